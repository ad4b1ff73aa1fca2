//! One (layer, direction)'s int8 weights ([`QuantizedCell`]): what [`QuantizedRnn`]
//! (forward.rs) keeps per cell and each step (`direction/`) reads.
//!
//! [`QuantizedRnn`]: crate::int8::QuantizedRnn

use crate::arch::RnnArch;
use crate::call::CallError;
use crate::cell::recurrent_apart;
use crate::cell_weights::CellWeights;
use crate::int8::{QuantLevels, QuantizedMatrix};

/// One (layer, direction)'s weights: the matrices quantized per output row, the biases
/// as the f32 kernel adds them (`CellWeights::input_bias`, `recurrent_bias`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct QuantizedCell {
    pub w_ih: QuantizedMatrix,
    pub w_hh: QuantizedMatrix,
    pub w_hr: Option<QuantizedMatrix>,
    /// Added to the input projection: `b_ih`, and `b_hh` too for a cell whose recurrent
    /// product goes into the gates (an LSTM); `None` without biases.
    pub input_bias: Option<Vec<f32>>,
    /// Added to the recurrent product kept apart (a GRU's `b_hh`).
    pub recurrent_bias: Option<Vec<f32>>,
}

impl QuantizedCell {
    /// Quantizes one (layer, direction) of `arch`'s canonical flat `weights` (of the
    /// right length) to `levels`. Errors name `weights` when a value is not finite.
    pub(crate) fn quantize(
        arch: &RnnArch,
        weights: &[f32],
        (layer, direction): (usize, usize),
        levels: QuantLevels,
    ) -> Result<Self, CallError> {
        let (gates, p, h) = (arch.gate_rows(), arch.output_size(), arch.hidden_size);
        let layout = arch.direction_layout(layer, direction);
        let cell = CellWeights::new(weights, &layout);
        // Errors say which matrix of which cell, and where it starts in the flat buffer.
        let matrix = |w: &[f32], rows, cols: usize, name: &str, start: usize| {
            let at = format!("{name} of layer {layer}, direction {direction}");
            QuantizedMatrix::quantize(w, rows, cols, levels).map_err(|e| match e.argument {
                "cols" => CallError {
                    argument: "arch",
                    expected: format!("{} inputs per product", e.expected),
                    actual: format!("{cols} ({at}: its columns)"),
                },
                _ => CallError {
                    argument: "weights",
                    expected: e.expected,
                    actual: format!(
                        "{} ({at}, which starts at index {start} of the flat buffer)",
                        e.actual
                    ),
                },
            })
        };
        let biased = cell.bias.is_some();
        Ok(Self {
            w_ih: matrix(
                cell.w_ih,
                gates,
                cell.input_size,
                "weight_ih",
                layout.weight_ih.start,
            )?,
            w_hh: matrix(cell.w_hh, gates, p, "weight_hh", layout.weight_hh.start)?,
            w_hr: cell
                .w_hr
                .zip(layout.weight_hr.clone())
                .map(|(w, range)| matrix(w, p, h, "weight_hr", range.start))
                .transpose()?,
            input_bias: biased.then(|| cell.input_bias(arch.cell, gates)),
            recurrent_bias: (biased && recurrent_apart(arch.cell))
                .then(|| cell.recurrent_bias(arch.cell, gates)),
        })
    }

    /// Bytes of the weights: the int8 values, their row scales and the f32 biases.
    pub(crate) fn bytes(&self) -> usize {
        let matrix = |m: &QuantizedMatrix| m.stored_bytes() + 4 * m.scales().len();
        let bias = |b: &Option<Vec<f32>>| 4 * b.as_ref().map_or(0, Vec::len);
        matrix(&self.w_ih)
            + matrix(&self.w_hh)
            + self.w_hr.as_ref().map_or(0, matrix)
            + bias(&self.input_bias)
            + bias(&self.recurrent_bias)
    }
}
