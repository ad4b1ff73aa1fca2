//! `B` packed into panels ([`PackedB`], [`Packed`]): the layout the micro-kernels read,
//! gathered panels for column ranges narrower than a panel, and packing on several
//! threads.

use core::ops::Range;

use crate::buffers::Buffer;
use crate::real::Real;
use crate::team::{Shared, run_team};

use super::params::{TRANSPOSE_DEPTH, TRANSPOSE_PREFETCH_BLOCKS, panel};

#[derive(Clone, Copy, Debug)]
pub(super) struct Panel {
    /// Column of `B` (and of `C`) where the panel starts.
    pub(super) col: usize,
    /// Valid columns (the rest of the panel is zero padding).
    pub(super) width: usize,
    /// Its [`Piece`]s in [`PackedB::pieces`], when its columns are not consecutive
    /// columns of `B` (`start == end`: they are, `col..col + width`).
    pub(super) pieces: (usize, usize),
}

/// Columns of a gathered panel that are consecutive in `B`: the panel's columns
/// `tile..tile + width` are `B`'s columns `col..col + width`, with `col` counted from
/// the panel's [`Panel::col`].
///
/// Why gathered panels: the gates' columns go in blocks of one panel of hidden units
/// with their four gates (`packed.rs`), and a hidden size that is no multiple of the
/// panel's width leaves a last block of four narrow ranges (8 units of each gate at
/// H = 200 with 32-wide panels): as four panels, three quarters of their multiply-adds
/// were on padding (12 % of all at H = 200). Gathered into one panel, none are.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub(super) tile: usize,
    pub(super) col: usize,
    pub(super) width: usize,
}

/// Some columns of a `K × N` matrix `B`, packed in panels: for each panel, `K` rows of
/// [`panel`] consecutive values.
#[derive(Debug)]
pub(crate) struct PackedB<T: Real> {
    pub(super) depth: usize,
    pub(super) data: Buffer<T>,
    pub(super) panels: Vec<Panel>,
    /// The pieces of gathered panels.
    pub(super) pieces: Vec<Piece>,
}

/// A run of consecutive panels of a [`PackedB`]: what [`gemm`](super::driver::gemm)
/// multiplies by. A thread of a team that owns some of the panels of a packed matrix (see
/// `packed::gate_groups`) multiplies by its own run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packed<'a, T> {
    pub(super) depth: usize,
    /// The first panel's data, then the others'.
    pub(super) data: &'a [T],
    pub(super) panels: &'a [Panel],
    /// Every piece of the packed matrix (panels index into it).
    pub(super) pieces: &'a [Piece],
}

impl<'a, T: Real> From<&'a PackedB<T>> for Packed<'a, T> {
    fn from(b: &'a PackedB<T>) -> Self {
        Self {
            depth: b.depth,
            data: &b.data,
            panels: &b.panels,
            pieces: &b.pieces,
        }
    }
}

impl<T> Packed<'_, T> {
    /// Bytes of packed data.
    pub(super) fn bytes(&self) -> usize {
        core::mem::size_of_val(self.data)
    }

    /// Panels.
    pub(super) fn panel_count(&self) -> usize {
        self.panels.len()
    }
}

