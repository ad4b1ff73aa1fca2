//! One (layer, direction) of the backward on a team: per step, against the processing
//! order, the projection's `du = dĥ·W_hr`, the cell's gate gradients
//! ([`Cell::backward_row`]) and `dh ← dz·W_hh`; then the whole-sequence weight products
//! (`weight_grads.rs`). Generic over the cell; [`backward_cell`] picks it from the
//! call's [`CellKind`].

use core::ops::Range;

use crate::arch::CellKind;
use crate::backward::cell_grads::CellGrads;
use crate::backward::weight_grads::{WeightGradInputs, bias_grads, weight_grads};
use crate::buffers::Buffer;
use crate::cell::{BackwardStep, Cell, Gru, Lstm};
use crate::cell_weights::CellWeights;
use crate::forward::{CellParams, CellRun, Split};
use crate::gemm::{PackedB, gemm};
use crate::real::Real;
use crate::tape::CellTape;
use crate::team::{Member, Shared, run_team};

/// `run.h0` / `run.c0` carry `dh_n` / `dc_n` of this cell; `dy` is the gradient of the
/// layer's whole output `[T, B, dirs * H_out]`.
pub(crate) fn backward_cell<T: Real>(
    run: &CellRun<'_, T>,
    tape: &mut CellTape<T>,
    dy: &[T],
    grads: &mut CellGrads<'_, T>,
) {
    match run.dims.cell {
        CellKind::Lstm => cell_pass::<T, Lstm>(run, tape, dy, grads),
        CellKind::Gru => cell_pass::<T, Gru>(run, tape, dy, grads),
    }
}

/// How the team splits the backward of one (layer, direction): by units (each member:
/// some hidden units of every row, a barrier per step), or by batch rows (each member:
/// every unit of some rows, no barrier at all, all of `W_hh` read per member per step;
/// see [`Split::choose_backward`]).
struct BackwardPlan {
    by_rows: bool,
    /// By units: each member's hidden units and its columns of the projected state.
    units: Vec<Range<usize>>,
    own_cols: Vec<Range<usize>>,
    /// By rows: each member's batch rows.
    row_parts: Vec<Range<usize>>,
}

impl BackwardPlan {
    fn new<T: Real>(run: &CellRun<'_, T>) -> Self {
        let (units, own_cols) = run.dims.team::<T>(run.threads);
        let by_rows = Split::choose_backward::<T>(&run.dims, units.len()) == Split::Rows;
        let row_parts = if by_rows {
            crate::team::split_aligned(run.dims.batch, units.len(), 1)
        } else {
            Vec::new()
        };
        Self {
            by_rows,
            units,
            own_cols,
            row_parts,
        }
    }

    fn members(&self) -> usize {
        if self.by_rows {
            self.row_parts.len()
        } else {
            self.units.len()
        }
    }

    /// A member's hidden units, its columns of `dh` (and of the projected state), and
    /// its batch rows.
    fn share(&self, id: usize, projection: bool, dims: (usize, usize, usize)) -> MemberShare {
        let (batch, h, p) = dims;
        if self.by_rows {
            return MemberShare {
                units: 0..h,
                cols: Some(0..p),
                rows: self.row_parts[id].clone(),
            };
        }
        let units = self.units[id].clone();
        let cols = if projection {
            self.own_cols.get(id).cloned()
        } else {
            Some(units.clone())
        };
        MemberShare {
            units,
            cols,
            rows: 0..batch,
        }
    }
}

/// One member's part of every backward step.
struct MemberShare {
    units: Range<usize>,
    cols: Option<Range<usize>>,
    rows: Range<usize>,
}

/// Everything the members of one (layer, direction) share.
struct Pass<'a, T: Real> {
    run: &'a CellRun<'a, T>,
    w: &'a CellWeights<'a, T>,
    plan: BackwardPlan,
    dy: &'a [T],
    /// `dh` of the current and the next step `[2, B, P]`, and `dc` `[B, H]`.
    d_hidden: Shared<'a, T>,
    d_cell: Shared<'a, T>,
    /// Projection only: dĥ of every step `[T·B, P]` (for dW_hr), du of the current step
    /// `[B, H]`, and the unprojected output o·tanh(c) of every step `[T·B, H]`.
    d_projected: Shared<'a, T>,
    d_unprojected: Shared<'a, T>,
    unprojected: Shared<'a, T>,
    /// The tape: gate activations (overwritten by dz), `tanh(c)`, `c_prev`, `h_prev`,
    /// the apart recurrent product (overwritten by its gradient).
    gates: Shared<'a, T>,
    tanh_cell: Shared<'a, T>,
    cell_prev: Shared<'a, T>,
    hidden_prev: Shared<'a, T>,
    recurrent_new: Shared<'a, T>,
    /// [`Cell::DIRECT_STATE_GRAD`]: `m·dĥ·z` of the current step, `[B, H]`.
    direct: Shared<'a, T>,
}

