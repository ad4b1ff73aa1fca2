//! What one (layer, direction) of the recurrence reads ([`CellRun`], with its weights as
//! [`CellParams`]) and, in the forward, writes ([`CellOut`]).

use crate::call::InputStrides;
use crate::cell_weights::CellWeights;
use crate::forward::split::Dims;
use crate::packed::PackedCell;
use crate::real::Real;
use crate::team::Shared;

/// Where a cell's weights come from: the flat parameters (each team member packs its
/// own columns at the start of the call) or weights packed before the call.
#[derive(Clone, Copy)]
pub(crate) enum CellParams<'a, T: Real> {
    Flat(&'a CellWeights<'a, T>),
    Packed(&'a PackedCell<T>),
}

/// Read-only inputs of one (layer, direction).
pub(crate) struct CellRun<'a, T: Real> {
    pub dims: Dims,
    pub threads: usize,
    pub input: &'a [T],
    /// Features of each row of `input`.
    pub input_size: usize,
    /// Where each row of `input` starts (the forward reads a strided first input in
    /// place; the backward's is always sequence-major).
    pub input_strides: InputStrides,
    pub params: CellParams<'a, T>,
    pub lengths: Option<&'a [usize]>,
    pub direction: usize,
    pub h0: &'a [T],
    pub c0: &'a [T],
}

/// Where one (layer, direction) writes.
pub(crate) struct CellOut<'a, T> {
    /// The layer's output `[T, B, dirs * H_out]` (this direction's columns).
    pub y: Shared<'a, T>,
    /// The final hidden state `[B, H_out]`.
    pub h_n: &'a mut [T],
    /// The final cell state `[B, H]` (empty for a GRU).
    pub c_n: &'a mut [T],
    /// Training: the tape's `[T, B, G]` gate activations. Inference keeps only a few
    /// steps' pre-activations at a time.
    pub gates: Option<Shared<'a, T>>,
    /// Training: `cell_prev`, `hidden_prev`, `tanh_cell` (the first and last empty for a
    /// GRU).
    pub tape: Option<(Shared<'a, T>, Shared<'a, T>, Shared<'a, T>)>,
    /// Training a GRU: `W_hn h + b_hn` of every step, `[T, B, H]`.
    pub recurrent_new: Option<Shared<'a, T>>,
}
