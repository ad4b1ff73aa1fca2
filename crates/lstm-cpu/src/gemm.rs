//! The GEMM of the kernel: `C += A · B` with `B` packed once into panels of two vector
//! registers' width ([`panel`]) and a register-blocked micro-kernel for up to [`kernel_rows`]
//! rows of `A`.
//!
//! Why our own: the recurrent step multiplies a short `A` (the batch, often 1 to 64
//! rows) by the same `W_hhᵀ` at every step. General GEMM crates re-pack `B` on every
//! call and are tuned for large square products; here `B` is packed once per sequence
//! (see `docs/fused-cpu.md`), `A` is read in place through strides (so transposed
//! operands of the backward need no copy), and a one-row kernel with four independent
//! accumulator banks serves batch 1 as a matrix-vector product.
//!
//! The micro-kernel is plain Rust over fixed-size arrays; it is compiled three times,
//! for AVX-512, for AVX2+FMA and for the baseline target, and the best one the CPU runs
//! is chosen at run time, so the crate runs everywhere.

use core::ops::Range;

use crate::buffers::Buffer;
use crate::real::{Real, fmadd};
use crate::simd::{self, Isa};
use crate::team::{Shared, SharedPtr, run_team};

/// Columns of a packed panel: two vector registers of `T`.
pub(crate) fn panel<T>() -> usize {
    2 * simd::isa().vector_bytes() / core::mem::size_of::<T>()
}

/// Rows of `A` per micro-kernel call: the accumulators (`rows × 2` registers) fill
/// most of the register file (16 registers on AVX2, 32 on AVX-512).
pub(crate) fn kernel_rows() -> usize {
    match simd::isa() {
        Isa::Avx512 => 8,
        Isa::Avx2 | Isa::Baseline => 6,
    }
}

/// Rows of `A` up to which a micro-kernel call covers two panels at once (0: never): a
/// tile of `r` rows keeps `2r` accumulators on one panel, and two FMA pipes of four
/// cycles' latency need eight in flight, so tiles of 2-4 rows (batches of 2-4 rows, or 8
/// split by rows over two threads) waited on their own results. Over two panels they
/// keep `4r`. AVX2 has 16 registers: four accumulators a row and four of `B` leave room
/// for two rows only (3 and 4 rows spilled: 85 → 57 and 110 → 76 GFLOP/s). Measured on
/// a Zen 5 core, `[r × 200] · [200 × 800]`, f32, one thread, GFLOP/s single → paired:
/// AVX2 2 rows 61 → 104; AVX-512 2 rows 120 → 124 (there the panels' reads from L2
/// limit it), 3 rows 166 → 190, 4 rows 211 → 216.
fn pair_rows(isa: Isa) -> usize {
    match isa {
        // The paired kernel is written on x86-64's vector registers only (a 32-bit x86
        // CPU that reports AVX2 runs the plain kernel).
        _ if !cfg!(target_arch = "x86_64") => 0,
        Isa::Avx512 => 4,
        Isa::Avx2 => 2,
        Isa::Baseline => 0,
    }
}
/// Rows of `A` of the calls that cover three panels as two tiles of a panel and a half
/// each (0: none; see [`micro_triple`]). A 3-row tile on one panel keeps 6 accumulators,
/// too few for two FMA pipes of four cycles' latency, and AVX2's 16 registers hold no
/// paired 3-row tile (see [`pair_rows`]); over a panel and a half it keeps 9, with three
/// vectors of `B` and the broadcast 13 registers. Zen 5, AVX2, one thread, `[3 × 256] ·
/// [256 × n]`: 92-94 → 106-108 GFLOP/s at n = 384, 90-94 → 98-103 at n = 1024. Not for
/// 4 rows: a 4 × 24 tile (12 accumulators, the third vector of `B` read by each
/// multiply-add to stay within 16 registers) ran no faster than 4 × 16 (114-119 both):
/// what holds a 4-row call is not the latency (see `docs/fused-cpu.md`). Nor for the
/// last 3 rows of a block of full calls, whose own pass over `B` cost more than it
/// gained (9 rows 124 → 117, 15 rows 126 → 121).
fn triple_rows(isa: Isa) -> usize {
    match isa {
        _ if !cfg!(target_arch = "x86_64") => 0,
        Isa::Avx2 => 3,
        Isa::Avx512 | Isa::Baseline => 0,
    }
}
/// Depth of one pass over `A` and a panel (the panel slice stays in L1).
const DEPTH_BLOCK: usize = 256;
/// Rows of a panel packed together when packing transposes (see [`PackedB::pack`]).
const TRANSPOSE_DEPTH: usize = 16;
/// Blocks of [`TRANSPOSE_DEPTH`] rows ahead that a transposing pack prefetches its
/// source (see [`PackedB::pack_groups`]).
const TRANSPOSE_PREFETCH_BLOCKS: usize = 2;
/// Packed `B` larger than this is prefetched block by block (see [`Micro::prefetch`]);
/// smaller stays in L2 (1 MiB per core on the machine measured, 1-2 MiB on most
/// current x86 cores).
const PREFETCH_ABOVE_BYTES: usize = 1 << 20;
/// Rows of a panel ahead of the one it multiplies that the micro-kernel of two rows or
/// more prefetches into L1, where a panel row is two cache lines (AVX-512). A step's
/// `W_hhᵀ` of up to 1 MiB stays in L2 but not in L1, and at two new lines every 8 cycles
/// (an 8-row tile; every 4 for the 4-row tiles of batch 8 split by rows) the hardware's
/// L1 prefetcher fell behind. Measured on 2 AVX-512 cores, kernel alone, interleaved:
/// GEMM 8×1024×256 (one thread) 183 → 195 GFLOP/s; inference 8×100×256 3.41 → 2.98 ms,
/// 8×50×200 with 4 layers 4.62 → 4.12 ms; training 16×50×256 and 8×100×256 −4-5 %;
/// 16×50×96-256, 64×100×512 and 20×35×1500 unchanged within the noise. On AVX2 (one line
/// per row) it cost 1-2 %, so it is off there. Only the first tile of a row block on a
/// panel prefetches: the later ones find the panel's rows in L1, and prefetching there
/// too took a 2048³ product from 284-295 to 270-273 GFLOP/s (2 threads).
const L1_PREFETCH_ROWS: usize = 8;
/// Rows of `A` per pass (`A`'s block stays in L2 while the panels stream past); a
/// multiple of every [`kernel_rows`].
const ROW_BLOCK: usize = 96;

