//! The op's flat parameter buffer, built from the module's `Param` tensors on every call
//! (so it can never be stale): [`LstmBackend::lstm_flat_weights`](crate::LstmBackend::lstm_flat_weights)'s
//! default and the autodiff rule.

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
