//! The LSTM's gate math of one step, for one row's units: forward ([`cell_update`]) and
//! backward ([`gate_grads`]); the equations are in `backward/mod.rs`'s documentation.

use crate::cell::{BackwardStep, Cell, ForwardStep};
use crate::real::Real;
use crate::simd;

/// The LSTM cell (PyTorch's `nn.LSTM`: gates i, f, g, o, a cell state, an optional
/// projection of `h`).
pub(crate) struct Lstm;

impl Cell for Lstm {
    const RECURRENT_APART: bool = false;

    unsafe fn forward_rows<T: Real>(step: &ForwardStep<'_, T>, scratch: &mut [T]) {
        let (h, p, own) = (step.hidden, step.out, step.units.clone());
        let nu = own.len();
        for b in step.rows.clone() {
            let row = step.gate_row(b);
            let c_at = b * h + own.start;
            // SAFETY: every slice below is this member's units of row `b` (in bounds of
            // its buffer's `[·, H]` / `[·, G]` / `[·, P]` shape), which no other thread
            // touches before the member's next barrier (the caller's promise); the
            // step's gate products are complete.
            unsafe {
                if let Some((cell_prev, _)) = step.tape {
                    cell_prev
                        .slice(step.tape_row(b) + own.start, nu)
                        .copy_from_slice(step.cell.slice(c_at, nu));
                }
                if step.valid(b) {
                    let tanh_c = match step.tape {
                        Some((_, tanh_cell)) => tanh_cell.slice(step.tape_row(b) + own.start, nu),
                        None => &mut scratch[..],
                    };
                    let h_dst = match step.unprojected {
                        Some(unprojected) => unprojected.slice(c_at, nu),
                        None => step.states.slice(step.next + b * p + own.start, nu),
                    };
                    cell_update(
                        [0, 1, 2, 3].map(|g| step.gates.slice(row + g * h + own.start, nu)),
                        step.cell.slice(c_at, nu),
                        tanh_c,
                        h_dst,
                    );
                }
            }
        }
    }

    const APART_BLOCKS: usize = 0;
    const DIRECT_STATE_GRAD: bool = false;

    unsafe fn backward_row<T: Real>(
        step: &BackwardStep<'_, T>,
        b: usize,
        du: &[T],
        scratch: &mut [T],
    ) {
        let (h, own) = (step.hidden, step.units.clone());
        let nu = own.len();
        let (row, at) = (step.gate_row(b), step.tape_row(b) + own.start);
        // SAFETY: every slice below is this member's units of row `b` of its buffer (in
        // bounds by the buffers' `[·, H]` / `[·, G]` shapes), touched by no other thread
        // before the member's next barrier (the caller's promise).
        unsafe {
            let u = match step.unprojected {
                Some(unprojected) => unprojected.slice(at, nu),
                None => &mut scratch[..],
            };
            gate_grads(
                [0, 1, 2, 3].map(|g| step.gates.slice(row + g * h + own.start, nu)),
                step.tanh_cell.slice(at, nu),
                step.cell_prev.slice(at, nu),
                du,
                step.d_cell.slice(b * h + own.start, nu),
                u,
            );
        }
    }
}

simd::dispatch! {
    /// The gate math of one row's units: activations written back over the
    /// pre-activations, the new cell state, `tanh(c)` and `h = o · tanh(c)`.
    pub(crate) fn cell_update<T: Real>(
        gates: [&mut [T]; 4],
        cell: &mut [T],
        tanh_cell: &mut [T],
        hidden: &mut [T],
    ) {
        let n = cell.len();
        let [zi, zf, zg, zo] = gates;
        let (zi, zf, zg, zo) = (&mut zi[..n], &mut zf[..n], &mut zg[..n], &mut zo[..n]);
        let (tanh_cell, hidden) = (&mut tanh_cell[..n], &mut hidden[..n]);
        // Two passes: the four activations (independent of each other), then the cell
        // and `tanh(c)`, which wait on them. In one pass a unit's work was ~225
        // instructions on one dependency chain two exponentials and divisions deep, and
        // the out-of-order window held about two units' worth: the loop ran on latency,
        // ~100 cycles per vector of units against ~35 of issue. Same operations on every
        // value, so the same bits.
        for j in 0..n {
            zi[j] = zi[j].sigmoid_on::<FMA>();
            zf[j] = zf[j].sigmoid_on::<FMA>();
            zg[j] = zg[j].tanh_on::<FMA>();
            zo[j] = zo[j].sigmoid_on::<FMA>();
        }
        for j in 0..n {
            let c = zf[j] * cell[j] + zi[j] * zg[j];
            let tc = c.tanh_on::<FMA>();
            cell[j] = c;
            tanh_cell[j] = tc;
            hidden[j] = zo[j] * tc;
        }
    }
}

simd::dispatch! {
    /// The gate gradients of one row's units (see `backward/mod.rs`), written over the
    /// gate activations; `d_cell` becomes the gradient of the previous cell state and `u`
    /// the unprojected output `o · tanh(c)`.
    pub(crate) fn gate_grads<T: Real>(
        gates: [&mut [T]; 4],
        tanh_cell: &[T],
        cell_prev: &[T],
        du: &[T],
        d_cell: &mut [T],
        u: &mut [T],
    ) {
        let n = d_cell.len();
        let [gi, gf, gg, go] = gates;
        let (gi, gf, gg, go) = (&mut gi[..n], &mut gf[..n], &mut gg[..n], &mut go[..n]);
        let (tanh_cell, cell_prev, du, u) = (&tanh_cell[..n], &cell_prev[..n], &du[..n], &mut u[..n]);
        let one = T::ONE;
        for j in 0..n {
            let (i, f, g, o) = (gi[j], gf[j], gg[j], go[j]);
            let tc = tanh_cell[j];
            let dc = d_cell[j] + du[j] * o * (one - tc * tc);
            gi[j] = dc * g * i * (one - i);
            gf[j] = dc * cell_prev[j] * f * (one - f);
            gg[j] = dc * i * (one - g * g);
            go[j] = du[j] * tc * o * (one - o);
            d_cell[j] = dc * f;
            u[j] = o * tc;
        }
    }
}
