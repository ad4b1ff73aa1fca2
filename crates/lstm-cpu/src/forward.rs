//! The forward pass: per layer and direction, the input projection of a chunk of steps
//! as one GEMM split over the team, then the recurrence, where the team splits the hidden
//! units (all four gates of a unit stay on one thread, so the gate math needs no
//! exchange) and meets once per step (twice with a projection), or, for small `W_hh`,
//! splits the batch rows and needs no barrier between steps (see [`Split`]).

use core::ops::Range;

use crate::arch::CellKind;
use crate::buffers::Buffer;
use crate::call::{CallError, InputStrides, RnnCall, RnnOutputs};
use crate::cell::gru::gru_update;
use crate::cell::lstm::cell_update;
use crate::cell_weights::CellWeights;
use crate::gemm::{
    Packed, PackedB, RowGroups, gemm, gemm_bias, gemm_bias_grouped, kernel_rows, panel, tile_calls,
};
use crate::packed::{PackedCell, PackedWeights, column_panels, gate_groups, unit_panels};
use crate::real::Real;
use crate::tape::{CellTape, LayerTape, Tape};
use crate::team::{Shared, aligned_part, run_team_placed, split_aligned};

/// Inference: outputs only.
pub fn forward<T: Real>(call: &RnnCall<'_, T>) -> Result<RnnOutputs<T>, CallError> {
    run(call, false, None).map(|(outputs, _)| outputs)
}

/// Training: outputs and the [`Tape`] that [`backward`](crate::backward) needs.
pub fn forward_train<T: Real>(
    call: &RnnCall<'_, T>,
) -> Result<(RnnOutputs<T>, Tape<T>), CallError> {
    run(call, true, None)
        .map(|(outputs, tape)| (outputs, tape.expect("a training run keeps its tape")))
}

/// Inference with weights packed beforehand: the same results as [`forward`] on the
/// flat parameters `packed` was made from. `call.weights` is not read (it may be empty);
/// `packed` must be of `call.arch`.
pub fn forward_packed<T: Real>(
    call: &RnnCall<'_, T>,
    packed: &PackedWeights<T>,
) -> Result<RnnOutputs<T>, CallError> {
    if packed.arch() != call.arch {
        return Err(CallError {
            argument: "packed",
            expected: format!("weights packed for {:?}", call.arch),
            actual: format!("weights packed for {:?}", packed.arch()),
        });
    }
    run(call, false, Some(packed)).map(|(outputs, _)| outputs)
}

/// Where a cell's weights come from: the flat parameters (each team member packs its
/// own columns at the start of the call) or weights packed before the call.
#[derive(Clone, Copy)]
pub(crate) enum CellParams<'a, T: Real> {
    Flat(&'a CellWeights<'a, T>),
    Packed(&'a PackedCell<T>),
}

/// Sizes shared by every cell of a call.
#[derive(Clone, Copy)]
pub(crate) struct Dims {
    pub cell: CellKind,
    /// Cell-state values per row: `hidden` (LSTM) or 0 (GRU).
    pub state: usize,
    pub seq: usize,
    pub batch: usize,
    pub hidden: usize,
    pub out: usize,
    pub dirs: usize,
}

impl Dims {
    pub fn of<T>(call: &RnnCall<'_, T>) -> Self {
        Self {
            cell: call.arch.cell,
            state: call.arch.cell_state_size(),
            seq: call.seq_len,
            batch: call.batch,
            hidden: call.arch.hidden_size,
            out: call.arch.output_size(),
            dirs: call.arch.dirs(),
        }
    }

    /// Gate columns of a row: `4H` (LSTM) or `3H` (GRU).
    #[inline]
    pub fn gate_cols(&self) -> usize {
        self.cell.gates() * self.hidden
    }

    /// Time index of the `step`-th step a direction processes.
    #[inline]
    pub fn time(&self, step: usize, reverse: bool) -> usize {
        if reverse { self.seq - 1 - step } else { step }
    }

    /// The recurrence's team: each member's hidden units (all four gates of them) and
    /// its columns of the projected state `h` (used with a projection). A step of fewer
    /// than ~32 K multiply-adds per thread is faster on one thread than split with a
    /// barrier (docs/dev/fused-cpu-measurements.md has the measurements).
    pub fn team<T>(&self, threads: usize) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
        let size = self.team_size(threads);
        let units = split_aligned(self.hidden, size, panel::<T>());
        let projected = split_aligned(self.out, units.len(), panel::<T>());
        (units, projected)
    }

    fn team_size(&self, threads: usize) -> usize {
        // A batch of one row counts as two: its step is a matrix-vector product, bound by
        // reading `W_hh` (two vector loads per two multiply-adds), which takes as long as
        // a product of two rows.
        let per_step = self.batch.max(2) * self.out * self.gate_cols();
        threads.min(per_step >> 15).max(1)
    }

    /// The forward recurrence's team: [`Dims::team`]'s split of the hidden units (the
    /// backward's), or a split of the batch rows (see [`Split`]), and which it is.
    pub fn forward_team<T>(&self, threads: usize) -> (Split, Vec<Share>) {
        let size = self.team_size(threads);
        let split = Split::choose::<T>(self, size);
        let shares = match split {
            Split::Rows => {
                // The input projection of a chunk of steps is still split by units: one
                // product over all the chunk's rows, which a member's rows alone (a few
                // per step) would cut into one product per step.
                let rows = split_aligned(self.batch, size, 1);
                // As many parts as members (the rows can split into fewer than `size`).
                let units = split_aligned(self.hidden, rows.len(), panel::<T>());
                rows.into_iter()
                    .enumerate()
                    .map(|(id, rows)| Share {
                        units: 0..self.hidden,
                        input_units: units.get(id).cloned(),
                        projected: Some(0..self.out),
                        rows,
                    })
                    .collect()
            }
            Split::Units => {
                let (units, projected) = self.team::<T>(threads);
                units
                    .into_iter()
                    .enumerate()
                    .map(|(id, units)| Share {
                        input_units: Some(units.clone()),
                        units,
                        projected: projected.get(id).cloned(),
                        rows: 0..self.batch,
                    })
                    .collect()
            }
        };
        (split, shares)
    }
}

