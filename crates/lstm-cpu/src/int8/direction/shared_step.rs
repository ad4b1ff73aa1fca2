//! A step's buffers as the parts of its gate math share them ([`SharedStep`]), each
//! part touching only its own batch rows: the gate math of those rows, then their
//! finishing (outputs, the state of rows past their length, the next step's quantized
//! state).

use std::ops::Range;

use crate::arch::CellKind;
use crate::cell::{Cell, ForwardStep, Gru, Lstm};
use crate::int8::quantize::quantize_activation_rows;
use crate::team::{Shared, aligned_part};

/// Where a step's gate pre-activations are: batch row `first_row`'s at `at` in
/// `buffer`, the next rows after it.
#[derive(Clone, Copy)]
pub(super) struct StepGates<'a> {
    pub buffer: Shared<'a, f32>,
    pub at: usize,
    pub first_row: usize,
}

/// A step's buffers, shared by the parts of its gate math (each touches its own rows).
#[derive(Clone, Copy)]
pub(super) struct SharedStep<'a> {
    pub gates: Shared<'a, f32>,
    pub states: Shared<'a, f32>,
    pub cell_state: Shared<'a, f32>,
    pub recurrent: Shared<'a, f32>,
    pub unprojected: Option<Shared<'a, f32>>,
    /// The next step's quantized state: values `[B, P]` and row scales `[B]`.
    pub h_values: Shared<'a, u8>,
    pub h_scales: Shared<'a, f32>,
    /// The layer's output `[T · B, dirs · P]`.
    pub y: Shared<'a, f32>,
    pub cell: CellKind,
    pub direction: usize,
    pub dirs: usize,
    pub hidden: usize,
    pub out: usize,
    pub gate_cols: usize,
    pub batch: usize,
    pub lengths: Option<&'a [usize]>,
}

impl SharedStep<'_> {
    /// The gate math of part `part` of `parts` of the batch rows at step `t` (its gates
    /// at `gates_at`), then, with `finish`, the finishing of those rows.
    ///
    /// # Safety
    /// No other thread touches these rows of the buffers until the caller's parts have
    /// returned (or the team's next barrier); `scratch` holds `H` values.
    pub(super) unsafe fn gate_rows(
        self,
        (part, parts): (usize, usize),
        t: usize,
        (prev, next): (usize, usize),
        gates_at: usize,
        finish: bool,
        scratch: &mut [f32],
    ) {
        let rows = aligned_part(self.batch, parts, 1, part);
        let gates = StepGates {
            buffer: self.gates,
            at: gates_at,
            first_row: 0,
        };
        // SAFETY: the caller's promise, for its part of the rows.
        unsafe { self.gate_math_of(rows, gates, t, (prev, next), finish, scratch) };
    }

    /// The gate math of batch rows `rows` at step `t`, their gates where `gates` says,
    /// then, with `finish`, the finishing of those rows.
    ///
    /// # Safety
    /// As [`Self::gate_rows`], for `rows`; `gates` holds their pre-activations.
    pub(super) unsafe fn gate_math_of(
        self,
        rows: Range<usize>,
        gates: StepGates<'_>,
        t: usize,
        (prev, next): (usize, usize),
        finish: bool,
        scratch: &mut [f32],
    ) {
        let step_args = ForwardStep {
            t,
            batch: self.batch,
            hidden: self.hidden,
            out: self.out,
            rows: rows.clone(),
            units: 0..self.hidden,
            gates: gates.buffer,
            gates_at: gates.at,
            first_row: gates.first_row,
            gate_cols: self.gate_cols,
            states: self.states,
            prev,
            next,
            cell: self.cell_state,
            unprojected: self.unprojected,
            recurrent: self.recurrent,
            tape: None,
            recurrent_new: None,
            lengths: self.lengths,
        };
        // SAFETY: the buffers have the shapes `ForwardStep` documents (gates `[chunk, B,
        // G]` from the chunk's first step, states `[2, B, P]`, the cell state `[B, H]`,
        // the recurrent product `[B, G]`, the unprojected output `[B, H]`), and these
        // rows are the caller's alone (its promise).
        unsafe {
            match self.cell {
                CellKind::Lstm => Lstm::forward_rows(&step_args, scratch),
                CellKind::Gru => Gru::forward_rows(&step_args, scratch),
            }
            if finish {
                self.finish_rows(t, (prev, next), rows);
            }
        }
    }

    /// Finishes `rows` of step `t`: a row past its length keeps its state (copied from
    /// `prev` to `next`) and emits zeros, the others emit their new state; then each
    /// row's state is quantized for the next step.
    ///
    /// # Safety
    /// No other thread touches these rows of the buffers until the caller's parts have
    /// returned.
    pub(super) unsafe fn finish_rows(
        self,
        t: usize,
        (prev, next): (usize, usize),
        rows: Range<usize>,
    ) {
        let p = self.out;
        for b in rows.clone() {
            // SAFETY: row `b` of each buffer is this caller's (the promise above).
            let (state_prev, state_next, y_row) = unsafe {
                (
                    self.states.slice(prev + b * p, p),
                    self.states.slice(next + b * p, p),
                    self.y
                        .slice((t * self.batch + b) * self.dirs * p + self.direction * p, p),
                )
            };
            if self.lengths.is_none_or(|l| t < l[b]) {
                y_row.copy_from_slice(state_next);
            } else {
                state_next.copy_from_slice(state_prev);
                y_row.fill(0.0);
            }
        }
        let n = rows.len();
        // SAFETY: as above, for the rows' states, quantized values and scales.
        unsafe {
            quantize_activation_rows(
                self.states.slice(next + rows.start * p, n * p),
                p,
                self.h_values.slice(rows.start * p, n * p),
                self.h_scales.slice(rows.start, n),
            );
        }
    }
}
