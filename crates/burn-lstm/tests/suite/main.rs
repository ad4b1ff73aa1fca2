//! burn-lstm's integration tests on the CPU backends, in one test binary.
//!
//! Each file under `tests/` is its own binary, and each binary links Burn again (every
//! one was about 500 MB and two minutes of a CI core): one binary for all of these keeps
//! `cargo test --workspace` within CI's time and disk (docs/ci.md). Tests that need a
//! process of their own stay apart: `long_run.rs` (it measures the process's resident
//! memory and sets cache limits in its environment) and the CUDA tests (`cudnn.rs`,
//! `cudnn_f64.rs`, built with the `cuda` feature and copied to the GPU machine alone).

#[path = "../common/mod.rs"]
mod common;

mod api;
mod backends;
mod dropout;
mod empty_rows;
mod finite_difference;
mod generated;
mod golden_f32;
mod golden_f64;
mod hostile_files;
mod layout;
mod nan_policy;