#[derive(Clone, Copy, Debug)]
struct Panel {
    /// Column of `B` (and of `C`) where the panel starts.
    col: usize,
    /// Valid columns (the rest of the panel is zero padding).
    width: usize,
    /// Its [`Piece`]s in [`PackedB::pieces`], when its columns are not consecutive
    /// columns of `B` (`start == end`: they are, `col..col + width`).
    pieces: (usize, usize),
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
struct Piece {
    tile: usize,
    col: usize,
    width: usize,
}

/// Some columns of a `K × N` matrix `B`, packed in panels: for each panel, `K` rows of
/// [`panel`] consecutive values.
#[derive(Debug)]
pub(crate) struct PackedB<T: Real> {
    depth: usize,
    data: Buffer<T>,
    panels: Vec<Panel>,
    /// The pieces of gathered panels.
    pieces: Vec<Piece>,
}

/// A run of consecutive panels of a [`PackedB`]: what [`gemm`] multiplies by. A thread
/// of a team that owns some of the panels of a packed matrix (see `packed::gate_groups`)
/// multiplies by its own run.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packed<'a, T> {
    depth: usize,
    /// The first panel's data, then the others'.
    data: &'a [T],
    panels: &'a [Panel],
    /// Every piece of the packed matrix (panels index into it).
    pieces: &'a [Piece],
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
    /// for a large `B` packed just before a [`par_gemm`] (the backward's whole-sequence
    /// products): packed by the calling thread alone, the other threads waited.
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
fn fill_panel<T: Real>(
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
            // L3 or memory. Measured on a Zen 4 core with the caches flushed
            // first: `W_hhᵀ` of H = 384 (1536 × 384) 2.0 → 0.46 ms, of H = 1500
            // (36 MB) 17 → 5.8 ms (a plain copy of it takes 7.3); 1, 4 and 8
            // blocks ahead were slower than 2. In cache: 0.35 → 0.31 ms.
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
fn prefetch_read<T>(at: *const T) {
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
fn segments<'a>(
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

/// Arguments of one micro-kernel call.
///
/// The micro-kernels' contract (every `unsafe fn` here that takes one says "a valid
/// `Micro`"): `a` covers `A(i, k) = a[i * rs + k * cs]` for the call's rows and
/// `k < depth`; `b` points at `depth` packed rows of `nr` values (the panel's width
/// rounded up to a whole panel); `c` covers `C(i, n) = c[i * ldc + n]` for the call's
/// rows and `n < width` (or, with pieces, each piece's columns), written by nobody else
/// during the call; `bias`, when not null, holds `width` values (or the pieces');
/// `pieces` points at `pieces_len` pieces; `prefetch` is null or inside `B`'s data (it is
/// only prefetched, which never faults).
#[derive(Clone, Copy)]
struct Micro<T> {
    depth: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: *const T,
    c: *mut T,
    ldc: usize,
    width: usize,
    /// Where the next `B` block starts (null: none): the micro-kernel of two rows or more
    /// prefetches it, one row of it per row of its own, so the next block streams in
    /// while this one computes. Rows of `B` are the step's whole weight matrix for the
    /// recurrent product, too large for L2 at wide layers (36 MB at H = 1500), and the
    /// hardware prefetcher restarts cold at every block.
    prefetch: *const T,
    /// Non-null in the first depth block of [`gemm_bias`]: the bias of the panel's
    /// columns, stored with the tile (`C = bias + tile`) instead of adding the tile to C.
    bias: *const T,
    /// A gathered panel's pieces (`pieces_len == 0`: its columns are consecutive).
    pieces: *const Piece,
    pieces_len: usize,
    /// The first tile of its row block on this panel: the one that brings the panel's
    /// rows into L1 (see [`L1_PREFETCH_ROWS`]); the tiles after it find them there.
    first_tile: bool,
}

/// `C[rows × cols(B)] += A · B`, where `A(i, k) = a[i * rs + k * cs]` and column `n` of
/// `B` lands in column `n` of `C` (`C(i, n) = c[i * ldc + n]`).
///
/// # Safety
/// `a` covers every `A(i, k)` for `i < rows`, `k < depth`; `c` covers every `C(i, n)`
/// for the packed columns; nobody else writes those entries of `C` meanwhile.
pub(crate) unsafe fn gemm<'b, T: Real>(
    rows: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: impl Into<Packed<'b, T>>,
    c: *mut T,
    ldc: usize,
) {
    // SAFETY: this function's contract is `gemm_into`'s, without a bias.
    unsafe { gemm_into(rows, a, rs, cs, b.into(), None, c, ldc) }
}

/// `C[rows × cols(B)] = bias + A · B`, with `bias[n]` added to column `n`: the input
/// projection of the gates, whose rows would otherwise each get a copy of the bias
/// first (a copy the size of the whole gate buffer). The same sums in the same order as
/// copying the bias into C and calling [`gemm`].
///
/// # Safety
/// As [`gemm`]; `bias` has a value for every packed column.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_bias<'b, T: Real>(
    rows: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: impl Into<Packed<'b, T>>,
    bias: &[T],
    c: *mut T,
    ldc: usize,
) {
    // SAFETY: this function's contract is `gemm_into`'s, with a bias of every column.
    unsafe { gemm_into(rows, a, rs, cs, b.into(), Some(bias), c, ldc) }
}

/// Rows of `A` and `C` in equal groups, each group's rows evenly spaced: row `i` is row
/// `i % rows` of group `i / rows`, at `i / rows * a_group + i % rows * rs` in `A` and
/// `i / rows * c_group + i % rows * ldc` in `C`. The input projection of a batch-first
/// input reads it in place this way: a group is one batch row's steps of a chunk
/// (consecutive in the input, `batch` rows apart in the gates), where sequence-major
/// rows would need a copy of the whole input first (`forward.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowGroups {
    /// Rows in each group (at least 1).
    pub rows: usize,
    /// Distance in `A` from a group's first row to the next group's.
    pub a_group: usize,
    /// Distance in `C` from a group's first row to the next group's.
    pub c_group: usize,
}

impl RowGroups {
    /// Every row in one group: `A`'s rows `rs` apart, `C`'s `ldc` apart.
    const ONE: Self = Self {
        rows: usize::MAX,
        a_group: 0,
        c_group: 0,
    };

    /// Offset of row `i` from row 0, where rows within a group are `stride` apart and
    /// groups `group` apart.
    fn offset(&self, i: usize, stride: usize, group: usize) -> usize {
        (i / self.rows) * group + (i % self.rows) * stride
    }
}

/// [`gemm_bias`] over rows `rows` of a matrix whose rows lie in [`RowGroups`]: `a` and
/// `c` point at row 0 (which need not be in `rows`), `rs` and `ldc` are the distances
/// between rows within a group. A micro-kernel's tile never spans two groups (so rows
/// may be tiled, and rounded, otherwise than by [`gemm_bias`] on the rows gathered).
///
/// # Safety
/// As [`gemm_bias`], for every row of `rows` at its place in the groups.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gemm_bias_grouped<'b, T: Real>(
    rows: Range<usize>,
    groups: RowGroups,
    a: *const T,
    rs: usize,
    cs: usize,
    b: impl Into<Packed<'b, T>>,
    bias: &[T],
    c: *mut T,
    ldc: usize,
) {
    assert!(groups.rows > 0, "a row group holds at least one row");
    // SAFETY: this function's contract is `gemm_rows`'s, with a bias of every column.
    unsafe { gemm_rows(rows, groups, a, rs, cs, b.into(), Some(bias), c, ldc) }
}

/// [`gemm`], or [`gemm_bias`] with `bias`.
///
/// # Safety
/// As [`gemm`] (and [`gemm_bias`] for `bias`).
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_into<T: Real>(
    rows: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: Packed<'_, T>,
    bias: Option<&[T]>,
    c: *mut T,
    ldc: usize,
) {
    // SAFETY: one group holding every row is the plain layout `gemm_into`'s caller
    // promised for rows 0..rows.
    unsafe { gemm_rows(0..rows, RowGroups::ONE, a, rs, cs, b, bias, c, ldc) }
}

