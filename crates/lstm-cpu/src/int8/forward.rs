//! Inference of a whole layer stack on int8 weights ([`QuantizedRnn`]): every product
//! (the input projection of a layer's whole sequence, each step's recurrent product,
//! an LSTMP's projection of `h`) on quantized operands, the gate math in f32 exactly as
//! the f32 kernel runs it (`cell/`). The products run the fastest exact int8 kernel the
//! CPU has, the large ones on the call's threads (split by rows); the rest on one.

use std::borrow::Cow;

use crate::arch::{CellKind, RnnArch};
use crate::call::{CallError, RnnCall, RnnOutputs, len_check};
use crate::cell::{Cell, ForwardStep, Gru, Lstm, recurrent_apart};
use crate::cell_weights::CellWeights;
use crate::int8::matmul::matmul_int8_on;
use crate::int8::{QuantLevels, QuantizedActivations, QuantizedMatrix};
use crate::team::Shared;

/// One (layer, direction)'s weights: the matrices quantized per output row, the biases
/// as the f32 kernel adds them (`CellWeights::input_bias`, `recurrent_bias`).
#[derive(Clone, Debug, PartialEq)]
struct QuantizedCell {
    w_ih: QuantizedMatrix,
    w_hh: QuantizedMatrix,
    w_hr: Option<QuantizedMatrix>,
    /// Added to the input projection: `b_ih`, and `b_hh` too for a cell whose recurrent
    /// product goes into the gates (an LSTM); `None` without biases.
    input_bias: Option<Vec<f32>>,
    /// Added to the recurrent product kept apart (a GRU's `b_hh`).
    recurrent_bias: Option<Vec<f32>>,
}

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
        len_check(
            "weights",
            "the canonical flat layout",
            arch.weight_count(),
            weights.len(),
        )?;
        let (gates, p, h) = (arch.gate_rows(), arch.output_size(), arch.hidden_size);
        let apart = recurrent_apart(arch.cell);
        let named = |e: CallError| CallError {
            argument: "weights",
            ..e
        };
        let mut cells = Vec::with_capacity(arch.cells());
        for layer in 0..arch.num_layers {
            for direction in 0..arch.dirs() {
                let layout = arch.direction_layout(layer, direction);
                let cell = CellWeights::new(weights, &layout);
                let matrix = |w: &[f32], rows, cols| {
                    QuantizedMatrix::quantize(w, rows, cols, levels).map_err(named)
                };
                let biased = cell.bias.is_some();
                cells.push(QuantizedCell {
                    w_ih: matrix(cell.w_ih, gates, cell.input_size)?,
                    w_hh: matrix(cell.w_hh, gates, p)?,
                    w_hr: cell.w_hr.map(|w| matrix(w, p, h)).transpose()?,
                    input_bias: biased.then(|| cell.input_bias(arch.cell, gates)),
                    recurrent_bias: (biased && apart)
                        .then(|| cell.recurrent_bias(arch.cell, gates)),
                });
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
        let matrix = |m: &QuantizedMatrix| m.values().len() + 4 * m.scales().len();
        let bias = |b: &Option<Vec<f32>>| 4 * b.as_ref().map_or(0, Vec::len);
        self.cells
            .iter()
            .map(|c| {
                matrix(&c.w_ih)
                    + matrix(&c.w_hh)
                    + c.w_hr.as_ref().map_or(0, matrix)
                    + bias(&c.input_bias)
                    + bias(&c.recurrent_bias)
            })
            .sum()
    }

    /// The outputs of `call` (its `weights` are not read: these are; up to its `threads`
    /// run the large products, with the same results on any number). Errors name `arch` when `call.arch` differs from the
    /// quantized one, `dropout_masks` when there are any (int8 runs inference), and
    /// otherwise as [`crate::forward`]'s.
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
        let arch = &self.arch;
        let (seq, batch, p) = (call.seq_len, call.batch, arch.output_size());
        let rows = seq * batch;
        let mut out = RnnOutputs {
            y: Vec::new(),
            h_n: vec![0.0; call.h0.len()],
            c_n: vec![0.0; call.c0.len()],
        };
        let mut below: Option<Vec<f32>> = None;
        for layer in 0..arch.num_layers {
            let input_size = arch.layer_input_size(layer);
            let input = match below.take() {
                Some(y) => Cow::Owned(y),
                None => sequence_major(call),
            };
            let x = QuantizedActivations::quantize(&input, rows, input_size)?;
            let mut y = vec![0.0f32; rows * arch.dirs() * p];
            for direction in 0..arch.dirs() {
                let cell = layer * arch.dirs() + direction;
                let state = DirectionState {
                    h_n: &mut out.h_n[cell * batch * p..][..batch * p],
                    c_n: &mut out.c_n[cell * batch * arch.cell_state_size()..]
                        [..batch * arch.cell_state_size()],
                };
                self.direction(call, cell, direction, &x, &mut y, state)?;
            }
            below = Some(y);
        }
        out.y = below.unwrap_or_default();
        Ok(out)
    }

    /// One (layer, direction), `cell` in the canonical order: its columns of `y`, its
    /// final states.
    fn direction(
        &self,
        call: &RnnCall<'_, f32>,
        cell: usize,
        direction: usize,
        x: &QuantizedActivations,
        y: &mut [f32],
        state: DirectionState<'_>,
    ) -> Result<(), CallError> {
        let arch = &self.arch;
        let q = &self.cells[cell];
        let (seq, batch) = (call.seq_len, call.batch);
        let (h, p, g, dirs) = (
            arch.hidden_size,
            arch.output_size(),
            arch.gate_rows(),
            arch.dirs(),
        );
        let apart = recurrent_apart(arch.cell);
        let mut gates = vec![0.0f32; seq * batch * g];
        matmul_int8_on(
            call.threads,
            x,
            &q.w_ih,
            q.input_bias.as_deref(),
            &mut gates,
        )?;
        let mut states = vec![0.0f32; 2 * batch * p];
        states[..batch * p].copy_from_slice(&call.h0[cell * batch * p..][..batch * p]);
        let s = arch.cell_state_size();
        let mut cell_state = call.c0[cell * batch * s..][..batch * s].to_vec();
        let mut recurrent = vec![0.0f32; batch * g];
        let mut unprojected = vec![0.0f32; if q.w_hr.is_some() { batch * h } else { 0 }];
        let mut scratch = vec![0.0f32; h];
        for step in 0..seq {
            let t = if direction == 1 { seq - 1 - step } else { step };
            let (prev, next) = ((step % 2) * batch * p, ((step + 1) % 2) * batch * p);
            let h_prev = QuantizedActivations::quantize(&states[prev..][..batch * p], batch, p)?;
            let bias = if apart {
                q.recurrent_bias.as_deref()
            } else {
                None
            };
            matmul_int8_on(call.threads, &h_prev, &q.w_hh, bias, &mut recurrent)?;
            if !apart {
                let step_gates = &mut gates[t * batch * g..][..batch * g];
                for (gate, product) in step_gates.iter_mut().zip(&recurrent) {
                    *gate += product;
                }
            }
            // SAFETY: one thread holds every buffer; each has the shape `ForwardStep`
            // documents for rows `0..batch` and units `0..h` (gates `[T, B, G]`, states
            // `[2, B, P]`, the cell state `[B, H]`, the recurrent product `[B, G]`, the
            // unprojected output `[B, H]`).
            unsafe {
                let step_args = ForwardStep {
                    t,
                    batch,
                    hidden: h,
                    out: p,
                    rows: 0..batch,
                    units: 0..h,
                    gates: Shared::new(&mut gates[..]),
                    gates_at: t * batch * g,
                    first_row: 0,
                    gate_cols: g,
                    states: Shared::new(&mut states[..]),
                    prev,
                    next,
                    cell: Shared::new(&mut cell_state[..]),
                    unprojected: q.w_hr.is_some().then(|| Shared::new(&mut unprojected[..])),
                    recurrent: Shared::new(&mut recurrent[..]),
                    tape: None,
                    recurrent_new: None,
                    lengths: call.lengths,
                };
                match arch.cell {
                    CellKind::Lstm => Lstm::forward_rows(&step_args, &mut scratch),
                    CellKind::Gru => Gru::forward_rows(&step_args, &mut scratch),
                }
            }
            if let Some(w_hr) = &q.w_hr {
                let u = QuantizedActivations::quantize(&unprojected, batch, h)?;
                matmul_int8_on(
                    call.threads,
                    &u,
                    w_hr,
                    None,
                    &mut states[next..][..batch * p],
                )?;
            }
            for b in 0..batch {
                let y_row = &mut y[(t * batch + b) * dirs * p + direction * p..][..p];
                if call.lengths.is_none_or(|l| t < l[b]) {
                    y_row.copy_from_slice(&states[next + b * p..][..p]);
                } else {
                    // Past its length a row keeps its state and emits zeros.
                    states.copy_within(prev + b * p..prev + (b + 1) * p, next + b * p);
                    y_row.fill(0.0);
                }
            }
        }
        let last = (seq % 2) * batch * p;
        state.h_n.copy_from_slice(&states[last..][..batch * p]);
        state.c_n.copy_from_slice(&cell_state);
        Ok(())
    }
}

/// Where one direction's final states go.
struct DirectionState<'a> {
    h_n: &'a mut [f32],
    c_n: &'a mut [f32],
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