/// Fewest batch rows per member for [`Split::Rows`]: fewer leave the micro-kernel
/// too few accumulators (and every member still reads all of `W_hh` per step).
const ROW_SPLIT_MIN_ROWS: usize = 4;
/// Largest `W_hh` for [`Split::Rows`], whose members each read all of it every step:
/// twice a core's L2, where rows and units cross over (on machines of 512 KiB and of
/// 2 MiB of L2 alike; `cache.rs`): beyond it, the members' reads of `W_hh` from L3 cost
/// more than the barriers they save.
fn row_split_max_weight_bytes() -> usize {
    2 * crate::cache::l2_bytes()
}

/// How a recurrence's team divides a step (forward: [`Split::choose`], backward:
/// [`Split::choose_backward`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Split {
    /// Each member owns some hidden units (all four gates of them) of every batch row:
    /// the members exchange `h` at a barrier every step, and each holds only its share
    /// of `W_hh` in its cache.
    Units,
    /// Each member owns some batch rows and runs their whole recurrence alone: no
    /// barrier and no exchange at all, but every member reads all of `W_hh` each step.
    Rows,
}

impl Split {
    /// The forward's split for `dims` on a team of `size`: rows where `W_hh` is at most
    /// [`row_split_max_weight_bytes`].
    fn choose<T>(dims: &Dims, size: usize) -> Self {
        Self::choose_within::<T>(dims, size, row_split_max_weight_bytes())
    }

    /// The backward's split: rows where `W_hh` is at most a core's L2. Its per-step
    /// product `dh = dz·W_hh` reads all of `W_hh` (4H deep) in every member split by
    /// rows, so the bound is half the forward's.
    pub(crate) fn choose_backward<T>(dims: &Dims, size: usize) -> Self {
        Self::choose_within::<T>(dims, size, crate::cache::l2_bytes())
    }

    /// Rows where every member gets [`ROW_SPLIT_MIN_ROWS`] and `W_hh` is at most
    /// `max_weight_bytes`. `LSTM_CPU_SPLIT=units` or `=rows` forces one split, forward
    /// and backward (for benchmarks and tests; read once per process).
    fn choose_within<T>(dims: &Dims, size: usize, max_weight_bytes: usize) -> Self {
        static FORCED: std::sync::OnceLock<Option<Split>> = std::sync::OnceLock::new();
        let forced = *FORCED.get_or_init(|| match std::env::var("LSTM_CPU_SPLIT").as_deref() {
            Ok("units") => Some(Split::Units),
            Ok("rows") => Some(Split::Rows),
            _ => None,
        });
        if size < 2 || dims.batch < size {
            return Split::Units;
        }
        if let Some(forced) = forced {
            return forced;
        }
        let rows_per_member = dims.batch / size;
        let w_hh_bytes = dims.gate_cols() * dims.out * core::mem::size_of::<T>();
        if rows_per_member >= ROW_SPLIT_MIN_ROWS && w_hh_bytes <= max_weight_bytes {
            Split::Rows
        } else {
            Split::Units
        }
    }
}

/// One team member's part of the forward recurrence.
#[derive(Clone, Debug)]
pub(crate) struct Share {
    /// Hidden units (all four gates of them) it computes.
    pub units: Range<usize>,
    /// Hidden units whose gates' input projection it computes (all rows of a chunk).
    pub input_units: Option<Range<usize>>,
    /// Columns of the projected state `h` it computes (with a projection), if any.
    pub projected: Option<Range<usize>>,
    /// Batch rows it computes.
    pub rows: Range<usize>,
}

