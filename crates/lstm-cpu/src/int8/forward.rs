//! Inference of a whole layer stack on int8 weights ([`QuantizedRnn`]): every product
//! (the input projection of a layer's whole sequence, each step's recurrent product,
//! an LSTMP's projection of `h`) on quantized operands, the gate math in f32 exactly as
//! the f32 kernel runs it (`cell/`). The products run the fastest exact int8 kernel the
//! CPU has; each (layer, direction) runs step by step in `direction/`, on the call's
//! threads where its steps are large enough to share.

use std::borrow::Cow;

use crate::arch::RnnArch;
use crate::buffers::Buffer;
use crate::call::{CallError, RnnCall, RnnOutputs, arch_fits, len_check};
use crate::int8::cell::QuantizedCell;
use crate::int8::direction::Direction;
use crate::int8::quantize::check_finite;
use crate::int8::{QuantLevels, QuantizedActivations};

/// The int8 weights of a whole layer stack, quantized once from the canonical flat f32
/// parameters ([`RnnArch::direction_layout`]): `W_ih`, `W_hh` and `W_hr` of every layer
/// and direction symmetric per output row, the biases kept in f32.
///
/// ```
/// use lstm_cpu::int8::{QuantLevels, QuantizedRnn};
/// use lstm_cpu::{CellKind, RnnArch, RnnCall};
///
/// let arch = RnnArch {
///     cell: CellKind::Lstm, input_size: 3, hidden_size: 4, proj_size: 0,
///     num_layers: 1, bidirectional: false, bias: true,
/// };
/// let weights: Vec<f32> = (0..arch.weight_count()).map(|i| (i % 7) as f32 / 10.0 - 0.3).collect();
/// let model = QuantizedRnn::quantize(&arch, &weights, QuantLevels::Full).unwrap();
/// let (input, zeros) = ([0.5f32; 2 * 1 * 3], [0.0f32; 4]);
/// let call = RnnCall {
///     arch: &arch, seq_len: 2, batch: 1, lengths: None, input: &input, input_strides: None,
///     weights: &[], h0: &zeros, c0: &zeros, dropout_masks: &[], threads: 1,
/// };
/// let out = model.forward(&call).unwrap();
/// assert_eq!(out.y.len(), 2 * 4);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedRnn {
    arch: RnnArch,
    cells: Vec<QuantizedCell>,
}

impl QuantizedRnn {
    /// Quantizes `weights` (the canonical flat buffer of `arch`) to `levels`. Errors name
    /// `weights` when its length is not `arch.weight_count()` or a value is not finite.
    pub fn quantize(
        arch: &RnnArch,
        weights: &[f32],
        levels: QuantLevels,
    ) -> Result<Self, CallError> {
        arch_fits(arch)?;
        len_check(
            "weights",
            "the canonical flat layout",
            arch.weight_count(),
            weights.len(),
        )?;
        let mut cells = Vec::with_capacity(arch.cells());
        for layer in 0..arch.num_layers {
            for direction in 0..arch.dirs() {
                cells.push(QuantizedCell::quantize(
                    arch,
                    weights,
                    (layer, direction),
                    levels,
                )?);
            }
        }
        Ok(Self {
            arch: arch.clone(),
            cells,
        })
    }

    /// The architecture the weights are of.
    pub fn arch(&self) -> &RnnArch {
        &self.arch
    }

    /// Bytes of the quantized weights: the int8 values, their row scales and the f32
    /// biases.
    pub fn weight_bytes(&self) -> usize {
        self.cells.iter().map(QuantizedCell::bytes).sum()
    }

