//! One (layer, direction) of the forward pass on a team: the plan fixed before the
//! members start ([`PassPlan`]), each member's panels, each chunk's input projection,
//! then each step: the recurrent product, the cell's gate math ([`Cell::forward_rows`]),
//! the projection of `h` and the outputs. Generic over the cell; [`forward_cell`] picks
//! it from the call's [`CellKind`].

use core::ops::Range;
use std::borrow::Cow;

use crate::arch::CellKind;
use crate::buffers::Buffer;
use crate::cell::{Cell, ForwardStep, Gru, Lstm};
use crate::forward::cell_io::{CellOut, CellParams, CellRun};
use crate::forward::chunks::{chunk_row_groups, chunk_steps, member_rows};
use crate::forward::split::{Share, Split, row_split_max_weight_bytes};
use crate::gemm::{Packed, PackedB, gemm, gemm_bias, gemm_bias_grouped, kernel_rows};
use crate::packed::{column_panels, gate_groups, unit_panels};
use crate::real::Real;
use crate::team::{Member, Shared, run_team_placed};

/// Runs one (layer, direction) forward: `out.y`'s columns of this direction, the final
/// states and, when training, the tape.
pub(crate) fn forward_cell<T: Real>(run: &CellRun<'_, T>, out: CellOut<'_, T>) {
    match run.dims.cell {
        CellKind::Lstm => cell_pass::<T, Lstm>(run, out),
        CellKind::Gru => cell_pass::<T, Gru>(run, out),
    }
}

/// How the team runs one (layer, direction), fixed before its members start.
struct PassPlan {
    /// Each member's part of the recurrence.
    team: Vec<Share>,
    /// The team splits the batch rows (no member reads another's values: the steps need
    /// no barrier), else the hidden units (see [`Split`]).
    by_rows: bool,
    /// With a row split, the chunk's input projection is split by the chunk's rows too
    /// (each member multiplies its part of them by all of `W_ihᵀ`), when `W_ih` is within
    /// the bound `W_hh` has. Split by units in blocks of a panel's width instead, it is
    /// uneven wherever the blocks do not divide by the team (H = 96: three blocks, 2 : 1
    /// on two members, one waiting a third of every chunk's projection at the barrier
    /// after it).
    projection_by_rows: bool,
    /// Inference split by rows keeps each member's pre-activations in a buffer of its
    /// own, which it projects and reads alone: no barrier around a chunk's projection,
    /// and no line of it ever written by the other member. In one buffer shared by the
    /// team (rows of one step side by side) the members' recurrent products slow down
    /// whenever the host places the two vCPUs far apart, though each member reads only
    /// rows it wrote itself, even with the members' rows a page apart (docs/fused-cpu.md,
    /// "Own pre-activations"). Training writes them to the tape, shared.
    own_chunks: bool,
    /// Time steps whose input projection is computed at once. A member's projection
    /// groups its rows by batch row (a row's steps of the chunk) where that gives fuller
    /// micro-kernel calls than a step's few rows: a chunk of whole calls, e.g. 16 steps
    /// → 18 on AVX2 (6-row calls, where 16 would run as 6 + 6 + 4). So does the
    /// projection of an input that is not sequence-major (a batch-first one, as the
    /// module hands it), whose rows are grouped too (`chunk_row_groups`).
    chunk: usize,
    /// Whether the cell projects `h` (`W_hr`).
    projection: bool,
}

impl PassPlan {
    fn new<T: Real>(run: &CellRun<'_, T>, training: bool, projection: bool) -> Self {
        let dims = run.dims;
        let (split, team) = dims.forward_team::<T>(run.threads);
        let by_rows = split == Split::Rows;
        let projection_by_rows = by_rows
            && dims.gate_cols() * run.input_size * core::mem::size_of::<T>()
                <= row_split_max_weight_bytes();
        let own_chunks = by_rows && projection_by_rows && !training;
        let grouped_input = !run.input_strides.steps_follow_rows(dims.batch);
        let chunk = chunk_steps(dims.seq, dims.batch);
        let chunk = if own_chunks || grouped_input {
            chunk.next_multiple_of(kernel_rows()).min(dims.seq)
        } else {
            chunk
        };
        Self {
            team,
            by_rows,
            projection_by_rows,
            own_chunks,
            chunk,
            projection,
        }
    }
}

