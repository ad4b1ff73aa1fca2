//! The recurrence of one quantized (layer, direction), step by step ([`Direction`]):
//! the input projection a chunk of steps at a time, then per step the recurrent product
//! on the quantized state, the f32 gate math of the f32 kernel (`Cell::forward_rows`),
//! an LSTMP's projection, and the new state quantized for the next step.
//!
//! On more than one thread a recurrence splits its batch rows over a team where each
//! member gets enough of them (`row_split.rs`: a barrier a chunk of steps, where the
//! rows go between the members by pace, `row_shares.rs`), else shares every
//! step's products on one team (`team_steps.rs`, an LSTM or GRU) or wakes the team for
//! each product and each step's gate math (an LSTMP of few rows, here). Wherever the
//! gate math splits the batch rows, each part also finishes its rows (the output, the
//! state of rows past their length, the next step's quantized state) so that the
//! calling thread does no per-row work alone (`shared_step.rs`).

mod row_shares;
mod row_split;
mod shared_step;
mod team_steps;

use std::ops::Range;
use std::sync::Mutex;

use crate::arch::RnnArch;
use crate::buffers::Buffer;
use crate::call::{CallError, RnnCall};
use crate::cell::recurrent_apart;
use crate::int8::QuantizedActivations;
use crate::int8::cell::QuantizedCell;
use crate::int8::matmul::matmul_int8_on;
use crate::int8::tile::Output;
use crate::team::{Shared, run_parts};

#[cfg(test)]
pub(crate) use row_shares::test_skew;
use shared_step::{SharedStep, StepGates};

/// Rows of the input projection computed at once: enough to keep the product's tiles
/// busy, few enough that its gate pre-activations stay in cache.
const CHUNK_ROWS: usize = 256;

/// Gate math of fewer cells (rows × hidden units) than this, between products that wake
/// the team each, runs on the calling thread alone: waking the team costs more than it
/// saves. (A recurrence on one team for all its steps, [`Direction::run_team`], splits
/// the rows of any batch: its team is awake.)
const TEAM_CELLS: usize = 1 << 12;

/// The order of a direction's steps, the same for every way of running them: the time
/// of the `step`-th, where its states are, the times of the chunk projected at it.
#[derive(Clone, Copy)]
struct StepOrder {
    seq: usize,
    /// Steps of each input projection.
    chunk: usize,
    /// Values of one hidden state `[B, P]`.
    state_len: usize,
    reverse: bool,
}

impl StepOrder {
    /// The time of the `step`-th step.
    fn time(self, step: usize) -> usize {
        if self.reverse {
            self.seq - 1 - step
        } else {
            step
        }
    }

    /// Where the states before and after the `step`-th step start in `[2, B, P]`.
    fn slots(self, step: usize) -> (usize, usize) {
        (
            (step % 2) * self.state_len,
            ((step + 1) % 2) * self.state_len,
        )
    }

    /// The times of the chunk whose projection the `step`-th step starts (`step` a
    /// multiple of the chunk), earliest first.
    fn chunk_times(self, step: usize) -> Range<usize> {
        let n = self.chunk.min(self.seq - step);
        let first = if self.reverse {
            self.seq - step - n
        } else {
            step
        };
        first..first + n
    }
}

/// One (layer, direction) of a call: its weights and its buffers, kept over its steps.
pub(crate) struct Direction<'a> {
    call: &'a RnnCall<'a, f32>,
    arch: &'a RnnArch,
    q: &'a QuantizedCell,
    /// 0 forward, 1 reverse.
    direction: usize,
    /// Steps of each input projection.
    chunk: usize,
    /// Gate pre-activations of a chunk of steps, `[chunk, B, G]`, from step
    /// `first_step` in time.
    gates: Buffer<f32>,
    first_step: usize,
    /// The hidden states `[2, B, P]`: the previous step's and this step's, in turn.
    states: Buffer<f32>,
    /// The cell state `[B, H]` (empty for a GRU).
    cell_state: Buffer<f32>,
    /// A GRU's recurrent product `[B, G]` (kept apart from the gates).
    recurrent: Buffer<f32>,
    /// With a projection: the output before it, `[B, H]`.
    unprojected: Buffer<f32>,
    /// The previous state, quantized for the recurrent product.
    h_prev: QuantizedActivations,
    /// The unprojected output, quantized for the projection.
    projected: QuantizedActivations,
    /// One gate-math scratch row of `H` per part of the team.
    scratch: Vec<Mutex<Vec<f32>>>,
}

