//! The x86-64 micro-kernels on vector registers (AVX-512 and AVX2+FMA): single,
//! paired and tripled tiles, and their prefetches.

use crate::real::Real;

use super::micro::{Micro, store_pieces};
use super::params::{BANK_DEPTH, L1_PREFETCH_ROWS};

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn kernel_avx512<S: crate::vector::Vector, const MR: usize>(args: Micro<S::E>) {
    // SAFETY: compiled for AVX-512 (S's set), run only where the CPU has it, on a valid
    // `Micro` (the caller's promise).
    unsafe { vector_body::<S, MR>(args) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn kernel_avx2<S: crate::vector::Vector, const MR: usize>(args: Micro<S::E>) {
    // SAFETY: compiled for AVX2+FMA (S's set), run only where the CPU has them, on a
    // valid `Micro` (the caller's promise).
    unsafe { vector_body::<S, MR>(args) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn pair_avx512<S: crate::vector::Vector, const MR: usize>(
    left: Micro<S::E>,
    right: Micro<S::E>,
) {
    // SAFETY: compiled for S's instruction set, run only where the CPU has it, on valid
    // `Micro`s (the caller's promise).
    unsafe { pair_body::<S, MR>(left, right) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pair_avx2<S: crate::vector::Vector, const MR: usize>(
    left: Micro<S::E>,
    right: Micro<S::E>,
) {
    // SAFETY: compiled for S's instruction set, run only where the CPU has it, on valid
    // `Micro`s (the caller's promise).
    unsafe { pair_body::<S, MR>(left, right) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn triple_avx2<S: crate::vector::Vector, const MR: usize>(
    panels: [Micro<S::E>; 3],
) {
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
pub(super) unsafe fn prefetch_c<S: crate::vector::Vector>(m: &Micro<S::E>, rows: usize) {
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
pub(super) unsafe fn prefetch_row<S: crate::vector::Vector>(
    next: *const S::E,
    offset: usize,
    nr: usize,
) {
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
pub(super) unsafe fn vector_body<S: crate::vector::Vector, const MR: usize>(m: Micro<S::E>) {
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
            // two multiply-adds). The banks are summed into the row every `BANK_DEPTH`
            // k's (see there).
            let mut k0 = 0;
            while k0 < m.depth {
                let end = (k0 + BANK_DEPTH).min(m.depth);
                let mut banks = [[S::zero(); 2]; 4];
                let mut k = k0;
                while k + 4 <= end {
                    for (u, bank) in banks.iter_mut().enumerate() {
                        let a = S::splat(*m.a.add((k + u) * m.cs));
                        let b = m.b.add((k + u) * nr);
                        bank[0] = S::fma(a, S::load(b), bank[0]);
                        bank[1] = S::fma(a, S::load(b.add(lanes)), bank[1]);
                    }
                    k += 4;
                }
                while k < end {
                    let a = S::splat(*m.a.add(k * m.cs));
                    let b = m.b.add(k * nr);
                    banks[0][0] = S::fma(a, S::load(b), banks[0][0]);
                    banks[0][1] = S::fma(a, S::load(b.add(lanes)), banks[0][1]);
                    k += 1;
                }
                for h in 0..2 {
                    let block = S::add(
                        S::add(banks[0][h], banks[1][h]),
                        S::add(banks[2][h], banks[3][h]),
                    );
                    acc[0][h] = S::add(acc[0][h], block);
                }
                k0 = end;
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
/// accumulators a row (see [`pair_rows`](super::params::pair_rows)).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn pair_body<S: crate::vector::Vector, const MR: usize>(
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
/// [`triple_rows`](super::params::triple_rows)): the first panel and the middle one's low
/// half, then the middle one's high half and the last panel. The middle panel's low half
/// waits in memory between the two (one store a row, outside the loops).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn triple_body<S: crate::vector::Vector, const MR: usize>(
    panels: [Micro<S::E>; 3],
) {
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
pub(super) unsafe fn triple_tile<S: crate::vector::Vector, const MR: usize>(
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
pub(super) unsafe fn store_row<S: crate::vector::Vector>(
    m: &Micro<S::E>,
    i: usize,
    low: S::V,
    high: S::V,
) {
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
