//! The blocking loop ([`gemm_rows`]): `C (+)= A · B` over depth blocks of
//! [`DEPTH_BLOCK`] (one block for a one-row product read along its row) and row blocks
//! of [`ROW_BLOCK`]; each block's tiles go over every panel, each tile to a
//! micro-kernel, in the variants the call's [`Plan`] chose.

use core::ops::Range;

use crate::real::Real;

use super::dispatch::{micro, micro_pair, micro_triple};
use super::micro::Micro;
use super::packing::{Packed, packed_end, segments};
use super::params::{DEPTH_BLOCK, ROW_BLOCK, kernel_rows, panel};
use super::plan::{Plan, TwoRowTail};
use super::row_groups::RowGroups;

/// One product's operands, as [`gemm_rows`] takes them: rows `first..first + rows` of
/// `A` and `C`, laid out in `groups`.
struct Product<'b, T> {
    first: usize,
    rows: usize,
    groups: RowGroups,
    a: *const T,
    rs: usize,
    cs: usize,
    b: Packed<'b, T>,
    bias: Option<&'b [T]>,
    c: *mut T,
    ldc: usize,
    /// Columns of a panel.
    nr: usize,
}

/// One block of rows at one depth block, and where its `A` is read: in place, or the
/// copy of [`Plan::pack_a`].
struct Block<T> {
    /// The depth block: `k0..k0 + depth`.
    k0: usize,
    depth: usize,
    /// The block's first row (of the product) and its rows.
    m0: usize,
    rows: usize,
    /// The block's `A` at column `k0` (in place: row 0 of the product; copied: the
    /// block's first row) and its strides.
    a: *const T,
    a_rs: usize,
    a_cs: usize,
    /// `a` is the copy (rows counted from the block's first).
    copied: bool,
}

/// A tile of a block: (first row in the block, rows, offset of that row in the block's
/// `A`, and in `C`).
type Tile = (usize, usize, usize, usize);

/// [`gemm_into`](super::driver::gemm_into) over rows `rows` in `groups`
/// ([`gemm_bias_grouped`](super::driver::gemm_bias_grouped)).
///
/// # Safety
/// As [`gemm_bias_grouped`](super::driver::gemm_bias_grouped) (with or without a bias).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_rows<T: Real>(
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
    let product = Product {
        first: rows.start,
        rows: rows.len(),
        groups,
        a,
        rs,
        cs,
        b,
        bias,
        c,
        ldc,
        nr: panel::<T>(),
    };
    if let Some(bias) = bias {
        let end = packed_end(&b);
        assert!(bias.len() >= end, "a bias value for every packed column");
        if b.depth == 0 {
            // SAFETY: the caller's C covers every packed column of its rows.
            unsafe { product.store_bias(bias, end) };
            return;
        }
    }
    let plan = Plan::new(&b, rs, cs);
    assert!(
        !(plan.pack_a && groups != RowGroups::ONE),
        "A read down its columns is one group"
    );
    let mut a_copy = if plan.pack_a {
        vec![T::ZERO; ROW_BLOCK * DEPTH_BLOCK]
    } else {
        Vec::new()
    };
    // One row (a matrix-vector product) reads each panel once whatever the depth blocks
    // (no other tile reuses a panel slice from L1): in blocks it would only cut its read
    // of `B` into strided pieces (a block of every panel, then the next block of every
    // panel), a stream the hardware prefetcher restarts at each piece. Its `A` row is
    // read in order beside the panel (4 KiB at a depth of 1024). Not where `A` is copied
    // block by block (`pack_a`), whose copy holds one depth block.
    let depth_block = if product.rows == 1 && !plan.pack_a {
        b.depth
    } else {
        DEPTH_BLOCK
    };
    let mut k0 = 0;
    while k0 < b.depth {
        let depth = depth_block.min(b.depth - k0);
        let mut m0 = 0;
        while m0 < product.rows {
            let rows = product.block_rows(&plan, m0);
            // SAFETY: rows `m0..m0 + rows` and columns `k0..k0 + depth` are in the
            // caller's A and C (the loops stay inside both).
            unsafe {
                let block = product.block(&plan, &mut a_copy, k0, depth, m0, rows);
                product.run_block(&plan, &block);
            }
            m0 += rows;
        }
        k0 += depth;
    }
}

