//! The op on `Autodiff<B>`: one autodiff node for the whole layer stack, whose backward
//! calls the inner backend's [`LstmBackend::lstm_backward`].
//!
//! An autodiff op has one float output, so the three results (`y`, `h_n`, `c_n`) are
//! packed into one flat tensor and sliced apart again with (differentiable) autodiff ops.

use burn::tensor::{Tensor, backend::AutodiffBackend, backend::Backend, ops::FloatTensor};
use burn_autodiff::{
    Autodiff,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};

use crate::backend::{LstmBackend, LstmOutput, LstmOutputGrads, LstmSaved};
use crate::kernel::KernelChoice;
use crate::portable::{primitive, tensor};
use crate::spec::LstmSpec;

#[derive(Debug)]
struct LstmBackward;

impl<B: LstmBackend> Backward<B, 4> for LstmBackward {
    type State = LstmSaved<B>;

    fn backward(
        self,
        ops: Ops<Self::State, 4>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let saved = ops.state;
        let packed = grads.consume::<B>(&ops.node);
        let unpacked = unpack::<B>(packed, &saved.spec);
        let computed = B::lstm_backward(
            saved,
            LstmOutputGrads {
                dy: unpacked.y,
                dh_n: unpacked.h_n,
                dc_n: unpacked.c_n,
            },
        );
        let [input, weights, h0, c0] = ops.parents;
        let results = [computed.input, computed.weights, computed.h0, computed.c0];
        for (parent, grad) in [input, weights, h0, c0].into_iter().zip(results) {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, grad);
            }
        }
    }
}

/// `y`, `h_n`, `c_n` flattened and concatenated.
fn pack<B: Backend>(output: LstmOutput<B>) -> FloatTensor<B> {
    let flat = |t| tensor::<B, 3>(t).reshape([-1]);
    primitive(Tensor::cat(
        vec![flat(output.y), flat(output.h_n), flat(output.c_n)],
        0,
    ))
}

/// Inverse of [`pack`], shapes from the spec.
fn unpack<B: Backend>(packed: FloatTensor<B>, spec: &LstmSpec) -> LstmOutput<B> {
    let packed = tensor::<B, 1>(packed);
    let arch = &spec.arch;
    let (y_len, h_len, c_len) = (spec.output_len(), spec.h_n_len(), spec.c_n_len());
    let part = |start: usize, len: usize, shape: [usize; 3]| {
        primitive(packed.clone().narrow(0, start, len).reshape(shape))
    };
    LstmOutput {
        y: part(
            0,
            y_len,
            [spec.seq_len, spec.batch, arch.dirs() * arch.output_size()],
        ),
        h_n: part(y_len, h_len, [arch.cells(), spec.batch, arch.output_size()]),
        c_n: part(
            y_len + h_len,
            c_len,
            [arch.cells(), spec.batch, arch.hidden_size],
        ),
    }
}

impl<B: LstmBackend, C: CheckpointStrategy> LstmBackend for Autodiff<B, C> {
    fn lstm_kernel(device: &Self::Device, spec: &LstmSpec) -> KernelChoice {
        B::lstm_kernel(device, spec)
    }

    /// Untracked parameters (inference on an autodiff backend) take the inner backend's
    /// fast path; tracked ones are joined by autodiff ops (see `flat_weights::tracked`),
    /// whose backward splits the buffer's gradient back into each parameter.
    fn lstm_flat_weights(parts: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        if parts.iter().all(|part| part.node.requirement.is_none()) {
            let inner = parts.into_iter().map(|part| part.primitive).collect();
            return Self::from_inner(B::lstm_flat_weights(inner));
        }
        crate::flat_weights::tracked::<B, C>(parts)
    }

    fn lstm_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        spec: &LstmSpec,
    ) -> LstmOutput<Self> {
        let nodes = [
            input.node.clone(),
            weights.node.clone(),
            h0.node.clone(),
            c0.node.clone(),
        ];
        match <LstmBackward as Backward<B, 4>>::prepare::<C>(LstmBackward, nodes)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (output, saved) = B::lstm_forward_train(
                    input.primitive,
                    weights.primitive,
                    h0.primitive,
                    c0.primitive,
                    spec,
                );
                let packed = prep.finish(saved, pack::<B>(output));
                unpack::<Self>(packed, spec)
            }
            OpsKind::UnTracked(_) => {
                let output = B::lstm_forward(
                    input.primitive,
                    weights.primitive,
                    h0.primitive,
                    c0.primitive,
                    spec,
                );
                LstmOutput {
                    y: Self::from_inner(output.y),
                    h_n: Self::from_inner(output.h_n),
                    c_n: Self::from_inner(output.c_n),
                }
            }
        }
    }
}