impl<'a> Direction<'a> {
    /// Cell `cell` (canonical order) of `call`, in `direction`, from its initial state.
    pub(crate) fn start(
        call: &'a RnnCall<'a, f32>,
        arch: &'a RnnArch,
        q: &'a QuantizedCell,
        (cell, direction): (usize, usize),
    ) -> Result<Self, CallError> {
        let (batch, seq) = (call.batch, call.seq_len);
        let (h, p, g, s) = (
            arch.hidden_size,
            arch.output_size(),
            arch.gate_rows(),
            arch.cell_state_size(),
        );
        let chunk = (CHUNK_ROWS / batch.max(1)).clamp(1, seq.max(1));
        // `call.threads` is already one where a step's product is too small to share. A
        // team may have more members than rows: they share the products (a batch of one
        // row on one team, not the team woken for each step's product).
        let parts = call.threads.max(1);
        let apart = recurrent_apart(arch.cell);
        let h0 = &call.h0[cell * batch * p..][..batch * p];
        let mut states = Buffer::zeroed(2 * batch * p);
        states[..batch * p].copy_from_slice(h0);
        let h_prev = QuantizedActivations::quantize(h0, batch, p)?;
        Ok(Self {
            call,
            arch,
            q,
            direction,
            chunk,
            // Every value is set by the input projection before it is read.
            gates: Buffer::for_overwrite(chunk * batch * g),
            first_step: 0,
            states,
            cell_state: Buffer::copied(&call.c0[cell * batch * s..][..batch * s]),
            recurrent: Buffer::zeroed(if apart { batch * g } else { 0 }),
            unprojected: Buffer::zeroed(if q.w_hr.is_some() { batch * h } else { 0 }),
            h_prev,
            projected: QuantizedActivations::default(),
            scratch: (0..parts).map(|_| Mutex::new(vec![0.0; h])).collect(),
        })
    }

    /// Runs every step over the layer's quantized input `x` (`[T · B, I]`), writing
    /// this direction's columns of `y` (`[T · B, dirs · P]`); returns the final hidden
    /// state `[B, P]` and cell state.
    pub(crate) fn run(
        mut self,
        x: &QuantizedActivations,
        y: &mut [f32],
    ) -> Result<(Vec<f32>, Vec<f32>), CallError> {
        let (seq, order) = (self.call.seq_len, self.order());
        if let Some(members) = self.row_split_members() {
            self.run_rows(members, x, y);
        } else if self.scratch.len() > 1 && self.q.w_hr.is_none() {
            self.run_team(x, y);
        } else {
            for step in 0..seq {
                if step % self.chunk == 0 {
                    self.project_inputs(x, order.chunk_times(step))?;
                }
                self.step(order.time(step), order.slots(step), y)?;
            }
        }
        let (last, _) = order.slots(seq);
        let final_state = self.states[last..][..order.state_len].to_vec();
        Ok((final_state, self.cell_state.to_vec()))
    }

    /// The order of this direction's steps.
    fn order(&self) -> StepOrder {
        StepOrder {
            seq: self.call.seq_len,
            chunk: self.chunk,
            state_len: self.call.batch * self.arch.output_size(),
            reverse: self.direction == 1,
        }
    }

    /// The input projection of the steps of one chunk, `times` in time.
    fn project_inputs(
        &mut self,
        x: &QuantizedActivations,
        times: Range<usize>,
    ) -> Result<(), CallError> {
        let batch = self.call.batch;
        let gates = &mut self.gates[..times.len() * batch * self.arch.gate_rows()];
        let rows = x.rows_of(times.start * batch..times.end * batch);
        let output = Output::Set(self.q.input_bias.as_deref());
        matmul_int8_on(self.call.threads, rows, &self.q.w_ih, output, gates)?;
        self.first_step = times.start;
        Ok(())
    }

