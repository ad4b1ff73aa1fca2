//! Backpropagation through time from a [`Tape`].
//!
//! Per step, against the direction's processing order, with `m` the row's validity (1
//! without padding):
//!
//! ```text
//! dĥ = m·(dh + dy_t)        du = dĥ·W_hr (projection) or dĥ
//! dc' = m·dc + du·o·(1 − tanh²c)
//! dz  = [dc'·g·i(1−i), dc'·c_prev·f(1−f), dc'·i·(1−g²), du·tanh c·o(1−o)]
//! dh ← dz·W_hh + (1 − m)·dh       dc ← dc'·f + (1 − m)·dc
//! ```
//!
//! A GRU (`r, z, n`; `a` its recurrent product `W_hn h + b_hn`):
//!
//! ```text
//! dĥ = m·(dh + dy_t)
//! dn = dĥ·(1 − z)·(1 − n²)     dz = dĥ·(h_prev − n)·z(1 − z)     dr = dn·a·r(1 − r)
//! dh ← [dr, dz, dn·r]·W_hh + m·dĥ·z + (1 − m)·dh
//! ```
//!
//! where the input side's gate gradient is `[dr, dz, dn]` and the recurrent side's
//! `[dr, dz, dn·r]` (they differ in the `n` block only: `dn·r` overwrites `a`).
//!
//! The same team split as the forward: a thread owns the units (all gates) for the
//! gate math and the columns of `dh` for `dz·W_hh`. `dz` overwrites the gate
//! activations in the tape; after the loop `dW_ih`, `dW_hh`, `dW_hr` and the input
//! gradient are one GEMM each over all steps (a GRU's `dW_hh` two: the `r, z` rows and
//! the `n` rows).

mod cell_grads;
mod pass;
mod weight_grads;

use crate::buffers::Buffer;
use crate::call::{CallError, InputStrides, OutputGrads, RnnCall, RnnGradients};
use crate::cell_weights::CellWeights;
use crate::forward::{CellParams, CellRun, Dims};
use crate::real::Real;
use crate::tape::Tape;
use cell_grads::CellGrads;
use pass::backward_cell;

/// [`backward`](crate::backward()), instantiated in this crate only (`crate::compiled`).
pub(crate) fn run<T: Real>(
    call: &RnnCall<'_, T>,
    mut tape: Tape<T>,
    grads: OutputGrads<'_, T>,
) -> Result<RnnGradients<T>, CallError> {
    call.check()?;
    grads.check(call)?;
    tape.check(call)?;
    let arch = call.arch;
    let dims = Dims::of(call);
    let (rows, p, s) = (dims.seq * dims.batch, dims.out, dims.state);
    // Outputs, handed to the caller, leaving the cache. Every region of `d_weights` is
    // stored whole by a cell's products or bias sums (`backward_cell`).
    let mut d_weights = Buffer::output_for_overwrite(call.weights.len()).into_vec();
    let mut d_h0 = Buffer::output_zeroed(call.h0.len()).into_vec();
    let mut d_c0 = Buffer::output_zeroed(call.c0.len()).into_vec();
    let mut d_output = Buffer::copied(grads.dy);
    for layer in (0..arch.num_layers).rev() {
        let layer_tape = &mut tape.layers[layer];
        let input: &[T] = match &layer_tape.input {
            Some(input) => input,
            None => call.input,
        };
        let in_size = arch.layer_input_size(layer);
        // Layers above the first always need theirs: it is the gradient of the output
        // below.
        let input_wanted = grads.input_wanted || layer > 0;
        // The first direction's product stores it, the second adds to it.
        // The first layer's is the call's input gradient.
        let d_input_len = if input_wanted { rows * in_size } else { 0 };
        let mut d_input = if layer == 0 {
            Buffer::output_for_overwrite(d_input_len)
        } else {
            Buffer::for_overwrite(d_input_len)
        };
        for (direction, cell_tape) in layer_tape.cells.iter_mut().enumerate() {
            let cell = layer * dims.dirs + direction;
            let layout = arch.direction_layout(layer, direction);
            let weights = CellWeights::new(call.weights, &layout);
            let (hp, hc) = (dims.batch * p, dims.batch * s);
            let run = CellRun {
                dims,
                threads: call.threads,
                input,
                input_size: layout.input_size,
                input_strides: InputStrides::seq_major(dims.batch, in_size),
                params: CellParams::Flat(&weights),
                lengths: call.padding(),
                direction,
                h0: &grads.dh_n[cell * hp..(cell + 1) * hp],
                c0: &grads.dc_n[cell * hc..(cell + 1) * hc],
            };
            let mut cell_grads = CellGrads {
                d_weights: &mut d_weights,
                layout: &layout,
                d_h0: &mut d_h0[cell * hp..(cell + 1) * hp],
                d_c0: &mut d_c0[cell * hc..(cell + 1) * hc],
                d_input: input_wanted.then_some(&mut d_input[..]),
            };
            backward_cell(&run, cell_tape, &d_output, &mut cell_grads);
        }
        if let Some(mask) = &layer_tape.mask {
            for (d, &m) in d_input.iter_mut().zip(mask.iter()) {
                *d = *d * m;
            }
        }
        d_output = d_input;
    }
    Ok(RnnGradients {
        input: d_output.into_vec(),
        weights: d_weights,
        h0: d_h0,
        c0: d_c0,
    })
}
