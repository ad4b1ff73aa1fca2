//! The op's flat parameter buffer, built from the module's `Param` tensors on every call
//! (so it can never be stale): [`LstmBackend::lstm_flat_weights`](crate::LstmBackend::lstm_flat_weights)'s
//! default and the autodiff rules.

use burn::tensor::ops::FloatTensorOps;
use burn::tensor::{Shape, TensorMetadata, backend::Backend, ops::FloatTensor};
use burn_autodiff::{
    Autodiff,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};

use crate::backend::LstmBackend;

/// Every part flattened and concatenated with Burn's own ops (differentiable on
/// autodiff backends: the gradient of the buffer is sliced back into the parts).
pub(crate) fn concatenate<B: Backend>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    let flat = parts
        .into_iter()
        .map(|part| {
            let len = part.shape().num_elements();
            B::float_reshape(part, Shape::new([len]))
        })
        .collect();
    B::float_cat(flat, 0)
}

/// Autodiff op: `[buffer so far, part] -> [buffer so far, part flattened]`.
#[derive(Debug)]
struct Append;

impl<B: Backend> Backward<B, 2> for Append {
    /// Length of the buffer before the append, and the appended part's shape.
    type State = (usize, Shape);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (before, part_shape) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        // Cut in place where possible: slicing the prefix at every append would copy
        // the buffer's gradient once per parameter.
        let (buffer_grad, part_grad) =
            crate::ndarray_host::split_gradient::<B>(grad, before, part_shape);
        let [buffer, part] = ops.parents;
        if let Some(part) = part {
            grads.register::<B>(part.id, part_grad);
        }
        if let Some(buffer) = buffer {
            grads.register::<B>(buffer.id, buffer_grad);
        }
    }
}

/// The flat buffer of tracked parameters, one autodiff op per parameter appending it to
/// the buffer so far (an autodiff op has a fixed number of parents, the parameter count
/// depends on the architecture). For backends whose flatten extends an unshared buffer
/// in place (NdArray) each value is copied once; autodiff's `cat` over NdArray's
/// `reshape` copies it three times into fresh blocks (27 % of a 20×35×1500 training
/// step, measured). Other backends keep the single `cat`.
pub(crate) fn tracked<B: LstmBackend, C: CheckpointStrategy>(
    parts: Vec<FloatTensor<Autodiff<B, C>>>,
) -> FloatTensor<Autodiff<B, C>> {
    if !crate::ndarray_host::appends_in_place::<B>() || parts.len() < 2 {
        return concatenate::<Autodiff<B, C>>(parts);
    }
    let total: usize = parts.iter().map(|p| p.shape().num_elements()).sum();
    // Appended to an empty buffer, the first part too: NdArray's `reshape` (forward and
    // backward) copies, the appends' backward cuts views.
    let (device, dtype) = (
        B::float_device(&parts[0].primitive),
        parts[0].primitive.dtype(),
    );
    let mut buffer = Autodiff::<B, C>::float_zeros(Shape::new([0]), &device, dtype.into());
    for part in parts {
        let state = (buffer.shape().num_elements(), part.shape());
        let nodes = [buffer.node.clone(), part.node.clone()];
        let prep = Append.prepare::<C>(nodes).compute_bound().stateful();
        let appended = crate::ndarray_host::flatten_into_capacity::<B>(
            vec![buffer.primitive, part.primitive],
            total,
        );
        buffer = match prep {
            OpsKind::Tracked(prep) => prep.finish(state, appended),
            OpsKind::UnTracked(prep) => prep.finish(appended),
        };
    }
    buffer
}
