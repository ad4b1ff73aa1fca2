//! The raw sums on AVX-512 VNNI: each `vpdpbusd` adds four `u8 × i8` products into each
//! of 16 `i32` lanes (no saturation: the sums are exact up to `MAX_DEPTH` inputs). Four
//! weight rows share each 64-byte load of the activations; the last partial block of a
//! row is loaded under a byte mask (zeros past the row's end).

use core::arch::x86_64::{
    __m512i, _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_maskz_loadu_epi8,
    _mm512_reduce_add_epi32, _mm512_setzero_si512,
};

/// Bytes of one vector.
const LANES: usize = 64;

/// Weight rows that share each load of the activations.
const ROWS: usize = 4;

/// `out[n] = Σ_k a_row[k] · w[n · depth + k]`, `depth = a_row.len()`.
///
/// # Safety
/// The CPU has avx512f, avx512bw and avx512vnni, and `w` holds at least
/// `out.len() · a_row.len()` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn raw_sums(a_row: &[u8], w: &[i8], out: &mut [i32]) {
    let depth = a_row.len();
    for (i, sums) in out.chunks_mut(ROWS).enumerate() {
        // SAFETY: rows `i · ROWS..` (`sums.len()` of them) of `w` lie within it (the
        // caller's promise), and this function's features are the caller's.
        let acc = unsafe { block(a_row, w.as_ptr().add(i * ROWS * depth), sums.len()) };
        sums.copy_from_slice(&acc[..sums.len()]);
    }
}

/// The sums of `rows` (at most [`ROWS`]) weight rows starting at `w`, each `a_row.len()`
/// long.
///
/// # Safety
/// As [`raw_sums`], for the `rows · a_row.len()` values from `w`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn block(a_row: &[u8], w: *const i8, rows: usize) -> [i32; ROWS] {
    let depth = a_row.len();
    let mut acc: [__m512i; ROWS] = [_mm512_setzero_si512(); ROWS];
    let full = depth / LANES * LANES;
    let mut k = 0;
    while k < full {
        // SAFETY: bytes `k..k + 64` lie within the activation row and each weight row.
        unsafe {
            let a = _mm512_loadu_si512(a_row.as_ptr().add(k).cast());
            for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                let v = _mm512_loadu_si512(w.add(r * depth + k).cast());
                *acc = _mm512_dpbusd_epi32(*acc, a, v);
            }
        }
        k += LANES;
    }
    if k < depth {
        let mask = u64::MAX >> (LANES - (depth - k));
        // SAFETY: the masked loads read only bytes `k..depth` of each row.
        unsafe {
            let a = _mm512_maskz_loadu_epi8(mask, a_row.as_ptr().add(k).cast());
            for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                let v = _mm512_maskz_loadu_epi8(mask, w.add(r * depth + k).cast());
                *acc = _mm512_dpbusd_epi32(*acc, a, v);
            }
        }
    }
    let mut sums = [0; ROWS];
    for (sum, acc) in sums.iter_mut().zip(acc) {
        *sum = _mm512_reduce_add_epi32(acc);
    }
    sums
}
