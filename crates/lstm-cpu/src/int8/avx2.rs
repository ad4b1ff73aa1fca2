//! The raw sums on AVX2: `vpmaddubsw` multiplies 32 `u8` activations by 32 `i8` weights
//! and adds neighbouring products into 16 `i16` lanes, saturating: exact only for
//! weights in `-63..=63` (`QuantLevels::Reduced`: 2 · 255 · 63 = 32,130 fits `i16`).
//! `vpmaddwd` by ones widens the pairs into 8 `i32` lanes. Four weight rows share each
//! 32-byte load of the activations; the last bytes of a row, past a whole vector, are
//! summed one at a time.

use core::arch::x86_64::{
    __m256i, _mm_add_epi32, _mm_cvtsi128_si32, _mm_hadd_epi32, _mm256_add_epi32,
    _mm256_castsi256_si128, _mm256_extracti128_si256, _mm256_loadu_si256, _mm256_madd_epi16,
    _mm256_maddubs_epi16, _mm256_set1_epi16, _mm256_setzero_si256,
};

/// Bytes of one vector.
const LANES: usize = 32;

/// Weight rows that share each load of the activations.
const ROWS: usize = 4;

/// `out[n] = Σ_k a_row[k] · w[n · depth + k]`, `depth = a_row.len()`, each weight in
/// `-63..=63`.
///
/// # Safety
/// The CPU has avx2, and `w` holds at least `out.len() · a_row.len()` values.
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn raw_sums(a_row: &[u8], w: &[i8], out: &mut [i32]) {
    let depth = a_row.len();
    for (i, sums) in out.chunks_mut(ROWS).enumerate() {
        let rows = &w[i * ROWS * depth..][..sums.len() * depth];
        let acc = block(a_row, rows, sums.len());
        for (r, sum) in sums.iter_mut().enumerate() {
            let row = &rows[r * depth..][..depth];
            let tail: i32 = a_row[depth / LANES * LANES..]
                .iter()
                .zip(&row[depth / LANES * LANES..])
                .map(|(&a, &v)| i32::from(a) * i32::from(v))
                .sum();
            *sum = acc[r] + tail;
        }
    }
}

/// The sums over the whole vectors of each of `rows` (at most [`ROWS`]) weight rows of
/// `w`, each `a_row.len()` long.
#[inline]
#[target_feature(enable = "avx2")]
fn block(a_row: &[u8], w: &[i8], rows: usize) -> [i32; ROWS] {
    let depth = a_row.len();
    let ones = _mm256_set1_epi16(1);
    let mut acc: [__m256i; ROWS] = [_mm256_setzero_si256(); ROWS];
    for k in (0..depth / LANES * LANES).step_by(LANES) {
        // SAFETY: bytes `k..k + 32` lie within the activation row and each of the `rows`
        // weight rows of `w` (`k + 32 <= depth`).
        unsafe {
            let a = _mm256_loadu_si256(a_row.as_ptr().add(k).cast());
            for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                let v = _mm256_loadu_si256(w.as_ptr().add(r * depth + k).cast());
                let pairs = _mm256_maddubs_epi16(a, v);
                *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(pairs, ones));
            }
        }
    }
    let mut sums = [0; ROWS];
    for (sum, acc) in sums.iter_mut().zip(acc) {
        let half = _mm_add_epi32(
            _mm256_castsi256_si128(acc),
            _mm256_extracti128_si256::<1>(acc),
        );
        let quarter = _mm_hadd_epi32(half, half);
        *sum = _mm_cvtsi128_si32(_mm_hadd_epi32(quarter, quarter));
    }
    sums
}
