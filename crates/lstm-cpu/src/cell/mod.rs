//! The cells, one file each: a cell type is a [`Cell`], its gate math of a step for one
//! row's units, forward and backward, beside it. The loops around the gate math
//! (products, threads, padding, the tape) are shared by every cell (`forward/pass.rs`,
//! `backward/pass.rs`) and run generic over the cell; a new cell adds its file here and its
//! arm where those loops dispatch on [`CellKind`] (docs/architecture.md,
//! "Adding a cell type").

use core::ops::Range;

use crate::arch::CellKind;
use crate::real::Real;
use crate::team::Shared;

pub(crate) mod gru;
pub(crate) mod lstm;

pub(crate) use gru::Gru;
pub(crate) use lstm::Lstm;

/// [`Cell::RECURRENT_APART`] of the cell type `kind` names (for what is sized before the
/// loops dispatch on the cell: the tape).
pub(crate) fn recurrent_apart(kind: CellKind) -> bool {
    match kind {
        CellKind::Lstm => Lstm::RECURRENT_APART,
        CellKind::Gru => Gru::RECURRENT_APART,
    }
}

/// What the fused kernel's shared forward loop asks of a cell type.
pub(crate) trait Cell {
    /// Whether a step's recurrent product `W_hh h + b_hh` goes to a buffer of its own
    /// ([`ForwardStep::recurrent`]) for the gate math to combine with the input
    /// projection (a GRU scales its `n` block by `r` first), rather than being added into
    /// the gates' pre-activations by the product itself (an LSTM).
    const RECURRENT_APART: bool;

    /// The forward's gate math of one step, for one team member's units of its rows:
    /// reads the step's pre-activations (and recurrent product), writes the activations
    /// over them, the new state and, when training, the cell's parts of the tape.
    /// `scratch` holds at least `step.units.len()` values.
    ///
    /// # Safety
    /// Every buffer of `step` has the shape [`ForwardStep`] documents, and no other
    /// thread touches this member's units of its rows in any of them before the
    /// member's next barrier.
    unsafe fn forward_rows<T: Real>(step: &ForwardStep<'_, T>, scratch: &mut [T]);

    /// Trailing gate blocks whose recurrent product the gate math reads on its own (a
    /// GRU's `n`, which takes `r ⊙ (W_hn h + b_hn)`): their rows of `W_hh` and `b_hh`
    /// get the gradient of that product ([`BackwardStep::recurrent_new`]), not the
    /// gates' (0 for an LSTM).
    const APART_BLOCKS: usize;

    /// Whether `h` depends on `h_prev` other than through `W_hh` (a GRU's `z ⊙ h_prev`):
    /// the gate math then writes that part of `dh_prev` to [`BackwardStep::direct`].
    const DIRECT_STATE_GRAD: bool;

    /// Rows of `W_hh` whose gradient comes from the gate gradients: all but the
    /// [`Cell::APART_BLOCKS`]' (theirs comes from their recurrent product's gradient).
    fn gate_fed_rows(gate_cols: usize, hidden: usize) -> usize {
        gate_cols - Self::APART_BLOCKS * hidden
    }

    /// The backward's gate math of batch row `b`'s units (`step.units`) at one step,
    /// given `du`, the gradient of the row's (unprojected) output: the gate gradients
    /// over the tape's activations and the cell's state gradients. `scratch` holds at
    /// least `step.units.len()` values.
    ///
    /// # Safety
    /// Every buffer of `step` has the shape [`BackwardStep`] documents, and no other
    /// thread touches row `b`'s units in any of them before the member's next barrier.
    unsafe fn backward_row<T: Real>(
        step: &BackwardStep<'_, T>,
        b: usize,
        du: &[T],
        scratch: &mut [T],
    );
}

/// One team member's part of one forward step, as the shared loop hands it to
/// [`Cell::forward_rows`]. The buffers are the team's; offsets count elements.
pub(crate) struct ForwardStep<'a, T> {
    /// The time step.
    pub t: usize,
    /// Batch rows `B`, hidden size `H` and the hidden state's size `P` (`H` without a
    /// projection).
    pub batch: usize,
    pub hidden: usize,
    pub out: usize,
    /// The member's batch rows and hidden units.
    pub rows: Range<usize>,
    pub units: Range<usize>,
    /// Gate pre-activations, `gate_cols` a row (a gate's block of `H` after another):
    /// batch row `first_row`'s of this step at `gates_at`, the next rows after it.
    pub gates: Shared<'a, T>,
    pub gates_at: usize,
    pub first_row: usize,
    pub gate_cols: usize,
    /// The hidden states `[2, B, P]`: the previous step's at `prev`, this step's at
    /// `next`.
    pub states: Shared<'a, T>,
    pub prev: usize,
    pub next: usize,
    /// The cell state `[B, H]`, updated in place (empty for a cell without one).
    pub cell: Shared<'a, T>,
    /// With a projection: the output before it, `[B, H]` (`h` is projected from it).
    pub unprojected: Option<Shared<'a, T>>,
    /// With [`Cell::RECURRENT_APART`]: this step's `W_hh h + b_hh`, `[B, gate_cols]`.
    pub recurrent: Shared<'a, T>,
    /// Training: the tape's `cell_prev` and `tanh_cell`, `[T, B, H]` each (empty for
    /// a cell without a cell state).
    pub tape: Option<(Shared<'a, T>, Shared<'a, T>)>,
    /// Training a cell with [`Cell::RECURRENT_APART`]: the tape's part of the recurrent
    /// product the backward needs, `[T, B, H]`.
    pub recurrent_new: Option<Shared<'a, T>>,
    /// Valid steps of each batch row (right padding), `None` when all are full.
    pub lengths: Option<&'a [usize]>,
}

