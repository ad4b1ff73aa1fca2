//! Shared code of the runnable examples (`cargo run --release --example NAME` from the
//! repository root): the sunspot forecaster that `train` trains and `infer` serves.

pub mod sunspots;
