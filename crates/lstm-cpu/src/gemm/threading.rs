//! A product's rows shared out over a team of threads ([`par_gemm`]).

use crate::real::Real;
use crate::team::{SharedPtr, run_team};

use super::driver::gemm_into;
use super::packing::{Packed, packed_end};
use super::params::kernel_rows;

/// What a product does with what `C` held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Store {
    /// `C += A · B`.
    Add,
    /// `C = A · B` over whatever C held: for outputs that would otherwise be zeroed
    /// first (`Buffer::for_overwrite`); bit for bit what zeroing C and adding gives.
    Overwrite,
}

/// [`gemm`](super::driver::gemm) with the rows of `A` and `C` split over up to `threads`
/// threads, adding to C or storing over it (`store`).
///
/// # Safety
/// As [`gemm`](super::driver::gemm).
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

/// [`par_gemm`], or with `bias` as [`gemm_bias`](super::driver::gemm_bias).
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
    // Saturating: only a thread count is decided from it.
    let work = rows.saturating_mul(columns).saturating_mul(b.depth);
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
