//! A recurrence on one team that shares every step's products ([`Direction::run_team`]):
//! each member computes its columns of the products, then the gate math of its batch
//! rows, two barriers a step. For batches too small to split by rows.

use crate::cell::recurrent_apart;
use crate::int8::QuantizedActivations;
use crate::int8::direction::Direction;
use crate::int8::matmul::product_part;
use crate::int8::quantize::ActivationRows;
use crate::int8::tile::Output;
use crate::team::{Shared, SharedPtr, run_team_placed};

impl Direction<'_> {
    /// Every step on a team of `scratch.len()` members that stays together for the
    /// whole recurrence (a cell without a projection): at each step every member
    /// computes its columns of the products (the input projection at the start of a
    /// chunk, then the recurrent one), meets the others, runs the gate math of its rows
    /// and finishes them, and meets them again. Two barriers a step, no team woken per
    /// product.
    pub(super) fn run_team(&mut self, x: &QuantizedActivations, y: &mut [f32]) {
        let (seq, batch, chunk) = (self.call.seq_len, self.call.batch, self.chunk);
        let (p, g) = (self.arch.output_size(), self.arch.gate_rows());
        let (q, order, parts) = (self.q, self.order(), self.scratch.len());
        let apart = recurrent_apart(self.arch.cell);
        // SAFETY: `y` outlives the team below, whose members write only their own rows.
        let y = unsafe { Shared::new(y) };
        let scratch = std::mem::take(&mut self.scratch);
        let shared = self.shared_with(y);
        // SAFETY: the products write through these only their own columns between two
        // barriers; the gate math reads them after the barrier that follows.
        let (gates_out, recurrent_out) = unsafe {
            (
                SharedPtr::new(shared.gates.at(0)),
                SharedPtr::new(shared.recurrent.at(0)),
            )
        };
        run_team_placed(parts, true, |member| {
            let part = (member.id, parts);
            let mut scratch = scratch[member.id].lock().unwrap_or_else(|e| e.into_inner());
            let mut first_step = 0;
            for step in 0..seq {
                if step % chunk == 0 {
                    let times = order.chunk_times(step);
                    first_step = times.start;
                    let rows = x.rows_of(times.start * batch..times.end * batch);
                    let output = Output::Set(q.input_bias.as_deref());
                    // SAFETY: the chunk's gates `[n, B, G]` lie within the buffer, and
                    // this member alone writes its columns of them before the barrier.
                    unsafe { product_part(rows, &q.w_ih, output, gates_out, part) };
                }
                let (t, (prev, next)) = (order.time(step), order.slots(step));
                let gates_at = (t - first_step) * batch * g;
                // SAFETY: the previous step's state, which no member writes before the
                // barrier that ends this step's products.
                let h_prev = unsafe {
                    ActivationRows {
                        values: shared.h_values.read(0, batch * p),
                        scales: shared.h_scales.read(0, batch),
                        cols: p,
                    }
                };
                // SAFETY: this member's columns of the step's gates (or of the recurrent
                // product kept apart), within their buffers.
                unsafe {
                    if apart {
                        let output = Output::Set(q.recurrent_bias.as_deref());
                        product_part(h_prev, &q.w_hh, output, recurrent_out, part);
                    } else {
                        let step_gates = SharedPtr::new(gates_out.at(gates_at));
                        product_part(h_prev, &q.w_hh, Output::Add, step_gates, part);
                    }
                }
                member.sync();
                // SAFETY: this member's rows, which no other member touches before the
                // barrier below; the products it reads were finished by the one above.
                unsafe {
                    shared.gate_rows(part, t, (prev, next), gates_at, true, &mut scratch);
                }
                member.sync();
            }
        });
        self.scratch = scratch;
    }
}