fn cell_pass<T: Real, C: Cell>(
    run: &CellRun<'_, T>,
    tape: &mut CellTape<T>,
    dy: &[T],
    grads: &mut CellGrads<'_, T>,
) {
    let dims = run.dims;
    let (seq, batch, h, p) = (dims.seq, dims.batch, dims.hidden, dims.out);
    let rows = seq * batch;
    let CellParams::Flat(w) = run.params else {
        unreachable!("the backward runs on the flat parameters");
    };
    let projection = w.w_hr.is_some();
    let plan = BackwardPlan::new(run);
    let mut d_hidden = vec![T::ZERO; 2 * batch * p];
    d_hidden[..batch * p].copy_from_slice(run.h0);
    let mut d_cell = run.c0.to_vec();
    // Written for every row and step before they are read (`du` per step, zeroed first).
    let with_proj = |len: usize| Buffer::for_overwrite(if projection { len } else { 0 });
    let mut d_projected = with_proj(rows * p);
    let mut d_unprojected = with_proj(batch * h);
    let mut unprojected = with_proj(rows * h);
    let mut direct = Buffer::zeroed(if C::DIRECT_STATE_GRAD { batch * h } else { 0 });
    fn shared<T>(v: &mut [T]) -> Shared<'_, T> {
        // SAFETY: each member writes its own units or columns (or rows) of these per-step
        // buffers and reads other members' parts only after the step's barrier;
        // `unprojected`, `d_projected` and the tape's rows are each written by one member.
        unsafe { Shared::new(v) }
    }
    let members = plan.members();
    let pass = Pass {
        run,
        w,
        plan,
        dy,
        d_hidden: shared(&mut d_hidden),
        d_cell: shared(&mut d_cell),
        d_projected: shared(&mut d_projected),
        d_unprojected: shared(&mut d_unprojected),
        unprojected: shared(&mut unprojected),
        gates: shared(&mut tape.gates),
        tanh_cell: shared(&mut tape.tanh_cell),
        cell_prev: shared(&mut tape.cell_prev),
        hidden_prev: shared(&mut tape.hidden_prev),
        recurrent_new: shared(&mut tape.recurrent_new),
        direct: shared(&mut direct),
    };
    run_team(members, |member| run_member::<T, C>(&pass, &member));
    let last = (seq % 2) * batch * p;
    grads
        .d_h0
        .copy_from_slice(&d_hidden[last..last + batch * p]);
    grads.d_c0.copy_from_slice(&d_cell);
    let inputs = WeightGradInputs {
        run,
        w,
        tape,
        d_projected: &d_projected,
        unprojected: &unprojected,
    };
    weight_grads::<T, C>(&inputs, grads);
    bias_grads::<T, C>(&inputs, grads);
}

/// The packed `W_hh` of one member's columns of `dh`: `B(k, n) = W_hh[k, n]`, its gate-fed
/// rows (against `dz`) and its apart rows (against their recurrent gradient).
struct MemberPanels<T: Real> {
    hh: Option<PackedB<T>>,
    apart: Option<PackedB<T>>,
    /// `du = dĥ · W_hr`: `B(k, n) = W_hr[k, n]`, this member's units.
    hr: Option<PackedB<T>>,
}

fn member_panels<T: Real, C: Cell>(pass: &Pass<'_, T>, share: &MemberShare) -> MemberPanels<T> {
    let (h, p, w) = (pass.run.dims.hidden, pass.run.dims.out, pass.w);
    let fed = C::gate_fed_rows(pass.run.dims.gate_cols(), h);
    let cols = share.cols.clone();
    MemberPanels {
        hh: cols
            .clone()
            .map(|c| PackedB::pack(fed, core::slice::from_ref(&c), w.w_hh, p, 1)),
        apart: cols
            .filter(|_| C::APART_BLOCKS > 0)
            .map(|c| PackedB::pack(C::APART_BLOCKS * h, &[c], &w.w_hh[fed * p..], p, 1)),
        hr: w
            .w_hr
            .map(|w_hr| PackedB::pack(p, core::slice::from_ref(&share.units), w_hr, h, 1)),
    }
}

