//! One tile of a quantized product ([`Tile`]): what a kernel of `dot.rs` sums at a
//! time, and the helpers every kernel shares.

use crate::int8::panels::GROUP;

/// Rows of activations a tile of any kernel takes at most (`DotKernel::tile_rows`).
pub(crate) const TILE_ROWS: usize = 6;

/// Sums of the largest tile of any kernel: AVX-512 VNNI's 4 rows × 4 panels × 16 rows
/// (the 256-bit kernels' 6 rows × 2 panels × 8 rows are fewer).
pub(crate) const TILE_SUMS: usize = 4 * 4 * 16;
const _: () = assert!(TILE_ROWS * 2 * 8 <= TILE_SUMS);

/// One tile of a product: `rows` rows of activations against `panels` consecutive
/// panels of weights.
#[derive(Clone, Copy)]
pub(crate) struct Tile<'a> {
    /// The tile's activation rows, `depth` bytes each, one after the other.
    pub a: &'a [u8],
    /// Rows: 1 to the kernel's `DotKernel::tile_rows` (at most [`TILE_ROWS`]); the
    /// panels of a product's part (`DotKernel::part_outputs`) take any number, walked
    /// in tiles.
    pub rows: usize,
    /// The tile's panels, one after the other (`Panels::bytes` from its first).
    pub w: &'a [i8],
    /// Panels: 1 to the kernel's `DotKernel::tile_panels`; a product's part takes any
    /// number, walked in blocks of a tile's width.
    pub panels: usize,
    /// Inputs of each row.
    pub depth: usize,
    /// Bytes of one panel (`Panels::panel_len`).
    pub panel_len: usize,
}

/// What a product does with its `out`.
#[derive(Clone, Copy)]
pub(crate) enum Output<'a> {
    /// `out = a · Wᵀ + bias` (no bias: `+ 0`).
    Set(Option<&'a [f32]>),
    /// `out += a · Wᵀ`: the product added to what `out` holds.
    Add,
}

/// Where and how a tile's (or a part's) sums become outputs, for a kernel that
/// finishes them in its registers: for each row `r` and each of the `cols` valid
/// outputs `j`,
/// `out[r · stride + j] = a_scales[r] · w_scales[j] · (sum − zero_point[j]) + bias[j]`
/// (or `+=` without the bias), the same operations in the same order as the product's
/// epilogue (matmul.rs).
#[derive(Clone, Copy)]
pub(crate) struct TileOutputs<'a> {
    /// The first output (row 0, column 0).
    pub out: *mut f32,
    /// Values between the starts of two rows of `out`.
    pub stride: usize,
    /// Valid outputs of each row (the last panel of a matrix may be partial).
    pub cols: usize,
    /// The scale of each row.
    pub a_scales: &'a [f32],
    /// The scale and the zero point's share of each of the `cols` outputs.
    pub w_scales: &'a [f32],
    pub zero_point: &'a [i32],
    /// Set (with the `cols` outputs' bias) or add.
    pub output: Output<'a>,
}

impl TileOutputs<'_> {
    /// These outputs' columns `first..first + cols` (of every row): where a block or a
    /// part of a product's panels writes.
    ///
    /// # Safety
    /// `first + cols <= self.cols`, and `out` points at rows of that many valid outputs.
    ///
    /// # Panics
    /// When a slice holds fewer than `first + cols` values.
    pub(crate) unsafe fn columns(&self, first: usize, cols: usize) -> Self {
        Self {
            // SAFETY: column `first` of the first row (the caller's promise).
            out: unsafe { self.out.add(first) },
            cols,
            w_scales: &self.w_scales[first..][..cols],
            zero_point: &self.zero_point[first..][..cols],
            output: match self.output {
                Output::Set(Some(bias)) => Output::Set(Some(&bias[first..][..cols])),
                other => other,
            },
            ..*self
        }
    }
}

/// Each block of `part` (its panels `tile_panels` at a time, from the first; the last
/// block may hold fewer), all of the part's rows, with its columns of `outputs`, handed
/// to `finish`: the outer loop of a kernel's `part_outputs`, inlined into it.
///
/// # Safety
/// `outputs.out` points at the part's rows of `outputs.stride` values; every panel of
/// the part has valid outputs (`(part.panels − 1) · panel_rows < outputs.cols`), and
/// `outputs`' slices hold `outputs.cols` values.
#[inline(always)]
pub(crate) unsafe fn for_each_block(
    part: &Tile<'_>,
    outputs: &TileOutputs<'_>,
    (tile_panels, panel_rows): (usize, usize),
    mut finish: impl FnMut(&Tile<'_>, &TileOutputs<'_>),
) {
    let mut first_panel = 0;
    while first_panel < part.panels {
        let panels = tile_panels.min(part.panels - first_panel);
        let first_col = first_panel * panel_rows;
        let block = Tile {
            w: &part.w[first_panel * part.panel_len..],
            panels,
            ..*part
        };
        let cols = (outputs.cols - first_col).min(panels * panel_rows);
        // SAFETY: columns `first_col..first_col + cols` lie within `outputs.cols` (the
        // caller's promise that every panel has valid outputs).
        let block_outputs = unsafe { outputs.columns(first_col, cols) };
        finish(&block, &block_outputs);
        first_panel += panels;
    }
}

/// Each tile of `block` (rows in `tiles`: groups of `(tiles, rows of each)`, from its
/// first row on) with its rows of `outputs`, handed to `finish`: the inner loop of a
/// kernel's `part_outputs`, inlined into it.
///
/// # Safety
/// `tiles` covers at most `block.rows` rows, and `outputs.out` points at the block's
/// rows of `outputs.stride` values.
#[inline(always)]
pub(crate) unsafe fn for_each_tile(
    block: &Tile<'_>,
    outputs: &TileOutputs<'_>,
    tiles: [(usize, usize); 3],
    mut finish: impl FnMut(&Tile<'_>, &TileOutputs<'_>),
) {
    let mut first = 0;
    for (count, rows) in tiles {
        for _ in 0..count {
            let tile = Tile {
                a: &block.a[first * block.depth..],
                rows,
                ..*block
            };
            let tile_outputs = TileOutputs {
                // SAFETY: row `first` of the block's outputs (the caller's promise).
                out: unsafe { outputs.out.add(first * outputs.stride) },
                a_scales: &outputs.a_scales[first..],
                ..*outputs
            };
            finish(&tile, &tile_outputs);
            first += rows;
        }
    }
}

/// Four activations from `k` of a row of `depth` (`k < depth`), zeros past its end, as
/// the `i32` a kernel broadcasts.
#[inline(always)]
pub(crate) fn group_of(a_row: &[u8], k: usize) -> i32 {
    let mut bytes = [0u8; GROUP];
    let n = (a_row.len() - k).min(GROUP);
    bytes[..n].copy_from_slice(&a_row[k..k + n]);
    i32::from_le_bytes(bytes)
}
