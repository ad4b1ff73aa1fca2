//! The flat buffer of *tracked* parameters on `Autodiff<B>`: one two-parent autodiff op
//! per parameter appends it to the buffer so far, with the inner backend's
//! [`FlatBufferOps`] (Burn's `cat` when it has none).

use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Shape, TensorMetadata, ops::FloatTensor};
use burn_autodiff::{
    Autodiff,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};

use crate::op::contract::RnnBackend;
use crate::op::flat_weights::{FlatBufferOps, concatenate};

/// Autodiff op: `[buffer so far, part] -> [buffer so far, part flattened]`.
#[derive(Debug)]
struct Append;

impl<B: RnnBackend> Backward<B, 2> for Append {
    /// The backend's split, the length of the buffer before the append, and the
    /// appended part's shape.
    type State = (FlatBufferOps<B>, usize, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (buffer_ops, before, part_shape) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        // Cut in place where the backend can: slicing the prefix at every append would
        // copy the buffer's gradient once per parameter.
        let (buffer_grad, part_grad) = (buffer_ops.split_gradient)(grad, before, part_shape);
        let [buffer, part] = ops.parents;
        if let Some(part) = part {
            grads.register::<B>(part.id, part_grad);
        }
        if let Some(buffer) = buffer {
            grads.register::<B>(buffer.id, buffer_grad);
        }
    }
}

/// The flat buffer of tracked parameters: joined by the backend's [`FlatJoinOps`]
/// where it has them (`joined_weights.rs`), else one autodiff op per parameter appending
/// it to the buffer so far (an autodiff op has a fixed number of parents, the parameter
/// count depends on the architecture). With NdArray's [`FlatBufferOps`] each value is
/// copied once; autodiff's `cat` over NdArray's `reshape` copies it three times into
/// fresh blocks (27 % of a 20×35×1500 training step, measured). Backends with neither
/// keep the single `cat`.
///
/// [`FlatJoinOps`]: crate::op::flat_weights::FlatJoinOps
pub(crate) fn tracked<B: RnnBackend, C: CheckpointStrategy>(
    parts: Vec<FloatTensor<Autodiff<B, C>>>,
) -> FloatTensor<Autodiff<B, C>> {
    if let Some(join_ops) = B::rnn_flat_join_ops().filter(|_| parts.len() >= 2) {
        return crate::op::joined_weights::joined::<B, C>(parts, join_ops);
    }
    let Some(buffer_ops) = B::rnn_flat_buffer_ops().filter(|_| parts.len() >= 2) else {
        return concatenate::<Autodiff<B, C>>(parts);
    };
    let total: usize = parts.iter().map(|p| p.shape().num_elements()).sum();
    // Appended to an empty buffer, the first part too: NdArray's `reshape` (forward and
    // backward) copies, the appends' backward cuts views.
    let (device, dtype) = (
        B::float_device(&parts[0].primitive),
        parts[0].primitive.dtype(),
    );
    let mut buffer = Autodiff::<B, C>::float_zeros(Shape::new([0]), &device, dtype.into());
    for part in parts {
        let state = (buffer_ops, buffer.shape().num_elements(), part.shape());
        let nodes = [buffer.node.clone(), part.node.clone()];
        let prep = Append.prepare::<C>(nodes).compute_bound().stateful();
        let appended = (buffer_ops.append)(buffer.primitive, part.primitive, total);
        buffer = match prep {
            OpsKind::Tracked(prep) => prep.finish(state, appended),
            OpsKind::UnTracked(prep) => prep.finish(appended),
        };
    }
    buffer
}
