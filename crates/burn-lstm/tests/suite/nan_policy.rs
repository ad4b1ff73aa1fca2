//! The NaN policy on every CPU kernel (portable, fused CPU; NdArray and Flex).
//!
//! - `NanPolicy::Reject`: a NaN or an infinity in the input or the initial state is
//!   `RnnError::NonFinite` naming the argument and the count, whatever kernel runs
//!   (the check runs before the kernel is chosen, so cuDNN's calls get it too).
//! - `NanPolicy::Propagate`: values flow as in PyTorch. A NaN at step `t` of row `b`
//!   makes that row's forward outputs NaN from `t` on, its reverse outputs NaN up to
//!   `t`, and its final states NaN; every other value is what a clean run gives. A NaN
//!   at a padded step (`t >= lengths[b]`) changes nothing, outputs or gradients, as in
//!   PyTorch's packed sequences, which never read padding.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{
    CudnnCompatibleLstm, CudnnCompatibleLstmConfig, LstmState, NanPolicy, RnnBackend, RnnError,
    RnnKernel,
};
use common::to_f64;

const KERNELS: [RnnKernel; 2] = [RnnKernel::Portable, RnnKernel::FusedCpu];
const BATCH: usize = 3;
const SEQ: usize = 6;
const INPUT: usize = 4;
const HIDDEN: usize = 5;

fn model<B: RnnBackend>(policy: NanPolicy, kernel: RnnKernel) -> CudnnCompatibleLstm<B> {
    let model = CudnnCompatibleLstmConfig::new(INPUT, HIDDEN)
        .with_bidirectional(true)
        .with_nan_policy(policy)
        .init::<B>(&Default::default())
        .with_kernel(Some(kernel));
    let _ = model.flat_weights();
    model
}

/// A batch-first input with `value` at `(row, step, feature 0)`.
fn input<B: RnnBackend>(at: Option<(usize, usize, f32)>) -> Tensor<B, 3> {
    let mut values: Vec<f32> = (0..BATCH * SEQ * INPUT)
        .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
        .collect();
    if let Some((row, step, value)) = at {
        values[(row * SEQ + step) * INPUT] = value;
    }
    Tensor::from_data(
        TensorData::new(values, [BATCH, SEQ, INPUT]),
        &Default::default(),
    )
}