/// [`gemm_into`] over rows `rows` in `groups` ([`gemm_bias_grouped`]).
///
/// # Safety
/// As [`gemm_bias_grouped`] (with or without a bias).
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_rows<T: Real>(
    rows: Range<usize>,
    groups: RowGroups,
    a: *const T,
    rs: usize,
    cs: usize,
    b: Packed<'_, T>,
    bias: Option<&[T]>,
    c: *mut T,
    ldc: usize,
) {
    let (first, rows) = (rows.start, rows.len());
    let grouped = groups != RowGroups::ONE;
    // Row `i` of this product (row `first + i` of the groups) in A and C.
    let a_row = |i: usize| groups.offset(first + i, rs, groups.a_group);
    let c_row = |i: usize| groups.offset(first + i, ldc, groups.c_group);
    // Rows from `i` to the end of its group.
    let group_left = |i: usize| groups.rows - (first + i) % groups.rows;
    if let Some(bias) = bias {
        let end = packed_end(&b);
        assert!(bias.len() >= end, "a bias value for every packed column");
        if b.depth == 0 {
            // No depth block to store the bias with: C is the bias alone.
            for i in 0..rows {
                // SAFETY: the caller's C covers every packed column of its rows.
                let c_row = unsafe { core::slice::from_raw_parts_mut(c.add(c_row(i)), end) };
                for panel in b.panels {
                    for (_, col, width) in segments(panel, b.pieces) {
                        c_row[col..col + width].copy_from_slice(&bias[col..col + width]);
                    }
                }
            }
            return;
        }
    }
    let nr = panel::<T>();
    let (isa, max_rows) = (simd::isa(), kernel_rows());
    // Panels that fit in L2 stay there between steps: prefetching them only spends load
    // slots (measured: 16×50×256 2-3 % slower with it; 20×35×1500, 36 MB of `W_hh` per
    // layer, 25 % slower without).
    let prefetch = core::mem::size_of_val(b.data) > PREFETCH_ABOVE_BYTES;
    // Paired panels only where `B` stays in L2: beyond it a few rows' product waits on
    // memory, not on the multiply-adds, and the block prefetch reads one panel ahead.
    let kernel_pair_rows = pair_rows(isa);
    let pair_rows = if prefetch { 0 } else { kernel_pair_rows };
    let triple_rows = if prefetch { 0 } else { triple_rows(isa) };
    // On AVX2 a block of full calls and two rows ends early and leaves the two rows a
    // block of their own, which runs over pairs of panels: a paired 2-row call runs at
    // 104 GFLOP/s, a 4-row call at 115-118 and a 6-row one at 128-132 (Zen 5, one
    // thread), so 8 rows run as 6 + 2 paired rather than 4 + 4. Only where pairs run at
    // all (`B` in L2: the pairs read it again from there), and not on AVX-512, which
    // keeps its even calls (not measured otherwise). An earlier version paired the two
    // rows inside the panel loop and, by turning that loop around, cost AVX-512's batch
    // 8 6 %; this one leaves the loop as it was.
    let pair_tail = pair_rows >= 2 && isa == Isa::Avx2;
    // A read down its columns (`rs == 1`, the backward's `dzᵀ`): a micro-kernel's rows
    // are contiguous at each k, but its k's are `cs` apart (4 KiB for `4H = 1024`, the
    // same L1 set every time), so each block of A is copied once into `a_block`, k's
    // `ROW_BLOCK` values apart, and every panel reads the copy from L1.
    let pack_a = rs == 1 && cs > 1 && b.panels.len() > 1;
    assert!(!(pack_a && grouped), "A read down its columns is one group");
    // Where `B` streams from beyond L2 (prefetched block by block), a block of full
    // calls and two rows pairs the two rows panel pair by panel pair, right after the
    // full calls on the same two panels, while those are still in L1: a block of their
    // own would stream `B` again. 8 rows ran as 4 + 4 before (`tile_rows`), 107-111
    // GFLOP/s a 4-row call against 125-127 for 6 rows there (AVX2, Zen 5, one thread,
    // `[m × 1000] · [1000 × 2000]`).
    let pair_streamed_tail = prefetch && isa == Isa::Avx2 && kernel_pair_rows >= 2 && !pack_a;
    let mut a_block = if pack_a {
        vec![T::ZERO; ROW_BLOCK * DEPTH_BLOCK]
    } else {
        Vec::new()
    };
    let mut k0 = 0;
    while k0 < b.depth {
        let depth = DEPTH_BLOCK.min(b.depth - k0);
        let mut m0 = 0;
        while m0 < rows {
            let mut block_rows = ROW_BLOCK.min(rows - m0);
            // On AVX2 a block of full calls and two rows leaves the two to a block of
            // their own, which runs over pairs of panels (see `pair_tail` above).
            if pair_tail
                && block_rows > max_rows
                && block_rows % max_rows == pair_rows
                && group_left(m0) >= block_rows
            {
                block_rows -= pair_rows;
            }
            // This block's A: (pointer to its first value, row stride, column stride).
            let (a_at, a_rs, a_cs) = if pack_a {
                for (k, dst) in a_block.chunks_exact_mut(ROW_BLOCK).take(depth).enumerate() {
                    // SAFETY: rows m0..m0 + block_rows of column k0 + k are in A, and
                    // contiguous (rs == 1, one group).
                    let src = unsafe {
                        core::slice::from_raw_parts(a.add(a_row(m0) + (k0 + k) * cs), block_rows)
                    };
                    dst[..block_rows].copy_from_slice(src);
                }
                (a_block.as_ptr(), 1, ROW_BLOCK)
            } else {
                // SAFETY: column k0 < depth of A, inside the caller's A.
                (unsafe { a.add(k0 * cs) }, rs, cs)
            };
            // A tile of panel `q` starting at row `row` (`a_tile` into this block's A)
            // that prefetches no `B` block: the paired calls' and lone tails'.
            let tile_at = |q: usize, row: usize, a_tile: usize, first_tile: bool| {
                let panel = &b.panels[q];
                // SAFETY: the tile's rows are rows of the caller's A and C, and its panel
                // is in B.
                unsafe {
                    Micro {
                        depth,
                        a: a_at.add(a_tile),
                        rs: a_rs,
                        cs: a_cs,
                        b: b.data.as_ptr().add((q * b.depth + k0) * nr),
                        c: c.add(c_row(row) + panel.col),
                        ldc,
                        width: panel.width,
                        prefetch: core::ptr::null(),
                        bias: match bias {
                            Some(bias) if k0 == 0 => bias.as_ptr().add(panel.col),
                            _ => core::ptr::null(),
                        },
                        pieces: b.pieces[panel.pieces.0..].as_ptr(),
                        pieces_len: panel.pieces.1 - panel.pieces.0,
                        first_tile,
                    }
                }
            };
            // A block of a few rows, one tile, goes over two panels at a time (see
            // `pair_rows`; one row has its own kernel), and its last odd panel alone; on
            // AVX2 a block of 3 rows over three panels at a time (`triple_rows`), and its
            // last one or two panels alone.
            let mut first_panel = 0;
            if (2..=pair_rows).contains(&block_rows) && group_left(m0) >= block_rows {
                let a_tile = if pack_a { 0 } else { a_row(m0) };
                // Pairs run only where nothing is prefetched block by block.
                let tile = |p: usize| tile_at(p, m0, a_tile, true);
                while first_panel + 1 < b.panels.len() {
                    let (p, q) = (tile(first_panel), tile(first_panel + 1));
                    // SAFETY: `tile_at` makes valid `Micro`s of the block's rows.
                    unsafe { micro_pair::<T>(block_rows, isa, p, q) };
                    first_panel += 2;
                }
            } else if (3..=triple_rows).contains(&block_rows) && group_left(m0) >= block_rows {
                let a_tile = if pack_a { 0 } else { a_row(m0) };
                let tile = |p: usize| tile_at(p, m0, a_tile, true);
                while first_panel + 2 < b.panels.len() {
                    let panels = [0, 1, 2].map(|q| tile(first_panel + q));
                    // SAFETY: `tile_at` makes valid `Micro`s of the block's rows.
                    unsafe { micro_triple::<T>(block_rows, isa, panels) };
                    first_panel += 3;
                }
            }
            // Rows the panel loop runs in full calls, and the two it pairs after them.
            let streamed_tail = pair_streamed_tail
                && block_rows > max_rows
                && block_rows % max_rows == 2
                && group_left(m0) >= block_rows;
            let full_rows = if streamed_tail {
                block_rows - 2
            } else {
                block_rows
            };
            // The block's tiles, the same on every panel: (first row in the block, rows,
            // offset of that row in the block's A, and in C). Worked out once, not on
            // each panel: the row arithmetic divides by the group's and the call's rows
            // (4-6 integer divisions a tile, 3 % of a single-threaded 16×50×512→128
            // inference call).
            let mut tiles = [(0, 0, 0, 0); ROW_BLOCK];
            let mut tile_count = 0;
            let mut i = 0;
            while i < full_rows {
                let row = m0 + i;
                // A tile's rows are evenly spaced: it ends with its group.
                let r = tile_rows((full_rows - i).min(group_left(row)), max_rows);
                let a_tile = if pack_a { i * a_rs } else { a_row(row) };
                tiles[tile_count] = (i, r, a_tile, c_row(row));
                tile_count += 1;
                i += r;
            }
            let tiles = &tiles[..tile_count];
            for (p, panel) in b.panels.iter().enumerate().skip(first_panel) {
                // SAFETY: offsets stay inside the panel and the caller's A and C.
                let bp = unsafe { b.data.as_ptr().add((p * b.depth + k0) * nr) };
                // The block read after this one: the next panel's rows `k0..k0 + depth`;
                // after the last panel of the last row block, the first panel's next
                // `depth` rows, when it has that many (the prefetch reads `depth` rows
                // and must stay inside the panel).
                let last_rows = m0 + block_rows >= rows;
                let next = if p + 1 < b.panels.len() {
                    Some(((p + 1) * b.depth + k0) * nr)
                } else if last_rows && k0 + 2 * depth <= b.depth {
                    Some((k0 + depth) * nr)
                } else {
                    None
                };
                for &(i, r, a_tile, c_tile) in tiles {
                    let args = Micro {
                        depth,
                        // SAFETY: the tile's first row, inside this block's A.
                        a: unsafe { a_at.add(a_tile) },
                        rs: a_rs,
                        cs: a_cs,
                        b: bp,
                        // SAFETY: the tile's first row and the panel's first column, inside
                        // the caller's C.
                        c: unsafe { c.add(c_tile + panel.col) },
                        ldc,
                        width: panel.width,
                        prefetch: match next {
                            // SAFETY: the next block's offset, inside `B`'s data.
                            Some(offset) if i == 0 && prefetch => unsafe {
                                b.data.as_ptr().add(offset)
                            },
                            _ => core::ptr::null(),
                        },
                        bias: match bias {
                            // SAFETY: the bias holds a value for every packed column.
                            Some(bias) if k0 == 0 => unsafe { bias.as_ptr().add(panel.col) },
                            _ => core::ptr::null(),
                        },
                        pieces: b.pieces[panel.pieces.0..].as_ptr(),
                        pieces_len: panel.pieces.1 - panel.pieces.0,
                        first_tile: i == 0,
                    };
                    // SAFETY: `args` is a valid `Micro` of the tile's `r` rows (above).
                    unsafe { micro::<T>(r, isa, nr, args) };
                }
                let second = (p - first_panel) % 2 == 1;
                if streamed_tail && (second || p + 1 == b.panels.len()) {
                    // The two rows after the full calls, over this panel and the one
                    // before it (both in L1), or this last, odd one alone.
                    let row = m0 + full_rows;
                    let tile = |q: usize| tile_at(q, row, a_row(row), false);
                    if second {
                        // SAFETY: `tile_at` makes valid `Micro`s of the two rows.
                        unsafe { micro_pair::<T>(2, isa, tile(p - 1), tile(p)) };
                    } else {
                        // SAFETY: as above.
                        unsafe { micro::<T>(2, isa, nr, tile(p)) };
                    }
                }
            }
            m0 += block_rows;
        }
        k0 += depth;
    }
}