/// The packed `W_ihᵀ`, `W_hhᵀ` and `W_hrᵀ` of some gate columns.
type Panels<T> = (PackedB<T>, PackedB<T>, Option<PackedB<T>>);

/// Everything the members of one (layer, direction) share.
struct Pass<'a, T: Real> {
    run: &'a CellRun<'a, T>,
    plan: PassPlan,
    /// The input projection's bias and the recurrent product's (see
    /// [`CellWeights::input_bias`](crate::cell_weights::CellWeights::input_bias)).
    bias: &'a [T],
    recurrent_bias: &'a [T],
    /// All gate columns packed once for the team (a row split of flat weights).
    packed_once: Option<&'a Panels<T>>,
    /// The layer's output and, when training, the tape.
    y: Shared<'a, T>,
    tape_gates: Option<Shared<'a, T>>,
    tape: Option<(Shared<'a, T>, Shared<'a, T>, Shared<'a, T>)>,
    recurrent_new: Option<Shared<'a, T>>,
    /// The recurrence's state (see [`ForwardStep`]) and, when the team shares them, the
    /// chunk's pre-activations.
    states: Shared<'a, T>,
    cell: Shared<'a, T>,
    unprojected: Shared<'a, T>,
    recurrent: Shared<'a, T>,
    chunk_gates: Shared<'a, T>,
}

fn cell_pass<T: Real, C: Cell>(run: &CellRun<'_, T>, out: CellOut<'_, T>) {
    let dims = run.dims;
    let (batch, h, p, gate_cols) = (dims.batch, dims.hidden, dims.out, dims.gate_cols());
    let (bias, recurrent_bias, projection) = biases(run);
    let plan = PassPlan::new(run, out.gates.is_some(), projection);
    let packed_once = pack_once(run, plan.by_rows);
    // Each chunk's projection writes its rows before the steps read them.
    let shares_chunk = out.gates.is_none() && !plan.own_chunks;
    let mut chunk_gates = Buffer::for_overwrite(if shares_chunk {
        plan.chunk * batch * gate_cols
    } else {
        0
    });
    let mut states = vec![T::ZERO; 2 * batch * p];
    states[..batch * p].copy_from_slice(run.h0);
    let mut cell = run.c0.to_vec();
    let mut unprojected = vec![T::ZERO; if projection { batch * h } else { 0 }];
    let mut recurrent = vec![
        T::ZERO;
        if C::RECURRENT_APART {
            batch * gate_cols
        } else {
            0
        }
    ];
    let keep_apart = out.gates.is_none();
    // SAFETY: each member writes its own units (or projected columns) of its rows of the
    // step's state, and reads the whole previous state only after the step's barrier
    // (none with a row split: no member reads another's rows); a chunk's projection
    // writes rows split between the members, which the steps read after the barrier
    // that ends the projection.
    let pass = unsafe {
        Pass {
            run,
            plan,
            bias: &bias,
            recurrent_bias: &recurrent_bias,
            packed_once: packed_once.as_ref(),
            y: out.y,
            tape_gates: out.gates,
            tape: out.tape,
            recurrent_new: out.recurrent_new,
            states: Shared::new(&mut states[..]),
            cell: Shared::new(&mut cell[..]),
            unprojected: Shared::new(&mut unprojected[..]),
            recurrent: Shared::new(&mut recurrent[..]),
            chunk_gates: Shared::new(&mut chunk_gates[..]),
        }
    };
    // Inference keeps the members on separate CPUs (team.rs, `run_team_placed`).
    run_team_placed(pass.plan.team.len(), keep_apart, |member| {
        run_member::<T, C>(&pass, &member)
    });
    let last = (dims.seq % 2) * batch * p;
    out.h_n.copy_from_slice(&states[last..last + batch * p]);
    out.c_n.copy_from_slice(&cell);
}