impl<T: Real> PackedB<T> {
    /// The panels `range` (in packing order).
    pub fn panels(&self, range: Range<usize>) -> Packed<'_, T> {
        let size = self.depth * panel::<T>();
        Packed {
            depth: self.depth,
            data: &self.data[range.start * size..range.end * size],
            panels: &self.panels[range],
            pieces: &self.pieces,
        }
    }

    /// Bytes of packed data.
    pub fn bytes(&self) -> usize {
        self.data.len() * core::mem::size_of::<T>()
    }

    /// Packs every column `0..cols` of `B`, whose entry `(k, n)` is `src[k * rs + n * cs]`.
    pub fn pack_all(depth: usize, cols: usize, src: &[T], rs: usize, cs: usize) -> Self {
        Self::pack(depth, core::slice::from_ref(&(0..cols)), src, rs, cs)
    }

    /// Packs the columns `cols` of `B`, whose entry `(k, n)` is `src[k * rs + n * cs]`:
    /// each range in panels of its own.
    pub fn pack(depth: usize, cols: &[Range<usize>], src: &[T], rs: usize, cs: usize) -> Self {
        let groups: Vec<&[Range<usize>]> = cols.iter().map(core::slice::from_ref).collect();
        Self::pack_groups(depth, &groups, src, rs, cs)
    }

    /// Packs the columns of `groups` of `B` (entry `(k, n)` at `src[k * rs + n * cs]`):
    /// each group's ranges one after the other, in panels of their own, so that a panel
    /// may gather columns of several ranges of its group ([`Piece`]). Ranges of a group
    /// must come in increasing column order.
    pub fn pack_groups<G: AsRef<[Range<usize>]>>(
        depth: usize,
        groups: &[G],
        src: &[T],
        rs: usize,
        cs: usize,
    ) -> Self {
        Self::pack_groups_on(1, depth, groups, src, rs, cs)
    }

    /// [`PackedB::pack_all`] with the panels shared out over up to `threads` threads,
    /// for a large `B` packed just before a [`par_gemm`](super::threading::par_gemm) (the
    /// backward's whole-sequence products): packed by the calling thread alone, the other
    /// threads waited.
    pub fn pack_all_on(
        threads: usize,
        depth: usize,
        cols: usize,
        src: &[T],
        rs: usize,
        cs: usize,
    ) -> Self {
        Self::pack_groups_on(
            threads,
            depth,
            &[core::slice::from_ref(&(0..cols))],
            src,
            rs,
            cs,
        )
    }

    /// [`PackedB::pack_groups`] on up to `threads` threads, each packing some panels.
    pub fn pack_groups_on<G: AsRef<[Range<usize>]>>(
        threads: usize,
        depth: usize,
        groups: &[G],
        src: &[T],
        rs: usize,
        cs: usize,
    ) -> Self {
        let nr = panel::<T>();
        let (mut panels, mut pieces) = (Vec::new(), Vec::new());
        for group in groups {
            // The group's columns, cut into panels of `nr`.
            let mut open: Vec<(usize, usize, usize)> = Vec::new(); // (tile, column, width)
            let mut filled = 0;
            let mut close = |open: &mut Vec<(usize, usize, usize)>, filled: usize| {
                let col = open[0].1;
                let (start, end) = if open.len() == 1 {
                    (pieces.len(), pieces.len())
                } else {
                    let start = pieces.len();
                    pieces.extend(open.iter().map(|&(tile, column, width)| Piece {
                        tile,
                        col: column - col,
                        width,
                    }));
                    (start, pieces.len())
                };
                panels.push(Panel {
                    col,
                    width: filled,
                    pieces: (start, end),
                });
                open.clear();
            };
            for range in group.as_ref() {
                let mut col = range.start;
                while col < range.end {
                    let width = (nr - filled).min(range.end - col);
                    open.push((filled, col, width));
                    filled += width;
                    col += width;
                    if filled == nr {
                        close(&mut open, filled);
                        filled = 0;
                    }
                }
            }
            if !open.is_empty() {
                close(&mut open, filled);
            }
        }
        // Every value is written below: the panels' columns, and zeros in the padding of
        // a partial panel (multiplied like the rest, its products never stored).
        let mut data = Buffer::for_overwrite(panels.len() * depth * nr);
        let panel_len = depth * nr;
        // Below ~256 KiB a second thread costs more than it gives.
        let threads = threads
            .min(data.len() * core::mem::size_of::<T>() / (256 << 10))
            .max(1);
        let parts = crate::team::split_aligned(panels.len(), threads, 1);
        // SAFETY: each member writes only its own panels; nothing reads `data` until the
        // team is done.
        let data_s = unsafe { Shared::new(&mut data[..]) };
        run_team(parts.len(), |member| {
            for p in parts[member.id].clone() {
                // SAFETY: each member writes only its own panels.
                let dst = unsafe { data_s.slice(p * panel_len, panel_len) };
                fill_panel(&panels[p], &pieces, dst, src, rs, cs);
            }
        });
        Self {
            depth,
            data,
            panels,
            pieces,
        }
    }
}