/// Rows of the next micro-kernel call when `left` rows remain: full calls of `max` rows,
/// and the last `max + r` rows (`r` short of a full call by more than two) as two even
/// calls. A call of `r` rows keeps `2r` accumulators in flight, and two FMA pipes of four
/// cycles' latency need eight: 8 rows as 6 + 2 ran the 2-row call at half speed, 4 + 4
/// runs both at full speed. But fewer rows also cost where the latency is covered: on a
/// Zen 5 core (AVX2, `[m × 256] · [256 × 1024]`, one thread) 6-row calls ran at 128-132
/// GFLOP/s, 5-row 119-122, 4-row 115-118, so 32 rows run as 6·4 + 4 + 4 (124.5-126.6)
/// rather than evenly as 6·2 + 5·4 (122.0-122.1); 16 rows as 6, 6, 4: 125.6-125.7
/// against 121.7-122.2. On AVX-512 (`max` 8) both splits ran alike. (Two rows alone stay
/// one 2-row call: as two calls of the one-row kernel, which reads the panel once per
/// row, batch 2 ran 5-10 % slower.)
fn tile_rows(left: usize, max: usize) -> usize {
    let short = left % max;
    if left > 2 * max || (left > max && (short == 0 || short + 2 >= max)) {
        max
    } else {
        left.div_ceil(left.div_ceil(max))
    }
}

/// Micro-kernel calls over a group of `rows` rows ([`tile_rows`] of [`kernel_rows`]):
/// `rows` over this is the group's mean rows a call, which bounds its multiply-add rate.
pub(crate) fn tile_calls(rows: usize) -> usize {
    rows.div_ceil(kernel_rows())
}

/// What a product does with what `C` held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    /// `C += A · B`.
    Add,
    /// `C = A · B` over whatever C held: for outputs that would otherwise be zeroed
    /// first (`Buffer::for_overwrite`); bit for bit what zeroing C and adding gives.
    Overwrite,
}

/// [`gemm`] with the rows of `A` and `C` split over up to `threads` threads, adding to
/// C or storing over it (`store`).
///
/// # Safety
/// As [`gemm`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn par_gemm<'b, T: Real>(
    threads: usize,
    store: Store,
    rows: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: impl Into<Packed<'b, T>>,
    c: *mut T,
    ldc: usize,
) {
    let b: Packed<'b, T> = b.into();
    // Overwriting: zeros as the bias of `gemm_bias`, whose first depth block stores the
    // tile.
    let zeros = match store {
        Store::Add => Vec::new(),
        Store::Overwrite => vec![T::ZERO; packed_end(&b)],
    };
    let bias = (store == Store::Overwrite).then_some(&zeros[..]);
    // SAFETY: this function's contract is `par_gemm_into`'s; `zeros` covers every packed
    // column.
    unsafe { par_gemm_into(threads, rows, a, rs, cs, b, bias, c, ldc) }
}

/// One past the last column of `B` that `b` holds.
fn packed_end<T: Real>(b: &Packed<'_, T>) -> usize {
    b.panels
        .iter()
        .flat_map(|p| segments(p, b.pieces))
        .map(|(_, col, width)| col + width)
        .max()
        .unwrap_or(0)
}

/// [`par_gemm`], or with `bias` as [`gemm_bias`].
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn par_gemm_into<T: Real>(
    threads: usize,
    rows: usize,
    a: *const T,
    rs: usize,
    cs: usize,
    b: Packed<'_, T>,
    bias: Option<&[T]>,
    c: *mut T,
    ldc: usize,
) {
    let columns: usize = b.panels.iter().map(|p| p.width).sum();
    let work = rows * columns * b.depth;
    // Below ~2 M multiply-adds a thread costs more than it gives.
    let threads = threads.min(work / (1 << 21)).max(1);
    let parts = crate::team::split_aligned(rows, threads, kernel_rows());
    // SAFETY: the members only read `A`, and each writes only its own rows of `C`.
    let (a, c) = unsafe { (SharedPtr::new(a as *mut T), SharedPtr::new(c)) };
    run_team(parts.len(), |member| {
        let range = parts[member.id].clone();
        // SAFETY: each member writes only its rows of C.
        unsafe {
            gemm_into(
                range.len(),
                a.at(range.start * rs),
                rs,
                cs,
                b,
                bias,
                c.at(range.start * ldc),
                ldc,
            )
        };
    });
}

const BASELINE: u8 = 0;
const AVX2: u8 = 1;
const AVX512: u8 = 2;

#[inline(always)]
unsafe fn micro<T: Real>(rows: usize, isa: Isa, panel: usize, args: Micro<T>) {
    // SAFETY: `args` is a valid `Micro` (the caller's promise) and `isa` was reported by
    // the CPU; each arm's kernel reads and writes only what `args` covers.
    unsafe {
        match (isa, panel) {
            (Isa::Avx512, 32) => rows_dispatch::<T, 32, AVX512>(rows, args),
            (Isa::Avx512, 16) => rows_dispatch::<T, 16, AVX512>(rows, args),
            (Isa::Avx2, 16) => rows_dispatch::<T, 16, AVX2>(rows, args),
            (Isa::Avx2, 8) => rows_dispatch::<T, 8, AVX2>(rows, args),
            (Isa::Baseline, 16) => rows_dispatch::<T, 16, BASELINE>(rows, args),
            (Isa::Baseline, 8) => rows_dispatch::<T, 8, BASELINE>(rows, args),
            (isa, panel) => unreachable!("no micro-kernel for {isa:?} panels of {panel}"),
        }
    }
}

