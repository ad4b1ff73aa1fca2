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
//!
//! Half-precision calls (f16, bf16) compute in f32 and round only their results
//! (`precision.rs`).

mod backward;
mod forward;
mod precision;
mod residuals;
mod steps;
mod weights;

use backward::backward as same_dtype_backward;
pub(crate) use forward::dropout_mask;
use forward::forward as same_dtype_forward;
pub(crate) use precision::{backward, forward};
