//! Conversions between Burn's typed tensors and the float primitives the op contract
//! passes around.

use burn::tensor::{Tensor, TensorPrimitive, backend::Backend, ops::FloatTensor};

/// The typed tensor of a float primitive.
pub(crate) fn tensor<B: Backend, const D: usize>(primitive: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

/// The float primitive of a typed tensor.
pub(crate) fn primitive<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}
