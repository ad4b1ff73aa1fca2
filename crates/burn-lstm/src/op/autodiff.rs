//! The op on `Autodiff<B>`: one autodiff node for the whole layer stack, whose backward
//! calls the inner backend's [`RnnBackend::rnn_backward`].
//!
//! An autodiff op has one float output, but the LSTM has three results (`y`, `h_n`,
//! `c_n`) and its backward needs all three gradients at once. So the op's node outputs a
//! one-element marker, and each result is a node of its own whose only parent is the op's
//! node: its backward puts the result's gradient in a slot shared with the op, and the
//! first of them to run hands the op's node a one-element marker gradient (which makes
//! autodiff run the op's backward). The op's backward, which autodiff runs after
//! its children's, takes the three gradients from the slot (zeros for a result the loss
//! does not reach). Packing the results into one tensor and slicing it apart instead costs
//! a copy of every output on the way in and, on the way out, a zero-filled packed
//! gradient per result plus the sums of those (NdArray: ~15 passes over `y`).

use std::sync::{Arc, Mutex};

use burn::tensor::{
    DType, Shape, TensorMetadata,
    backend::{AutodiffBackend, Backend},
    ops::FloatTensor,
};
use burn_autodiff::{
    Autodiff,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};

use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::contract::RnnBackend;
use crate::op::io::{RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::shapes::{ResultShapes, debug_check_non_empty};
use crate::op::spec::RnnSpec;
use crate::op::tensor::primitive;
use crate::op::zero_state;

/// The gradients of `[y, h_n, c_n]`, put here by the result nodes' backward and taken by
/// the op's.
struct ResultGrads<B: Backend>(Mutex<[Option<FloatTensor<B>>; 3]>);

impl<B: Backend> core::fmt::Debug for ResultGrads<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("ResultGrads(..)")
    }
}

impl<B: Backend> ResultGrads<B> {
    fn shared() -> Arc<Self> {
        Arc::new(Self(Mutex::new([None, None, None])))
    }

    /// Puts the gradient of result `which`; returns whether it is the first gradient of
    /// any result (the one whose node hands the op's node its marker gradient).
    fn put(&self, which: usize, grad: FloatTensor<B>) -> bool {
        let mut grads = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let first = grads.iter().all(Option::is_none);
        grads[which] = Some(match grads[which].take() {
            Some(earlier) => B::float_add(earlier, grad),
            None => grad,
        });
        first
    }

    fn take(&self) -> [Option<FloatTensor<B>>; 3] {
        core::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// The one-element stand-in for the op node's output and for its gradient (one zero
/// tensor kept for every call, `zero_state.rs`).
fn marker<B: Backend>(device: &B::Device, dtype: DType) -> FloatTensor<B> {
    primitive(zero_state::zeros::<B, 1>([1], (device, dtype)))
}

/// The op's node over its `N` parents: `[input, weights, h0, c0]` for an LSTM, `[input,
/// weights, h0]` for a GRU (no cell state).
#[derive(Debug)]
struct LstmBackward<const N: usize>;

impl<B: RnnBackend, const N: usize> Backward<B, N> for LstmBackward<N> {
    type State = (RnnSaved<B>, Arc<ResultGrads<B>>);

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (saved, result_grads) = ops.state;
        // The markers the result nodes registered; the real gradients are in the slot.
        let marker_grad = grads.consume::<B>(&ops.node);
        let (device, dtype) = (B::float_device(&marker_grad), marker_grad.dtype());
        let shapes = ResultShapes::of(&saved.spec);
        let [dy, dh_n, dc_n] = result_grads.take();
        let or_zeros = |grad: Option<FloatTensor<B>>, shape: [usize; 3]| {
            grad.unwrap_or_else(|| B::float_zeros(Shape::new(shape), &device, dtype.into()))
        };
        let mut parents = ops.parents.into_iter();
        let [input, weights, h0] = [(); 3].map(|_| parents.next().flatten());
        let c0 = parents.next().flatten();
        let output_grads = RnnOutputGrads {
            dy: or_zeros(dy, shapes.y),
            dh_n: or_zeros(dh_n, shapes.h_n),
            dc_n: shapes.c_n.map(|shape| or_zeros(dc_n, shape)),
            input_required: input.is_some(),
        };
        debug_check_non_empty::<B>(
            "autodiff's upstream gradients",
            [&output_grads.dy, &output_grads.dh_n]
                .into_iter()
                .chain(&output_grads.dc_n),
        );
        let computed = B::rnn_backward(saved, output_grads);
        let results = [
            computed.input,
            Some(computed.weights),
            Some(computed.h0),
            computed.c0,
        ];
        for (parent, grad) in [input, weights, h0, c0].into_iter().zip(results) {
            if let (Some(parent), Some(grad)) = (parent, grad) {
                grads.register::<B>(parent.id, grad);
            }
        }
    }
}

/// One of the op's results (`which`: 0 `y`, 1 `h_n`, 2 `c_n`).
#[derive(Debug)]
struct TakeResult;

impl<B: Backend> Backward<B, 1> for TakeResult {
    type State = (usize, Arc<ResultGrads<B>>);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (which, result_grads) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let (device, dtype) = (B::float_device(&grad), grad.dtype());
        // One marker gradient makes the op's backward run; a second would only be
        // summed with it (an add per result on the backend).
        let first = result_grads.put(which, grad);
        let [op] = ops.parents;
        if let (Some(op), true) = (op, first) {
            grads.register::<B>(op.id, marker::<B>(&device, dtype));
        }
    }
}

