//! The GEMM's entry points: `C += A · B` ([`gemm`]), `C = bias + A · B` ([`gemm_bias`]),
//! over rows in groups ([`gemm_bias_grouped`]), each a call of the blocking loop.

use core::ops::Range;

use crate::real::Real;

use super::blocking::gemm_rows;
use super::packing::Packed;
use super::row_groups::RowGroups;

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
pub(super) unsafe fn gemm_into<T: Real>(
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