/// Packs the panel `layout` of `B` (entry `(k, n)` at `src[k * rs + n * cs]`) into
/// `dst`, its `depth` rows of [`panel`] values.
pub(super) fn fill_panel<T: Real>(
    layout: &Panel,
    pieces: &[Piece],
    dst: &mut [T],
    src: &[T],
    rs: usize,
    cs: usize,
) {
    let nr = panel::<T>();
    if layout.width < nr {
        for row in dst.chunks_exact_mut(nr) {
            row[layout.width..].fill(T::ZERO);
        }
    }
    for (tile, col, width) in segments(layout, pieces) {
        if cs == 1 {
            // Rows of B are contiguous: one copy per row.
            for (k, row) in dst.chunks_exact_mut(nr).enumerate() {
                let start = k * rs + col;
                row[tile..tile + width].copy_from_slice(&src[start..start + width]);
            }
        } else {
            // A transpose (B's columns are the source's rows, e.g. W_ihᵀ): a block
            // of TRANSPOSE_DEPTH rows of the panel at a time, so that each source
            // row is read one cache line at a time while the block's destination
            // rows (a few KiB) stay in L1; column by column over the whole depth
            // wrote one value per destination line and ran at ~2 cycles a value.
            //
            // The panel's source rows are read side by side, a line of each per
            // block: more streams than the hardware prefetcher follows, so each
            // line is prefetched `TRANSPOSE_PREFETCH_BLOCKS` blocks ahead. A
            // training call packs weights the optimiser has just written, out of
            // L3 or memory.
            let values_per_line = (64 / core::mem::size_of::<T>()).max(1);
            // Only where a block's values of a row are consecutive (`rs == 1`).
            let block_lines = if rs == 1 {
                TRANSPOSE_DEPTH.div_ceil(values_per_line)
            } else {
                0
            };
            for (block, rows) in dst.chunks_mut(TRANSPOSE_DEPTH * nr).enumerate() {
                let k0 = block * TRANSPOSE_DEPTH;
                for n in 0..width {
                    let base = (col + n) * cs + k0 * rs;
                    let ahead = src
                        .as_ptr()
                        .wrapping_add(base + TRANSPOSE_PREFETCH_BLOCKS * TRANSPOSE_DEPTH * rs);
                    // A block's values of a row are one line of f32, two of f64.
                    for line in 0..block_lines {
                        prefetch_read(ahead.wrapping_add(line * values_per_line));
                    }
                    for (kk, row) in rows.chunks_exact_mut(nr).enumerate() {
                        row[tile + n] = src[base + kk * rs];
                    }
                }
            }
        }
    }
}

/// Asks for the cache line at `at` in L1 ahead of its use (nothing off x86-64). A
/// prefetch never faults, so `at` may lie past the data.
#[inline(always)]
pub(super) fn prefetch_read<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing architecturally and never faults.
    unsafe {
        use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(at as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// A panel's runs of consecutive columns of `B`: (first column in the panel, column of
/// `B`, width).
pub(super) fn segments<'a>(
    panel: &'a Panel,
    pieces: &'a [Piece],
) -> impl Iterator<Item = (usize, usize, usize)> + 'a {
    let gathered = &pieces[panel.pieces.0..panel.pieces.1];
    let whole = gathered.is_empty().then_some((0, panel.col, panel.width));
    whole.into_iter().chain(
        gathered
            .iter()
            .map(|piece| (piece.tile, panel.col + piece.col, piece.width)),
    )
}

/// One past the last column of `B` that `b` holds.
pub(super) fn packed_end<T: Real>(b: &Packed<'_, T>) -> usize {
    b.panels
        .iter()
        .flat_map(|p| segments(p, b.pieces))
        .map(|(_, col, width)| col + width)
        .max()
        .unwrap_or(0)
}