/// The input projection's bias, the recurrent product's (empty for an LSTM), and
/// whether the cell projects `h`.
fn biases<'a, T: Real>(run: &CellRun<'a, T>) -> (Cow<'a, [T]>, Cow<'a, [T]>, bool) {
    match run.params {
        CellParams::Packed(packed) => (
            Cow::Borrowed(&packed.input_bias[..]),
            Cow::Borrowed(&packed.recurrent_bias[..]),
            packed.hr.is_some(),
        ),
        CellParams::Flat(w) => {
            let (cell, gate_cols) = (run.dims.cell, run.dims.gate_cols());
            (
                Cow::Owned(w.input_bias(cell, gate_cols)),
                Cow::Owned(w.recurrent_bias(cell, gate_cols)),
                w.w_hr.is_some(),
            )
        }
    }
}

/// A row split gives every member every gate column: flat weights are packed once for
/// all of them, not once per member.
fn pack_once<T: Real>(run: &CellRun<'_, T>, by_rows: bool) -> Option<Panels<T>> {
    let CellParams::Flat(w) = run.params else {
        return None;
    };
    if !by_rows {
        return None;
    }
    let (h, p, threads, input_size) = (run.dims.hidden, run.dims.out, run.threads, run.input_size);
    let gates = gate_groups::<T>(h, run.dims.cell.gates(), 0..h);
    Some((
        PackedB::pack_groups_on(threads, input_size, &gates, w.w_ih, 1, input_size),
        PackedB::pack_groups_on(threads, p, &gates, w.w_hh, 1, p),
        w.w_hr
            .map(|w_hr| PackedB::pack_all_on(threads, h, p, w_hr, 1, h)),
    ))
}

/// A member's panels: `W_ihᵀ` for its share of the chunks' input projection (its own
/// gate columns, or with a row split its part of all of them), `W_hhᵀ` for its units and
/// `W_hrᵀ` for its projected columns.
struct MemberPanels<'a, T> {
    projection_ih: Option<Packed<'a, T>>,
    hh: Packed<'a, T>,
    hr: Option<Packed<'a, T>>,
}

/// The panels a member packs itself (flat weights the team does not share): the same
/// panels in the same order as packed beforehand (see `packed.rs`).
fn pack_here<T: Real>(
    pass: &Pass<'_, T>,
    units: &Range<usize>,
    own_h: &Option<Range<usize>>,
) -> Option<Panels<T>> {
    let (CellParams::Flat(w), None) = (pass.run.params, pass.packed_once) else {
        return None;
    };
    let (h, p, input_size) = (pass.run.dims.hidden, pass.run.dims.out, pass.run.input_size);
    let gates = gate_groups::<T>(h, pass.run.dims.cell.gates(), units.clone());
    Some((
        PackedB::pack_groups(input_size, &gates, w.w_ih, 1, input_size),
        PackedB::pack_groups(p, &gates, w.w_hh, 1, p),
        w.w_hr
            .zip(own_h.clone())
            .map(|(w_hr, cols)| PackedB::pack(h, &[cols], w_hr, 1, h)),
    ))
}

