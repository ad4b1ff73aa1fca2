//! The portable kernel: Burn tensor ops only, so it runs on every backend.
//!
//! Per layer and direction: the input projection of all time steps is one matmul, then
//! each step is one matmul (`h_prev · W_hhᵀ`) plus element-wise gate math. The backward
//! is explicit backpropagation through time from the saved gate activations: after the
//! step loop, the weight gradients and the input gradient are again one matmul each.
//!
//! The sigmoid gates use `σ(x) = ½·tanh(x/2) + ½`. The `½` inside is folded into the
//! rows of `W_ih`, `W_hh` and the biases once per call, so every step needs a single
//! `tanh` over all four gates followed by one multiply-add (see `GateAffine`).

mod backward;
mod forward;
mod residuals;
mod weights;

pub(crate) use backward::backward;
pub(crate) use forward::{dropout_mask, forward};

use burn::tensor::{Tensor, TensorPrimitive, backend::Backend, ops::FloatTensor};

pub(crate) fn tensor<B: Backend, const D: usize>(primitive: FloatTensor<B>) -> Tensor<B, D> {
    Tensor::from_primitive(TensorPrimitive::Float(primitive))
}

pub(crate) fn primitive<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> FloatTensor<B> {
    tensor.into_primitive().tensor()
}

/// Entry `index` of the leading axis of a `[N, B, ·]` tensor (a time step of a sequence,
/// or a cell of a state), as `[B, ·]`.
pub(crate) fn index_leading<B: Backend>(tensor: &Tensor<B, 3>, index: usize) -> Tensor<B, 2> {
    let [_, rows, cols] = tensor.dims();
    tensor.clone().narrow(0, index, 1).reshape([rows, cols])
}

/// Time index of the `step`-th step a direction processes.
fn time_index(step: usize, seq_len: usize, reverse: bool) -> usize {
    if reverse { seq_len - 1 - step } else { step }
}
