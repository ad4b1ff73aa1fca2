//! burn-lstm's integration tests on the CPU backends, in two test binaries: this one and
//! `suite_f64` (the tests that run Flex and NdArray in float64).
//!
//! Each file under `tests/` is its own binary, and each binary links Burn again (every
//! one was about 500 MB and two minutes of a CI core): one binary for all of these keeps
//! `cargo test --workspace` within CI's time and disk (docs/ci.md). A test that needs a
//! process of its own for a few checks runs this binary again in a child process that
//! runs only it (`lstm_cpu::reran_in_child`): the import tests' float64 checks and
//! the long run (it measures the process's resident memory and sets cache limits in its
//! environment). Apart stay the float64 tests (Burn 0.21 keeps one float type per device
//! for the whole process, so Flex in f32 and Flex in f64 cannot share one; see
//! `common::flex_f64`) and the CUDA tests (`cudnn.rs`, `cudnn_f64.rs`, built with the
//! `cuda` feature and copied to the GPU machine alone).

#[path = "../common/mod.rs"]
mod common;

mod api;
mod backends;
mod burn_quantized;
mod deprecated_names;
mod dropout;
mod eval_between_steps;
mod golden_f32;
mod gru;
mod gru_golden_f32;
mod half;
mod hostile_files;
mod import;
mod int8_golden;
mod int8_models;
mod layout;
mod long_run;
mod model_checkpoint;
mod nan_policy;
mod one_row;
mod pytorch_files;
