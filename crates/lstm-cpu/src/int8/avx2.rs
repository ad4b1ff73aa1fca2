//! The raw sums on AVX2: one 32-byte load of a weight panel holds four inputs of each
//! of its 8 rows; `vpmaddubsw` multiplies them by four activations of a row (broadcast
//! to every lane) and adds neighbouring products into `i16` lanes, `vpmaddwd` by ones
//! adds those pairs into 8 `i32` sums, one per output. The pair sums saturate past
//! `i16`: exact only for weights in `-63..=63` (`QuantLevels::Reduced`: 2 · 255 · 63 =
//! 32,130). A tile of up to 4 rows and 2 panels keeps its 8 sums in registers.

use core::arch::x86_64::{
    __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_maddubs_epi16,
    _mm256_set1_epi16, _mm256_set1_epi32, _mm256_setzero_si256, _mm256_storeu_si256,
};

use crate::int8::panels::GROUP;
use crate::int8::tile::{Tile, group_of};

/// Rows of a panel: the `i32` lanes of a vector.
const PANEL_ROWS: usize = 8;

/// [`DotKernel::sums`](crate::int8::dot::DotKernel::sums) on AVX2.
///
/// # Safety
/// The CPU has avx2, the tile's weights are in `-63..=63`, and the tile's operands and
/// `sums` are as long as `DotKernel::sums` checks (up to 4 rows and 2 panels).
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn sums(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: (every arm) the caller's promise, for the tile's own size.
    unsafe {
        match (tile.rows, tile.panels) {
            (1, 1) => tile_sums::<1, 1>(tile, sums),
            (1, 2) => tile_sums::<1, 2>(tile, sums),
            (2, 1) => tile_sums::<2, 1>(tile, sums),
            (2, 2) => tile_sums::<2, 2>(tile, sums),
            (3, 1) => tile_sums::<3, 1>(tile, sums),
            (3, 2) => tile_sums::<3, 2>(tile, sums),
            (4, 1) => tile_sums::<4, 1>(tile, sums),
            (4, 2) => tile_sums::<4, 2>(tile, sums),
            (rows, panels) => unreachable!("no AVX2 tile of {rows} rows × {panels} panels"),
        }
    }
}

/// The sums of a tile of `R` rows and `P` panels.
///
/// # Safety
/// As [`sums`], with `tile.rows == R` and `tile.panels == P`.
#[inline]
// `p` addresses both a panel's weights and its sums: an index reads better than a zip.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2")]
unsafe fn tile_sums<const R: usize, const P: usize>(tile: &Tile<'_>, sums: &mut [i32]) {
    let depth = tile.depth;
    let (a, w) = (tile.a.as_ptr(), tile.w.as_ptr());
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_si256(); P]; R];
    let whole = depth / GROUP;
    for g in 0..whole {
        let mut x = [_mm256_setzero_si256(); R];
        for (r, x) in x.iter_mut().enumerate() {
            // SAFETY: bytes `4g..4g + 4` of row `r` lie within `a` (`4g + 4 <= depth`).
            let four = unsafe { a.add(r * depth + g * GROUP).cast::<i32>().read_unaligned() };
            *x = _mm256_set1_epi32(four);
        }
        for p in 0..P {
            // SAFETY: group `g` of panel `p`: 32 bytes within `w` (`g < groups`).
            let v = unsafe { _mm256_loadu_si256(w.add(p * tile.panel_len + g * 32).cast()) };
            for r in 0..R {
                let pairs = _mm256_maddubs_epi16(x[r], v);
                acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    if whole * GROUP < depth {
        let k = whole * GROUP;
        let x: [__m256i; R] =
            core::array::from_fn(|r| _mm256_set1_epi32(group_of(&tile.a[r * depth..][..depth], k)));
        for p in 0..P {
            // SAFETY: the last group of panel `p`, within `w`.
            let v = unsafe { _mm256_loadu_si256(w.add(p * tile.panel_len + whole * 32).cast()) };
            for r in 0..R {
                let pairs = _mm256_maddubs_epi16(x[r], v);
                acc[r][p] = _mm256_add_epi32(acc[r][p], _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    let width = P * PANEL_ROWS;
    for (r, acc) in acc.iter().enumerate() {
        for (p, &acc) in acc.iter().enumerate() {
            // SAFETY: 8 sums at `r · width + 8p`, within `sums` (`r < R`, `p < P`).
            unsafe {
                _mm256_storeu_si256(
                    sums.as_mut_ptr().add(r * width + p * PANEL_ROWS).cast(),
                    acc,
                )
            };
        }
    }
}
