//! The architecture of a recurrent layer stack (LSTM or GRU) and where each (layer,
//! direction)'s parameters lie in the flat parameter buffer: PyTorch's and cuDNN's
//! canonical order, shared by every kernel of the workspace.

use core::ops::Range;

/// The recurrent cell of a layer stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CellKind {
    /// Long short-term memory: gates (i, f, g, o), a hidden and a cell state
    /// (PyTorch's `nn.LSTM`, `CUDNN_LSTM`).
    #[default]
    Lstm,
    /// Gated recurrent unit with the reset gate applied after the hidden product: gates
    /// (r, z, n), `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, a hidden state only
    /// (PyTorch's `nn.GRU`, `CUDNN_GRU`, Keras `reset_after=True`).
    Gru,
}

impl CellKind {
    /// Gate blocks stacked along the rows of `weight_ih` and `weight_hh`: 4 or 3.
    pub fn gates(self) -> usize {
        match self {
            Self::Lstm => 4,
            Self::Gru => 3,
        }
    }

    /// The lower-case name (`lstm`, `gru`), as in benchmark output and golden configs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Lstm => "lstm",
            Self::Gru => "gru",
        }
    }
}

impl core::fmt::Display for CellKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Architecture of a recurrent layer stack: everything a checkpoint fixes, `cell` among
/// it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RnnArch {
    /// The cell: LSTM or GRU. A GRU has no cell state and no projection.
    pub cell: CellKind,
    /// Features of each input step.
    pub input_size: usize,
    /// Size of the cell state `H` (of the hidden state for a GRU).
    pub hidden_size: usize,
    /// Size of the projected hidden state (PyTorch's `proj_size`); 0 means no projection.
    pub proj_size: usize,
    /// Number of stacked layers.
    pub num_layers: usize,
    /// Whether every layer also runs from the last step to the first.
    pub bidirectional: bool,
    /// Whether the gates have the two bias vectors `bias_ih` and `bias_hh`.
    pub bias: bool,
}

/// Where one (layer, direction)'s parameters lie inside the flat parameter buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectionLayout {
    /// `weight_ih`, `[G·H, in]` row-major (`G` = [`CellKind::gates`]).
    pub weight_ih: Range<usize>,
    /// `weight_hh`, `[G·H, H_out]` row-major.
    pub weight_hh: Range<usize>,
    /// `bias_ih`, `[G·H]`, when the architecture has biases.
    pub bias_ih: Option<Range<usize>>,
    /// `bias_hh`, `[G·H]`, when the architecture has biases.
    pub bias_hh: Option<Range<usize>>,
    /// `weight_hr`, `[H_out, H]`, with a projection.
    pub weight_hr: Option<Range<usize>>,
    /// Input features of this layer.
    pub input_size: usize,
}

impl RnnArch {
    /// Number of directions: 2 when bidirectional, else 1.
    pub fn dirs(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }

    /// Size of the hidden state `h` each direction emits (`proj_size` if set, else `hidden_size`).
    pub fn output_size(&self) -> usize {
        if self.proj_size > 0 {
            self.proj_size
        } else {
            self.hidden_size
        }
    }

    /// Input features of layer `layer`: the user's input for layer 0, the concatenated
    /// directions of the layer below otherwise.
    pub fn layer_input_size(&self, layer: usize) -> usize {
        if layer == 0 {
            self.input_size
        } else {
            self.dirs() * self.output_size()
        }
    }

    /// Number of (layer, direction) cells, `num_layers * dirs`.
    pub fn cells(&self) -> usize {
        self.num_layers * self.dirs()
    }

    /// Rows of `weight_ih` and `weight_hh`: the gate blocks times `hidden_size`.
    pub fn gate_rows(&self) -> usize {
        self.cell.gates() * self.hidden_size
    }

    /// Size of the cell state of each (layer, direction): `hidden_size` for an LSTM, 0
    /// for a GRU (which has none: its `c0` and `c_n` are empty).
    pub fn cell_state_size(&self) -> usize {
        match self.cell {
            CellKind::Lstm => self.hidden_size,
            CellKind::Gru => 0,
        }
    }

    /// Parameters of one (layer, direction) in the flat buffer, in the canonical order
    /// `weight_ih, weight_hh, bias_ih, bias_hh, weight_hr` and cells ordered
    /// `layer * dirs + direction` (PyTorch's order).
    pub fn direction_layout(&self, layer: usize, direction: usize) -> DirectionLayout {
        let mut offset = 0;
        for l in 0..self.num_layers {
            for d in 0..self.dirs() {
                let layout = self.layout_at(l, offset);
                if (l, d) == (layer, direction) {
                    return layout;
                }
                offset = layout.end();
            }
        }
        panic!("cell ({layer}, {direction}) is outside the architecture {self:?}")
    }

    fn layout_at(&self, layer: usize, start: usize) -> DirectionLayout {
        let gates = self.gate_rows();
        let input_size = self.layer_input_size(layer);
        let mut next = start;
        let mut take = |len: usize| {
            let range = next..next + len;
            next += len;
            range
        };
        let weight_ih = take(gates * input_size);
        let weight_hh = take(gates * self.output_size());
        let bias_ih = self.bias.then(|| take(gates));
        let bias_hh = self.bias.then(|| take(gates));
        let weight_hr = (self.proj_size > 0).then(|| take(self.proj_size * self.hidden_size));
        DirectionLayout {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
            weight_hr,
            input_size,
        }
    }

