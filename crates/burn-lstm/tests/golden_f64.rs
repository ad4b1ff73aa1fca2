//! Parity with PyTorch `nn.LSTM` in f64 (see `common/golden_check.rs` and
//! `golden_f32.rs`): every golden case (the shipped fixtures and every case in
//! `$LSTM_GOLDEN_DIR`) through both kernels NdArray runs, portable and fused CPU.
//!
//! Tolerance (∞-norm relative error, see `common::rel_err`): 1e-9 — the reference is
//! float64 too, so only summation order differs.

mod common;

use burn::backend::{Autodiff, NdArray};
use burn_lstm::LstmKernel;
use common::golden_check::run_all;

#[test]
fn golden_cases_f64_portable() {
    run_all::<Autodiff<NdArray<f64>>>(LstmKernel::Portable, "f64", 1e-9);
}

#[test]
fn golden_cases_f64_fused_cpu() {
    run_all::<Autodiff<NdArray<f64>>>(LstmKernel::FusedCpu, "f64", 1e-9);
}
