//! Parity with PyTorch `nn.LSTM` in f64 (see `common/golden_check.rs` and
//! `golden_f32.rs`): every golden case (the shipped fixtures and every case in
//! `$LSTM_GOLDEN_DIR`) through both CPU kernels, portable and fused CPU, on NdArray
//! (`NdArray<f64>`) and on Flex (its device's float type set to f64).
//!
//! Tolerance (∞-norm relative error, see `common::rel_err`): 1e-9 — the reference is
//! float64 too, so only summation order differs.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::golden_check::run_all;

#[test]
fn golden_cases_f64_portable_ndarray() {
    run_all::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::Portable, "f64", 1e-9);
}

#[test]
fn golden_cases_f64_fused_cpu_ndarray() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "golden_cases_f64_fused_cpu_ndarray",
    );
    run_all::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::FusedCpu, "f64", 1e-9);
}

#[test]
fn golden_cases_f64_portable_flex() {
    common::flex_f64();
    run_all::<Autodiff<Flex>>("flex", RnnKernel::Portable, "f64", 1e-9);
}

#[test]
fn golden_cases_f64_fused_cpu_flex() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "golden_cases_f64_fused_cpu_flex",
    );
    common::flex_f64();
    run_all::<Autodiff<Flex>>("flex", RnnKernel::FusedCpu, "f64", 1e-9);
}
