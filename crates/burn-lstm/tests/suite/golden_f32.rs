//! Parity with PyTorch `nn.LSTM` in f32 (see `common/golden_check.rs` and
//! `golden_f64.rs`): every golden case (the shipped fixtures and every case in
//! `$LSTM_GOLDEN_DIR`) through both CPU kernels, portable and fused CPU, on NdArray and
//! on Flex.
//!
//! Tolerance (∞-norm relative error, see `common::rel_err`): 1e-4 — float32 rounding
//! (~6e-8 per operation) accumulated over up to 20 steps, 2 layers and saturated gates
//! (the golden weights are N(0, 0.4²), larger than a trained network's), plus the fused
//! kernel's polynomial `exp` (a few ulp).

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::golden_check::run_all;

#[test]
fn golden_cases_f32_portable_ndarray() {
    run_all::<Autodiff<NdArray<f32>>>("ndarray", RnnKernel::Portable, "f32", 1e-4);
}

#[test]
fn golden_cases_f32_fused_cpu_ndarray() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "golden_cases_f32_fused_cpu_ndarray",
    );
    run_all::<Autodiff<NdArray<f32>>>("ndarray", RnnKernel::FusedCpu, "f32", 1e-4);
}

#[test]
fn golden_cases_f32_portable_flex() {
    run_all::<Autodiff<Flex>>("flex", RnnKernel::Portable, "f32", 1e-4);
}

#[test]
fn golden_cases_f32_fused_cpu_flex() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "golden_cases_f32_fused_cpu_flex",
    );
    run_all::<Autodiff<Flex>>("flex", RnnKernel::FusedCpu, "f32", 1e-4);
}
