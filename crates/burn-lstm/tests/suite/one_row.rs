//! Batch 1 past the fused CPU kernel's depth block: its one-row products (a step, the
//! backward's `dz·W_hh`, a one-step projection) run their whole depth at once, here 300
//! input features and `4H = 320` in the backward, both deeper than the GEMM's blocks of
//! 256, which the golden cases (at most 128 deep in a one-row product) never reach.
//! Against the portable kernel (Burn's own matmul) on the same parameters: outputs,
//! final states and every gradient, on Flex and NdArray.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstmConfig, RnnBackend, RnnKernel};
use common::golden_check::parameter_grad;
use common::{rel_err, to_f64};

/// Every value a kernel computes for one call at batch 1: `y`, `h_n`, `c_n`, then the
/// gradients of the input and of each parameter, by name.
fn run<B>(kernel: RnnKernel, seq: usize) -> Vec<(String, Vec<f64>)>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let device = Default::default();
    let (input, hidden) = (300, 80);
    // The same parameters for both kernels: a fixed seed, then the kernel chosen.
    B::seed(&device, 7);
    let model = CudnnCompatibleLstmConfig::new(input, hidden)
        .with_num_layers(2)
        .with_bidirectional(true)
        .init::<B>(&device)
        .with_kernel(Some(kernel));
    let values: Vec<f32> = (0..seq * input)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0) - 1.0)
        .collect();
    let x =
        Tensor::<B, 3>::from_data(TensorData::new(values, [1, seq, input]), &device).require_grad();
    let (y, state) = model.forward(x.clone(), None);
    let mut out = vec![
        ("y".to_string(), to_f64(y.clone())),
        ("h_n".to_string(), to_f64(state.hidden.clone())),
        ("c_n".to_string(), to_f64(state.cell.clone())),
    ];
    let loss = (y.clone() * y).sum() + state.hidden.sum() + state.cell.sum();
    let grads = loss.backward();
    out.push(("grad.x".to_string(), to_f64(x.grad(&grads).unwrap())));
    for layer in 0..2 {
        for suffix in ["", "_reverse"] {
            for param in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                let name = format!("{param}_l{layer}{suffix}");
                out.push((
                    format!("grad.{name}"),
                    parameter_grad(&model, &name, &grads),
                ));
            }
        }
    }
    out
}

fn fused_matches_portable<B>(backend: &str)
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    for seq in [1, 4] {
        let fused = run::<B>(RnnKernel::FusedCpu, seq);
        let portable = run::<B>(RnnKernel::Portable, seq);
        for ((name, got), (_, want)) in fused.iter().zip(&portable) {
            let error = rel_err(got, want);
            assert!(
                error < 1e-4,
                "{backend}, 1x{seq}x300 -> 80: {name} differs by {error:e} (relative)"
            );
        }
    }
}

#[test]
fn batch_one_past_the_depth_block_matches_the_portable_kernel() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "batch_one_past_the_depth_block_matches_the_portable_kernel",
    );
    fused_matches_portable::<Autodiff<Flex>>("flex");
    fused_matches_portable::<Autodiff<NdArray<f32>>>("ndarray");
}