/// One member's backward, step by step against the processing order.
fn run_member<T: Real, C: Cell>(pass: &Pass<'_, T>, member: &Member<'_>) {
    let dims = pass.run.dims;
    let projection = pass.w.w_hr.is_some();
    let share = pass
        .plan
        .share(member.id, projection, (dims.batch, dims.hidden, dims.out));
    let panels = member_panels::<T, C>(pass, &share);
    let mut du_row = vec![T::ZERO; share.units.len()];
    let mut u_row = vec![T::ZERO; share.units.len()];
    let sync = || {
        if !pass.plan.by_rows {
            member.sync();
        }
    };
    for step in 0..dims.seq {
        let t = dims.time(dims.seq - 1 - step, pass.run.direction == 1);
        let (cur, next) = (
            (step % 2) * dims.batch * dims.out,
            ((step + 1) % 2) * dims.batch * dims.out,
        );
        if let Some(packed_hr) = &panels.hr {
            project_back(pass, &share, packed_hr, t, cur, &sync);
        }
        gate_grads_of_rows::<T, C>(pass, &share, t, cur, &mut du_row, &mut u_row);
        sync();
        if let (Some(cols), Some(packed_hh)) = (&share.cols, &panels.hh) {
            recurrent_back::<T, C>(
                pass,
                &share,
                cols,
                (packed_hh, panels.apart.as_ref()),
                t,
                (cur, next),
            );
        }
    }
}

/// Where batch row `b`'s `dy` of time `t` starts (this direction's columns).
fn dy_at<T: Real>(pass: &Pass<'_, T>, t: usize, b: usize) -> usize {
    let dims = pass.run.dims;
    (t * dims.batch + b) * dims.dirs * dims.out + pass.run.direction * dims.out
}

/// Whether batch row `b` has a value at time `t`.
fn valid<T: Real>(pass: &Pass<'_, T>, t: usize, b: usize) -> bool {
    pass.run.lengths.is_none_or(|l| t < l[b])
}

