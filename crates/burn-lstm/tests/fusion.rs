//! The op on Burn's fused Wgpu backend (feature `wgpu`), with the flat parameter buffer
//! and its gradient as one fusion operation each way (`BURN_LSTM_FUSION_FLAT_JOIN`,
//! switched on by every test here): every LSTM and GRU golden case, outputs, final
//! states and every gradient, through the portable kernel.
//!
//! `#[ignore]`d: they need a Wgpu adapter. A CPU one serves: Mesa's lavapipe (Debian's
//! `mesa-vulkan-drivers`) runs them in about five minutes on two cores
//! (`cargo test -p burn-lstm --features wgpu --test fusion -- --ignored`). On Cuda the
//! same switch is checked by the GPU tests (`tests/cudnn.rs`).
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::{Autodiff, Wgpu};
use burn_lstm::{RnnKernel, set_fusion_flat_join};
use common::golden_check::run_all;
use common::gru_golden_check::run_all_gru;

#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn golden_cases_with_one_operation_flat_buffer() {
    set_fusion_flat_join(true);
    run_all::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 1e-4);
}

#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn gru_golden_cases_with_one_operation_flat_buffer() {
    set_fusion_flat_join(true);
    run_all_gru::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 3e-4);
}