/// [`micro`] over two panels at once: `left`'s tile and `right`'s, the same rows of `A`
/// (see [`pair_rows`]; `rows` is 2 to 4).
#[inline(always)]
unsafe fn micro_pair<T: Real>(rows: usize, isa: Isa, left: Micro<T>, right: Micro<T>) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F32x16, F64x4, F64x8};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) `isa` names a feature set the CPU reported, the element type
        // matches the vector's, and the `Micro`s are valid (the caller's promise).
        unsafe {
            match (isa, f32, rows) {
                (Isa::Avx512, true, 2) => pair_avx512::<F32x16, 2>(left.cast(), right.cast()),
                (Isa::Avx512, true, 3) => pair_avx512::<F32x16, 3>(left.cast(), right.cast()),
                (Isa::Avx512, true, 4) => pair_avx512::<F32x16, 4>(left.cast(), right.cast()),
                (Isa::Avx512, false, 2) => pair_avx512::<F64x8, 2>(left.cast(), right.cast()),
                (Isa::Avx512, false, 3) => pair_avx512::<F64x8, 3>(left.cast(), right.cast()),
                (Isa::Avx512, false, 4) => pair_avx512::<F64x8, 4>(left.cast(), right.cast()),
                (Isa::Avx2, true, 2) => pair_avx2::<F32x8, 2>(left.cast(), right.cast()),
                (Isa::Avx2, false, 2) => pair_avx2::<F64x4, 2>(left.cast(), right.cast()),
                (isa, _, rows) => unreachable!("no paired micro-kernel of {rows} rows on {isa:?}"),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, isa, left, right);
        unreachable!("paired panels are x86-64 only (pair_rows)");
    }
}

/// [`micro`] over three panels at once as two tiles of a panel and a half: `panels[0]`
/// and the low half of `panels[1]`, then its high half and `panels[2]` (see
/// [`triple_rows`]; `rows` is 3).
#[inline(always)]
unsafe fn micro_triple<T: Real>(rows: usize, isa: Isa, panels: [Micro<T>; 3]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F64x4};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) `isa` names a feature set the CPU reported, the element type
        // matches the vector's, and the `Micro`s are valid (the caller's promise).
        unsafe {
            match (isa, f32, rows) {
                (Isa::Avx2, true, 3) => triple_avx2::<F32x8, 3>(panels.map(|p| p.cast())),
                (Isa::Avx2, false, 3) => triple_avx2::<F64x4, 3>(panels.map(|p| p.cast())),
                (isa, _, rows) => {
                    unreachable!("no three-panel micro-kernel of {rows} rows on {isa:?}")
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, isa, panels);
        unreachable!("three-panel calls are x86-64 only (triple_rows)");
    }
}

#[inline(always)]
unsafe fn rows_dispatch<T: Real, const NR: usize, const ISA: u8>(rows: usize, args: Micro<T>) {
    // SAFETY: `args` is a valid `Micro` of `rows` rows and ISA was reported by the CPU
    // (the caller's promise); each arm is the same kernel for a fixed row count.
    unsafe {
        match rows {
            1 => kernel::<T, 1, NR, ISA>(args),
            2 => kernel::<T, 2, NR, ISA>(args),
            3 => kernel::<T, 3, NR, ISA>(args),
            4 => kernel::<T, 4, NR, ISA>(args),
            5 => kernel::<T, 5, NR, ISA>(args),
            6 => kernel::<T, 6, NR, ISA>(args),
            7 => kernel::<T, 7, NR, ISA>(args),
            _ => kernel::<T, 8, NR, ISA>(args),
        }
    }
}

