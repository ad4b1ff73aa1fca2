//! Parity with PyTorch `nn.LSTM` in f32 (see `common/golden_check.rs` and
//! `golden_f64.rs`): every golden case (the shipped fixtures and every case in
//! `$LSTM_GOLDEN_DIR`) through both kernels NdArray runs, portable and fused CPU.
//!
//! Tolerance (∞-norm relative error, see `common::rel_err`): 1e-4 — float32 rounding
//! (~6e-8 per operation) accumulated over up to 20 steps, 2 layers and saturated gates
//! (the golden weights are N(0, 0.4²), larger than a trained network's), plus the fused
//! kernel's polynomial `exp` (a few ulp).

mod common;

use burn::backend::{Autodiff, NdArray};
use burn_lstm::LstmKernel;
use common::golden_check::run_all;

#[test]
fn golden_cases_f32_portable() {
    run_all::<Autodiff<NdArray<f32>>>(LstmKernel::Portable, "f32", 1e-4);
}

#[test]
fn golden_cases_f32_fused_cpu() {
    run_all::<Autodiff<NdArray<f32>>>(LstmKernel::FusedCpu, "f32", 1e-4);
}
