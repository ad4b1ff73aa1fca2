//! How one product runs beyond its plain tiles ([`Plan`]): decided once per call from
//! the instruction set, the size of `B` and how `A` is read, then read by the blocking
//! loop (`blocking.rs`).

use crate::simd::{self, Isa};

use super::packing::Packed;
use super::params::{PREFETCH_ABOVE_BYTES, kernel_rows_on, pair_rows, triple_rows};

/// What a block of full micro-kernel calls and two more rows does with the two rows
/// (AVX2 only, where a 2-row call over one panel keeps too few accumulators in flight).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TwoRowTail {
    /// Nothing special: the rows are tiled by `tile_rows` like any others.
    Tiled,
    /// The block ends before the two rows, which then form a block of their own that
    /// runs over pairs of panels. Only where `B` stays in L2 (the pairs read it again
    /// from there).
    OwnBlock,
    /// The two rows run paired, panel pair by panel pair, right after the full calls on
    /// the same two panels, while those are still in L1: where `B` streams from beyond
    /// L2, a block of their own would stream it again.
    AfterEachPanelPair,
}

/// The variants one product runs, fixed for the whole call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    /// The instruction set of the micro-kernels.
    pub isa: Isa,
    /// Rows of a full micro-kernel call ([`kernel_rows_on`]).
    pub max_rows: usize,
    /// `B` is larger than L2 ([`PREFETCH_ABOVE_BYTES`]): the micro-kernels prefetch the
    /// next block of it while they compute. Smaller, it stays in L2 between calls and a
    /// prefetch would only spend load slots.
    pub prefetch: bool,
    /// A block of 2 up to this many rows (one tile) runs over two panels a call (0:
    /// never): [`pair_rows`] where `B` stays in L2; beyond it such a product waits on
    /// memory, not on its multiply-adds.
    pub pair_rows: usize,
    /// A block of 3 up to this many rows runs over three panels a call (0: never), on
    /// the same condition: [`triple_rows`].
    pub triple_rows: usize,
    /// `A` is read down its columns (`rs == 1`, the backward's `dzᵀ`): a tile's rows are
    /// contiguous at each `k`, but its `k`s are `cs` apart (4 KiB for `4H = 1024`, the
    /// same L1 set every time), so each block of `A` is copied once, its `k`s
    /// `ROW_BLOCK` values apart, and every panel reads the copy from L1. Only for a
    /// product over more than one panel, and never for grouped rows.
    pub pack_a: bool,
    /// What a block of full calls and two rows does with the two rows.
    pub two_row_tail: TwoRowTail,
}

impl Plan {
    /// The plan of a product by `b` whose `A` has strides `rs` (rows) and `cs` (columns).
    pub fn new<T>(b: &Packed<'_, T>, rs: usize, cs: usize) -> Self {
        Self::for_isa(simd::isa(), b.bytes(), b.panel_count(), rs, cs)
    }

    /// [`Plan::new`] on `isa`, for a packed `B` of `b_bytes` bytes in `panels` panels.
    pub fn for_isa(isa: Isa, b_bytes: usize, panels: usize, rs: usize, cs: usize) -> Self {
        let prefetch = b_bytes > PREFETCH_ABOVE_BYTES;
        let kernel_pair_rows = pair_rows(isa);
        let pair_rows = if prefetch { 0 } else { kernel_pair_rows };
        let triple_rows = if prefetch { 0 } else { triple_rows(isa) };
        let pack_a = rs == 1 && cs > 1 && panels > 1;
        let two_row_tail = if pair_rows >= 2 && isa == Isa::Avx2 {
            TwoRowTail::OwnBlock
        } else if prefetch && isa == Isa::Avx2 && kernel_pair_rows >= 2 && !pack_a {
            TwoRowTail::AfterEachPanelPair
        } else {
            TwoRowTail::Tiled
        };
        Self {
            isa,
            max_rows: kernel_rows_on(isa),
            prefetch,
            pair_rows,
            triple_rows,
            pack_a,
            two_row_tail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variants each instruction set picks for a `B` in L2 and one beyond it, `A`
    /// read along its rows and down its columns.
    #[test]
    fn each_instruction_set_plans_its_variants() {
        let small = PREFETCH_ABOVE_BYTES;
        let large = PREFETCH_ABOVE_BYTES + 1;
        let x86 = cfg!(target_arch = "x86_64");
        // AVX2, B in L2: pairs up to 2 rows, triples of 3, the two-row tail its own block.
        let plan = Plan::for_isa(Isa::Avx2, small, 4, 256, 1);
        assert!(!plan.prefetch && !plan.pack_a);
        if x86 {
            assert_eq!((plan.pair_rows, plan.triple_rows), (2, 3));
            assert_eq!(plan.two_row_tail, TwoRowTail::OwnBlock);
        }
        // AVX2, B streamed: no pairs or triples, the two rows after each panel pair.
        let plan = Plan::for_isa(Isa::Avx2, large, 4, 256, 1);
        assert!(plan.prefetch);
        assert_eq!((plan.pair_rows, plan.triple_rows), (0, 0));
        if x86 {
            assert_eq!(plan.two_row_tail, TwoRowTail::AfterEachPanelPair);
        }
        // ... unless A is copied block by block (read down its columns).
        let plan = Plan::for_isa(Isa::Avx2, large, 4, 1, 1024);
        assert!(plan.pack_a);
        assert_eq!(plan.two_row_tail, TwoRowTail::Tiled);
        // A single panel: A is read in place even down its columns.
        assert!(!Plan::for_isa(Isa::Avx2, small, 1, 1, 1024).pack_a);
        // AVX-512 keeps its even calls; the baseline has no paired kernels.
        for isa in [Isa::Avx512, Isa::Baseline] {
            for bytes in [small, large] {
                assert_eq!(
                    Plan::for_isa(isa, bytes, 4, 256, 1).two_row_tail,
                    TwoRowTail::Tiled
                );
            }
        }
        if x86 {
            assert_eq!(Plan::for_isa(Isa::Avx512, small, 4, 256, 1).pair_rows, 4);
        }
        assert_eq!(Plan::for_isa(Isa::Baseline, small, 4, 256, 1).pair_rows, 0);
        assert_eq!(Plan::for_isa(Isa::Avx512, small, 4, 256, 1).max_rows, 8);
        assert_eq!(Plan::for_isa(Isa::Avx2, small, 4, 256, 1).max_rows, 6);
    }
}
