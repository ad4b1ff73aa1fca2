//! The op's flat parameter buffer, built from the module's `Param` tensors on every call
//! (so it can never be stale): [`RnnBackend::rnn_flat_weights`](crate::RnnBackend::rnn_flat_weights)'s
//! default, and the hooks a backend may give for building it one tracked parameter at a
//! time (`tracked_weights.rs`).

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
