//! Parity with PyTorch `nn.GRU` in f32 (see `common/gru_golden_check.rs`): every GRU
//! golden case (`tests/fixtures/golden-gru` and every GRU case in `$LSTM_GOLDEN_DIR`)
//! through both CPU kernels, portable and fused CPU, on NdArray and on Flex.
//!
//! Tolerance 3e-4, three times the LSTM's (`golden_f32.rs`): `gru_medium` (H = 128,
//! 2 layers, 20 steps, N(0, 0.4²) weights) is ill-conditioned in float32. PyTorch's own
//! `nn.GRU` in float32 on its parameters is off its float64 result by 6.5e-5 (`y`) and
//! 1.6e-4 (`h_n`), measured with torch 2.15 on CPU; this kernel is off by the same
//! (6.3e-5, 1.6e-4), and the fused CPU kernel by the same. The other cases are within
//! 4e-7.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::gru_golden_check::run_all_gru;

#[test]
fn gru_golden_cases_f32_ndarray() {
    run_all_gru::<Autodiff<NdArray<f32>>>("ndarray", RnnKernel::Portable, "f32", 3e-4);
}

#[test]
fn gru_golden_cases_f32_flex() {
    run_all_gru::<Autodiff<Flex>>("flex", RnnKernel::Portable, "f32", 3e-4);
}

#[test]
fn gru_golden_cases_f32_fused_cpu_ndarray() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_golden_cases_f32_fused_cpu_ndarray",
    );
    run_all_gru::<Autodiff<NdArray<f32>>>("ndarray", RnnKernel::FusedCpu, "f32", 3e-4);
}

#[test]
fn gru_golden_cases_f32_fused_cpu_flex() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_golden_cases_f32_fused_cpu_flex",
    );
    run_all_gru::<Autodiff<Flex>>("flex", RnnKernel::FusedCpu, "f32", 3e-4);
}
