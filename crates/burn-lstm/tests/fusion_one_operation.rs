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
use burn::tensor::{Distribution, Tensor, TensorPrimitive};
use burn_lstm::{
    CudnnCompatibleLstmConfig, RnnBackend, RnnKernel, RnnSpec, keep_awake, set_keep_awake,
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

/// Keeping the runner threads awake (`set_keep_awake`: the fusion thread's queue flushed
/// every 50 µs while the op's operations are registered) changes no value: four training
/// steps of a two-layer stack through the fusion operations, each step's output and
/// every gradient equal with it off and on.
#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn keeping_the_runner_threads_awake_changes_no_value() {
    set_one_operation_on_every_fused_backend(true);
    type B = Autodiff<Wgpu>;
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(3, 4)
        .with_num_layers(2)
        .init::<B>(&device);
    let x = Tensor::<B, 3>::random([2, 5, 3], Distribution::Normal(0.0, 1.0), &device);
    // Restored after each run: the other tests of this binary run beside it.
    let before = keep_awake();
    let steps = |keep_awake: bool| {
        set_keep_awake(keep_awake);
        let values: Vec<Vec<f32>> = (0..4)
            .flat_map(|_| {
                let x = x.clone().require_grad();
                let (y, _) = model
                    .try_forward(x.clone(), None, None)
                    .expect("a valid call");
                let grads = (y.clone() * y.clone()).sum().backward();
                let weight_grad = model.layers[1]
                    .forward
                    .weight_hh
                    .grad(&grads)
                    .expect("tracked");
                let input_grad = x.grad(&grads).expect("tracked");
                [
                    y.into_data().to_vec::<f32>().unwrap(),
                    weight_grad.into_data().to_vec::<f32>().unwrap(),
                    input_grad.into_data().to_vec::<f32>().unwrap(),
                ]
            })
            .collect();
        set_keep_awake(before);
        values
    };
    let off = steps(false);
    let on = steps(true);
    assert_eq!(off.len(), on.len());
    for (step, (off, on)) in off.iter().zip(&on).enumerate() {
        assert!(
            off.iter().all(|v| v.is_finite()),
            "value set {step}: {off:?}"
        );
        assert_eq!(off, on, "value set {step}: keep-awake off, then on");
    }
}
