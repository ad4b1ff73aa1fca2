//! The op as one custom fusion operation each way (forward, backward) on Burn's fused
//! Wgpu backend (feature `wgpu`), the portable kernel running inside: the glue through
//! which fused Cuda runs cuDNN (`op/fusion.rs`: the operations' inputs and outputs, the
//! forward's saved state handed to the backward), checked without a GPU. Every LSTM and
//! GRU golden case, outputs, final states and every gradient.
//!
//! Its own test binary: the routing is a process-wide switch
//! (`set_one_operation_on_every_fused_backend`), which would reroute `tests/fusion.rs`'s
//! tests running beside it. `#[ignore]`d: it needs a Wgpu adapter; Mesa's lavapipe
//! (Debian's `mesa-vulkan-drivers`) serves (`cargo test -p burn-lstm --features wgpu
//! --test fusion_one_operation -- --ignored`).
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::{Autodiff, Wgpu};
use burn_lstm::{RnnKernel, set_one_operation_on_every_fused_backend};
use common::golden_check::run_all;
use common::gru_golden_check::run_all_gru;

#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn golden_cases_through_the_op_as_one_fusion_operation() {
    set_one_operation_on_every_fused_backend(true);
    run_all::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 1e-4);
    run_all_gru::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 3e-4);
}
