//! Shared code of the runnable examples (`cargo run --release --example NAME` from the
//! repository root): the sunspot forecaster that `train` trains and `infer` serves, and
//! the word-level language model that `language_model` trains and `generate` serves, and
//! the tools' lines on stdout (`say!`).

pub mod language_model;
pub mod stdout;
pub mod sunspots;