fn run<T: Real>(
    call: &RnnCall<'_, T>,
    save: bool,
    packed: Option<&PackedWeights<T>>,
) -> Result<(RnnOutputs<T>, Option<Tape<T>>), CallError> {
    call.check_with_weights(packed.is_none())?;
    let arch = call.arch;
    let dims = Dims::of(call);
    let (rows, p, s) = (dims.seq * dims.batch, dims.out, dims.state);
    let mut h_n = Buffer::output_zeroed(call.h0.len()).into_vec();
    let mut c_n = Buffer::output_zeroed(call.c0.len()).into_vec();
    let mut tape = Vec::new();
    let mut below: Option<Buffer<T>> = None;
    for layer in 0..arch.num_layers {
        let mask = (layer > 0)
            .then(|| call.dropout_masks.get(layer - 1))
            .flatten();
        let (owned_input, input_strides) =
            layer_input(call, &dims, layer, below.take(), mask.copied(), save);
        let input: &[T] = owned_input.as_deref().unwrap_or(call.input);
        // Every value is written: a row's output or, past its length, zeros. The last
        // layer's is the call's output (the others are read a value at a time, by the
        // next layer's projection: their alignment does not matter).
        let mut output = Buffer::output_for_overwrite(rows * dims.dirs * p);
        // SAFETY: each direction's members write their own rows of their direction's
        // columns (`forward_cell`); nothing reads `output` until both directions are done.
        let output_s = unsafe { Shared::new(&mut output[..]) };
        // One direction's recurrence on `threads` threads, writing its columns of
        // `output` and its final states `h_n`, `c_n` (this cell's slices); its tape when
        // training.
        let run_direction = |direction: usize, threads: usize, h_n: &mut [T], c_n: &mut [T]| {
            let cell = layer * dims.dirs + direction;
            let layout = arch.direction_layout(layer, direction);
            let flat;
            let params = match packed {
                Some(packed) => CellParams::Packed(packed.cell(cell)),
                None => {
                    flat = CellWeights::new(call.weights, &layout);
                    CellParams::Flat(&flat)
                }
            };
            let mut cell_tape = save.then(|| new_cell_tape(&dims));
            let (gates, tape, recurrent_new) = match cell_tape.as_mut() {
                // SAFETY: `forward_cell`'s members write the tape's entries of their own
                // units of each step, and nothing reads the tape before the backward.
                Some(t) => unsafe {
                    (
                        Some(Shared::new(&mut t.gates[..])),
                        Some((
                            Shared::new(&mut t.cell_prev[..]),
                            Shared::new(&mut t.hidden_prev[..]),
                            Shared::new(&mut t.tanh_cell[..]),
                        )),
                        Some(Shared::new(&mut t.recurrent_new[..])),
                    )
                },
                None => (None, None, None),
            };
            forward_cell(
                &CellRun {
                    dims,
                    threads,
                    input,
                    input_size: layout.input_size,
                    input_strides,
                    params,
                    lengths: call.padding(),
                    direction,
                    h0: &call.h0[cell * dims.batch * p..(cell + 1) * dims.batch * p],
                    c0: &call.c0[cell * dims.batch * s..(cell + 1) * dims.batch * s],
                },
                CellOut {
                    y: output_s,
                    h_n,
                    c_n,
                    gates,
                    tape,
                    recurrent_new,
                },
            );
            cell_tape
        };
        let first_cell = layer * dims.dirs;
        let h_n = &mut h_n[first_cell * dims.batch * p..(first_cell + dims.dirs) * dims.batch * p];
        let c_n = &mut c_n[first_cell * dims.batch * s..(first_cell + dims.dirs) * dims.batch * s];
        let cells = run_directions(&dims, call.threads, save, h_n, c_n, run_direction);
        if save {
            tape.push(LayerTape {
                input: owned_input,
                mask: mask.map(|m| Buffer::copied(m)),
                cells,
            });
        }
        below = Some(output);
    }
    let outputs = RnnOutputs {
        y: below.expect("at least one layer").into_vec(),
        h_n,
        c_n,
    };
    Ok((outputs, save.then_some(Tape { layers: tape })))
}

/// The input of `layer` and its strides: above the first layer the output below
/// (`below`, times its dropout `mask`), owned, so the tape keeps it without a copy; the
/// call's input otherwise (`None`: read in place), except that a strided first input is
/// copied once, sequence-major, in training (`save`), whose backward reads it by steps
/// from the tape.
fn layer_input<T: Real>(
    call: &RnnCall<'_, T>,
    dims: &Dims,
    layer: usize,
    below: Option<Buffer<T>>,
    mask: Option<&[T]>,
    save: bool,
) -> (Option<Buffer<T>>, InputStrides) {
    let owned_input = below.map(|mut values| {
        if let Some(mask) = mask {
            for (v, &m) in values.iter_mut().zip(mask.iter()) {
                *v = *v * m;
            }
        }
        values
    });
    let strided = call.strided_input().filter(|_| layer == 0);
    let owned_input = match strided {
        Some(strides) if save => Some(call.seq_major_input(strides)),
        _ => owned_input,
    };
    let input_strides = match (strided, &owned_input) {
        (Some(strides), None) => strides,
        _ => InputStrides::seq_major(dims.batch, call.arch.layer_input_size(layer)),
    };
    (owned_input, input_strides)
}

/// The tape of one direction of one layer. Written by `forward_cell` for every row and
/// step, except `tanh_cell` and `recurrent_new` past a row's length, where the backward
/// never reads the first and zeroes the second.
fn new_cell_tape<T: Real>(dims: &Dims) -> CellTape<T> {
    let rows = dims.seq * dims.batch;
    let gru = dims.cell == CellKind::Gru;
    CellTape {
        gates: Buffer::for_overwrite(rows * dims.gate_cols()),
        cell_prev: Buffer::for_overwrite(rows * dims.state),
        hidden_prev: Buffer::for_overwrite(rows * dims.out),
        tanh_cell: Buffer::for_overwrite(rows * dims.state),
        recurrent_new: Buffer::for_overwrite(if gru { rows * dims.hidden } else { 0 }),
    }
}

