//! The whole-sequence products of one (layer, direction)'s backward, after its steps:
//! `dW_ih`, `dW_hh`, `dW_hr` and the input gradient one GEMM each over all steps (the
//! [`Cell::APART_BLOCKS`]' rows of `dW_hh` one more), and the bias sums.

use crate::backward::cell_grads::CellGrads;
use crate::cell::Cell;
use crate::cell_weights::CellWeights;
use crate::forward::CellRun;
use crate::gemm::{PackedB, Store, par_gemm};
use crate::real::Real;
use crate::tape::CellTape;

/// What the products read: the call, the weights, the tape (its gates now `dz`, its
/// apart recurrent product now that product's gradient) and, with a projection, `dĥ`
/// and the unprojected output of every step.
pub(super) struct WeightGradInputs<'a, T: Real> {
    pub run: &'a CellRun<'a, T>,
    pub w: &'a CellWeights<'a, T>,
    pub tape: &'a CellTape<T>,
    pub d_projected: &'a [T],
    pub unprojected: &'a [T],
}

/// `dW_ih = dzᵀ · X`, `dW_hh = dzᵀ · H_prev` (apart rows: their gradient's), `dX (+)= dz
/// · W_ih` (the first direction stores, the second adds), `dW_hr = dĥᵀ · U`.
pub(super) fn weight_grads<T: Real, C: Cell>(
    inputs: &WeightGradInputs<'_, T>,
    grads: &mut CellGrads<'_, T>,
) {
    let WeightGradInputs { run, w, tape, .. } = *inputs;
    let (threads, h, p) = (run.threads, run.dims.hidden, run.dims.out);
    let rows = run.dims.seq * run.dims.batch;
    let gate_cols = run.dims.gate_cols();
    let fed = C::gate_fed_rows(gate_cols, h);
    // dz is [T·B, G] in tape.gates.
    let dz = tape.gates.as_ptr();
    let layout = grads.layout;
    let in_size = w.input_size;
    let d_weights = grads.d_weights.as_mut_ptr();
    // SAFETY: the team has finished; every `A` is a whole tape buffer (`[T·B, ·]`, read
    // transposed through its strides), every `C` a parameter block of `d_weights` at its
    // layout offset with room for `rows × ldc` values (the layout's sizes).
    unsafe {
        // dW_ih = dzᵀ · X, dW_hh = dzᵀ · H_prev: A(i, k) = dz[k, i].
        let x = PackedB::pack_all_on(threads, rows, in_size, run.input, in_size, 1);
        par_gemm(
            threads,
            Store::Overwrite,
            gate_cols,
            dz,
            1,
            gate_cols,
            &x,
            d_weights.add(layout.weight_ih.start),
            in_size,
        );
        let h_prev = PackedB::pack_all_on(threads, rows, p, &tape.hidden_prev, p, 1);
        par_gemm(
            threads,
            Store::Overwrite,
            fed,
            dz,
            1,
            gate_cols,
            &h_prev,
            d_weights.add(layout.weight_hh.start),
            p,
        );
        if C::APART_BLOCKS > 0 {
            // The apart rows: their recurrent gradient (a GRU's dn·r)ᵀ · H_prev.
            let apart = C::APART_BLOCKS * h;
            par_gemm(
                threads,
                Store::Overwrite,
                apart,
                tape.recurrent_new.as_ptr(),
                1,
                apart,
                &h_prev,
                d_weights.add(layout.weight_hh.start + fed * p),
                p,
            );
        }
        // dX += dz · W_ih (the first direction: dX = dz · W_ih).
        if let Some(d_input) = grads.d_input.as_deref_mut() {
            let w_ih = PackedB::pack_all_on(threads, gate_cols, in_size, w.w_ih, in_size, 1);
            // The reverse direction adds to what the forward one stored.
            let store = if run.direction > 0 {
                Store::Add
            } else {
                Store::Overwrite
            };
            par_gemm(
                threads,
                store,
                rows,
                dz,
                gate_cols,
                1,
                &w_ih,
                d_input.as_mut_ptr(),
                in_size,
            );
        }
        if let Some(range) = &layout.weight_hr {
            // dW_hr = dĥᵀ · U.
            let u = PackedB::pack_all_on(threads, rows, h, inputs.unprojected, h, 1);
            par_gemm(
                threads,
                Store::Overwrite,
                p,
                inputs.d_projected.as_ptr(),
                1,
                p,
                &u,
                d_weights.add(range.start),
                h,
            );
        }
    }
}

/// `db_ih` = the sum of `dz` over all rows; `db_hh` the same but in the apart blocks,
/// which get the sum of their recurrent gradient.
pub(super) fn bias_grads<T: Real, C: Cell>(
    inputs: &WeightGradInputs<'_, T>,
    grads: &mut CellGrads<'_, T>,
) {
    let (Some(ih), Some(hh)) = (&grads.layout.bias_ih, &grads.layout.bias_hh) else {
        return;
    };
    let gate_cols = inputs.run.dims.gate_cols();
    let fed = C::gate_fed_rows(gate_cols, inputs.run.dims.hidden);
    let mut d_bias = vec![T::ZERO; gate_cols];
    for row in inputs.tape.gates.chunks_exact(gate_cols) {
        for (acc, &v) in d_bias.iter_mut().zip(row) {
            *acc += v;
        }
    }
    grads.d_weights[ih.clone()].copy_from_slice(&d_bias);
    if C::APART_BLOCKS > 0 {
        let d_bias_apart = &mut d_bias[fed..];
        d_bias_apart.fill(T::ZERO);
        for row in inputs.tape.recurrent_new.chunks_exact(gate_cols - fed) {
            for (acc, &v) in d_bias_apart.iter_mut().zip(row) {
                *acc += v;
            }
        }
    }
    grads.d_weights[hh.clone()].copy_from_slice(&d_bias);
}
