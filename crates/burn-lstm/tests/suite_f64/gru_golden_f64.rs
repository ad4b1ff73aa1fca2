//! Parity with PyTorch `nn.GRU` in f64 (see `common/gru_golden_check.rs`): every GRU
//! golden case through both CPU kernels, portable and fused CPU, on NdArray
//! (`NdArray<f64>`) and on Flex (its device set to f64).
//!
//! Tolerance: 1e-9, as for the LSTM (the reference is float64 too).

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::gru_golden_check::run_all_gru;

#[test]
fn gru_golden_cases_f64_ndarray() {
    run_all_gru::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::Portable, "f64", 1e-9);
}

#[test]
fn gru_golden_cases_f64_flex() {
    common::flex_f64();
    run_all_gru::<Autodiff<Flex>>("flex", RnnKernel::Portable, "f64", 1e-9);
}

#[test]
fn gru_golden_cases_f64_fused_cpu_ndarray() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_golden_cases_f64_fused_cpu_ndarray",
    );
    run_all_gru::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::FusedCpu, "f64", 1e-9);
}

#[test]
fn gru_golden_cases_f64_fused_cpu_flex() {
    common::flex_f64();
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_golden_cases_f64_fused_cpu_flex",
    );
    run_all_gru::<Autodiff<Flex>>("flex", RnnKernel::FusedCpu, "f64", 1e-9);
}
