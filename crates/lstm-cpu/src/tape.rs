//! What a training forward keeps for the backward. Buffers are indexed by time step
//! (not processing order), so the weight gradients are single GEMMs over all steps.

use crate::buffers::Buffer;
use crate::call::{CallError, RnnCall};
use crate::real::Real;

/// The residuals of [`forward_train`](crate::forward_train), consumed by
/// [`backward`](crate::backward()) (which overwrites the gate activations with their
/// gradients in place).
#[derive(Clone, Debug)]
pub struct Tape<T: Real> {
    pub(crate) layers: Vec<LayerTape<T>>,
}

#[derive(Clone, Debug)]
pub(crate) struct LayerTape<T: Real> {
    /// The layer's input after dropout (layers above the first; the first reads the
    /// call's, or keeps a sequence-major copy of a strided one).
    pub input: Option<Buffer<T>>,
    /// The dropout mask applied to that input.
    pub mask: Option<Buffer<T>>,
    /// One per direction.
    pub cells: Vec<CellTape<T>>,
}

#[derive(Clone, Debug)]
pub(crate) struct CellTape<T: Real> {
    /// Gate activations `i, f, g, o` (LSTM, `[T, B, 4H]`) or `r, z, n` (GRU, `[T, B, 3H]`).
    pub gates: Buffer<T>,
    /// Cell state entering each step, `[T, B, H]` (empty for a GRU).
    pub cell_prev: Buffer<T>,
    /// Hidden state entering each step, `[T, B, H_out]`.
    pub hidden_prev: Buffer<T>,
    /// `tanh(c_t)`, `[T, B, H]` (empty for a GRU).
    pub tanh_cell: Buffer<T>,
    /// GRU: `W_hn h_prev + b_hn`, `[T, B, H]`, which the reset gate multiplies (empty for
    /// an LSTM).
    pub recurrent_new: Buffer<T>,
}

impl<T: Real> Tape<T> {
    /// Bytes held (the kernel's training memory beyond inputs and outputs).
    pub fn bytes(&self) -> usize {
        let values: usize = self
            .layers
            .iter()
            .map(|l| {
                l.input.as_ref().map_or(0, |b| b.len())
                    + l.mask.as_ref().map_or(0, |b| b.len())
                    + l.cells
                        .iter()
                        .map(|c| {
                            c.gates.len()
                                + c.cell_prev.len()
                                + c.hidden_prev.len()
                                + c.tanh_cell.len()
                                + c.recurrent_new.len()
                        })
                        .sum::<usize>()
            })
            .sum();
        values * core::mem::size_of::<T>()
    }

    pub(crate) fn check<U>(&self, call: &RnnCall<'_, U>) -> Result<(), CallError> {
        let a = call.arch;
        let rows = call.seq_len * call.batch;
        let fits = self.layers.len() == a.num_layers
            && self.layers.iter().all(|l| {
                l.cells.len() == a.dirs()
                    && l.cells.iter().all(|c| {
                        c.gates.len() == rows * a.gate_rows()
                            && c.hidden_prev.len() == rows * a.output_size()
                    })
            })
            // A strided input was copied into the tape (the backward reads it by steps).
            && (call.strided_input().is_none() || self.layers[0].input.is_some());
        if fits {
            Ok(())
        } else {
            Err(CallError {
                argument: "tape",
                expected: format!(
                    "the tape of a forward_train with this architecture, T={} and B={}",
                    call.seq_len, call.batch
                ),
                actual: "a tape of another call".into(),
            })
        }
    }
}
