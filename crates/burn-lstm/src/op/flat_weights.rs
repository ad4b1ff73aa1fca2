//! The op's flat parameter buffer, built from the module's `Param` tensors on every call
//! (so it can never be stale): [`RnnBackend::rnn_flat_weights`](crate::RnnBackend::rnn_flat_weights)'s
//! default, its inverse for gradients, and the hooks a backend may give for building the
//! buffer of tracked parameters (`tracked_weights.rs`, `joined_weights.rs`).

use burn::tensor::{Shape, TensorMetadata, backend::Backend, ops::FloatTensor};

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

/// [`concatenate`]'s inverse: `flat` (one-dimensional) cut into consecutive parts of
/// `shapes`, each reshaped (views on backends whose `slice` and `reshape` are views).
/// `flat` holds at least as many values as `shapes` together.
#[cfg(any(test, feature = "cubecl"))]
pub(crate) fn split<B: Backend>(flat: FloatTensor<B>, shapes: &[Shape]) -> Vec<FloatTensor<B>> {
    let mut start = 0;
    shapes
        .iter()
        .map(|shape| {
            let end = start + shape.num_elements();
            let range = burn::tensor::Slice::new(start as isize, Some(end as isize), 1);
            start = end;
            B::float_reshape(B::float_slice(flat.clone(), &[range]), shape.clone())
        })
        .collect()
}

/// A backend's own way to build the flat buffer of tracked parameters in one operation
/// and to cut its gradient back in one, for backends where every Burn operation has a
/// fixed cost (Burn's fused backends register each with their stream): autodiff's `cat`
/// costs a `reshape` per parameter, and its backward a `slice` and a `reshape` per
/// parameter (see [`RnnBackend::rnn_flat_join_ops`](crate::RnnBackend::rnn_flat_join_ops)).
pub struct FlatJoinOps<B: Backend> {
    /// `join(parts)`: the parts flattened and concatenated in order, one-dimensional.
    pub join: fn(Vec<FloatTensor<B>>) -> FloatTensor<B>,
    /// `split(grad, shapes)`: the gradient of a joined buffer cut into the gradients of
    /// its parts, of `shapes`, in order.
    pub split: fn(FloatTensor<B>, &[Shape]) -> Vec<FloatTensor<B>>,
}

impl<B: Backend> Clone for FlatJoinOps<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Backend> Copy for FlatJoinOps<B> {}

impl<B: Backend> core::fmt::Debug for FlatJoinOps<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FlatJoinOps(..)")
    }
}

/// A backend's own way to build the flat buffer of tracked parameters one at a time,
/// for backends where Burn's `cat` costs more than a copy of each value (see
/// [`RnnBackend::rnn_flat_buffer_ops`](crate::RnnBackend::rnn_flat_buffer_ops)).
pub struct FlatBufferOps<B: Backend> {
    /// `append(buffer, part, capacity)`: `buffer` (one-dimensional, the parameters so
    /// far) followed by `part` flattened. `capacity` is the length of the whole flat
    /// buffer, so a buffer nobody else holds can be extended in place without
    /// reallocating.
    pub append: fn(FloatTensor<B>, FloatTensor<B>, usize) -> FloatTensor<B>,
    /// `split_gradient(grad, before, part_shape)`: the gradient of `[buffer, part]`
    /// (`before + part_shape.num_elements()` values) cut into the gradient of the
    /// first `before` values and that of the part, reshaped to `part_shape`.
    pub split_gradient: fn(FloatTensor<B>, usize, Shape) -> GradientSplit<B>,
}

/// The gradients of the buffer so far and of the appended part (see
/// [`FlatBufferOps::split_gradient`]).
pub type GradientSplit<B> = (FloatTensor<B>, FloatTensor<B>);

impl<B: Backend> Clone for FlatBufferOps<B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Backend> Copy for FlatBufferOps<B> {}

impl<B: Backend> core::fmt::Debug for FlatBufferOps<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FlatBufferOps(..)")
    }
}
