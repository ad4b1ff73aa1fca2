//! burn-lstm's float64 integration tests on the CPU backends (golden cases in f64, finite
//! differences, empty rows, generated configurations), in a test binary of their own:
//! Burn 0.21 keeps one float type per device for the whole process (`common::flex_f64`),
//! so they cannot share a process with the float32 tests of `suite`. One binary for all
//! of them, not one per file: each test binary links Burn again (docs/ci.md).

#[path = "../common/mod.rs"]
mod common;

mod empty_rows;
mod finite_difference;
mod generated;
mod golden_f64;
mod gru_golden_f64;
