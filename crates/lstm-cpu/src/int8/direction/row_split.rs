//! A recurrence whose batch rows split over a team ([`Direction::run_rows`]): each
//! member runs the whole recurrence of its rows alone, nothing read that another member
//! wrote but at a chunk's start (one barrier a chunk of steps, where the rows may change
//! hands, `row_shares.rs`), at the cost of every member reading all of each step's
//! weights.

use std::time::Instant;

use crate::buffers::Buffer;
use crate::cell::recurrent_apart;
use crate::int8::direction::row_shares::{ChunkSeconds, RowShares};
use crate::int8::direction::{Direction, StepGates};
use crate::int8::matmul::product_part;
use crate::int8::quantize::{ActivationRows, quantize_activation_rows};
use crate::int8::tile::Output;
use crate::int8::{QuantizedActivations, QuantizedMatrix};
use crate::team::{Shared, SharedPtr, run_team_placed};

/// Fewest batch rows per member of a row split: with fewer, each member's read of all
/// of the step's weights feeds too few rows (2 threads, 2026-11-27: 3 rows a member
/// made 7x100x256 10 % and 6x100x128 12-20 % faster than the shared team, 2 rows made
/// 4x50x512 10 % slower on both instruction sets and 4x100x256 slower with AVX-VNNI).
const ROW_SPLIT_MIN_ROWS: usize = 3;

impl Direction<'_> {
    /// Members of a row split of this recurrence ([`Self::run_rows`]), if it takes one
    /// ([`row_split`]).
    pub(super) fn row_split_members(&self) -> Option<usize> {
        let step_weights = self.q.w_hh.stored_bytes()
            + self
                .q
                .w_hr
                .as_ref()
                .map_or(0, QuantizedMatrix::stored_bytes);
        row_split(self.scratch.len(), self.call.batch, step_weights)
    }

    /// Every step with the batch rows split over a team of `members`: each member runs
    /// the whole recurrence of its rows alone (their input projection a chunk of steps
    /// at a time into gates of its own, their recurrent products over all of `W_hh`, the
    /// gate math, an LSTMP's projection, their quantized state), so no member waits for
    /// another nor reads what another wrote within a chunk. At each chunk's start the
    /// members meet, and the rows go between them in proportion to the pace each kept
    /// over the chunk before ([`RowShares`]); a row's state lives in the shared buffers,
    /// so it carries on wherever its row goes. Every member reads all of the step's
    /// weights, which [`Self::row_split_members`] keeps within its cache.
    pub(super) fn run_rows(&mut self, members: usize, x: &QuantizedActivations, y: &mut [f32]) {
        let (seq, batch, chunk) = (self.call.seq_len, self.call.batch, self.chunk);
        let (h, p, g) = (
            self.arch.hidden_size,
            self.arch.output_size(),
            self.arch.gate_rows(),
        );
        let (q, order) = (self.q, self.order());
        let apart = recurrent_apart(self.arch.cell);
        // SAFETY: `y` outlives the team below, whose members write only their own rows.
        let y = unsafe { Shared::new(y) };
        let scratch = std::mem::take(&mut self.scratch);
        let shared = self.shared_with(y);
        let first_shares = RowShares::even(batch, members, ROW_SPLIT_MIN_ROWS);
        let chunk_seconds = ChunkSeconds::new(members);
        let most_rows = batch - (members - 1) * ROW_SPLIT_MIN_ROWS;
        #[cfg(test)]
        let skewed = super::row_shares::test_skew::now();
        run_team_placed(members, true, |member| {
            let mut shares = first_shares.clone();
            let mut rows = shares.rows(member.id);
            let mut scratch = scratch[member.id].lock().unwrap_or_else(|e| e.into_inner());
            // This member's rows of a chunk's inputs, and of its gates `[chunk, nb, G]`
            // (every value set by the chunk's projection before it is read).
            let mut own_x = QuantizedActivations::default();
            let mut own_gates = Buffer::<f32>::for_overwrite(chunk * most_rows * g);
            // SAFETY: this member alone reads and writes its own gates.
            let own_gates = unsafe { Shared::new(&mut own_gates[..]) };
            let mut projected = QuantizedActivations::default();
            let mut first_step = 0;
            let mut chunk_start = Instant::now();
            for step in 0..seq {
                if step % chunk == 0 {
                    if step > 0 {
                        let done = step / chunk - 1;
                        let seconds = chunk_start.elapsed().as_secs_f64();
                        chunk_seconds.store(member.id, done, seconds);
                        // Every member's last chunk done: its rows' states written, its
                        // seconds stored.
                        member.sync();
                        let seconds = chunk_seconds.of_chunk(done);
                        #[cfg(test)]
                        let seconds =
                            super::row_shares::test_skew::skewed(seconds, step / chunk, skewed);
                        shares.rebalance(&seconds);
                        #[cfg(test)]
                        if member.id == 0 && shares.rows(0) != rows {
                            use std::sync::atomic::Ordering;
                            super::row_shares::test_skew::MOVES.fetch_add(1, Ordering::Relaxed);
                        }
                        rows = shares.rows(member.id);
                        chunk_start = Instant::now();
                    }
                    let times = order.chunk_times(step);
                    first_step = times.start;
                    own_x.copy_step_rows(x, times, batch, rows.clone());
                    let output = Output::Set(q.input_bias.as_deref());
                    // SAFETY: `n · nb` rows of `G` gates, within this member's buffer.
                    unsafe {
                        let out = SharedPtr::new(own_gates.at(0));
                        product_part(own_x.all_rows(), &q.w_ih, output, out, (0, 1));
                    }
                }
                let (b0, nb) = (rows.start, rows.len());
                let (t, (prev, next)) = (order.time(step), order.slots(step));
                let gates = StepGates {
                    buffer: own_gates,
                    at: (t - first_step) * nb * g,
                    first_row: b0,
                };
                // SAFETY: this member's rows of the quantized state, written at the
                // previous step (by this member, or by the one that held the rows before
                // this chunk's start barrier, or by `start`); only this member writes
                // them until the next chunk's start.
                let h_prev = unsafe {
                    ActivationRows {
                        values: shared.h_values.read(b0 * p, nb * p),
                        scales: shared.h_scales.read(b0, nb),
                        cols: p,
                    }
                };
                // SAFETY: this member's rows of the step's gates (or of the recurrent
                // product kept apart, `[B, G]`), which only it touches.
                unsafe {
                    if apart {
                        let output = Output::Set(q.recurrent_bias.as_deref());
                        let out = SharedPtr::new(shared.recurrent.at(b0 * g));
                        product_part(h_prev, &q.w_hh, output, out, (0, 1));
                    } else {
                        let out = SharedPtr::new(gates.buffer.at(gates.at));
                        product_part(h_prev, &q.w_hh, Output::Add, out, (0, 1));
                    }
                }
                let projection = q.w_hr.as_ref();
                // SAFETY: this member's rows, which no other member touches.
                unsafe {
                    shared.gate_math_of(
                        rows.clone(),
                        gates,
                        t,
                        (prev, next),
                        projection.is_none(),
                        &mut scratch,
                    );
                }
                if let (Some(w_hr), Some(unprojected)) = (projection, shared.unprojected) {
                    let (values, scales) = projected.rows_mut(nb, h);
                    // SAFETY: this member's rows of the unprojected output and of the next
                    // state, which only it touches; `nb · P` states from row `b0`.
                    unsafe {
                        quantize_activation_rows(
                            unprojected.read(b0 * h, nb * h),
                            h,
                            values,
                            scales,
                        );
                        let out = SharedPtr::new(shared.states.at(next + b0 * p));
                        product_part(projected.all_rows(), w_hr, Output::Set(None), out, (0, 1));
                        shared.finish_rows(t, (prev, next), rows.clone());
                    }
                }
            }
        });
        self.scratch = scratch;
    }
}

