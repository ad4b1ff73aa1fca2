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

use crate::arch::CellKind;
use crate::buffers::Buffer;
use crate::call::{CallError, InputStrides, OutputGrads, RnnCall, RnnGradients};
use crate::cell::gru::gru_gate_grads;
use crate::cell::lstm::gate_grads;
use crate::cell_weights::CellWeights;
use crate::forward::{CellParams, CellRun, Dims, Split};
use crate::gemm::{PackedB, Store, gemm, par_gemm};
use crate::real::Real;
use crate::tape::{CellTape, Tape};
use crate::team::{Shared, run_team};

/// Gradients of the call's inputs from the upstream gradients of its outputs.
pub fn backward<T: Real>(
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

struct CellGrads<'a, T> {
    d_weights: &'a mut [T],
    layout: &'a crate::arch::DirectionLayout,
    d_h0: &'a mut [T],
    d_c0: &'a mut [T],
    /// Accumulated over the layer's directions, stored by the first (`None`: not
    /// wanted).
    d_input: Option<&'a mut [T]>,
}

/// `run.h0` / `run.c0` carry `dh_n` / `dc_n` of this cell; `dy` is the gradient of the
/// layer's whole output `[T, B, dirs * H_out]`.
fn backward_cell<T: Real>(
    run: &CellRun<'_, T>,
    tape: &mut CellTape<T>,
    dy: &[T],
    grads: &mut CellGrads<'_, T>,
) {
    let CellRun {
        dims,
        threads,
        input,
        input_size: _,
        input_strides: _,
        params,
        lengths,
        direction,
        h0: dh_n,
        c0: dc_n,
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
    let gru = cell_kind == CellKind::Gru;
    let rows = seq * batch;
    let reverse = direction == 1;
    let CellParams::Flat(w) = params else {
        unreachable!("the backward runs on the flat parameters");
    };
    let projection = w.w_hr.is_some();

    let (units, own_cols) = dims.team::<T>(threads);
    // Split by units (each member: some hidden units of every row, a barrier per step),
    // or by batch rows (each member: every unit of some rows, no barrier at all, all of
    // `W_hh` read per member per step; see `Split::choose_backward`).
    let by_rows = Split::choose_backward::<T>(&dims, units.len()) == Split::Rows;
    let row_parts = if by_rows {
        crate::team::split_aligned(batch, units.len(), 1)
    } else {
        Vec::new()
    };
    let members = if by_rows {
        row_parts.len()
    } else {
        units.len()
    };
    let mut d_hidden = vec![T::ZERO; 2 * batch * p];
    d_hidden[..batch * p].copy_from_slice(dh_n);
    let mut d_cell = dc_n.to_vec();
    // Projection only: dĥ of every step (for dW_hr), du of the current step, and the
    // unprojected output o·tanh(c) of every step (o is overwritten by dz).
    // Written for every row and step before they are read (`du` per step, zeroed first).
    let with_proj = |len: usize| Buffer::for_overwrite(if projection { len } else { 0 });
    let mut d_projected = with_proj(rows * p);
    let mut d_unprojected = with_proj(batch * h);
    let mut unprojected = with_proj(rows * h);
    fn shared<T>(v: &mut [T]) -> Shared<'_, T> {
        // SAFETY: each member writes its own units (`own`) or projected columns (`cols`)
        // of these per-step buffers and reads other members' parts only after the step's
        // barrier; `unprojected` and `d_projected` rows are each written by one member.
        unsafe { Shared::new(v) }
    }
    let (dh_s, dc_s, dproj_s, du_s, u_s) = (
        shared(&mut d_hidden),
        shared(&mut d_cell),
        shared(&mut d_projected),
        shared(&mut d_unprojected),
        shared(&mut unprojected),
    );
    // Rows of `W_hh` multiplied against the tape's gate gradients: all of them, or a
    // GRU's `r, z` rows (its `n` rows go against `dn·r`).
    let rz_rows = if gru { 2 * h } else { g4 };
    // GRU: `m·dĥ·z` of the current step, the direct part of the previous step's `dh`.
    let mut d_direct = Buffer::zeroed(if gru { batch * h } else { 0 });
    let (gates_s, tanh_s, cprev_s, hprev_s, rnew_s, direct_s) = (
        shared(&mut tape.gates),
        shared(&mut tape.tanh_cell),
        shared(&mut tape.cell_prev),
        shared(&mut tape.hidden_prev),
        shared(&mut tape.recurrent_new),
        shared(&mut d_direct),
    );
    let valid = |t: usize, b: usize| lengths.is_none_or(|l| t < l[b]);

    run_team(members, |member| {
        let (own, cols, my_rows) = if by_rows {
            (0..h, Some(0..p), row_parts[member.id].clone())
        } else {
            let own = units[member.id].clone();
            let cols = if projection {
                own_cols.get(member.id).cloned()
            } else {
                Some(own.clone())
            };
            (own, cols, 0..batch)
        };
        let nu = own.len();
        let (b0, nb) = (my_rows.start, my_rows.len());
        let sync = || {
            if !by_rows {
                member.sync();
            }
        };
        // dh = dz · W_hh: B(k, n) = W_hh[k, n], this member's columns of dh. A GRU's in
        // two parts, the `r, z` rows (against `dz` in the tape's gates) and the `n` rows
        // (against `dn·r` in the tape's `recurrent_new`).
        let packed_hh = cols
            .clone()
            .map(|c| PackedB::pack(rz_rows, core::slice::from_ref(&c), w.w_hh, p, 1));
        let packed_hn = cols
            .clone()
            .filter(|_| gru)
            .map(|c| PackedB::pack(h, &[c], &w.w_hh[2 * h * p..], p, 1));
        // du = dĥ · W_hr: B(k, n) = W_hr[k, n], this member's units.
        let packed_hr = w
            .w_hr
            .map(|w_hr| PackedB::pack(p, core::slice::from_ref(&own), w_hr, h, 1));
        let mut du_row = vec![T::ZERO; nu];
        let mut u_row = vec![T::ZERO; nu];
        for step in 0..seq {
            // Against the processing order.
            let t = dims.time(seq - 1 - step, reverse);
            let (cur, next) = ((step % 2) * batch * p, ((step + 1) % 2) * batch * p);
            let dy_at = |b: usize| (t * batch + b) * dirs * p + direction * p;
            if let Some(packed_hr) = &packed_hr {
                if let Some(cols) = &cols {
                    for b in my_rows.clone() {
                        let n = cols.len();
                        // SAFETY: this member's projected columns of row `b`, in bounds of
                        // `[T·B, P]` and `[2·B, P]`; no other member touches them before
                        // the barrier below.
                        unsafe {
                            let dst = dproj_s.slice((t * batch + b) * p + cols.start, n);
                            if valid(t, b) {
                                let dh = dh_s.slice(cur + b * p + cols.start, n);
                                let dy_t = &dy[dy_at(b) + cols.start..][..n];
                                for j in 0..n {
                                    dst[j] = dh[j] + dy_t[j];
                                }
                            } else {
                                dst.fill(T::ZERO);
                            }
                        }
                    }
                }
                sync();
                for b in my_rows.clone() {
                    // SAFETY: this member's units of row `b` of `du` (`[B, H]`).
                    unsafe { du_s.slice(b * h + own.start, nu).fill(T::ZERO) };
                }
                // SAFETY: dĥ of step t is complete (barrier above); this member writes
                // only its units of du.
                unsafe {
                    gemm(
                        nb,
                        dproj_s.at((t * batch + b0) * p),
                        p,
                        1,
                        packed_hr,
                        du_s.at(b0 * h),
                        h,
                    )
                };
            }
            for b in my_rows.clone() {
                let row = (t * batch + b) * g4;
                let at = (t * batch + b) * h + own.start;
                // SAFETY: every slice below is this member's units of row `b` of its
                // buffer (in bounds by the buffers' `[·, H]` / `[·, G·H]` shapes), read or
                // written by no other member before the next barrier; the previous step's
                // `dh` and `dc` were completed before the last barrier.
                unsafe {
                    if !valid(t, b) {
                        // No gradient from this step reaches the weight products.
                        for g in 0..cell_kind.gates() {
                            gates_s.slice(row + g * h + own.start, nu).fill(T::ZERO);
                        }
                        if gru {
                            rnew_s.slice(at, nu).fill(T::ZERO);
                        }
                        if projection {
                            u_s.slice(at, nu).fill(T::ZERO);
                        }
                        continue;
                    }
                    let du: &[T] = if projection {
                        du_s.slice(b * h + own.start, nu)
                    } else {
                        let dh = dh_s.slice(cur + b * p + own.start, nu);
                        let dy_t = &dy[dy_at(b) + own.start..][..nu];
                        for j in 0..nu {
                            du_row[j] = dh[j] + dy_t[j];
                        }
                        &du_row
                    };
                    if gru {
                        gru_gate_grads(
                            [0, 1, 2].map(|g| gates_s.slice(row + g * h + own.start, nu)),
                            rnew_s.slice(at, nu),
                            hprev_s.slice((t * batch + b) * p + own.start, nu),
                            du,
                            direct_s.slice(b * h + own.start, nu),
                        );
                        continue;
                    }
                    let gates = [0, 1, 2, 3].map(|g| gates_s.slice(row + g * h + own.start, nu));
                    let u = if projection {
                        u_s.slice(at, nu)
                    } else {
                        &mut u_row[..]
                    };
                    gate_grads(
                        gates,
                        tanh_s.slice(at, nu),
                        cprev_s.slice(at, nu),
                        du,
                        dc_s.slice(b * h + own.start, nu),
                        u,
                    );
                }
            }
            sync();
            if let (Some(cols), Some(packed_hh)) = (&cols, &packed_hh) {
                for b in my_rows.clone() {
                    // SAFETY: this member's columns of row `b` of the next step's `dh`;
                    // `direct` and the gate gradients it reads were completed before the
                    // barrier above.
                    unsafe {
                        let dst = dh_s.slice(next + b * p + cols.start, cols.len());
                        if valid(t, b) && gru {
                            // Without a projection a member's columns are its units.
                            dst.copy_from_slice(direct_s.slice(b * h + cols.start, cols.len()));
                        } else if valid(t, b) {
                            dst.fill(T::ZERO);
                        } else {
                            // Past its length a row passes dh through untouched.
                            dst.copy_from_slice(dh_s.slice(cur + b * p + cols.start, cols.len()));
                        }
                    }
                }
                // SAFETY: dz of step t is complete (barrier above); this member writes
                // only its columns of dh.
                unsafe {
                    gemm(
                        nb,
                        gates_s.at((t * batch + b0) * g4),
                        g4,
                        1,
                        packed_hh,
                        dh_s.at(next + b0 * p),
                        p,
                    );
                    if let Some(packed_hn) = &packed_hn {
                        gemm(
                            nb,
                            rnew_s.at((t * batch + b0) * h),
                            h,
                            1,
                            packed_hn,
                            dh_s.at(next + b0 * p),
                            p,
                        );
                    }
                };
            }
        }
    });
    let last = (seq % 2) * batch * p;
    grads
        .d_h0
        .copy_from_slice(&d_hidden[last..last + batch * p]);
    grads.d_c0.copy_from_slice(&d_cell);

    // Whole-sequence products. dz is [T·B, 4H] in tape.gates.
    let dz = tape.gates.as_ptr();
    let layout = grads.layout;
    let in_size = w.input_size;
    let d_weights = grads.d_weights.as_mut_ptr();
    // SAFETY: the team above has finished; every `A` is the whole tape (`[T·B, G·H]`, read
    // transposed through its strides), every `C` a parameter block of `d_weights` at its
    // layout offset with room for `rows × ldc` values (the layout's sizes).
    unsafe {
        // dW_ih = dzᵀ · X, dW_hh = dzᵀ · H_prev: A(i, k) = dz[k, i].
        let x = PackedB::pack_all_on(threads, rows, in_size, input, in_size, 1);
        par_gemm(
            threads,
            Store::Overwrite,
            g4,
            dz,
            1,
            g4,
            &x,
            d_weights.add(layout.weight_ih.start),
            in_size,
        );
        let h_prev = PackedB::pack_all_on(threads, rows, p, &tape.hidden_prev, p, 1);
        par_gemm(
            threads,
            Store::Overwrite,
            rz_rows,
            dz,
            1,
            g4,
            &h_prev,
            d_weights.add(layout.weight_hh.start),
            p,
        );
        if gru {
            // The `n` rows: (dn·r)ᵀ · H_prev.
            par_gemm(
                threads,
                Store::Overwrite,
                h,
                tape.recurrent_new.as_ptr(),
                1,
                h,
                &h_prev,
                d_weights.add(layout.weight_hh.start + 2 * h * p),
                p,
            );
        }
        // dX += dz · W_ih (the first direction: dX = dz · W_ih).
        if let Some(d_input) = grads.d_input.as_deref_mut() {
            let w_ih = PackedB::pack_all_on(threads, g4, in_size, w.w_ih, in_size, 1);
            // The reverse direction adds to what the forward one stored.
            let store = if direction > 0 {
                Store::Add
            } else {
                Store::Overwrite
            };
            par_gemm(
                threads,
                store,
                rows,
                dz,
                g4,
                1,
                &w_ih,
                d_input.as_mut_ptr(),
                in_size,
            );
        }
        if let Some(range) = &layout.weight_hr {
            // dW_hr = dĥᵀ · U.
            let u = PackedB::pack_all_on(threads, rows, h, &unprojected, h, 1);
            par_gemm(
                threads,
                Store::Overwrite,
                p,
                d_projected.as_ptr(),
                1,
                p,
                &u,
                d_weights.add(range.start),
                h,
            );
        }
    }
    if let (Some(ih), Some(hh)) = (&layout.bias_ih, &layout.bias_hh) {
        let mut d_bias = vec![T::ZERO; g4];
        for row in tape.gates.chunks_exact(g4) {
            for (acc, &v) in d_bias.iter_mut().zip(row) {
                *acc += v;
            }
        }
        grads.d_weights[ih.clone()].copy_from_slice(&d_bias);
        if gru {
            // The `n` block of `b_hh` gets `dn·r`.
            let d_bias_n = &mut d_bias[2 * h..];
            d_bias_n.fill(T::ZERO);
            for row in tape.recurrent_new.chunks_exact(h) {
                for (acc, &v) in d_bias_n.iter_mut().zip(row) {
                    *acc += v;
                }
            }
        }
        grads.d_weights[hh.clone()].copy_from_slice(&d_bias);
    }
}