impl<T> ForwardStep<'_, T> {
    /// Whether batch row `b` has a value at this step (past its length it keeps its
    /// state).
    #[inline]
    pub fn valid(&self, b: usize) -> bool {
        self.lengths.is_none_or(|l| self.t < l[b])
    }

    /// Where batch row `b`'s gate pre-activations of this step start.
    #[inline]
    pub fn gate_row(&self, b: usize) -> usize {
        self.gates_at + (b - self.first_row) * self.gate_cols
    }

    /// Where batch row `b`'s values of this step start in a `[T, B, H]` tape buffer.
    #[inline]
    pub fn tape_row(&self, b: usize) -> usize {
        (self.t * self.batch + b) * self.hidden
    }
}

/// One team member's part of one backward step, as the shared loop hands it to
/// [`Cell::backward_row`]. The buffers are the team's; offsets count elements.
pub(crate) struct BackwardStep<'a, T> {
    /// The time step.
    pub t: usize,
    /// Batch rows `B`, hidden size `H` and the hidden state's size `P`.
    pub batch: usize,
    pub hidden: usize,
    pub out: usize,
    /// The member's hidden units.
    pub units: Range<usize>,
    /// The tape's gate activations `[T, B, gate_cols]`, overwritten by their gradients.
    pub gates: Shared<'a, T>,
    pub gate_cols: usize,
    /// The tape's `tanh(c)`, `c_prev` (`[T, B, H]` each; empty without a cell state) and
    /// `h_prev` (`[T, B, P]`).
    pub tanh_cell: Shared<'a, T>,
    pub cell_prev: Shared<'a, T>,
    pub hidden_prev: Shared<'a, T>,
    /// The tape's recurrent product of the [`Cell::APART_BLOCKS`], `[T, B, H]`,
    /// overwritten by its gradient.
    pub recurrent_new: Shared<'a, T>,
    /// [`Cell::DIRECT_STATE_GRAD`]: the direct part of the previous step's `dh`, `[B, H]`.
    pub direct: Shared<'a, T>,
    /// The cell state's gradient `[B, H]`: of this step's on entry, of the previous
    /// step's on return.
    pub d_cell: Shared<'a, T>,
    /// With a projection: where the unprojected output of every step goes, `[T, B, H]`
    /// (for `dW_hr`).
    pub unprojected: Option<Shared<'a, T>>,
}

impl<T> BackwardStep<'_, T> {
    /// Where batch row `b`'s values of this step start in a `[T, B, H]` tape buffer.
    #[inline]
    pub fn tape_row(&self, b: usize) -> usize {
        (self.t * self.batch + b) * self.hidden
    }

    /// Where batch row `b`'s gates of this step start in the tape.
    #[inline]
    pub fn gate_row(&self, b: usize) -> usize {
        (self.t * self.batch + b) * self.gate_cols
    }
}