    /// Step `t`: the recurrent product of the quantized state at `prev`, the gate math,
    /// an LSTMP's projection; the new state at `next` (quantized into `h_prev`), its
    /// copy into this direction's columns of `y`.
    fn step(
        &mut self,
        t: usize,
        (prev, next): (usize, usize),
        y: &mut [f32],
    ) -> Result<(), CallError> {
        let (batch, g) = (self.call.batch, self.arch.gate_rows());
        let threads = self.call.threads;
        let h_prev = self.h_prev.all_rows();
        if recurrent_apart(self.arch.cell) {
            let output = Output::Set(self.q.recurrent_bias.as_deref());
            matmul_int8_on(threads, h_prev, &self.q.w_hh, output, &mut self.recurrent)?;
        } else {
            let at = (t - self.first_step) * batch * g;
            let step_gates = &mut self.gates[at..][..batch * g];
            matmul_int8_on(threads, h_prev, &self.q.w_hh, Output::Add, step_gates)?;
        }
        let projected = self.q.w_hr.is_some();
        self.gate_math(t, (prev, next), y, !projected);
        if let Some(w_hr) = &self.q.w_hr {
            let h = self.arch.hidden_size;
            self.projected.quantize_into(&self.unprojected, batch, h)?;
            let rows = self.projected.all_rows();
            let new_state = &mut self.states[next..][..batch * self.arch.output_size()];
            matmul_int8_on(threads, rows, w_hr, Output::Set(None), new_state)?;
            // SAFETY: `y` outlives the call below, on this thread alone.
            let y = unsafe { Shared::new(y) };
            // SAFETY: one thread, every row.
            unsafe { self.shared_with(y).finish_rows(t, (prev, next), 0..batch) };
        }
        Ok(())
    }

    /// The gate math of step `t`, its rows split over the team when there are enough
    /// cells ([`TEAM_CELLS`]); with `finish`, each part then finishes its rows.
    fn gate_math(&mut self, t: usize, (prev, next): (usize, usize), y: &mut [f32], finish: bool) {
        let (batch, threads) = (self.call.batch, self.call.threads);
        let parts = if batch * self.arch.hidden_size >= TEAM_CELLS {
            self.scratch.len().min(batch)
        } else {
            1
        };
        let gates_at = (t - self.first_step) * self.call.batch * self.arch.gate_rows();
        // SAFETY: `y` outlives the parts below, each of which writes only its own rows.
        let y = unsafe { Shared::new(y) };
        // Out of `self` while `shared` borrows the rest of it.
        let scratch = std::mem::take(&mut self.scratch);
        let shared = self.shared_with(y);
        let run = |part: usize| {
            let mut scratch = scratch[part].lock().unwrap_or_else(|e| e.into_inner());
            // SAFETY: this part alone touches its rows of the buffers until `run_parts`
            // returns.
            unsafe {
                shared.gate_rows(
                    (part, parts),
                    t,
                    (prev, next),
                    gates_at,
                    finish,
                    &mut scratch,
                )
            };
        };
        match parts {
            1 => run(0),
            parts => run_parts(threads, parts, run),
        }
        self.scratch = scratch;
    }

    /// The buffers as the parts of a step share them, with `y`.
    fn shared_with<'s>(&'s mut self, y: Shared<'s, f32>) -> SharedStep<'s> {
        let unprojected = (!self.unprojected.is_empty()).then_some(&mut self.unprojected[..]);
        let (values, scales) = self
            .h_prev
            .rows_mut(self.call.batch, self.arch.output_size());
        // SAFETY: every user of these (`gate_math`'s parts, `finish_rows`) touches only
        // its own batch rows of each, and the buffers are read again only after the
        // parts have returned.
        unsafe {
            SharedStep {
                gates: Shared::new(&mut self.gates[..]),
                states: Shared::new(&mut self.states[..]),
                cell_state: Shared::new(&mut self.cell_state[..]),
                recurrent: Shared::new(&mut self.recurrent[..]),
                unprojected: unprojected.map(|u| Shared::new(u)),
                h_values: Shared::new(values),
                h_scales: Shared::new(scales),
                y,
                cell: self.arch.cell,
                direction: self.direction,
                dirs: self.arch.dirs(),
                hidden: self.arch.hidden_size,
                out: self.arch.output_size(),
                gate_cols: self.arch.gate_rows(),
                batch: self.call.batch,
                lengths: self.call.lengths,
            }
        }
    }
}