fn member_panels<'a, T: Real>(
    pass: &'a Pass<'a, T>,
    packed_here: Option<&'a Panels<T>>,
    share: &Share,
    own_h: &Option<Range<usize>>,
) -> MemberPanels<'a, T> {
    let gate_blocks = pass.run.dims.cell.gates();
    let own = &share.units;
    let (ih, hh, hr): (Packed<'a, T>, Packed<'a, T>, Option<Packed<'a, T>>) =
        match (pass.run.params, pass.packed_once.or(packed_here)) {
            (_, Some((ih, hh, hr))) => (ih.into(), hh.into(), hr.as_ref().map(Packed::from)),
            (CellParams::Packed(packed), None) => (
                packed.ih.panels(unit_panels::<T>(gate_blocks, own)),
                packed.hh.panels(unit_panels::<T>(gate_blocks, own)),
                packed
                    .hr
                    .as_ref()
                    .zip(own_h.as_ref())
                    .map(|(hr, cols)| hr.panels(column_panels::<T>(cols))),
            ),
            (CellParams::Flat(_), None) => unreachable!("flat weights are packed once or here"),
        };
    let ih_all = match (pass.run.params, pass.packed_once) {
        (_, Some((ih, _, _))) => Some(ih),
        (CellParams::Packed(packed), None) if pass.plan.by_rows => Some(&packed.ih),
        _ => None,
    };
    let projection_ih = match ih_all {
        Some(ih) if pass.plan.projection_by_rows => Some(ih.into()),
        Some(ih) => share
            .input_units
            .as_ref()
            .map(|units| ih.panels(unit_panels::<T>(gate_blocks, units))),
        None => Some(ih),
    };
    MemberPanels {
        projection_ih,
        hh,
        hr,
    }
}

/// Where a chunk's pre-activations are: the buffer, its first time, its batch rows per
/// step and its first batch row.
#[derive(Clone, Copy)]
struct ChunkGates<'a, T> {
    buffer: Shared<'a, T>,
    base: usize,
    rows_per_step: usize,
    first_row: usize,
    gate_cols: usize,
}

impl<T> ChunkGates<'_, T> {
    /// Where the gates of time `t` start.
    fn at(&self, t: usize) -> usize {
        (t - self.base) * self.rows_per_step * self.gate_cols
    }
}

/// One member's whole recurrence: chunk by chunk, the chunk's input projection, then
/// its steps.
fn run_member<T: Real, C: Cell>(pass: &Pass<'_, T>, member: &Member<'_>) {
    let (dims, plan) = (pass.run.dims, &pass.plan);
    let share = &plan.team[member.id];
    // Without a projection a member owns the same columns of h as of c.
    let own_h = if plan.projection {
        share.projected.clone()
    } else {
        Some(share.units.clone())
    };
    let packed_here = pack_here(pass, &share.units, &own_h);
    let panels = member_panels(pass, packed_here.as_ref(), share, &own_h);
    let gate_cols = dims.gate_cols();
    // This member's chunk of pre-activations, `[steps, rows, G]` (see `own_chunks`).
    let mut own_chunk = Buffer::<T>::for_overwrite(if plan.own_chunks {
        plan.chunk * share.rows.len() * gate_cols
    } else {
        0
    });
    // SAFETY: this member's own buffer: no other member holds it.
    let own_chunk = unsafe { Shared::new(&mut own_chunk[..]) };
    // Inference's `tanh(c)` (LSTM) or `W_hn h + b_hn` (GRU) of a row, not kept.
    let mut scratch_row = vec![T::ZERO; share.units.len()];
    let reverse = pass.run.direction == 1;
    let mut first = 0;
    while first < dims.seq {
        let steps = plan.chunk.min(dims.seq - first);
        // Times of this chunk, in processing order: t_lo..t_lo + steps.
        let t_lo = if reverse {
            dims.seq - first - steps
        } else {
            first
        };
        let (buffer, base, rows_per_step, first_row) = match pass.tape_gates {
            Some(tape) => (tape, 0, dims.batch, 0),
            None if plan.own_chunks => (own_chunk, t_lo, share.rows.len(), share.rows.start),
            None => (pass.chunk_gates, t_lo, dims.batch, 0),
        };
        let gates = ChunkGates {
            buffer,
            base,
            rows_per_step,
            first_row,
            gate_cols,
        };
        project_chunk(pass, member, &panels, gates, first, steps, t_lo);
        for step in first..first + steps {
            forward_step::<T, C>(pass, member, &panels, &own_h, gates, step, &mut scratch_row);
        }
        first += steps;
    }
}