/// The members of a row split of `batch` rows on a team of up to `parts`, whose members
/// each read `step_weight_bytes` of weights every step; `None` where it takes none (see
/// [`Direction::run_rows`]): at least two members of [`ROW_SPLIT_MIN_ROWS`] rows each,
/// and weights within [`row_split_max_weight_bytes`].
fn row_split(parts: usize, batch: usize, step_weight_bytes: usize) -> Option<usize> {
    let members = parts.min(batch / ROW_SPLIT_MIN_ROWS);
    (members > 1 && step_weight_bytes <= row_split_max_weight_bytes()).then_some(members)
}

/// Largest weights of a step for a row split: half a core's L2, the rest left to the
/// member's gates of a chunk of steps (each member reads all of the weights every
/// step, where a team sharing the products reads half each). At 2 MiB of L2, 8 rows
/// of hidden 600 (1.4 MB of `W_hh`, 4 rows a member) ran 4 % slower split by rows;
/// 64 rows of hidden 512 (1 MiB) 5 % faster and 8 rows of hidden 256 13 % faster
/// (2026-11-27).
fn row_split_max_weight_bytes() -> usize {
    crate::cache::l2_bytes() / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_split_needs_two_members_of_enough_rows_and_weights_within_cache() {
        let fits = row_split_max_weight_bytes();
        assert_eq!(row_split(2, 16, 150_000), Some(2));
        assert_eq!(row_split(3, 32, 150_000), Some(3));
        // 8 rows give two members of at least 3 rows, not three.
        assert_eq!(row_split(3, 8, 150_000), Some(2));
        assert_eq!(row_split(2, 6, fits), Some(2));
        assert_eq!(row_split(2, 5, 150_000), None);
        assert_eq!(row_split(1, 64, 150_000), None);
        assert_eq!(row_split(2, 64, fits + 1), None);
    }
}
