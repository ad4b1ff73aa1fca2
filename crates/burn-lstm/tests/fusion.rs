//! The op on Burn's fused Wgpu backend (feature `wgpu`), with the flat parameter buffer
//! and its gradient as one fusion operation each way (`BURN_LSTM_FUSION_FLAT_JOIN`,
//! switched on by every test here): every LSTM and GRU golden case, outputs, final
//! states and every gradient, a stack of 40 parameters (two join operations), through
//! the portable kernel, and evaluation between training steps (the GPU weight cache).
//!
//! `#[ignore]`d: they need a Wgpu adapter. A CPU one serves: Mesa's lavapipe (Debian's
//! `mesa-vulkan-drivers`) runs them in about five minutes on two cores
//! (`cargo test -p burn-lstm --features wgpu --test fusion -- --ignored`). On Cuda the
//! same switch is checked by the GPU tests (`tests/cudnn.rs`).
#![cfg(feature = "wgpu")]

mod common;

use burn::backend::{Autodiff, NdArray, Wgpu};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstmConfig, RnnBackend, RnnKernel, set_fusion_flat_join};
use common::eval_between_steps_check::check_evaluation_between_steps;
use common::golden_check::{layer_parameter_grad, run_all};
use common::gru_golden_check::run_all_gru;
use common::{rel_err, to_f64};

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

/// Evaluation between SGD steps on fused Wgpu, where inference keeps the flat parameter
/// buffer of unchanged parameters (`kernels/cubecl/flat_cache.rs`): each evaluation
/// matches NdArray on the step's parameters, a module kept from before a step its own,
/// and `release_gpu_buffers` changes no value (`common::eval_between_steps_check`).
#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn evaluation_between_training_steps_sees_each_steps_parameters() {
    set_fusion_flat_join(true);
    check_evaluation_between_steps::<Autodiff<Wgpu>>(
        &Default::default(),
        4,
        RnnKernel::Portable,
        1e-5,
        burn_lstm::release_gpu_buffers,
    );
}

/// A 4-layer bidirectional LSTMP has 40 parameters: two join operations, the second
/// taking the buffer of the first. Outputs and every parameter's gradient on fused Wgpu
/// with the switch on against NdArray (the portable kernel on both).
#[test]
#[ignore = "needs a Wgpu adapter (lavapipe serves)"]
fn a_stack_of_40_parameters_matches_ndarray() {
    set_fusion_flat_join(true);
    let config = CudnnCompatibleLstmConfig::new(3, 4)
        .with_num_layers(4)
        .with_bidirectional(true)
        .with_proj_size(2);
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-fusion-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("stack-40.safetensors");
    config
        .init::<NdArray<f32>>(&Default::default())
        .save_pytorch_safetensors(&path)
        .expect("export");
    let expected = outputs_and_grads::<Autodiff<NdArray<f32>>>(&config, &path);
    let actual = outputs_and_grads::<Autodiff<Wgpu>>(&config, &path);
    assert_eq!(actual.len(), 1 + 40);
    for ((name, actual), (_, expected)) in actual.iter().zip(&expected) {
        let error = rel_err(actual, expected);
        assert!(error <= 1e-5, "{name}: relative error {error:.2e}");
    }
}

/// `y` and the gradient of every parameter (PyTorch's names) of one training call of
/// `config`'s module, loaded from `path`, on a fixed input, under a fixed weighting of
/// `y`.
fn outputs_and_grads<B: AutodiffBackend + RnnBackend>(
    config: &CudnnCompatibleLstmConfig,
    path: &std::path::Path,
) -> Vec<(String, Vec<f64>)> {
    let device = Default::default();
    let model = config
        .load_pytorch_safetensors::<B>(path, &device)
        .expect("parameters load")
        .with_kernel(Some(RnnKernel::Portable));
    let values = |len: usize, seed: usize| -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + seed * 13) % 17) as f32 / 8.0 - 1.0)
            .collect()
    };
    let [seq, batch] = [5, 2];
    let x = TensorData::new(values(seq * batch * 3, 1), [seq, batch, 3]);
    let (y, _) = model.forward(Tensor::<B, 3>::from_data(x, &device), None);
    let weights = TensorData::new(values(y.shape().num_elements(), 2), y.dims());
    let grads = (y.clone() * Tensor::from_data(weights, &device))
        .sum()
        .backward();
    let mut results = vec![("y".to_string(), to_f64(y))];
    for layer in 0..config.num_layers {
        for direction in ["", "_reverse"] {
            for param in ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"] {
                let name = format!("{param}_l{layer}{direction}");
                let grad = layer_parameter_grad(&model.layers, &name, &grads);
                results.push((name, grad));
            }
        }
    }
    results
}