/// This member's part of a chunk's input projection `x W_ihᵀ + b`, between the
/// barriers a shared chunk buffer needs.
fn project_chunk<T: Real>(
    pass: &Pass<'_, T>,
    member: &Member<'_>,
    panels: &MemberPanels<'_, T>,
    gates: ChunkGates<'_, T>,
    first: usize,
    steps: usize,
    t_lo: usize,
) {
    let (run, plan) = (pass.run, &pass.plan);
    let share = &plan.team[member.id];
    if plan.by_rows && first > 0 && !plan.own_chunks {
        // Every member's steps are done with the previous chunk's gates, which this
        // projection may overwrite.
        member.sync();
    }
    // This member's rows of the chunk's projection: its own rows (`own_chunks`), all, or
    // its part of them; and the first of them in the input.
    let (groups, rs, ldc) = chunk_row_groups(
        run.input_strides,
        steps,
        gates.rows_per_step,
        gates.gate_cols,
    );
    let (chunk_rows, input_first) = if plan.own_chunks {
        (
            0..steps * share.rows.len(),
            share.rows.start * run.input_strides.row,
        )
    } else if plan.projection_by_rows {
        let rows = steps * run.dims.batch;
        (member_rows(groups, rows, plan.team.len(), member.id), 0)
    } else {
        (0..steps * run.dims.batch, 0)
    };
    if let (Some(packed_ih), false) = (panels.projection_ih, chunk_rows.is_empty()) {
        // SAFETY: this member writes only its gate columns of these rows (all columns of
        // its own rows when the projection is split by rows, in its own buffer with
        // `own_chunks`); the call's check put every row of the input inside it.
        unsafe {
            gemm_bias_grouped(
                chunk_rows,
                groups,
                run.input
                    .as_ptr()
                    .add(t_lo * run.input_strides.step + input_first),
                rs,
                1,
                packed_ih,
                pass.bias,
                gates.buffer.at(gates.at(t_lo)),
                ldc,
            )
        };
    }
    if plan.by_rows && !plan.own_chunks {
        // Each member's rows need every member's gate columns.
        member.sync();
    }
}

/// One step of one member: the recurrent product of its rows, the cell's gate math,
/// the projection of `h` and the outputs, with the barriers a split by units needs.
#[allow(clippy::too_many_arguments)]
fn forward_step<T: Real, C: Cell>(
    pass: &Pass<'_, T>,
    member: &Member<'_>,
    panels: &MemberPanels<'_, T>,
    own_h: &Option<Range<usize>>,
    gates: ChunkGates<'_, T>,
    step: usize,
    scratch: &mut [T],
) {
    let (dims, plan) = (pass.run.dims, &pass.plan);
    let share = &plan.team[member.id];
    let (batch, p, gate_cols) = (dims.batch, dims.out, gates.gate_cols);
    let t = dims.time(step, pass.run.direction == 1);
    let (prev, next) = ((step % 2) * batch * p, ((step + 1) % 2) * batch * p);
    let (b0, nb) = (share.rows.start, share.rows.len());
    let cell_step = ForwardStep {
        t,
        batch,
        hidden: dims.hidden,
        out: p,
        rows: share.rows.clone(),
        units: share.units.clone(),
        gates: gates.buffer,
        gates_at: gates.at(t),
        first_row: gates.first_row,
        gate_cols,
        states: pass.states,
        prev,
        next,
        cell: pass.cell,
        unprojected: plan.projection.then_some(pass.unprojected),
        recurrent: pass.recurrent,
        tape: pass
            .tape
            .map(|(cell_prev, _, tanh_cell)| (cell_prev, tanh_cell)),
        recurrent_new: pass.recurrent_new,
        lengths: pass.run.lengths,
    };
    // SAFETY: this member writes only its gate columns of its rows of step t (or its
    // rows of the recurrent buffer); h_prev is complete (its own rows, or the barrier at
    // the end of the previous step).
    unsafe {
        let h_prev = pass.states.at(prev + b0 * p);
        if C::RECURRENT_APART {
            let recurrent = pass.recurrent.at(b0 * gate_cols);
            gemm_bias(
                nb,
                h_prev,
                p,
                1,
                panels.hh,
                pass.recurrent_bias,
                recurrent,
                gate_cols,
            )
        } else {
            let row = cell_step.gate_row(b0);
            gemm(nb, h_prev, p, 1, panels.hh, gates.buffer.at(row), gate_cols)
        }
    };
    // SAFETY: `cell_step`'s buffers have the documented shapes, and this member's units
    // of its rows are touched by no other member before the step's barrier.
    unsafe { C::forward_rows(&cell_step, scratch) };
    if plan.projection && !plan.by_rows {
        // Every member crosses this barrier, also one that owns no columns of the
        // projected state (when `out` splits into fewer panels than `hidden`): skipping
        // it desynchronised the team and hung the call.
        member.sync();
    }
    if let (Some(packed_hr), Some(cols)) = (panels.hr, own_h) {
        project_hidden(pass, share, packed_hr, cols, next);
    }
    if let Some(cols) = own_h {
        emit_outputs(pass, &cell_step, cols);
    }
    if !plan.by_rows {
        member.sync();
    }
}

