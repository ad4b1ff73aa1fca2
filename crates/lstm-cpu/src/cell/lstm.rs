//! The LSTM's gate math of one step, for one row's units: forward ([`cell_update`]) and
//! backward ([`gate_grads`]); the equations are in `backward.rs`'s documentation.

use crate::real::Real;
use crate::simd;

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
    /// The gate gradients of one row's units (see `backward.rs`), written over the
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
