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
//! Each cell has a folder (`lstm/`, `gru/`): its forward, backward and residuals; the
//! layer stack, the steps' indexing, the weights and the residuals' flattening are
//! shared. A new cell adds its folder and its arm in the two dispatches below.
//!
//! Half-precision calls (f16, bf16) compute in f32 and round only their results
//! (`precision.rs`).

mod gru;
mod lstm;
mod precision;
mod residuals;
mod stack;
mod steps;
mod weights;

use burn::tensor::backend::Backend;

pub(crate) use precision::{backward, forward};
pub(crate) use stack::dropout_mask;

use crate::op::io::{RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::spec::{CellKind, RnnSpec};

/// The forward of the call's cell, in the inputs' own float type.
fn same_dtype_forward<B: Backend>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    match spec.arch.cell {
        CellKind::Lstm => lstm::forward::forward::<B>(inputs, spec, save),
        CellKind::Gru => gru::forward::forward::<B>(inputs, spec, save),
    }
}

/// The backward of the saved call's cell, in the inputs' own float type.
fn same_dtype_backward<B: Backend>(saved: RnnSaved<B>, grads: RnnOutputGrads<B>) -> RnnGrads<B> {
    match saved.spec.arch.cell {
        CellKind::Lstm => lstm::backward::backward::<B>(saved, grads),
        CellKind::Gru => gru::backward::backward::<B>(saved, grads),
    }
}