#[inline(always)]
unsafe fn kernel<T: Real, const MR: usize, const NR: usize, const ISA: u8>(args: Micro<T>) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F32x16, F64x4, F64x8};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) ISA names a feature set the CPU reported, the element type
        // matches the vector's, and `args` is a valid `Micro` (the caller's promise).
        unsafe {
            match (ISA, f32) {
                (AVX512, true) => return kernel_avx512::<F32x16, MR>(args.cast()),
                (AVX512, false) => return kernel_avx512::<F64x8, MR>(args.cast()),
                (AVX2, true) => return kernel_avx2::<F32x8, MR>(args.cast()),
                (AVX2, false) => return kernel_avx2::<F64x4, MR>(args.cast()),
                _ => {}
            }
        }
    }
    // SAFETY: `args` is a valid `Micro` (the caller's promise); plain Rust arithmetic.
    unsafe { kernel_body::<T, MR, NR, false>(args) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn kernel_avx512<S: crate::vector::Vector, const MR: usize>(args: Micro<S::E>) {
    // SAFETY: compiled for AVX-512 (S's set), run only where the CPU has it, on a valid
    // `Micro` (the caller's promise).
    unsafe { vector_body::<S, MR>(args) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2<S: crate::vector::Vector, const MR: usize>(args: Micro<S::E>) {
    // SAFETY: compiled for AVX2+FMA (S's set), run only where the CPU has them, on a
    // valid `Micro` (the caller's promise).
    unsafe { vector_body::<S, MR>(args) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn pair_avx512<S: crate::vector::Vector, const MR: usize>(
    left: Micro<S::E>,
    right: Micro<S::E>,
) {
    // SAFETY: compiled for S's instruction set, run only where the CPU has it, on valid
    // `Micro`s (the caller's promise).
    unsafe { pair_body::<S, MR>(left, right) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pair_avx2<S: crate::vector::Vector, const MR: usize>(
    left: Micro<S::E>,
    right: Micro<S::E>,
) {
    // SAFETY: compiled for S's instruction set, run only where the CPU has it, on valid
    // `Micro`s (the caller's promise).
    unsafe { pair_body::<S, MR>(left, right) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn triple_avx2<S: crate::vector::Vector, const MR: usize>(panels: [Micro<S::E>; 3]) {
    // SAFETY: compiled for AVX2+FMA, run only where the CPU has them, on valid `Micro`s
    // (the caller's promise).
    unsafe { triple_body::<S, MR>(panels) }
}

/// Prefetches into L1 the lines of `C` that the tile of `rows` rows adds to at its end
/// (none where it stores the bias instead). The recurrent step's `C` is the step's rows
/// of the chunk's pre-activations, which the chunk's projection wrote many steps
/// earlier (at batch 8 and H = 1000 the chunk is 4 MB), and a later depth block's
/// tile comes back to its `C` after all the other panels' (8 MB of `W_hh` at H = 1000
/// streamed past): the tile otherwise waited for each row from L3 after its
/// multiply-adds. AVX2, one thread, 8×35×1000 inference, interleaved: 1.046× (only in
/// the first depth block: 1.020×); 2 threads 1.02×, AVX-512 1.01-1.03×; elsewhere the same
/// within the noise.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch_c<S: crate::vector::Vector>(m: &Micro<S::E>, rows: usize) {
    use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    if !m.bias.is_null() {
        return;
    }
    let last = 2 * S::LANES - 1;
    for i in 0..rows {
        let row = m.c.wrapping_add(i * m.ldc);
        // SAFETY: a prefetch never faults (the address need not be valid).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(row as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(last) as *const i8);
        }
    }
}

/// Prefetches row `offset..offset + nr` of the next `B` block into L2 (`nr` values of a
/// panel row span one or two cache lines).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch_row<S: crate::vector::Vector>(next: *const S::E, offset: usize, nr: usize) {
    use core::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
    if next.is_null() {
        return;
    }
    // SAFETY: a prefetch never faults; the address is inside the packed buffer anyway.
    unsafe {
        let row = next.add(offset) as *const i8;
        _mm_prefetch::<_MM_HINT_T1>(row);
        let bytes = nr * core::mem::size_of::<S::E>();
        if bytes > 64 {
            _mm_prefetch::<_MM_HINT_T1>(row.add(64));
        }
    }
}

/// The micro-kernel on explicit vector registers: an `MR × 2·LANES` tile.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn vector_body<S: crate::vector::Vector, const MR: usize>(m: Micro<S::E>) {
    let lanes = S::LANES;
    let nr = 2 * lanes;
    // SAFETY: on S's instruction set (inlined into its `target_feature` caller); loads
    // of A's MR rows and B's `depth` packed rows of `nr`, stores of C's rows, all within
    // the valid `Micro` `m`.
    unsafe {
        prefetch_c::<S>(&m, MR);
        let mut acc = [[S::zero(); 2]; MR];
        if MR == 1 {
            // Matrix-vector: four banks hide the FMA latency a single chain would expose.
            // No software prefetch here: a matrix-vector step reads its panels in order,
            // one after the other, a stream the hardware prefetcher follows; the prefetch
            // instructions only competed with the loads (two loads and a broadcast per
            // two multiply-adds). Measured without them: batch 1, H = 128, 7 % faster;
            // H = 1024 (weights beyond L2), 11 %.
            let mut banks = [[S::zero(); 2]; 4];
            let mut k = 0;
            while k + 4 <= m.depth {
                for (u, bank) in banks.iter_mut().enumerate() {
                    let a = S::splat(*m.a.add((k + u) * m.cs));
                    let b = m.b.add((k + u) * nr);
                    bank[0] = S::fma(a, S::load(b), bank[0]);
                    bank[1] = S::fma(a, S::load(b.add(lanes)), bank[1]);
                }
                k += 4;
            }
            while k < m.depth {
                let a = S::splat(*m.a.add(k * m.cs));
                let b = m.b.add(k * nr);
                banks[0][0] = S::fma(a, S::load(b), banks[0][0]);
                banks[0][1] = S::fma(a, S::load(b.add(lanes)), banks[0][1]);
                k += 1;
            }
            for h in 0..2 {
                acc[0][h] = S::add(
                    S::add(banks[0][h], banks[1][h]),
                    S::add(banks[2][h], banks[3][h]),
                );
            }
        } else {
            // Two cache lines of B per k on AVX-512: see `L1_PREFETCH_ROWS`.
            let l1_prefetch = m.first_tile && nr * core::mem::size_of::<S::E>() == 128;
            for k in 0..m.depth {
                prefetch_row::<S>(m.prefetch, k * nr, nr);
                if l1_prefetch {
                    use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                    // SAFETY: a prefetch never faults (past the panel's end it reads the
                    // next panel's first rows, or nothing).
                    let ahead = m.b.wrapping_add((k + L1_PREFETCH_ROWS) * nr) as *const i8;
                    _mm_prefetch::<_MM_HINT_T0>(ahead);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64));
                }
                let b = m.b.add(k * nr);
                let (b0, b1) = (S::load(b), S::load(b.add(lanes)));
                let mut a_col = m.a.add(k * m.cs);
                for row in acc.iter_mut() {
                    let a = S::splat(*a_col);
                    row[0] = S::fma(a, b0, row[0]);
                    row[1] = S::fma(a, b1, row[1]);
                    a_col = a_col.add(m.rs);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            store_row::<S>(&m, i, row[0], row[1]);
        }
    }
}

/// [`vector_body`] over two panels, `left` and `right` (the same rows of `A`): four
/// accumulators a row (see [`pair_rows`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn pair_body<S: crate::vector::Vector, const MR: usize>(
    left: Micro<S::E>,
    right: Micro<S::E>,
) {
    let lanes = S::LANES;
    let nr = 2 * lanes;
    // SAFETY: as in `vector_body`, for each of the two valid `Micro`s.
    unsafe {
        prefetch_c::<S>(&left, MR);
        prefetch_c::<S>(&right, MR);
        let mut acc = [[S::zero(); 4]; MR];
        // Two cache lines of each panel per k on AVX-512: see `L1_PREFETCH_ROWS`.
        let l1_prefetch = left.first_tile && nr * core::mem::size_of::<S::E>() == 128;
        for k in 0..left.depth {
            if l1_prefetch {
                use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
                for panel in [left.b, right.b] {
                    // SAFETY: a prefetch never faults.
                    let ahead = panel.wrapping_add((k + L1_PREFETCH_ROWS) * nr) as *const i8;
                    _mm_prefetch::<_MM_HINT_T0>(ahead);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(64));
                }
            }
            let (l, r) = (left.b.add(k * nr), right.b.add(k * nr));
            let b = [
                S::load(l),
                S::load(l.add(lanes)),
                S::load(r),
                S::load(r.add(lanes)),
            ];
            let mut a_col = left.a.add(k * left.cs);
            for row in acc.iter_mut() {
                let a = S::splat(*a_col);
                for (sum, b) in row.iter_mut().zip(b) {
                    *sum = S::fma(a, b, *sum);
                }
                a_col = a_col.add(left.rs);
            }
        }
        for (i, row) in acc.iter().enumerate() {
            store_row::<S>(&left, i, row[0], row[1]);
            store_row::<S>(&right, i, row[2], row[3]);
        }
    }
}

/// [`vector_body`] over three panels as two tiles of three vectors a row (see
/// [`triple_rows`]): the first panel and the middle one's low half, then the middle
/// one's high half and the last panel. The middle panel's low half waits in memory
/// between the two (one store a row, outside the loops).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn triple_body<S: crate::vector::Vector, const MR: usize>(panels: [Micro<S::E>; 3]) {
    let lanes = S::LANES;
    let [first, middle, last] = panels;
    // SAFETY: as in `vector_body`, for each of the three valid `Micro`s.
    unsafe {
        for panel in &panels {
            prefetch_c::<S>(panel, MR);
        }
        let left = triple_tile::<S, MR>(&first, [(first.b, 0), (first.b, lanes), (middle.b, 0)]);
        let right = triple_tile::<S, MR>(&first, [(middle.b, lanes), (last.b, 0), (last.b, lanes)]);
        for i in 0..MR {
            store_row::<S>(&first, i, left[i][0], left[i][1]);
            store_row::<S>(&middle, i, left[i][2], right[i][0]);
            store_row::<S>(&last, i, right[i][1], right[i][2]);
        }
    }
}

/// One tile of [`triple_body`]: `MR` rows of `m`'s `A` times the three vectors at
/// `(panel, offset)` of each row `k` of `B`, three accumulators a row.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn triple_tile<S: crate::vector::Vector, const MR: usize>(
    m: &Micro<S::E>,
    b: [(*const S::E, usize); 3],
) -> [[S::V; 3]; MR] {
    let nr = 2 * S::LANES;
    // SAFETY: on S's instruction set; `a` covers the tile's MR rows over `depth` and each
    // of `b` its panel's `depth` packed rows (the caller's valid `Micro`s).
    unsafe {
        let mut acc = [[S::zero(); 3]; MR];
        for k in 0..m.depth {
            let row_k = |j: usize| b[j].0.add(k * nr + b[j].1);
            let b = [S::load(row_k(0)), S::load(row_k(1)), S::load(row_k(2))];
            let mut a_col = m.a.add(k * m.cs);
            for row in acc.iter_mut() {
                let a = S::splat(*a_col);
                for (sum, b) in row.iter_mut().zip(b) {
                    *sum = S::fma(a, b, *sum);
                }
                a_col = a_col.add(m.rs);
            }
        }
        acc
    }
}

/// Row `i` of a tile (its two vectors, `low` and `high`) added to what it is added to (C,
/// or the bias in the first depth block of `gemm_bias`) and stored in C.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn store_row<S: crate::vector::Vector>(m: &Micro<S::E>, i: usize, low: S::V, high: S::V) {
    let lanes = S::LANES;
    // SAFETY: row `i` of the valid `Micro` `m`'s C, its `width` columns (or pieces).
    unsafe {
        let c = m.c.add(i * m.ldc);
        let base = if m.bias.is_null() {
            c as *const S::E
        } else {
            m.bias
        };
        if m.width == 2 * lanes && m.pieces_len == 0 {
            S::store(c, S::add(S::load(base), low));
            S::store(c.add(lanes), S::add(S::load(base.add(lanes)), high));
        } else {
            // A partial or gathered panel: spill the tile row and add its valid columns
            // where they belong.
            let mut tile = [<S::E as Real>::ZERO; 64];
            S::store(tile.as_mut_ptr(), low);
            S::store(tile.as_mut_ptr().add(lanes), high);
            store_pieces(m, &tile, c, base);
        }
    }
}

impl<T> Micro<T> {
    /// The same call on another element type of the same values (the caller checked that
    /// the types are the same).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn cast<U>(self) -> Micro<U> {
        Micro {
            depth: self.depth,
            a: self.a as *const U,
            rs: self.rs,
            cs: self.cs,
            b: self.b as *const U,
            c: self.c as *mut U,
            ldc: self.ldc,
            width: self.width,
            prefetch: self.prefetch as *const U,
            bias: self.bias as *const U,
            pieces: self.pieces,
            pieces_len: self.pieces_len,
            first_tile: self.first_tile,
        }
    }
}

