//! The forward pass: per layer and direction, the input projection of a chunk of steps
//! as one GEMM split over the team, then the recurrence, where the team splits the hidden
//! units (all four gates of a unit stay on one thread, so the gate math needs no
//! exchange) and meets once per step (twice with a projection), or, for small `W_hh`,
//! splits the batch rows and needs no barrier between steps (see [`Split`]).

mod cell_io;
mod chunks;
mod pass;
mod split;

pub(crate) use cell_io::{CellParams, CellRun};
pub(crate) use split::{Dims, Split};

use crate::buffers::Buffer;
use crate::call::{CallError, InputStrides, RnnCall, RnnOutputs};
use crate::cell::recurrent_apart;
use crate::cell_weights::CellWeights;
use crate::forward::cell_io::CellOut;
use crate::forward::pass::forward_cell;
use crate::packed::PackedWeights;
use crate::real::Real;
use crate::tape::{CellTape, LayerTape, Tape};
use crate::team::{Shared, run_team_placed};

/// The output of a forward pass: the outputs, and the tape when asked to keep one.
pub(crate) type ForwardResult<T> = Result<(RnnOutputs<T>, Option<Tape<T>>), CallError>;

/// The pass behind [`forward`](crate::forward()), [`forward_train`](crate::forward_train)
/// and [`forward_packed`](crate::forward_packed), instantiated in this crate only
/// (`crate::compiled`).
pub(crate) fn run<T: Real>(
    call: &RnnCall<'_, T>,
    save: bool,
    packed: Option<&PackedWeights<T>>,
) -> ForwardResult<T> {
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
    CellTape {
        gates: Buffer::for_overwrite(rows * dims.gate_cols()),
        cell_prev: Buffer::for_overwrite(rows * dims.state),
        hidden_prev: Buffer::for_overwrite(rows * dims.out),
        tanh_cell: Buffer::for_overwrite(rows * dims.state),
        recurrent_new: Buffer::for_overwrite(if recurrent_apart(dims.cell) {
            rows * dims.hidden
        } else {
            0
        }),
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