impl<T: Real> Product<'_, T> {
    /// Row `i` of this product (row `first + i` of the groups) in `A`.
    fn a_row(&self, i: usize) -> usize {
        self.groups
            .offset(self.first + i, self.rs, self.groups.a_group)
    }

    /// Row `i` of this product in `C`.
    fn c_row(&self, i: usize) -> usize {
        self.groups
            .offset(self.first + i, self.ldc, self.groups.c_group)
    }

    /// Rows from row `i` to the end of its group.
    fn group_left(&self, i: usize) -> usize {
        self.groups.rows - (self.first + i) % self.groups.rows
    }

    /// `C` = the bias alone, for a product of depth 0 (no depth block to store the bias
    /// with); `end` is one past the last packed column.
    ///
    /// # Safety
    /// `C` covers every packed column of the product's rows.
    unsafe fn store_bias(&self, bias: &[T], end: usize) {
        for i in 0..self.rows {
            // SAFETY: the caller's C covers every packed column of its rows.
            let c_row = unsafe { core::slice::from_raw_parts_mut(self.c.add(self.c_row(i)), end) };
            for panel in self.b.panels {
                for (_, col, width) in segments(panel, self.b.pieces) {
                    c_row[col..col + width].copy_from_slice(&bias[col..col + width]);
                }
            }
        }
    }

    /// Rows of the block that starts at row `m0`: [`ROW_BLOCK`], the rows left, or one
    /// pair fewer where the pair goes to a block of its own
    /// ([`TwoRowTail::OwnBlock`]).
    fn block_rows(&self, plan: &Plan, m0: usize) -> usize {
        let rows = ROW_BLOCK.min(self.rows - m0);
        let own_block_tail = plan.two_row_tail == TwoRowTail::OwnBlock
            && rows > plan.max_rows
            && rows % plan.max_rows == plan.pair_rows
            && self.group_left(m0) >= rows;
        if own_block_tail {
            rows - plan.pair_rows
        } else {
            rows
        }
    }

    /// The block of `rows` rows from `m0` at depth block `k0..k0 + depth`, its `A`
    /// copied into `a_copy` first where the plan says so.
    ///
    /// # Safety
    /// The block's rows and depth are inside the caller's `A`; `a_copy` holds
    /// [`ROW_BLOCK`] × [`DEPTH_BLOCK`] values where `plan.pack_a`.
    unsafe fn block(
        &self,
        plan: &Plan,
        a_copy: &mut [T],
        k0: usize,
        depth: usize,
        m0: usize,
        rows: usize,
    ) -> Block<T> {
        let (a, a_rs, a_cs) = if plan.pack_a {
            assert!(
                depth <= DEPTH_BLOCK,
                "a copied block of A is one depth block"
            );
            for (k, dst) in a_copy.chunks_exact_mut(ROW_BLOCK).take(depth).enumerate() {
                // SAFETY: rows m0..m0 + rows of column k0 + k are in A, and contiguous
                // (rs == 1, one group).
                let src = unsafe {
                    core::slice::from_raw_parts(
                        self.a.add(self.a_row(m0) + (k0 + k) * self.cs),
                        rows,
                    )
                };
                dst[..rows].copy_from_slice(src);
            }
            (a_copy.as_ptr(), 1, ROW_BLOCK)
        } else {
            // SAFETY: column k0 < depth of A, inside the caller's A.
            (unsafe { self.a.add(k0 * self.cs) }, self.rs, self.cs)
        };
        Block {
            k0,
            depth,
            m0,
            rows,
            a,
            a_rs,
            a_cs,
            copied: plan.pack_a,
        }
    }

    /// Offset in the block's `A` of the product's row `row`.
    fn a_tile(&self, block: &Block<T>, row: usize) -> usize {
        if block.copied {
            (row - block.m0) * block.a_rs
        } else {
            self.a_row(row)
        }
    }

    /// The tile of panel `q` from row `row` (`a_tile` into the block's `A`) that
    /// prefetches no `B` block: the paired and tripled calls' and the two-row tails'.
    ///
    /// # Safety
    /// The tile's rows are rows of the caller's `A` and `C`; `q` is a panel of `B`.
    unsafe fn tile_at(
        &self,
        block: &Block<T>,
        q: usize,
        row: usize,
        a_tile: usize,
        first_tile: bool,
    ) -> Micro<T> {
        let c_tile = self.c_row(row);
        // SAFETY: the caller's promise.
        unsafe { self.micro_args(block, q, a_tile, c_tile, first_tile, core::ptr::null()) }
    }

    /// The micro-kernel call of a tile on panel `q`: its first row at `a_tile` in the
    /// block's `A` and at `c_tile` in `C`, prefetching `prefetch` (null: nothing).
    ///
    /// # Safety
    /// The tile's rows are rows of the caller's `A` and `C`; `q` is a panel of `B`;
    /// `prefetch` is null or inside `B`'s data.
    unsafe fn micro_args(
        &self,
        block: &Block<T>,
        q: usize,
        a_tile: usize,
        c_tile: usize,
        first_tile: bool,
        prefetch: *const T,
    ) -> Micro<T> {
        let panel = &self.b.panels[q];
        // SAFETY: the tile's rows are rows of the caller's A and C, its panel is in B,
        // and the bias holds a value for every packed column.
        unsafe {
            Micro {
                depth: block.depth,
                a: block.a.add(a_tile),
                rs: block.a_rs,
                cs: block.a_cs,
                b: self
                    .b
                    .data
                    .as_ptr()
                    .add((q * self.b.depth + block.k0) * self.nr),
                c: self.c.add(c_tile + panel.col),
                ldc: self.ldc,
                width: panel.width,
                prefetch,
                bias: match self.bias {
                    Some(bias) if block.k0 == 0 => bias.as_ptr().add(panel.col),
                    _ => core::ptr::null(),
                },
                pieces: self.b.pieces[panel.pieces.0..].as_ptr(),
                pieces_len: panel.pieces.1 - panel.pieces.0,
                first_tile,
            }
        }
    }

    /// Runs one block: a block of a few rows (one tile) first over pairs or triples of
    /// panels, then the tiles over every panel left, with the two-row tail of
    /// [`TwoRowTail::AfterEachPanelPair`] after each pair of panels.
    ///
    /// # Safety
    /// The block lies inside the caller's `A` and `C`.
    unsafe fn run_block(&self, plan: &Plan, block: &Block<T>) {
        // SAFETY: the block's rows and panels are the caller's.
        let first_panel = unsafe { self.run_short_block(plan, block) };
        let streamed_tail = plan.two_row_tail == TwoRowTail::AfterEachPanelPair
            && block.rows > plan.max_rows
            && block.rows % plan.max_rows == 2
            && self.group_left(block.m0) >= block.rows;
        let full_rows = if streamed_tail {
            block.rows - 2
        } else {
            block.rows
        };
        let mut tiles = [(0, 0, 0, 0); ROW_BLOCK];
        let count = self.tiles(plan, block, full_rows, &mut tiles);
        let panels = self.b.panels.len();
        for p in first_panel..panels {
            // SAFETY: the tiles are the block's rows, `p` a panel of B.
            unsafe { self.run_panel(plan, block, p, &tiles[..count]) };
            let second = (p - first_panel) % 2 == 1;
            if streamed_tail && (second || p + 1 == panels) {
                // The two rows after the full calls, over this panel and the one before
                // it (both in L1), or this last, odd one alone.
                let row = block.m0 + full_rows;
                // SAFETY: the two rows are the block's last, panels `p - 1` and `p` in B.
                unsafe {
                    let tile = |q: usize| self.tile_at(block, q, row, self.a_row(row), false);
                    if second {
                        micro_pair::<T>(2, plan.isa, tile(p - 1), tile(p));
                    } else {
                        micro::<T>(2, plan.isa, self.nr, tile(p));
                    }
                }
            }
        }
    }

    /// A block of a few rows, one tile, over two panels a call ([`Plan::pair_rows`]) and
    /// its last odd panel left to the panel loop; or over three panels a call
    /// ([`Plan::triple_rows`]) and its last one or two left. Returns the first panel
    /// the panel loop still runs (0: none ran here).
    ///
    /// # Safety
    /// The block lies inside the caller's `A` and `C`.
    unsafe fn run_short_block(&self, plan: &Plan, block: &Block<T>) -> usize {
        let fits = self.group_left(block.m0) >= block.rows;
        let a_tile = self.a_tile(block, block.m0);
        let panels = self.b.panels.len();
        // SAFETY: the tile is the block's rows, its panels in B.
        let tile = |q: usize| unsafe { self.tile_at(block, q, block.m0, a_tile, true) };
        let mut first_panel = 0;
        if (2..=plan.pair_rows).contains(&block.rows) && fits {
            while first_panel + 1 < panels {
                let (p, q) = (tile(first_panel), tile(first_panel + 1));
                // SAFETY: `tile_at` makes valid `Micro`s of the block's rows.
                unsafe { micro_pair::<T>(block.rows, plan.isa, p, q) };
                first_panel += 2;
            }
        } else if (3..=plan.triple_rows).contains(&block.rows) && fits {
            while first_panel + 2 < panels {
                let three = [0, 1, 2].map(|q| tile(first_panel + q));
                // SAFETY: `tile_at` makes valid `Micro`s of the block's rows.
                unsafe { micro_triple::<T>(block.rows, plan.isa, three) };
                first_panel += 3;
            }
        }
        first_panel
    }

    /// The block's first `full_rows` rows as tiles of [`tile_rows`] rows, none across
    /// a group's end, into `tiles`; returns how many. Worked out once per block, not on
    /// each panel: the row arithmetic divides by the group's and the call's rows.
    fn tiles(
        &self,
        plan: &Plan,
        block: &Block<T>,
        full_rows: usize,
        tiles: &mut [Tile; ROW_BLOCK],
    ) -> usize {
        let mut count = 0;
        let mut i = 0;
        while i < full_rows {
            let row = block.m0 + i;
            // A tile's rows are evenly spaced: it ends with its group.
            let r = tile_rows((full_rows - i).min(self.group_left(row)), plan.max_rows);
            tiles[count] = (i, r, self.a_tile(block, row), self.c_row(row));
            count += 1;
            i += r;
        }
        count
    }

    /// The block's `tiles` over panel `p`, the first one prefetching the block read
    /// after this one where the plan prefetches: the next panel's rows of this depth
    /// block, or after the last panel of the last row block, the first panel's next
    /// depth block when it has that many rows (the prefetch must stay inside `B`).
    ///
    /// # Safety
    /// The tiles are rows of the caller's `A` and `C`; `p` is a panel of `B`.
    unsafe fn run_panel(&self, plan: &Plan, block: &Block<T>, p: usize, tiles: &[Tile]) {
        let (b, k0, depth) = (&self.b, block.k0, block.depth);
        let last_rows = block.m0 + block.rows >= self.rows;
        let next = if p + 1 < b.panels.len() {
            Some(((p + 1) * b.depth + k0) * self.nr)
        } else if last_rows && k0 + 2 * depth <= b.depth {
            Some((k0 + depth) * self.nr)
        } else {
            None
        };
        for &(i, r, a_tile, c_tile) in tiles {
            let prefetch = match next {
                // SAFETY: the next block's offset, inside `B`'s data.
                Some(offset) if i == 0 && plan.prefetch => unsafe { b.data.as_ptr().add(offset) },
                _ => core::ptr::null(),
            };
            // SAFETY: the tile's rows are the caller's (its promise), `p` a panel of B,
            // `prefetch` null or inside B's data; `micro_args` makes a valid `Micro` of
            // the tile's `r` rows.
            unsafe {
                let args = self.micro_args(block, p, a_tile, c_tile, i == 0, prefetch);
                micro::<T>(r, plan.isa, self.nr, args)
            };
        }
    }
}

/// Rows of the next micro-kernel call when `left` rows remain: full calls of `max` rows,
/// and the last `max + r` rows (`r` short of a full call by more than two) as two even
/// calls. A call of `r` rows keeps `2r` accumulators in flight, and two FMA pipes of four
/// cycles' latency need eight: a 2-row call after full ones would run at half speed,
/// two even calls run at full speed. Fewer rows a call also cost where the latency is
/// covered (each call reads its panel once), so the rows before the last two calls stay
/// full calls rather than being spread evenly. Two rows alone stay one 2-row call, which
/// reads the panel once for both.
pub(super) fn tile_rows(left: usize, max: usize) -> usize {
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
