//! One tile of a quantized product ([`Tile`]): what a kernel of `dot.rs` sums at a
//! time, and the helpers every kernel shares.

use crate::int8::panels::GROUP;

/// Rows of activations a tile takes at most.
pub(crate) const TILE_ROWS: usize = 4;

/// Sums of the largest tile of any kernel: [`TILE_ROWS`] × 4 panels × 16 rows.
pub(crate) const TILE_SUMS: usize = TILE_ROWS * 4 * 16;

/// One tile of a product: `rows` rows of activations against `panels` consecutive
/// panels of weights.
#[derive(Clone, Copy)]
pub(crate) struct Tile<'a> {
    /// The tile's activation rows, `depth` bytes each, one after the other.
    pub a: &'a [u8],
    /// Rows: 1 to [`TILE_ROWS`].
    pub rows: usize,
    /// The tile's panels, one after the other (`Panels::bytes` from its first).
    pub w: &'a [i8],
    /// Panels: 1 to the kernel's `DotKernel::tile_panels`.
    pub panels: usize,
    /// Inputs of each row.
    pub depth: usize,
    /// Bytes of one panel (`Panels::panel_len`).
    pub panel_len: usize,
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