    /// Most parameters an architecture may have: their bytes, as f64, then fit in an
    /// address, so no size computed from the count overflows.
    pub const MAX_WEIGHT_COUNT: usize = isize::MAX as usize / 8;

    /// [`Self::weight_count`] computed without overflow: `None` where it is past
    /// [`Self::MAX_WEIGHT_COUNT`] (sizes of 0 give `Some`, see `call::arch_fits`).
    pub fn checked_weight_count(&self) -> Option<usize> {
        let gates = self.cell.gates().checked_mul(self.hidden_size)?;
        let output = self.output_size();
        let direction = |input: usize| -> Option<usize> {
            let biases = if self.bias { gates.checked_mul(2)? } else { 0 };
            gates
                .checked_mul(input)?
                .checked_add(gates.checked_mul(output)?)?
                .checked_add(biases)?
                .checked_add(self.proj_size.checked_mul(self.hidden_size)?)
        };
        let dirs = self.dirs();
        let first = direction(self.input_size)?.checked_mul(dirs)?;
        let upper_input = dirs.checked_mul(output)?;
        let rest = direction(upper_input)?
            .checked_mul(dirs)?
            .checked_mul(self.num_layers.saturating_sub(1))?;
        first
            .checked_add(rest)
            .filter(|&count| count <= Self::MAX_WEIGHT_COUNT)
    }

    /// Total number of scalars in the flat parameter buffer.
    pub fn weight_count(&self) -> usize {
        let last = self.direction_layout(self.num_layers - 1, self.dirs() - 1);
        last.end()
    }
}

impl DirectionLayout {
    /// One past the last scalar of this cell in the flat buffer.
    pub fn end(&self) -> usize {
        [
            Some(&self.weight_ih),
            Some(&self.weight_hh),
            self.bias_ih.as_ref(),
            self.bias_hh.as_ref(),
            self.weight_hr.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|r| r.end)
        .max()
        .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checked_count_is_the_count_and_none_past_the_bound() {
        for (cell, proj_size, bidirectional, bias) in [
            (CellKind::Lstm, 0, false, true),
            (CellKind::Lstm, 3, true, false),
            (CellKind::Gru, 0, true, true),
        ] {
            for num_layers in [1, 3] {
                let arch = RnnArch {
                    cell,
                    input_size: 7,
                    hidden_size: 5,
                    proj_size,
                    num_layers,
                    bidirectional,
                    bias,
                };
                assert_eq!(
                    arch.checked_weight_count(),
                    Some(arch.weight_count()),
                    "{arch:?}"
                );
            }
        }
        let huge = RnnArch {
            cell: CellKind::Lstm,
            input_size: 8,
            hidden_size: 1 << 62,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
        };
        assert_eq!(huge.checked_weight_count(), None);
        let deep = RnnArch {
            hidden_size: 1 << 20,
            num_layers: 1 << 40,
            ..huge
        };
        assert_eq!(deep.checked_weight_count(), None);
    }

    #[test]
    fn layout_is_contiguous_in_pytorch_order() {
        let arch = RnnArch {
            cell: CellKind::Lstm,
            input_size: 3,
            hidden_size: 5,
            proj_size: 2,
            num_layers: 2,
            bidirectional: true,
            bias: true,
        };
        let l0f = arch.direction_layout(0, 0);
        assert_eq!(l0f.weight_ih, 0..60);
        assert_eq!(l0f.weight_hh, 60..100);
        assert_eq!(l0f.bias_ih, Some(100..120));
        assert_eq!(l0f.bias_hh, Some(120..140));
        assert_eq!(l0f.weight_hr, Some(140..150));
        let l0r = arch.direction_layout(0, 1);
        assert_eq!(l0r.weight_ih.start, 150);
        let l1f = arch.direction_layout(1, 0);
        assert_eq!(l1f.input_size, 4);
        assert_eq!(l1f.weight_ih, 300..380);
        assert_eq!(arch.weight_count(), 300 + 2 * (80 + 40 + 40 + 10));
    }

    #[test]
    fn gru_layout_has_three_gate_blocks_and_no_cell_state() {
        let arch = RnnArch {
            cell: CellKind::Gru,
            input_size: 3,
            hidden_size: 5,
            proj_size: 0,
            num_layers: 2,
            bidirectional: false,
            bias: true,
        };
        let l0 = arch.direction_layout(0, 0);
        assert_eq!(l0.weight_ih, 0..45);
        assert_eq!(l0.weight_hh, 45..120);
        assert_eq!(l0.bias_ih, Some(120..135));
        assert_eq!(l0.bias_hh, Some(135..150));
        assert_eq!(l0.weight_hr, None);
        assert_eq!(arch.direction_layout(1, 0).weight_ih, 150..225);
        // Layer 1 reads the 5 features of layer 0: 15×5 + 15×5 + 2×15.
        assert_eq!(arch.weight_count(), 150 + 180);
        assert_eq!(arch.cell_state_size(), 0);
    }
}