/// Runs a layer's directions (`run_direction(direction, threads, h_n, c_n)`), each with
/// its slices of the layer's final states `h_n` and `c_n`: both at once, one thread
/// each, where [`directions_at_once`] says so, else one after the other on the whole
/// team. Returns their tapes in direction order.
fn run_directions<T: Real>(
    dims: &Dims,
    threads: usize,
    save: bool,
    h_n: &mut [T],
    c_n: &mut [T],
    run_direction: impl Fn(usize, usize, &mut [T], &mut [T]) -> Option<CellTape<T>> + Sync,
) -> Vec<CellTape<T>> {
    let (p, s) = (dims.out, dims.state);
    let mut cells = Vec::new();
    if directions_at_once::<T>(dims, threads) {
        let (h_fw, h_bw) = h_n.split_at_mut(dims.batch * p);
        let (c_fw, c_bw) = c_n.split_at_mut(dims.batch * s);
        let finals = [
            std::sync::Mutex::new((h_fw, c_fw, None)),
            std::sync::Mutex::new((h_bw, c_bw, None)),
        ];
        // Inference keeps the two apart, as a team's members (team.rs).
        run_team_placed(2, !save, |member| {
            let mut own = finals[member.id].lock().expect("one member per direction");
            let (h_n, c_n, cell_tape) = &mut *own;
            *cell_tape = run_direction(member.id, 1, h_n, c_n);
        });
        for direction in finals {
            let (_, _, cell_tape) = direction.into_inner().expect("no member panicked");
            cells.extend(cell_tape);
        }
    } else {
        let (mut h_n, mut c_n) = (h_n, c_n);
        for direction in 0..dims.dirs {
            let (h_own, h_rest) = h_n.split_at_mut(dims.batch * p);
            let (c_own, c_rest) = c_n.split_at_mut(dims.batch * s);
            cells.extend(run_direction(direction, threads, h_own, c_own));
            (h_n, c_n) = (h_rest, c_rest);
        }
    }
    cells
}

/// Whether a bidirectional layer runs its two directions at once, one thread each, rather
/// than one after the other on the whole team: on two or three threads, where the team
/// would split a direction's batch rows ([`Split::Rows`]: every member reads all of
/// `W_hh` anyway). Each direction then has all the batch rows (twice the rows per
/// micro-kernel call) and no barrier at all. With more threads each direction keeps a
/// team (two teams at once would spawn threads: the pool runs one team at a time).
fn directions_at_once<T>(dims: &Dims, threads: usize) -> bool {
    dims.dirs == 2
        && (2..4).contains(&threads)
        && Split::choose::<T>(dims, dims.team_size(threads)) == Split::Rows
}

/// Read-only inputs of one (layer, direction).
pub(crate) struct CellRun<'a, T: Real> {
    pub dims: Dims,
    pub threads: usize,
    pub input: &'a [T],
    /// Features of each row of `input`.
    pub input_size: usize,
    /// Where each row of `input` starts (the forward reads a strided first input in
    /// place; the backward's is always sequence-major).
    pub input_strides: InputStrides,
    pub params: CellParams<'a, T>,
    pub lengths: Option<&'a [usize]>,
    pub direction: usize,
    pub h0: &'a [T],
    pub c0: &'a [T],
}

/// Where one (layer, direction) writes.
struct CellOut<'a, T> {
    /// The layer's output `[T, B, dirs * H_out]` (this direction's columns).
    y: Shared<'a, T>,
    h_n: &'a mut [T],
    c_n: &'a mut [T],
    /// Training: the tape's `[T, B, 4H]` gate activations. Inference keeps only a few
    /// steps' pre-activations at a time.
    gates: Option<Shared<'a, T>>,
    /// Training: `cell_prev`, `hidden_prev`, `tanh_cell` (the first and last empty for a
    /// GRU).
    tape: Option<(Shared<'a, T>, Shared<'a, T>, Shared<'a, T>)>,
    /// Training a GRU: `W_hn h + b_hn` of every step, `[T, B, H]`.
    recurrent_new: Option<Shared<'a, T>>,
}

/// The rows of a chunk's input projection (`steps` steps of `batch` rows, gates `g4`
/// values a row, sequence-major) as the GEMM's [`RowGroups`], with the distance between
/// rows within a group in the input and in the gates. Sequence-major input rows are one
/// group. Otherwise the groups are a batch row's steps or a step's batch rows: the one
/// with more rows per micro-kernel call ([`tile_calls`]), and of two alike, the one
/// whose rows are closer together in the input (a batch-first input's steps,
/// consecutive).
fn chunk_row_groups(
    strides: InputStrides,
    steps: usize,
    batch: usize,
    g4: usize,
) -> (RowGroups, usize, usize) {
    if strides.steps_follow_rows(batch) || steps == 1 {
        let one = RowGroups {
            rows: steps * batch,
            a_group: 0,
            c_group: 0,
        };
        return (one, strides.row, g4);
    }
    // A tile never spans two groups: groups of 8 rows tile as 4 + 4 where the kernel
    // takes 6 (AVX2), and a 4-row tile runs slower than a 6-row one (`tile_rows`). So
    // the grouping with more rows per tile on average wins: `steps / calls(steps)`
    // against `batch / calls(batch)`.
    let (step_calls, row_calls) = (tile_calls(steps), tile_calls(batch));
    let by_batch_row = match (steps * row_calls).cmp(&(batch * step_calls)) {
        core::cmp::Ordering::Greater => true,
        core::cmp::Ordering::Less => false,
        core::cmp::Ordering::Equal => strides.step <= strides.row,
    };
    if by_batch_row {
        let groups = RowGroups {
            rows: steps,
            a_group: strides.row,
            c_group: g4,
        };
        (groups, strides.step, batch * g4)
    } else {
        let groups = RowGroups {
            rows: batch,
            a_group: strides.step,
            c_group: batch * g4,
        };
        (groups, strides.row, g4)
    }
}