impl<B: RnnBackend, C: CheckpointStrategy> RnnBackend for Autodiff<B, C> {
    fn rnn_kernel(device: &Self::Device, spec: &RnnSpec) -> KernelChoice {
        B::rnn_kernel(device, spec)
    }

    fn rnn_kernel_of_call(device: &Self::Device, spec: &RnnSpec) -> RnnKernel {
        B::rnn_kernel_of_call(device, spec)
    }

    /// Untracked parameters (inference on an autodiff backend) take the inner backend's
    /// fast path; tracked ones are joined by autodiff ops (see `tracked_weights.rs`),
    /// whose backward splits the buffer's gradient back into each parameter.
    fn rnn_flat_weights(parts: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        if parts.iter().all(|part| part.node.requirement.is_none()) {
            let inner = parts.into_iter().map(|part| part.primitive).collect();
            return Self::from_inner(B::rnn_flat_weights(inner));
        }
        crate::op::tracked_weights::tracked::<B, C>(parts)
    }

    fn rnn_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> RnnOutput<Self> {
        match c0 {
            Some(c0) => forward::<B, C, 4>([input, weights, h0, c0], spec),
            None => forward::<B, C, 3>([input, weights, h0], spec),
        }
    }
}

/// The op on `inputs`, `[input, weights, h0, c0]` (LSTM, `N = 4`) or `[input, weights,
/// h0]` (GRU, `N = 3`), recorded as one node over them.
fn forward<B: RnnBackend, C: CheckpointStrategy, const N: usize>(
    inputs: [FloatTensor<Autodiff<B, C>>; N],
    spec: &RnnSpec,
) -> RnnOutput<Autodiff<B, C>> {
    let nodes = inputs.each_ref().map(|t| t.node.clone());
    let mut inner = inputs.into_iter().map(|t| t.primitive);
    let [input, weights, h0] = [(); 3].map(|_| inner.next().expect("N >= 3 inputs"));
    let c0 = inner.next();
    match LstmBackward::<N>
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let device = B::float_device(&input);
            let dtype = input.dtype();
            let (output, saved) = B::rnn_forward_train(input, weights, h0, c0, spec);
            let result_grads = ResultGrads::shared();
            let op = prep.finish((saved, result_grads.clone()), marker::<B>(&device, dtype));
            let result = |which: usize, value: FloatTensor<B>| {
                let nodes = [op.node.clone()];
                match TakeResult.prepare::<C>(nodes).compute_bound().stateful() {
                    OpsKind::Tracked(prep) => prep.finish((which, result_grads.clone()), value),
                    OpsKind::UnTracked(prep) => prep.finish(value),
                }
            };
            RnnOutput {
                y: result(0, output.y),
                h_n: result(1, output.h_n),
                c_n: output.c_n.map(|c_n| result(2, c_n)),
            }
        }
        OpsKind::UnTracked(_) => {
            let output = B::rnn_forward(input, weights, h0, c0, spec);
            RnnOutput {
                y: Autodiff::<B, C>::from_inner(output.y),
                h_n: Autodiff::<B, C>::from_inner(output.h_n),
                c_n: output.c_n.map(Autodiff::<B, C>::from_inner),
            }
        }
    }
}