/// An input, an initial state, the argument the error must name and its count.
type RejectCase<B> = (Tensor<B, 3>, Option<LstmState<B>>, &'static str, usize);

fn rejects_on<B: RnnBackend>() {
    for kernel in KERNELS {
        let model = model::<B>(NanPolicy::Reject, kernel);
        let state = |h: f32, c: f32| {
            let device = Default::default();
            let mut hidden = vec![0.0f32; 2 * BATCH * HIDDEN];
            let mut cell = hidden.clone();
            hidden[7] = h;
            cell[3] = c;
            cell[4] = c;
            LstmState::new(
                Tensor::from_data(TensorData::new(hidden, [2, BATCH, HIDDEN]), &device),
                Tensor::from_data(TensorData::new(cell, [2, BATCH, HIDDEN]), &device),
            )
        };
        let cases: [RejectCase<B>; 4] = [
            (input(Some((1, 2, f32::NAN))), None, "input", 1),
            (input(Some((2, 0, f32::INFINITY))), None, "input", 1),
            (
                input(None),
                Some(state(f32::NEG_INFINITY, 0.0)),
                "state.hidden",
                1,
            ),
            (input(None), Some(state(0.0, f32::NAN)), "state.cell", 2),
        ];
        for (x, state, argument, count) in cases {
            let lengths = [SEQ, 3, SEQ];
            match model.try_forward(x, state, Some(&lengths)) {
                Err(RnnError::NonFinite {
                    argument: a,
                    count: n,
                }) => {
                    assert_eq!((a.as_str(), n), (argument, count), "{kernel}");
                }
                other => panic!("{kernel}: expected NonFinite for {argument}, got {other:?}"),
            }
        }
        // Finite values pass.
        assert!(model.try_forward(input(None), None, None).is_ok());
    }
}

#[test]
fn reject_names_the_argument_on_every_kernel() {
    rejects_on::<NdArray<f32>>();
    rejects_on::<Flex>();
}

fn propagates_on<B: RnnBackend>() {
    let (row, step) = (1, 2);
    for kernel in KERNELS {
        let model = model::<B>(NanPolicy::Propagate, kernel);
        let (clean, clean_state) = model.forward(input(None), None);
        let (y, state) = model.forward(input(Some((row, step, f32::NAN))), None);
        let (clean, y) = (to_f64(clean), to_f64(y));
        for b in 0..BATCH {
            for t in 0..SEQ {
                for j in 0..2 * HIDDEN {
                    let at = (b * SEQ + t) * 2 * HIDDEN + j;
                    let reached = b == row && if j < HIDDEN { t >= step } else { t <= step };
                    if reached {
                        assert!(y[at].is_nan(), "{kernel}: y[{b}, {t}, {j}] = {}", y[at]);
                    } else {
                        assert!(
                            (y[at] - clean[at]).abs() < 1e-6,
                            "{kernel}: y[{b}, {t}, {j}] = {} (clean {})",
                            y[at],
                            clean[at]
                        );
                    }
                }
            }
        }
        for (got, clean) in [
            (state.hidden, clean_state.hidden.clone()),
            (state.cell, clean_state.cell.clone()),
        ] {
            let (got, clean) = (to_f64(got), to_f64(clean));
            for (i, (g, c)) in got.iter().zip(&clean).enumerate() {
                let b = (i / HIDDEN) % BATCH;
                assert_eq!(g.is_nan(), b == row, "{kernel}: final state {i}");
                if b != row {
                    assert!((g - c).abs() < 1e-6, "{kernel}: final state {i}");
                }
            }
        }
    }
}

#[test]
fn propagate_reaches_what_pytorch_reaches_on_every_kernel() {
    propagates_on::<NdArray<f32>>();
    propagates_on::<Flex>();
}

/// Outputs, final states and every gradient of a training call.
fn training<B: AutodiffBackend + RnnBackend>(
    model: &CudnnCompatibleLstm<B>,
    x: Tensor<B, 3>,
    lengths: &[usize],
) -> Vec<Vec<f64>> {
    let x = x.require_grad();
    let (y, state) = model.try_forward(x.clone(), None, Some(lengths)).unwrap();
    let grads =
        (y.clone().powi_scalar(2).sum() + state.hidden.clone().sum() + state.cell.clone().sum())
            .backward();
    let mut out = vec![to_f64(y), to_f64(state.hidden), to_f64(state.cell)];
    out.push(to_f64(x.grad(&grads).unwrap()));
    for cell in model.directions() {
        out.push(to_f64(cell.weight_ih.grad(&grads).unwrap()));
        out.push(to_f64(cell.weight_hh.grad(&grads).unwrap()));
        out.push(to_f64(cell.bias_ih.as_ref().unwrap().grad(&grads).unwrap()));
    }
    out
}

fn padding_is_never_read_on<B: AutodiffBackend + RnnBackend>() {
    // Row 1 has 3 valid steps; its step 4 holds a NaN, row 2 is empty and holds an inf.
    let lengths = [SEQ, 3, 0];
    for kernel in KERNELS {
        let model = model::<B>(NanPolicy::Propagate, kernel);
        let clean = training(&model, input(None), &lengths);
        let x = input::<B>(Some((1, 4, f32::NAN)));
        let x = x.slice_assign(
            [2..3, 1..2, 0..1],
            Tensor::from_data(
                TensorData::new(vec![f32::INFINITY], [1, 1, 1]),
                &Default::default(),
            ),
        );
        let dirty = training(&model, x, &lengths);
        for (i, (d, c)) in dirty.iter().zip(&clean).enumerate() {
            assert!(
                d.iter().zip(c).all(|(d, c)| (d - c).abs() < 1e-6),
                "{kernel}: result {i} changed by a NaN in the padding"
            );
        }
    }
}

#[test]
fn propagate_never_reads_padding_on_every_kernel() {
    padding_is_never_read_on::<Autodiff<NdArray<f32>>>();
    padding_is_never_read_on::<Autodiff<Flex>>();
}