/// `h = u W_hrᵀ` of this member's rows and projected columns `cols` of the next state.
fn project_hidden<T: Real>(
    pass: &Pass<'_, T>,
    share: &Share,
    packed_hr: Packed<'_, T>,
    cols: &Range<usize>,
    next: usize,
) {
    let (h, p) = (pass.run.dims.hidden, pass.run.dims.out);
    let (b0, nb) = (share.rows.start, share.rows.len());
    for b in share.rows.clone() {
        // SAFETY: this member's projected columns of row `b` of the next state, which no
        // other member touches before the barrier.
        unsafe {
            pass.states
                .slice(next + b * p + cols.start, cols.len())
                .fill(T::ZERO)
        };
    }
    // SAFETY: the unprojected units of these rows are complete (this member's own rows,
    // or the barrier before the projection).
    unsafe {
        gemm(
            nb,
            pass.unprojected.at(b0 * h),
            h,
            1,
            packed_hr,
            pass.states.at(next + b0 * p),
            p,
        )
    };
}

/// This member's columns `cols` of each of its rows' output `y` (zeros past a row's
/// length, where the row keeps its state) and, when training, of the tape's
/// `hidden_prev`.
fn emit_outputs<T: Real>(pass: &Pass<'_, T>, step: &ForwardStep<'_, T>, cols: &Range<usize>) {
    let dims = pass.run.dims;
    let (t, batch, p, n) = (step.t, dims.batch, dims.out, cols.len());
    let y_at = |b: usize| (t * batch + b) * dims.dirs * p + pass.run.direction * p;
    for b in step.rows.clone() {
        // SAFETY: this member's columns of row `b` in the states, `y` and the tape (in
        // bounds by their shapes), which no other member writes before the step's
        // barrier; of them, only the previous state (read here, not written) may be
        // read by other members meanwhile.
        unsafe {
            let h_prev = pass.states.read(step.prev + b * p + cols.start, n);
            let h_next = pass.states.slice(step.next + b * p + cols.start, n);
            let y = pass.y.slice(y_at(b) + cols.start, n);
            if step.valid(b) {
                y.copy_from_slice(h_next);
            } else {
                // Past its length a row keeps its state and emits zeros.
                h_next.copy_from_slice(h_prev);
                y.fill(T::ZERO);
            }
            if let Some((_, hidden_prev, _)) = pass.tape {
                hidden_prev
                    .slice((t * batch + b) * p + cols.start, n)
                    .copy_from_slice(h_prev);
            }
        }
    }
}