#[inline(always)]
unsafe fn load<T: Real, const NR: usize>(p: *const T) -> [T; NR] {
    // SAFETY: the caller's panel holds NR values at p.
    unsafe { core::ptr::read_unaligned(p as *const [T; NR]) }
}

#[inline(always)]
unsafe fn kernel_body<T: Real, const MR: usize, const NR: usize, const FMA: bool>(m: Micro<T>) {
    let mut acc = [[T::ZERO; NR]; MR];
    // SAFETY: reads of A's MR rows and B's packed rows, writes of C's rows, all within
    // the valid `Micro` `m` (the caller's promise).
    unsafe {
        if MR == 1 {
            // Matrix-vector: four banks hide the FMA latency a single chain would expose.
            let mut banks = [[T::ZERO; NR]; 4];
            let mut k = 0;
            while k + 4 <= m.depth {
                for (u, bank) in banks.iter_mut().enumerate() {
                    let av = *m.a.add((k + u) * m.cs);
                    let bv = load::<T, NR>(m.b.add((k + u) * NR));
                    for j in 0..NR {
                        bank[j] = fmadd::<T, FMA>(av, bv[j], bank[j]);
                    }
                }
                k += 4;
            }
            while k < m.depth {
                let av = *m.a.add(k * m.cs);
                let bv = load::<T, NR>(m.b.add(k * NR));
                for j in 0..NR {
                    banks[0][j] = fmadd::<T, FMA>(av, bv[j], banks[0][j]);
                }
                k += 1;
            }
            for j in 0..NR {
                acc[0][j] = (banks[0][j] + banks[1][j]) + (banks[2][j] + banks[3][j]);
            }
        } else {
            for k in 0..m.depth {
                let bv = load::<T, NR>(m.b.add(k * NR));
                let a_col = m.a.add(k * m.cs);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = *a_col.add(i * m.rs);
                    for j in 0..NR {
                        row[j] = fmadd::<T, FMA>(av, bv[j], row[j]);
                    }
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let c_row = m.c.add(i * m.ldc);
            let base = if m.bias.is_null() {
                c_row as *const T
            } else {
                m.bias
            };
            store_pieces(&m, row, c_row, base);
        }
    }
}

/// `C = base + tile` on a tile row's valid columns: `0..width` where the panel's columns
/// are consecutive, else piece by piece. `c` and `base` point at the panel's first
/// column in C's row and in what the tile is added to.
///
/// # Safety
/// `c` and `base` cover the columns of every piece of the panel.
#[inline(always)]
unsafe fn store_pieces<T: Real>(m: &Micro<T>, tile: &[T], c: *mut T, base: *const T) {
    // SAFETY: `c` and `base` cover every piece's columns (the caller's promise), and the
    // pieces lie within the tile's width.
    unsafe {
        if m.pieces_len == 0 {
            for (j, value) in tile.iter().enumerate().take(m.width) {
                *c.add(j) = *base.add(j) + *value;
            }
        } else {
            for piece in core::slice::from_raw_parts(m.pieces, m.pieces_len) {
                for j in 0..piece.width {
                    let col = piece.col + j;
                    *c.add(col) = *base.add(col) + tile[piece.tile + j];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) as f64 / (1u64 << 31) as f64) - 0.5
            })
            .collect()
    }

    fn check<T: Real + Into<f64>>(
        m: usize,
        k: usize,
        n: usize,
        threads: usize,
        cast: fn(f64) -> T,
    ) {
        let a64 = values(m * k, 1);
        let b64 = values(k * n, 2);
        let expected = reference(m, k, n, &a64, &b64);
        let a: Vec<T> = a64.iter().map(|&v| cast(v)).collect();
        let b: Vec<T> = b64.iter().map(|&v| cast(v)).collect();
        // Pack B through its transpose's strides, as the kernel packs Wᵀ from W, in two
        // column ranges to exercise partial panels.
        let bt: Vec<T> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let split = n / 3;
        let packed = PackedB::pack(k, &[0..split, split..n], &bt, 1, k);
        // Gathered panels: two groups of interleaved ranges, each group's ranges packed
        // one after the other, so a panel can hold columns of two ranges.
        let (s1, s2, s3) = (n / 5, n / 2, n * 3 / 4);
        let gathered =
            PackedB::pack_groups(k, &[vec![0..s1, s2..s3], vec![s1..s2, s3..n]], &bt, 1, k);
        // Row-major A, and A read through transposed strides from Aᵀ.
        let at: Vec<T> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        for ((src, rs, cs), b) in [(&a, k, 1), (&at, 1, m)]
            .into_iter()
            .flat_map(|a| [(a, &packed), (a, &gathered)])
        {
            let mut c = vec![cast(1.0); m * n];
            // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
            unsafe {
                par_gemm(
                    threads,
                    Store::Add,
                    m,
                    src.as_ptr(),
                    rs,
                    cs,
                    b,
                    c.as_mut_ptr(),
                    n,
                )
            };
            let worst = c
                .iter()
                .zip(&expected)
                .map(|(&got, &want)| (got.into() - 1.0 - want).abs())
                .fold(0.0, f64::max);
            assert!(worst < 1e-3, "{m}x{k}x{n} threads {threads}: error {worst}");
        }
    }

    #[test]
    fn matches_reference_on_awkward_shapes() {
        for (m, k, n) in [
            (1, 1, 1),
            (1, 37, 50),
            (7, 300, 33),
            (13, 5, 17),
            (200, 520, 40),
        ] {
            check::<f32>(m, k, n, 1, |v| v as f32);
            check::<f64>(m, k, n, 1, |v| v);
        }
        check::<f32>(400, 300, 64, 2, |v| v as f32);
        check::<f64>(400, 300, 64, 2, |v| v);
    }

    /// Products of 2-4 rows, which the micro-kernel computes over two panels at once
    /// (`pair_rows`) or, 3 rows on AVX2, three (`triple_rows`); of full calls and two
    /// rows (8, 14, 20), whose last two rows form a paired block of their own on AVX2;
    /// and of full calls and a 3- or 4-row call (9, 10, 16), which stay in the panel loop;
    /// on every instruction set the CPU has: a number of panels that leaves one or two
    /// alone, partial and gathered panels, several depth blocks, and a `B` large enough
    /// to be prefetched block by block (where AVX2 pairs the last two rows of 8, 14 and 20
    /// inside the panel loop instead, and runs no three-panel call).
    #[test]
    fn matches_reference_on_few_rows_over_paired_panels() {
        crate::rerun_test_on_lower_instruction_sets(
            module_path!(),
            "matches_reference_on_few_rows_over_paired_panels",
        );
        for m in [2, 3, 4, 5, 8, 9, 10, 14, 16, 20] {
            for (k, n) in [(40, 130), (300, 97), (257, 64), (600, 520)] {
                check::<f32>(m, k, n, 1, |v| v as f32);
                check::<f64>(m, k, n, 1, |v| v);
            }
        }
    }

    /// Packing on a team writes the same panels as packing on one thread: both copies
    /// (rows of `B` contiguous) and transposes, with a partial last panel, above the
    /// size where the second thread joins.
    #[test]
    fn packing_on_a_team_equals_packing_alone() {
        for (depth, cols, rs, cs) in [(300, 400, 400, 1), (300, 400, 1, 300), (700, 150, 150, 1)] {
            let src: Vec<f32> = values(depth * cols, 7).iter().map(|&v| v as f32).collect();
            let alone = PackedB::pack_all(depth, cols, &src, rs, cs);
            assert!(alone.bytes() > 256 << 10, "large enough for two threads");
            for threads in [2, 3] {
                let team = PackedB::pack_all_on(threads, depth, cols, &src, rs, cs);
                assert_eq!(team.panels.len(), alone.panels.len());
                let bits =
                    |b: &PackedB<f32>| b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&team),
                    bits(&alone),
                    "{depth}x{cols} threads {threads}"
                );
            }
        }
    }

    /// `Store::Overwrite` stores `A·B` over whatever C held (NaN here), bit for bit what
    /// adding to zeros gives: one depth block or several, partial panels, one thread or
    /// two, and no depth at all.
    #[test]
    fn overwriting_products_equal_zeroed_then_added() {
        for (m, k, n, threads) in [
            (7, 300, 33, 1),
            (400, 600, 70, 2),
            (1, 37, 50, 2),
            (5, 0, 40, 1),
        ] {
            let a: Vec<f32> = values(m * k, 8).iter().map(|&v| v as f32).collect();
            let bt: Vec<f32> = values(n * k, 9).iter().map(|&v| v as f32).collect();
            let packed = PackedB::pack(k, &[0..n / 3, n / 3..n], &bt, 1, k);
            let run = |store, start: f32| {
                let mut c = vec![start; m * n];
                // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
                unsafe {
                    par_gemm(
                        threads,
                        store,
                        m,
                        a.as_ptr(),
                        k,
                        1,
                        &packed,
                        c.as_mut_ptr(),
                        n,
                    )
                };
                c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(
                run(Store::Overwrite, f32::NAN),
                run(Store::Add, 0.0),
                "{m}x{k}x{n}"
            );
        }
    }

    #[test]
    fn rows_are_tiled_in_full_calls_and_two_even_last_ones() {
        for max in [6, 8] {
            for rows in 1..=40 {
                let mut tiles = Vec::new();
                let mut left = rows;
                while left > 0 {
                    let r = tile_rows(left, max);
                    assert!((1..=max).contains(&r), "{rows} rows, max {max}: tile {r}");
                    tiles.push(r);
                    left -= r;
                }
                assert_eq!(tiles.len(), rows.div_ceil(max), "{rows} rows, max {max}");
                // All full but the last two, which differ by one row at most unless the
                // last is at most two short of full.
                let last_two = tiles.len().saturating_sub(2);
                assert!(
                    tiles[..last_two].iter().all(|&r| r == max),
                    "{rows}: {tiles:?}"
                );
                let tail = &tiles[last_two..];
                let (least, most) = (tail.iter().min().unwrap(), tail.iter().max().unwrap());
                assert!(
                    most - least <= 1 || least + 2 >= max,
                    "{rows}, {max}: {tiles:?}"
                );
            }
        }
        let tiling = |mut left: usize, max: usize| {
            let mut tiles = Vec::new();
            while left > 0 {
                tiles.push(tile_rows(left, max));
                left -= tiles.last().unwrap();
            }
            tiles
        };
        assert_eq!(tiling(8, 6), [4, 4]);
        assert_eq!(tiling(16, 6), [6, 6, 4]);
        assert_eq!(tiling(32, 6), [6, 6, 6, 6, 4, 4]);
        assert_eq!(tiling(11, 6), [6, 5]);
        assert_eq!(tiling(10, 8), [5, 5]);
        assert_eq!(tiling(20, 8), [8, 6, 6]);
    }

    /// `gemm_bias` stores `bias + A·B` over whatever C held, bit for bit what copying the
    /// bias into C and accumulating with `gemm` gives: one depth block or several, full
    /// and partial panels, one row or many, and no depth at all.
    fn check_bias<T: Real + Into<f64>>(m: usize, k: usize, n: usize, cast: fn(f64) -> T) {
        let a: Vec<T> = values(m * k, 3).into_iter().map(cast).collect();
        let bt: Vec<T> = values(n * k, 4).into_iter().map(cast).collect();
        let bias: Vec<T> = values(n, 5).into_iter().map(cast).collect();
        let split = n / 3;
        let packed = PackedB::pack(k, &[0..split, split..n], &bt, 1, k);
        let gathered = PackedB::pack_groups(k, &[vec![0..split / 2, split..n - 3]], &bt, 1, k);
        let rest = PackedB::pack_groups(k, &[vec![split / 2..split, n - 3..n]], &bt, 1, k);
        let mut expected: Vec<T> = (0..m * n).map(|i| bias[i % n]).collect();
        // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
        unsafe { gemm(m, a.as_ptr(), k, 1, &packed, expected.as_mut_ptr(), n) };
        let bits = |v: &[T]| v.iter().map(|&x| x.into().to_bits()).collect::<Vec<_>>();
        let mut got = vec![cast(f64::NAN); m * n];
        // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
        unsafe { gemm_bias(m, a.as_ptr(), k, 1, &packed, &bias, got.as_mut_ptr(), n) };
        assert_eq!(bits(&got), bits(&expected), "{m}x{k}x{n}");
        // Gathered panels store each piece where it belongs, and only there.
        let mut got = vec![cast(f64::NAN); m * n];
        for b in [&gathered, &rest] {
            // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
            unsafe { gemm_bias(m, a.as_ptr(), k, 1, b, &bias, got.as_mut_ptr(), n) };
        }
        assert_eq!(bits(&got), bits(&expected), "{m}x{k}x{n} gathered");
    }

    /// Rows in groups (a batch-first input's rows: a group's rows consecutive in `A`,
    /// with a gap between groups; interleaved in `C`) give what the plain product gives
    /// on the same rows gathered, for the whole range or part of it, and
    /// write nothing outside their rows. Groups of one row, of fewer rows than a tile, of
    /// several tiles; one depth block or two.
    #[test]
    fn grouped_rows_equal_the_rows_gathered() {
        for (groups, per_group, k, n) in [(3, 16, 300, 70), (4, 5, 40, 33), (6, 1, 17, 40)] {
            let rows = groups * per_group;
            let (a_group, c_group, ldc) = ((per_group + 1) * k, n, groups * n);
            let stored: Vec<f32> = values(groups * a_group, 11)
                .iter()
                .map(|&v| v as f32)
                .collect();
            let bt: Vec<f32> = values(n * k, 12).iter().map(|&v| v as f32).collect();
            let bias: Vec<f32> = values(n, 13).iter().map(|&v| v as f32).collect();
            let packed = PackedB::pack(k, &[0..n / 2, n / 2..n], &bt, 1, k);
            let layout = RowGroups {
                rows: per_group,
                a_group,
                c_group,
            };
            // Row i: group i / per_group, row i % per_group of it.
            let a_at = |i: usize| (i / per_group) * a_group + (i % per_group) * k;
            let c_at = |i: usize| (i % per_group) * ldc + (i / per_group) * c_group;
            let gathered: Vec<f32> = (0..rows)
                .flat_map(|i| stored[a_at(i)..a_at(i) + k].iter().copied())
                .collect();
            let mut plain = vec![f32::NAN; rows * n];
            // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
            unsafe {
                gemm_bias(
                    rows,
                    gathered.as_ptr(),
                    k,
                    1,
                    &packed,
                    &bias,
                    plain.as_mut_ptr(),
                    n,
                )
            };
            for range in [0..rows, 1..rows - 1, rows / 2..rows / 2 + 1] {
                let mut got = vec![f32::NAN; per_group * ldc];
                let at = got.as_mut_ptr();
                // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
                unsafe {
                    gemm_bias_grouped(
                        range.clone(),
                        layout,
                        stored.as_ptr(),
                        k,
                        1,
                        &packed,
                        &bias,
                        at,
                        ldc,
                    )
                };
                for i in 0..rows {
                    let row = &got[c_at(i)..c_at(i) + n];
                    if range.contains(&i) {
                        let want = &plain[i * n..(i + 1) * n];
                        // A tile of other rows may sum in another order (the one-row
                        // kernel splits its depth over several accumulators).
                        for (g, w) in row.iter().zip(want) {
                            assert!(
                                (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                                "{groups}x{per_group} {range:?} row {i}: {g} vs {w}"
                            );
                        }
                    } else {
                        assert!(
                            row.iter().all(|v| v.is_nan()),
                            "row {i} outside {range:?} written"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bias_initialised_products_equal_bias_copied_then_accumulated() {
        for (m, k, n) in [
            (1, 37, 50),
            (9, 300, 70),
            (16, 256, 64),
            (3, 600, 33),
            (5, 0, 40),
        ] {
            check_bias::<f32>(m, k, n, |v| v as f32);
            check_bias::<f64>(m, k, n, |v| v);
        }
    }
}
