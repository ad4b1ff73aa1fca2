//! One (layer, direction)'s parameters as views of the flat parameter buffer, and the
//! biases each of its products adds.

use crate::arch::{CellKind, DirectionLayout};
use crate::real::Real;

/// One (layer, direction)'s parameters.
pub(crate) struct CellWeights<'a, T> {
    pub w_ih: &'a [T],
    pub w_hh: &'a [T],
    pub bias: Option<(&'a [T], &'a [T])>,
    pub w_hr: Option<&'a [T]>,
    pub input_size: usize,
}

impl<'a, T> CellWeights<'a, T> {
    pub fn new(flat: &'a [T], layout: &DirectionLayout) -> Self {
        Self {
            w_ih: &flat[layout.weight_ih.clone()],
            w_hh: &flat[layout.weight_hh.clone()],
            bias: layout
                .bias_ih
                .clone()
                .zip(layout.bias_hh.clone())
                .map(|(ih, hh)| (&flat[ih], &flat[hh])),
            w_hr: layout.weight_hr.clone().map(|r| &flat[r]),
            input_size: layout.input_size,
        }
    }
}

impl<T: Real> CellWeights<'_, T> {
    /// The bias the input projection adds, `[gate_rows]` (zeros without biases): an
    /// LSTM's `b_ih + b_hh` (both add to every gate), a GRU's `b_ih` alone (its `b_hn`
    /// is multiplied by the reset gate, so `b_hh` goes with the recurrent product).
    pub fn input_bias(&self, cell: CellKind, gate_rows: usize) -> Vec<T> {
        match (self.bias, cell) {
            (Some((b_ih, b_hh)), CellKind::Lstm) => {
                b_ih.iter().zip(b_hh).map(|(&a, &b)| a + b).collect()
            }
            (Some((b_ih, _)), CellKind::Gru) => b_ih.to_vec(),
            (None, _) => vec![T::ZERO; gate_rows],
        }
    }

    /// The bias the recurrent product adds: a GRU's `b_hh` (zeros without biases); empty
    /// for an LSTM, whose recurrent product adds to the projection's gates.
    pub fn recurrent_bias(&self, cell: CellKind, gate_rows: usize) -> Vec<T> {
        match (self.bias, cell) {
            (_, CellKind::Lstm) => Vec::new(),
            (Some((_, b_hh)), CellKind::Gru) => b_hh.to_vec(),
            (None, CellKind::Gru) => vec![T::ZERO; gate_rows],
        }
    }
}
