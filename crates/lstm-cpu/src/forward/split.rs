//! How a team divides the recurrence of one (layer, direction): the call's sizes
//! ([`Dims`]), the split of a step by hidden units or by batch rows ([`Split`]) and each
//! member's part of the forward ([`Share`]). The backward splits the same way.

use core::ops::Range;

use crate::arch::CellKind;
use crate::call::RnnCall;
use crate::gemm::panel;
use crate::team::split_aligned;

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

    pub(crate) fn team_size(&self, threads: usize) -> usize {
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
pub(crate) fn row_split_max_weight_bytes() -> usize {
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
    pub(crate) fn choose<T>(dims: &Dims, size: usize) -> Self {
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
