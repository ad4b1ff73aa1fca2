//! The GRU's gate math of one step, for one row's units: forward ([`gru_update`]) and
//! backward ([`gru_gate_grads`]); the equations are in `backward/mod.rs`'s documentation.

use crate::cell::{BackwardStep, Cell, ForwardStep};
use crate::real::Real;
use crate::simd;

/// The GRU cell (PyTorch's `nn.GRU`: gates r, z, n, with `r` applied to `W_hn h + b_hn`;
/// no cell state, no projection).
pub(crate) struct Gru;

impl Cell for Gru {
    const RECURRENT_APART: bool = true;

    unsafe fn forward_rows<T: Real>(step: &ForwardStep<'_, T>, scratch: &mut [T]) {
        let (h, p, own) = (step.hidden, step.out, step.units.clone());
        let nu = own.len();
        for b in step.rows.clone().filter(|&b| step.valid(b)) {
            let row = step.gate_row(b);
            // SAFETY: every slice below is this member's units of row `b` (in bounds of
            // its buffer's `[·, H]` / `[·, G]` / `[·, P]` shape), which no other thread
            // writes before the member's next barrier (the caller's promise); those
            // written here (gates, next state, tape) no other thread reads either, while
            // the previous state, only read, may be read by other members' products;
            // the step's products are complete.
            unsafe {
                let recurrent_new = match step.recurrent_new {
                    Some(tape) => tape.slice(step.tape_row(b) + own.start, nu),
                    None => &mut scratch[..],
                };
                gru_update(
                    [0, 1, 2].map(|g| step.gates.slice(row + g * h + own.start, nu)),
                    [0, 1, 2].map(|g| {
                        step.recurrent
                            .read(b * step.gate_cols + g * h + own.start, nu)
                    }),
                    step.states.read(step.prev + b * p + own.start, nu),
                    step.states.slice(step.next + b * p + own.start, nu),
                    recurrent_new,
                );
            }
        }
    }

    const APART_BLOCKS: usize = 1;
    const DIRECT_STATE_GRAD: bool = true;

    unsafe fn backward_row<T: Real>(
        step: &BackwardStep<'_, T>,
        b: usize,
        du: &[T],
        _scratch: &mut [T],
    ) {
        let (h, p, own) = (step.hidden, step.out, step.units.clone());
        let nu = own.len();
        let row = step.gate_row(b);
        // SAFETY: every slice below is this member's units of row `b` of its buffer (in
        // bounds by the buffers' `[·, H]` / `[·, G]` / `[·, P]` shapes), touched by no
        // other thread before the member's next barrier (the caller's promise).
        unsafe {
            gru_gate_grads(
                [0, 1, 2].map(|g| step.gates.slice(row + g * h + own.start, nu)),
                step.recurrent_new.slice(step.tape_row(b) + own.start, nu),
                step.hidden_prev
                    .slice((step.t * step.batch + b) * p + own.start, nu),
                du,
                step.direct.slice(b * h + own.start, nu),
            );
        }
    }
}

simd::dispatch! {
    /// The GRU's gate math of one row's units: activations `r, z, n` written back over
    /// the input projections, `W_hn h + b_hn` kept for the backward, and
    /// `h = (1 − z) · n + z · h_prev` (as `n + z · (h_prev − n)`).
    pub(crate) fn gru_update<T: Real>(
        gates: [&mut [T]; 3],
        recurrent: [&[T]; 3],
        hidden_prev: &[T],
        hidden: &mut [T],
        recurrent_new: &mut [T],
    ) {
        let n = hidden.len();
        let [xr, xz, xn] = gates;
        let (xr, xz, xn) = (&mut xr[..n], &mut xz[..n], &mut xn[..n]);
        let [hr, hz, hn] = recurrent;
        let (hr, hz, hn) = (&hr[..n], &hz[..n], &hn[..n]);
        let (hidden_prev, recurrent_new) = (&hidden_prev[..n], &mut recurrent_new[..n]);
        // Two passes, as `cell_update`'s: the gates, then what depends on them.
        for j in 0..n {
            xr[j] = (xr[j] + hr[j]).sigmoid_on::<FMA>();
            xz[j] = (xz[j] + hz[j]).sigmoid_on::<FMA>();
        }
        for j in 0..n {
            let new = (xn[j] + xr[j] * hn[j]).tanh_on::<FMA>();
            xn[j] = new;
            recurrent_new[j] = hn[j];
            hidden[j] = new + xz[j] * (hidden_prev[j] - new);
        }
    }
}

simd::dispatch! {
    /// A GRU's gate gradients of one row's units (see `backward/mod.rs`): `dr, dz, dn`
    /// written over the gate activations, `dn·r` over `recurrent_new` (`W_hn h + b_hn`),
    /// and `d_direct` = `dĥ·z`, the part of the previous `dh` that skips the product.
    pub(crate) fn gru_gate_grads<T: Real>(
        gates: [&mut [T]; 3],
        recurrent_new: &mut [T],
        hidden_prev: &[T],
        d_hidden: &[T],
        d_direct: &mut [T],
    ) {
        let n = d_direct.len();
        let [gr, gz, gn] = gates;
        let (gr, gz, gn) = (&mut gr[..n], &mut gz[..n], &mut gn[..n]);
        let (recurrent_new, hidden_prev, d_hidden) =
            (&mut recurrent_new[..n], &hidden_prev[..n], &d_hidden[..n]);
        let one = T::ONE;
        for j in 0..n {
            let (r, z, new) = (gr[j], gz[j], gn[j]);
            let dh = d_hidden[j];
            let dn = dh * (one - z) * (one - new * new);
            gr[j] = dn * recurrent_new[j] * r * (one - r);
            gz[j] = dh * (hidden_prev[j] - new) * z * (one - z);
            gn[j] = dn;
            recurrent_new[j] = dn * r;
            d_direct[j] = dh * z;
        }
    }
}