/// With a projection: `dĥ = m·(dh + dy_t)` of this member's columns, then, after the
/// barrier, `du = dĥ · W_hr` of its units.
fn project_back<T: Real>(
    pass: &Pass<'_, T>,
    share: &MemberShare,
    packed_hr: &PackedB<T>,
    t: usize,
    cur: usize,
    sync: &impl Fn(),
) {
    let (batch, h, p) = (pass.run.dims.batch, pass.run.dims.hidden, pass.run.dims.out);
    let (own, nu) = (&share.units, share.units.len());
    if let Some(cols) = &share.cols {
        for b in share.rows.clone() {
            let n = cols.len();
            // SAFETY: this member's projected columns of row `b`, in bounds of `[T·B, P]`
            // and `[2·B, P]`; no other member touches them before the barrier below.
            unsafe {
                let dst = pass.d_projected.slice((t * batch + b) * p + cols.start, n);
                if valid(pass, t, b) {
                    let dh = pass.d_hidden.slice(cur + b * p + cols.start, n);
                    let dy_t = &pass.dy[dy_at(pass, t, b) + cols.start..][..n];
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
    for b in share.rows.clone() {
        // SAFETY: this member's units of row `b` of `du` (`[B, H]`).
        unsafe {
            pass.d_unprojected
                .slice(b * h + own.start, nu)
                .fill(T::ZERO)
        };
    }
    let (b0, nb) = (share.rows.start, share.rows.len());
    // SAFETY: dĥ of step t is complete (barrier above); this member writes only its
    // units of du.
    unsafe {
        gemm(
            nb,
            pass.d_projected.at((t * batch + b0) * p),
            p,
            1,
            packed_hr,
            pass.d_unprojected.at(b0 * h),
            h,
        )
    };
}

/// The gate gradients of this member's units of its rows at time `t`: zeros past a
/// row's length (no gradient from this step reaches the weight products), else the
/// cell's gate math on `du` (`dh + dy_t`, or the projection's `du`).
fn gate_grads_of_rows<T: Real, C: Cell>(
    pass: &Pass<'_, T>,
    share: &MemberShare,
    t: usize,
    cur: usize,
    du_row: &mut [T],
    u_row: &mut [T],
) {
    let dims = pass.run.dims;
    let (batch, h, p) = (dims.batch, dims.hidden, dims.out);
    let (own, nu) = (share.units.clone(), share.units.len());
    let projection = pass.w.w_hr.is_some();
    let step = BackwardStep {
        t,
        batch,
        hidden: h,
        out: p,
        units: own.clone(),
        gates: pass.gates,
        gate_cols: dims.gate_cols(),
        tanh_cell: pass.tanh_cell,
        cell_prev: pass.cell_prev,
        hidden_prev: pass.hidden_prev,
        recurrent_new: pass.recurrent_new,
        direct: pass.direct,
        d_cell: pass.d_cell,
        unprojected: projection.then_some(pass.unprojected),
    };
    for b in share.rows.clone() {
        let (row, at) = (step.gate_row(b), step.tape_row(b) + own.start);
        // SAFETY: every slice below is this member's units of row `b` of its buffer (in
        // bounds by the buffers' `[·, H]` / `[·, G]` shapes), read or written by no other
        // member before the next barrier; the previous step's `dh` and `dc` were
        // completed before the last barrier.
        unsafe {
            if !valid(pass, t, b) {
                for g in 0..dims.cell.gates() {
                    pass.gates.slice(row + g * h + own.start, nu).fill(T::ZERO);
                }
                if C::APART_BLOCKS > 0 {
                    pass.recurrent_new.slice(at, nu).fill(T::ZERO);
                }
                if projection {
                    pass.unprojected.slice(at, nu).fill(T::ZERO);
                }
                continue;
            }
            let du: &[T] = if projection {
                pass.d_unprojected.slice(b * h + own.start, nu)
            } else {
                let dh = pass.d_hidden.slice(cur + b * p + own.start, nu);
                let dy_t = &pass.dy[dy_at(pass, t, b) + own.start..][..nu];
                for j in 0..nu {
                    du_row[j] = dh[j] + dy_t[j];
                }
                du_row
            };
            C::backward_row(&step, b, du, u_row);
        }
    }
}

/// The previous step's `dh` of this member's columns: the cell's direct part (or zeros)
/// plus `dz · W_hh` (and the apart blocks' gradient times their rows), or, past a row's
/// length, this step's `dh` passed through.
fn recurrent_back<T: Real, C: Cell>(
    pass: &Pass<'_, T>,
    share: &MemberShare,
    cols: &Range<usize>,
    (packed_hh, packed_apart): (&PackedB<T>, Option<&PackedB<T>>),
    t: usize,
    (cur, next): (usize, usize),
) {
    let dims = pass.run.dims;
    let (batch, h, p, gate_cols) = (dims.batch, dims.hidden, dims.out, dims.gate_cols());
    for b in share.rows.clone() {
        // SAFETY: this member's columns of row `b` of the next step's `dh`; `direct` and
        // the gate gradients it reads were completed before the barrier above.
        unsafe {
            let dst = pass.d_hidden.slice(next + b * p + cols.start, cols.len());
            if valid(pass, t, b) && C::DIRECT_STATE_GRAD {
                // Without a projection a member's columns are its units.
                dst.copy_from_slice(pass.direct.slice(b * h + cols.start, cols.len()));
            } else if valid(pass, t, b) {
                dst.fill(T::ZERO);
            } else {
                // Past its length a row passes dh through untouched.
                dst.copy_from_slice(pass.d_hidden.slice(cur + b * p + cols.start, cols.len()));
            }
        }
    }
    let (b0, nb) = (share.rows.start, share.rows.len());
    // SAFETY: dz of step t is complete (barrier above); this member writes only its
    // columns of dh.
    unsafe {
        gemm(
            nb,
            pass.gates.at((t * batch + b0) * gate_cols),
            gate_cols,
            1,
            packed_hh,
            pass.d_hidden.at(next + b0 * p),
            p,
        );
        if let Some(packed_apart) = packed_apart {
            let apart = C::APART_BLOCKS * h;
            gemm(
                nb,
                pass.recurrent_new.at((t * batch + b0) * apart),
                apart,
                1,
                packed_apart,
                pass.d_hidden.at(next + b0 * p),
                p,
            );
        }
    };
}