    /// The outputs of `call` (its `weights` are not read: these are; up to its `threads`
    /// run the large steps, with the same results on any number). Errors name `arch`
    /// when `call.arch` differs from the quantized one, `dropout_masks` when there are
    /// any (int8 runs inference), `input`, `h0` or `c0` when it holds a value that is not
    /// finite, and otherwise as [`crate::forward()`]'s.
    pub fn forward(&self, call: &RnnCall<'_, f32>) -> Result<RnnOutputs<f32>, CallError> {
        if *call.arch != self.arch {
            return Err(CallError {
                argument: "arch",
                expected: format!("the quantized architecture {:?}", self.arch),
                actual: format!("{:?}", call.arch),
            });
        }
        if !call.dropout_masks.is_empty() {
            return Err(CallError {
                argument: "dropout_masks",
                expected: "none (the int8 path runs inference)".into(),
                actual: format!("{} masks", call.dropout_masks.len()),
            });
        }
        call.check_with_weights(false)?;
        // The states are quantized unchecked from the first step on: finite from here on
        // (the input is checked as it is quantized).
        check_finite("h0", call.h0)?;
        check_finite("c0", call.c0)?;
        let arch = &self.arch;
        let call = &RnnCall {
            threads: team_size(arch, call.batch, call.threads),
            ..*call
        };
        let (seq, batch, p) = (call.seq_len, call.batch, arch.output_size());
        let rows = seq * batch;
        let mut out = RnnOutputs {
            y: Vec::new(),
            h_n: vec![0.0; call.h0.len()],
            c_n: vec![0.0; call.c0.len()],
        };
        let first_input = sequence_major(call);
        // The output of the layer below: scratch from the crate's buffer cache (every
        // value is written: each row of each step, zeros past a row's length).
        let mut below: Option<Buffer<f32>> = None;
        for layer in 0..arch.num_layers {
            let input_size = arch.layer_input_size(layer);
            let input: &[f32] = below.as_deref().unwrap_or(&first_input);
            let x = QuantizedActivations::quantize_on(call.threads, input, rows, input_size)
                .map_err(|e| match layer {
                    0 => input_error(call, input, e),
                    _ => e,
                })?;
            let len = rows * arch.dirs() * p;
            let last = layer + 1 == arch.num_layers;
            // The last layer's output is the call's, a plain vector.
            let (mut scratch, mut output) = if last {
                (None, vec![0.0f32; len])
            } else {
                (Some(Buffer::for_overwrite(len)), Vec::new())
            };
            let y: &mut [f32] = match &mut scratch {
                Some(scratch) => scratch,
                None => &mut output,
            };
            for direction in 0..arch.dirs() {
                let cell = layer * arch.dirs() + direction;
                let q = &self.cells[cell];
                let (h_n, c_n) = Direction::start(call, arch, q, (cell, direction))?.run(&x, y)?;
                out.h_n[cell * batch * p..][..batch * p].copy_from_slice(&h_n);
                let s = arch.cell_state_size();
                out.c_n[cell * batch * s..][..batch * s].copy_from_slice(&c_n);
            }
            x.recycle();
            below = scratch;
            out.y = output;
        }
        Ok(out)
    }
}

/// The threads a call runs on: one where a step's recurrent product is too small to
/// share (under 2^17 multiply-adds; a row of one counts as two, its product being bound
/// by reading the weights), else up to `threads`. Between the team's products the calling
/// thread runs alone, and a member waiting for the next product slows it.
fn team_size(arch: &RnnArch, batch: usize, threads: usize) -> usize {
    let per_step = batch.max(2) * arch.output_size() * arch.gate_rows();
    threads.min(per_step >> 17).max(1)
}

/// `e`, an error about `rows` (the call's input as [`sequence_major`] made it), as an
/// error about the user's `input`: a value that is not finite at its index in the
/// user's slice, with its step, row and feature.
fn input_error(call: &RnnCall<'_, f32>, rows: &[f32], e: CallError) -> CallError {
    let i = call.arch.input_size;
    let Some(at) = rows.iter().position(|v| !v.is_finite()) else {
        return CallError {
            argument: "input",
            ..e
        };
    };
    let (t, b, f) = (at / i / call.batch, at / i % call.batch, at % i);
    let index = match call.input_strides {
        Some(strides) => t * strides.step + b * strides.row + f,
        None => at,
    };
    CallError {
        argument: "input",
        expected: "finite values".into(),
        actual: format!(
            "{} at index {index} (step {t}, row {b}, feature {f})",
            rows[at]
        ),
    }
}

/// The call's input as rows `[T · B, I]`, sequence-major: the input itself when it
/// already is, else a copy.
fn sequence_major<'a>(call: &RnnCall<'a, f32>) -> Cow<'a, [f32]> {
    let i = call.arch.input_size;
    let Some(strides) = call.input_strides else {
        return Cow::Borrowed(call.input);
    };
    let mut rows = Vec::with_capacity(call.seq_len * call.batch * i);
    for t in 0..call.seq_len {
        for b in 0..call.batch {
            rows.extend_from_slice(&call.input[t * strides.step + b * strides.row..][..i]);
        }
    }
    Cow::Owned(rows)
}
