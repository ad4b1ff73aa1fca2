//! The op as one custom fusion operation each way (forward, backward) on Burn's fused
//! Wgpu backend (feature `wgpu`), the portable kernel running inside: the glue through
//! which fused Cuda runs cuDNN (`op/fusion.rs`: the operations' inputs and outputs, the
//! forward's saved state handed to the backward), checked without a GPU: every LSTM and
//! GRU golden case, outputs, final states and every gradient, and that the switch does
//! route a call through that operation.
//!
//! Its own test binary: the routing is a process-wide switch
//! (`set_one_operation_on_every_fused_backend`), which would reroute `tests/fusion.rs`'s
//! tests running beside it. `#[ignore]`d: it needs a Wgpu adapter; Mesa's lavapipe
//! (Debian's `mesa-vulkan-drivers`) serves (`cargo test -p burn-lstm --features wgpu
//! --test fusion_one_operation -- --ignored`).
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::{Autodiff, Wgpu};
use burn::tensor::{Tensor, TensorPrimitive};
use burn_lstm::{
    CudnnCompatibleLstmConfig, RnnBackend, RnnKernel, RnnSpec,
    set_one_operation_on_every_fused_backend,
};
use common::golden_check::run_all;
use common::gru_golden_check::run_all_gru;

#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn golden_cases_through_the_op_as_one_fusion_operation() {
    set_one_operation_on_every_fused_backend(true);
    run_all::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 1e-4);
    run_all_gru::<Autodiff<Wgpu>>("wgpu", RnnKernel::Portable, "f32", 3e-4);
}

/// With the switch on, a training forward on fused Wgpu is the op's fusion operation:
/// what it saves is the slot that operation fills (host residuals, no tensors), where the
/// portable kernel as ordinary fusion operations saves its gate activations as tensors.
#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn the_switch_routes_a_training_forward_through_the_fusion_operation() {
    set_one_operation_on_every_fused_backend(true);
    let arch = CudnnCompatibleLstmConfig::new(3, 4).arch();
    let spec = RnnSpec {
        seq_len: 5,
        batch: 2,
        lengths: None,
        dropout: 0.0,
        training: true,
        dropout_seed: None,
        kernel: None,
        arch: arch.clone(),
    };
    let device = Default::default();
    let zeros = |shape: [usize; 3]| Tensor::<Wgpu, 3>::zeros(shape, &device);
    let (output, saved) = <Wgpu as RnnBackend>::rnn_forward_train(
        zeros([5, 2, 3]).into_primitive().tensor(),
        Tensor::<Wgpu, 1>::ones([arch.weight_count()], &device)
            .into_primitive()
            .tensor(),
        zeros([1, 2, 4]).into_primitive().tensor(),
        Some(zeros([1, 2, 4]).into_primitive().tensor()),
        &spec,
    );
    assert_eq!(
        saved.kernel,
        RnnKernel::Portable,
        "the inner backend's kernel"
    );
    assert!(saved.host.is_some(), "the fusion operation's slot");
    assert!(
        saved.residuals.is_empty(),
        "{} residual tensors",
        saved.residuals.len()
    );
    let y = Tensor::<Wgpu, 3>::from_primitive(TensorPrimitive::Float(output.y));
    // All-zero input and state through all-one weights and biases: every gate's
    // pre-activation is 2 at the first step and above it after, so every output is
    // positive and finite.
    let values = y.into_data().to_vec::<f32>().unwrap();
    assert!(
        values.iter().all(|v| v.is_finite() && *v > 0.0),
        "{values:?}"
    );
}