/// Member `id`'s rows (of `rows`, in `groups`) of a chunk's projection split by rows over
/// `members`: whole row groups to every member where they share out evenly (a tile never
/// spans two groups: a group cut in two ends in a short tile on each side), else as even
/// a split as there is. Split into multiples of the micro-kernel's rows instead, 256 rows
/// went 132 + 124 on AVX2 (6 rows a call): one member waited 6 % of every chunk's
/// projection at the barrier.
fn member_rows(groups: RowGroups, rows: usize, members: usize, id: usize) -> Range<usize> {
    let group = groups.rows.min(rows).max(1);
    let align = if (rows / group).is_multiple_of(members) {
        group
    } else {
        1
    };
    aligned_part(rows, members, align, id)
}

/// Time steps whose input projection is computed at once: enough rows for an efficient
/// GEMM, few enough that the pre-activations are still in cache when their steps run.
fn chunk_steps(seq: usize, batch: usize) -> usize {
    (256 / batch).clamp(1, seq)
}

fn forward_cell<T: Real>(run: &CellRun<'_, T>, out: CellOut<'_, T>) {
    let CellRun {
        dims,
        threads,
        input,
        input_size,
        input_strides,
        params,
        lengths,
        direction,
        h0,
        c0,
    } = *run;
    let Dims {
        cell: cell_kind,
        seq,
        batch,
        hidden: h,
        out: p,
        dirs,
        ..
    } = dims;
    let g4 = dims.gate_cols();
    let gate_blocks = cell_kind.gates();
    // A GRU's recurrent product goes to its own buffer: its `n` block is multiplied by
    // the reset gate before it meets the input projection's.
    let gru = cell_kind == CellKind::Gru;
    let reverse = direction == 1;
    let biases;
    let (bias, recurrent_bias, projection): (&[T], &[T], bool) = match params {
        CellParams::Packed(packed) => (
            &packed.input_bias,
            &packed.recurrent_bias,
            packed.hr.is_some(),
        ),
        CellParams::Flat(w) => {
            biases = (w.input_bias(cell_kind, g4), w.recurrent_bias(cell_kind, g4));
            (&biases.0, &biases.1, w.w_hr.is_some())
        }
    };

    // A team splits the hidden units (each member owns all four gates of its units, so
    // it projects its own gate columns and needs no barrier between projection and
    // step), or the batch rows (see `Split`).
    let (split, team) = dims.forward_team::<T>(threads);
    // Split by rows no member reads another's values: the steps need no barrier.
    let by_rows = split == Split::Rows;
    // With a row split, the chunk's input projection is split by the chunk's rows too
    // (each member multiplies its part of them by all of `W_ihᵀ`) when `W_ih` is within
    // the bound `W_hh` has. Split by units in blocks of a panel's width instead, it is
    // uneven wherever the blocks do not divide by the team (H = 96: three blocks, 2 : 1
    // on two members, one waiting a third of every chunk's projection at the barrier
    // after it).
    let projection_by_rows =
        by_rows && g4 * input_size * core::mem::size_of::<T>() <= row_split_max_weight_bytes();
    // A row split gives every member every gate column: pack the flat weights once for
    // all of them, not once per member.
    let packed_once = match params {
        CellParams::Flat(w) if by_rows => {
            let gates = gate_groups::<T>(h, gate_blocks, 0..h);
            Some((
                PackedB::pack_groups_on(threads, input_size, &gates, w.w_ih, 1, input_size),
                PackedB::pack_groups_on(threads, p, &gates, w.w_hh, 1, p),
                w.w_hr
                    .map(|w_hr| PackedB::pack_all_on(threads, h, p, w_hr, 1, h)),
            ))
        }
        _ => None,
    };
    // Inference split by rows keeps each member's pre-activations in a buffer of its own,
    // which it projects and reads alone: no barrier around a chunk's projection, and no
    // line of it ever written by the other member. In one buffer shared by the team
    // (rows of one step side by side) the members' recurrent products slow down
    // whenever the host places the two vCPUs far apart, though each member reads only
    // rows it wrote itself, even with the members' rows a page apart (docs/fused-cpu.md,
    // "Own pre-activations"). Training writes them to the tape, shared.
    let own_chunks = by_rows && projection_by_rows && out.gates.is_none();
    // A member's projection groups its rows by batch row (a row's steps of the chunk)
    // where that gives fuller micro-kernel calls than a step's few rows: a chunk of whole
    // calls, e.g. 16 steps → 18 on AVX2 (6-row calls, where 16 would run as 6 + 6 + 4).
    // So does the projection of an input that is not sequence-major (a batch-first one,
    // as the module hands it), whose rows are grouped too (`chunk_row_groups`).
    let grouped_input = !input_strides.steps_follow_rows(batch);
    let chunk = chunk_steps(seq, batch);
    let chunk = if own_chunks || grouped_input {
        chunk.next_multiple_of(kernel_rows()).min(seq)
    } else {
        chunk
    };
    // Each chunk's projection writes its rows before the steps read them.
    let mut chunk_gates = Buffer::for_overwrite(if out.gates.is_some() || own_chunks {
        0
    } else {
        chunk * batch * g4
    });
    // SAFETY: a chunk's projection writes rows split between the members, which the
    // steps read after the barrier that ends the projection.
    let chunk_s = unsafe { Shared::new(&mut chunk_gates[..]) };
    let mut hidden = vec![T::ZERO; 2 * batch * p];
    hidden[..batch * p].copy_from_slice(h0);
    let mut cell = c0.to_vec();
    let mut unprojected = vec![T::ZERO; if projection { batch * h } else { 0 }];
    // GRU: `W_hh h + b_hh` of the current step, `[B, 3H]` in the gates' columns.
    let mut recurrent = vec![T::ZERO; if gru { batch * g4 } else { 0 }];
    // SAFETY: each member writes its own units (`own`) or projected columns (`cols`) of
    // the step's state, and reads the whole previous state only after the step's barrier.
    let (hidden_s, cell_s, unproj_s, recurrent_s) = unsafe {
        (
            Shared::new(&mut hidden[..]),
            Shared::new(&mut cell[..]),
            Shared::new(&mut unprojected[..]),
            Shared::new(&mut recurrent[..]),
        )
    };
    let valid = |t: usize, b: usize| lengths.is_none_or(|l| t < l[b]);
    let y_at = |t: usize, b: usize| (t * batch + b) * dirs * p + direction * p;

    // Inference keeps the members on separate CPUs (team.rs, `run_team_placed`).
    run_team_placed(team.len(), out.gates.is_none(), |member| {
        let share = &team[member.id];
        let own = share.units.clone();
        let nu = own.len();
        let rows = share.rows.clone();
        let (b0, nb) = (rows.start, rows.len());
        // Without a projection a member owns the same columns of h as of c.
        let own_h = if projection {
            share.projected.clone()
        } else {
            Some(own.clone())
        };
        // This member's panels: packed before the call, or packed here (the same panels
        // in the same order, see `packed.rs`).
        let packed_here;
        let (packed_ih, packed_hh, packed_hr): (Packed<T>, Packed<T>, Option<Packed<T>>) =
            match (params, &packed_once) {
                (_, Some((ih, hh, hr))) => (ih.into(), hh.into(), hr.as_ref().map(Packed::from)),
                (CellParams::Packed(packed), None) => (
                    packed.ih.panels(unit_panels::<T>(gate_blocks, &own)),
                    packed.hh.panels(unit_panels::<T>(gate_blocks, &own)),
                    packed
                        .hr
                        .as_ref()
                        .zip(own_h.as_ref())
                        .map(|(hr, cols)| hr.panels(column_panels::<T>(cols))),
                ),
                (CellParams::Flat(w), None) => {
                    let gates = gate_groups::<T>(h, gate_blocks, own.clone());
                    packed_here = (
                        PackedB::pack_groups(input_size, &gates, w.w_ih, 1, input_size),
                        PackedB::pack_groups(p, &gates, w.w_hh, 1, p),
                        w.w_hr
                            .zip(own_h.clone())
                            .map(|(w_hr, cols)| PackedB::pack(h, &[cols], w_hr, 1, h)),
                    );
                    (
                        (&packed_here.0).into(),
                        (&packed_here.1).into(),
                        packed_here.2.as_ref().map(Packed::from),
                    )
                }
            };
        // The panels of this member's share of the input projection: its own gate
        // columns, or with a row split its part of all of them.
        let ih_all = match (params, &packed_once) {
            (_, Some((ih, _, _))) => Some(ih),
            (CellParams::Packed(packed), None) if by_rows => Some(&packed.ih),
            _ => None,
        };
        let projection_ih = match ih_all {
            Some(ih) if projection_by_rows => Some(ih.into()),
            Some(ih) => share
                .input_units
                .as_ref()
                .map(|units| ih.panels(unit_panels::<T>(gate_blocks, units))),
            None => Some(packed_ih),
        };
        // This member's chunk of pre-activations, `[steps, nb, G]` (see `own_chunks`).
        let mut own_chunk =
            Buffer::<T>::for_overwrite(if own_chunks { chunk * nb * g4 } else { 0 });
        // SAFETY: this member's own buffer: no other member holds it.
        let own_chunk_s = unsafe { Shared::new(&mut own_chunk[..]) };
        // Inference's `tanh(c)` (LSTM) or `W_hn h + b_hn` (GRU) of a row, not kept.
        let mut scratch_row = vec![T::ZERO; nu];
        let mut first = 0;
        while first < seq {
            let steps = chunk.min(seq - first);
            // Times of this chunk, in processing order: t_lo..t_lo + steps.
            let t_lo = if reverse { seq - first - steps } else { first };
            // The gate buffer: its first time, its batch rows per step and its first
            // batch row.
            let (gates, base, rows_per_step, first_row) = match out.gates {
                Some(tape) => (tape, 0, batch, 0),
                None if own_chunks => (own_chunk_s, t_lo, nb, b0),
                None => (chunk_s, t_lo, batch, 0),
            };
            let z_at = |t: usize| (t - base) * rows_per_step * g4;
            // Gates of batch row `b` at time `t`.
            let row_at = |t: usize, b: usize| z_at(t) + (b - first_row) * g4;
            if by_rows && first > 0 && !own_chunks {
                // Every member's steps are done with the previous chunk's gates, which
                // this projection may overwrite.
                member.sync();
            }
            // This member's rows of the chunk's projection: its own rows (`own_chunks`),
            // all, or its part of them; and the first of them in the input.
            let (groups, rs, ldc) = chunk_row_groups(input_strides, steps, rows_per_step, g4);
            let (chunk_rows, input_first) = if own_chunks {
                (0..steps * nb, b0 * input_strides.row)
            } else if projection_by_rows {
                (member_rows(groups, steps * batch, team.len(), member.id), 0)
            } else {
                (0..steps * batch, 0)
            };
            if let (Some(packed_ih), false) = (projection_ih, chunk_rows.is_empty()) {
                // SAFETY: this member writes only its gate columns of these rows (all
                // columns of its own rows when the projection is split by rows, in its
                // own buffer with `own_chunks`); the call's check put every row of the
                // input inside it.
                unsafe {
                    gemm_bias_grouped(
                        chunk_rows,
                        groups,
                        input.as_ptr().add(t_lo * input_strides.step + input_first),
                        rs,
                        1,
                        packed_ih,
                        bias,
                        gates.at(z_at(t_lo)),
                        ldc,
                    )
                };
            }
            if by_rows && !own_chunks {
                // Each member's rows need every member's gate columns.
                member.sync();
            }
            for step in first..first + steps {
                let t = dims.time(step, reverse);
                let (prev, next) = ((step % 2) * batch * p, ((step + 1) % 2) * batch * p);
                // SAFETY: this member writes only its gate columns of its rows of step t;
                // h_prev is complete (its own rows, or the barrier at the end of the
                // previous step).
                unsafe {
                    if gru {
                        gemm_bias(
                            nb,
                            hidden_s.at(prev + b0 * p),
                            p,
                            1,
                            packed_hh,
                            recurrent_bias,
                            recurrent_s.at(b0 * g4),
                            g4,
                        )
                    } else {
                        gemm(
                            nb,
                            hidden_s.at(prev + b0 * p),
                            p,
                            1,
                            packed_hh,
                            gates.at(row_at(t, b0)),
                            g4,
                        )
                    }
                };
                for b in rows.clone() {
                    let row = row_at(t, b);
                    let c_at = b * h + own.start;
                    // SAFETY: every slice below is this member's units of row `b` (in
                    // bounds of its buffer's `[·, H]` / `[·, G·H]` / `[·, P]` shape),
                    // touched by no other member before the next barrier; the step's gate
                    // products were completed before the last barrier.
                    unsafe {
                        if gru {
                            if valid(t, b) {
                                let recurrent_new = match out.recurrent_new {
                                    Some(tape) => tape.slice((t * batch + b) * h + own.start, nu),
                                    None => &mut scratch_row[..],
                                };
                                gru_update(
                                    [0, 1, 2].map(|g| gates.slice(row + g * h + own.start, nu)),
                                    [0, 1, 2].map(|g| {
                                        &*recurrent_s.slice(b * g4 + g * h + own.start, nu)
                                    }),
                                    hidden_s.slice(prev + b * p + own.start, nu),
                                    hidden_s.slice(next + b * p + own.start, nu),
                                    recurrent_new,
                                );
                            }
                            continue;
                        }
                        if let Some((cell_prev, _, _)) = out.tape {
                            cell_prev
                                .slice((t * batch + b) * h + own.start, nu)
                                .copy_from_slice(cell_s.slice(c_at, nu));
                        }
                        if valid(t, b) {
                            let tanh_c = match out.tape {
                                Some((_, _, tanh_cell)) => {
                                    tanh_cell.slice((t * batch + b) * h + own.start, nu)
                                }
                                None => &mut scratch_row[..],
                            };
                            let h_dst = if projection {
                                unproj_s.slice(c_at, nu)
                            } else {
                                hidden_s.slice(next + b * p + own.start, nu)
                            };
                            cell_update(
                                [0, 1, 2, 3].map(|g| gates.slice(row + g * h + own.start, nu)),
                                cell_s.slice(c_at, nu),
                                tanh_c,
                                h_dst,
                            );
                        }
                    }
                }
                if projection && !by_rows {
                    // Every member crosses this barrier, also one that owns no columns
                    // of the projected state (when `out` splits into fewer panels than
                    // `hidden`): skipping it desynchronised the team and hung the call.
                    member.sync();
                }
                if let (Some(packed_hr), Some(cols)) = (packed_hr, &own_h) {
                    for b in rows.clone() {
                        // SAFETY: this member's projected columns of row `b` of the next
                        // state, which no other member touches before the barrier.
                        unsafe {
                            hidden_s
                                .slice(next + b * p + cols.start, cols.len())
                                .fill(T::ZERO)
                        };
                    }
                    // SAFETY: the unprojected units of these rows are complete (this
                    // member's own rows, or the barrier above).
                    unsafe {
                        gemm(
                            nb,
                            unproj_s.at(b0 * h),
                            h,
                            1,
                            packed_hr,
                            hidden_s.at(next + b0 * p),
                            p,
                        )
                    };
                }
                if let Some(cols) = &own_h {
                    for b in rows.clone() {
                        let n = cols.len();
                        // SAFETY: this member's columns of row `b` in the states, `y` and
                        // the tape (in bounds by their shapes), which no other member
                        // touches before the step's barrier.
                        unsafe {
                            let h_prev = hidden_s.slice(prev + b * p + cols.start, n);
                            let h_next = hidden_s.slice(next + b * p + cols.start, n);
                            let y = out.y.slice(y_at(t, b) + cols.start, n);
                            if valid(t, b) {
                                y.copy_from_slice(h_next);
                            } else {
                                // Past its length a row keeps its state and emits zeros.
                                h_next.copy_from_slice(h_prev);
                                y.fill(T::ZERO);
                            }
                            if let Some((_, hidden_prev, _)) = out.tape {
                                hidden_prev
                                    .slice((t * batch + b) * p + cols.start, n)
                                    .copy_from_slice(h_prev);
                            }
                        }
                    }
                }
                if !by_rows {
                    member.sync();
                }
            }
            first += steps;
        }
    });
    let last = (seq % 2) * batch * p;
    out.h_n.copy_from_slice(&hidden[last..last + batch * p]);
    out.c_n.copy_from_slice(&cell);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grouping with more rows per micro-kernel call wins, and of two alike the one
    /// whose rows lie closer together in the input; on every instruction set the CPU
    /// has (AVX2 calls take 6 rows, AVX-512 8).
    #[test]
    fn projection_groups_favour_fuller_calls() {
        crate::rerun_test_on_lower_instruction_sets(
            module_path!(),
            "projection_groups_favour_fuller_calls",
        );
        let per_call = |rows: usize| rows as f64 / tile_calls(rows) as f64;
        for (seq, steps, batch) in [
            (50, 8, 32),
            (100, 16, 16),
            (50, 32, 8),
            (9, 4, 64),
            (7, 7, 5),
        ] {
            let input = 24;
            let batch_first = InputStrides::batch_first(seq, input);
            let (groups, rs, ldc) = chunk_row_groups(batch_first, steps, batch, 4);
            let (chosen, other) = if groups.rows == steps {
                assert_eq!((rs, ldc), (input, batch * 4), "a batch row's steps");
                (steps, batch)
            } else {
                assert_eq!(groups.rows, batch, "{steps} steps of {batch} rows");
                assert_eq!((rs, ldc), (seq * input, 4), "a step's batch rows");
                (batch, steps)
            };
            assert!(
                per_call(chosen) >= per_call(other),
                "{steps} steps of {batch} rows: groups of {chosen} ({} a call) over {other} ({})",
                per_call(chosen),
                per_call(other)
            );
            if per_call(chosen) == per_call(other) {
                assert_eq!(chosen, steps, "a tie goes to the consecutive steps");
            }
        }
        // Sequence-major rows are one group.
        let (groups, _, _) = chunk_row_groups(InputStrides::seq_major(32, 24), 8, 32, 4);
        assert_eq!(groups.rows, 256);
        // Batch 32 in chunks of 8 steps: by batch row on AVX-512 (one 8-row call per
        // group), by step on AVX2 (8 rows would be 4 + 4 there).
        let (groups, _, _) = chunk_row_groups(InputStrides::batch_first(50, 24), 8, 32, 4);
        let expected = if crate::gemm::kernel_rows() == 8 {
            8
        } else {
            32
        };
        assert_eq!(groups.rows, expected);
    }

    /// A row-split projection hands out whole groups where they share out evenly, else
    /// an even split, and covers every row once.
    #[test]
    fn projection_rows_split_evenly_in_whole_groups() {
        let groups = |rows| RowGroups {
            rows,
            a_group: 0,
            c_group: 0,
        };
        let parts = |g: RowGroups, rows: usize, members: usize| {
            (0..members)
                .map(|id| member_rows(g, rows, members, id))
                .collect::<Vec<_>>()
        };
        // 8 groups of 32 on 2 members: 4 each.
        assert_eq!(parts(groups(32), 256, 2), [0..128, 128..256]);
        // One group (sequence-major) of 256: 128 each, not 132 + 124.
        assert_eq!(parts(groups(256), 256, 2), [0..128, 128..256]);
        // 3 groups of 32 on 2 members would go 64 + 32: rows split evenly instead.
        assert_eq!(parts(groups(32), 96, 2), [0..48, 48..96]);
        for (group, rows, members) in [(32, 256, 3), (5, 35, 2), (256, 100, 3), (1, 7, 4)] {
            let got = parts(groups(group), rows, members);
            let covered: Vec<usize> = got.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(
                covered,
                (0..rows).collect::<Vec<_>>(),
                "{group} {rows} {members}"
            );
        }
    }
}
