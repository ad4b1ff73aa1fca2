//! The GEMM's tuning parameters: panel width, rows per micro-kernel call, the
//! blocking sizes and where prefetching and the paired and tripled calls apply, per
//! instruction set.

use crate::simd::{self, Isa};

/// Columns of a packed panel: two vector registers of `T`.
pub(crate) fn panel<T>() -> usize {
    2 * simd::isa().vector_bytes() / core::mem::size_of::<T>()
}

/// Rows of `A` per micro-kernel call on this CPU ([`kernel_rows_on`]).
pub(crate) fn kernel_rows() -> usize {
    kernel_rows_on(simd::isa())
}

/// Rows of `A` per micro-kernel call on `isa`: the accumulators (`rows × 2` registers)
/// fill most of the register file (16 registers on AVX2, 32 on AVX-512).
pub(super) fn kernel_rows_on(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 8,
        Isa::Avx2 | Isa::Baseline => 6,
    }
}

/// Rows of `A` up to which a micro-kernel call covers two panels at once (0: never). A
/// tile of `r` rows keeps `2r` accumulators on one panel, and two FMA pipes of four
/// cycles' latency need eight in flight: tiles of 2-4 rows (batches of 2-4 rows, or 8
/// split by rows over two threads) wait on their own results over one panel, not over
/// two (`4r`). AVX2's 16 registers hold four accumulators a row and four vectors of `B`
/// for two rows only; AVX-512's 32 hold four rows.
pub(super) fn pair_rows(isa: Isa) -> usize {
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
/// each (0: none; see [`micro_triple`](super::dispatch::micro_triple)). A 3-row tile on
/// one panel keeps 6 accumulators, too few for two FMA pipes of four cycles' latency,
/// and AVX2's 16 registers hold no paired 3-row tile (see [`pair_rows`]); over a panel
/// and a half it keeps 9, with three vectors of `B` and the broadcast 13 registers. A
/// 4-row call is not held by the latency (`docs/fused-cpu.md`), and the last 3 rows of a
/// block of full calls would pay a pass of their own over `B`: only a block of 3 rows
/// runs this way.
pub(super) fn triple_rows(isa: Isa) -> usize {
    match isa {
        _ if !cfg!(target_arch = "x86_64") => 0,
        Isa::Avx2 => 3,
        Isa::Avx512 | Isa::Baseline => 0,
    }
}
/// Depth of one pass over `A` and a panel (the panel slice stays in L1 while the block's
/// tiles read it); a one-row product runs its whole depth in one pass (`blocking.rs`).
pub(super) const DEPTH_BLOCK: usize = 256;
/// Depth over which a one-row product's four accumulator banks sum before they are
/// added to the row's total. The banks of one pass over the whole depth (a one-row
/// product's single depth block) would each sum a quarter of it: at a depth of 4096
/// (the backward's `dz · W_hh` at H = 1024) a rounding bound of about 1024 ε, and on
/// constant inputs an error of up to 1.35e-5 relative, against 5e-7 with totals every 256 (and
/// the 256-deep sums of the other tiles). Same reads, four more additions per 256 k's.
pub(super) const BANK_DEPTH: usize = 256;
/// Rows of a panel packed together when packing transposes (see
/// [`PackedB::pack`](super::packing::PackedB::pack)).
pub(super) const TRANSPOSE_DEPTH: usize = 16;
/// Blocks of [`TRANSPOSE_DEPTH`] rows ahead that a transposing pack prefetches its
/// source (see [`PackedB::pack_groups`](super::packing::PackedB::pack_groups)).
pub(super) const TRANSPOSE_PREFETCH_BLOCKS: usize = 2;
/// Packed `B` larger than this is prefetched block by block (see
/// [`Micro::prefetch`](super::micro::Micro::prefetch)); smaller stays in L2 (1-2 MiB
/// per core on current x86 cores), where a prefetch only spends load slots.
pub(super) const PREFETCH_ABOVE_BYTES: usize = 1 << 20;
/// Rows of a panel ahead of the one it multiplies that the micro-kernel of two rows or
/// more prefetches into L1, on AVX-512, where a panel row is two cache lines: a step's
/// `W_hhᵀ` of up to 1 MiB stays in L2 but not in L1, and at two new lines every 8 cycles
/// (an 8-row tile) the hardware's L1 prefetcher falls behind. On AVX2 (one line a row)
/// the hardware keeps up and the prefetch is off. Only the first tile of a row block on
/// a panel prefetches: the later ones find the panel's rows in L1.
pub(super) const L1_PREFETCH_ROWS: usize = 8;
/// Rows of `A` per pass (`A`'s block stays in L2 while the panels stream past); a
/// multiple of every [`kernel_rows`].
pub(super) const ROW_BLOCK: usize = 96;
