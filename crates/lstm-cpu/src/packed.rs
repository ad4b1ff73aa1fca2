//! Weights packed once for many inference calls ([`PackedWeights`], [`forward_packed`](crate::forward_packed())).
//!
//! A call packs `W_ihᵀ`, `W_hhᵀ` and `W_hrᵀ` into GEMM panels before its first step
//! (each team member its own gate columns). For small shapes that is a large share of
//! the call (11 % at batch 1, H = 128; 6 % at 16×50×256), and a caller serving one
//! model for many calls (ONNX Runtime packs once per session) can pack once instead.
//! The caller keeps the packed copy and must make a new one when a parameter changes:
//! this crate has no way to know (burn-lstm keys its copies on the identity of
//! parameter tensors it holds, docs/fused-cpu.md).
//!
//! Panels are laid out so that any team split can use them: the gate columns go in
//! blocks of one panel of hidden units, each block holding its units' four gates
//! ([`gate_groups`]). A member owning the units `a..b` (team splits are aligned to
//! panels) multiplies by the consecutive panels of its blocks ([`unit_panels`]), the same
//! panels in the same order that it would pack for itself.

use core::ops::Range;

use crate::arch::RnnArch;
use crate::call::{CallError, arch_fits, len_check};
use crate::cell_weights::CellWeights;
use crate::gemm::{PackedB, panel};
use crate::real::Real;

/// Every (layer, direction)'s weights packed for the forward's GEMMs, and its summed
/// biases. Made by [`PackedWeights::new`] from the canonical flat parameters; used by
/// [`forward_packed`](crate::forward_packed). Holds no reference to the flat parameters
/// it was made from.
#[derive(Debug)]
pub struct PackedWeights<T: Real> {
    arch: RnnArch,
    cells: Vec<PackedCell<T>>,
}

/// One (layer, direction) of [`PackedWeights`].
#[derive(Debug)]
pub(crate) struct PackedCell<T: Real> {
    /// `W_ihᵀ`, gate columns in [`gate_groups`] order.
    pub ih: PackedB<T>,
    /// `W_hhᵀ`, gate columns in [`gate_groups`] order.
    pub hh: PackedB<T>,
    /// `W_hrᵀ` (projection), columns in order.
    pub hr: Option<PackedB<T>>,
    /// The bias added to the input projection (see [`CellWeights::input_bias`]).
    pub input_bias: Vec<T>,
    /// The bias added to the recurrent product: a GRU's `b_hh` (zeros without biases);
    /// empty for an LSTM (see [`CellWeights::recurrent_bias`]).
    pub recurrent_bias: Vec<T>,
}

impl<T: Real> PackedWeights<T> {
    /// [`PackedWeights::new`], instantiated in this crate only (`crate::compiled`).
    pub(crate) fn pack(arch: &RnnArch, weights: &[T]) -> Result<Self, CallError> {
        arch_fits(arch)?;
        len_check(
            "weights",
            "the canonical flat layout",
            arch.weight_count(),
            weights.len(),
        )?;
        let (h, p) = (arch.hidden_size, arch.output_size());
        let all_gates = gate_groups::<T>(h, arch.cell.gates(), 0..h);
        let cells = (0..arch.num_layers)
            .flat_map(|layer| (0..arch.dirs()).map(move |direction| (layer, direction)))
            .map(|(layer, direction)| {
                let w = CellWeights::new(weights, &arch.direction_layout(layer, direction));
                PackedCell {
                    ih: PackedB::pack_groups(w.input_size, &all_gates, w.w_ih, 1, w.input_size),
                    hh: PackedB::pack_groups(p, &all_gates, w.w_hh, 1, p),
                    hr: w.w_hr.map(|w_hr| PackedB::pack_all(h, p, w_hr, 1, h)),
                    input_bias: w.input_bias(arch.cell, arch.gate_rows()),
                    recurrent_bias: w.recurrent_bias(arch.cell, arch.gate_rows()),
                }
            })
            .collect();
        Ok(Self {
            arch: arch.clone(),
            cells,
        })
    }

    /// The architecture the weights belong to.
    pub fn arch(&self) -> &RnnArch {
        &self.arch
    }

    /// Bytes of packed data (about the parameters' own size).
    pub fn bytes(&self) -> usize {
        self.cells
            .iter()
            .map(|c| {
                c.ih.bytes()
                    + c.hh.bytes()
                    + c.hr.as_ref().map_or(0, PackedB::bytes)
                    + (c.input_bias.len() + c.recurrent_bias.len()) * core::mem::size_of::<T>()
            })
            .sum()
    }

    pub(crate) fn cell(&self, cell: usize) -> &PackedCell<T> {
        &self.cells[cell]
    }
}

/// The gate columns of the hidden units `units` (whose start is a multiple of the panel
/// width) of a cell of `gates` gate blocks, grouped for [`PackedB::pack_groups`]: per
/// block of one panel of hidden units, its gate columns (LSTM: `i`, `f`, `g`, `o`; GRU:
/// `r`, `z`, `n`), one group of one range (one panel) per gate, except a last block
/// narrower than a panel, whose ranges are one group: panels that gather them, fewer
/// than `gates` (one for 8 units of each of four gates in 32-wide panels), so no
/// multiply-add is spent on padding but the last panel's.
pub(crate) fn gate_groups<T>(
    hidden: usize,
    gates: usize,
    units: Range<usize>,
) -> Vec<Vec<Range<usize>>> {
    let nr = panel::<T>();
    let mut groups = Vec::new();
    let mut start = units.start;
    while start < units.end {
        let end = (start + nr).min(units.end);
        let ranges = (0..gates).map(|gate| gate * hidden + start..gate * hidden + end);
        if end - start == nr {
            groups.extend(ranges.map(|range| vec![range]));
        } else {
            groups.push(ranges.collect());
        }
        start = end;
    }
    groups
}

/// The panels of [`gate_groups`]`(hidden, gates, 0..hidden)` that hold the units `units`
/// (a range of a team split: its start a multiple of the panel width, its end too or the
/// hidden size).
pub(crate) fn unit_panels<T>(gates: usize, units: &Range<usize>) -> Range<usize> {
    let nr = panel::<T>();
    debug_assert_eq!(units.start % nr, 0, "team splits are aligned to panels");
    // `gates` panels per whole block, then the narrow last block's gathered panels.
    let panels_before = |unit: usize| gates * (unit / nr) + (gates * (unit % nr)).div_ceil(nr);
    panels_before(units.start)..panels_before(units.end)
}

/// The panels of a matrix packed column by column that hold the columns `cols` (a range
/// of a team split).
pub(crate) fn column_panels<T>(cols: &Range<usize>) -> Range<usize> {
    let nr = panel::<T>();
    debug_assert_eq!(cols.start % nr, 0, "team splits are aligned to panels");
    cols.start / nr..cols.end.div_ceil(nr)
}
