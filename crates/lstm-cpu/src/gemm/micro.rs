//! One micro-kernel call's arguments ([`Micro`]) and their contract, and the stores
//! every kernel shares (a tile into gathered columns).

use crate::real::Real;

use super::packing::Piece;

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
pub(super) struct Micro<T> {
    pub(super) depth: usize,
    pub(super) a: *const T,
    pub(super) rs: usize,
    pub(super) cs: usize,
    pub(super) b: *const T,
    pub(super) c: *mut T,
    pub(super) ldc: usize,
    pub(super) width: usize,
    /// Where the next `B` block starts (null: none): the micro-kernel of two rows or more
    /// prefetches it, one row of it per row of its own, so the next block streams in
    /// while this one computes. Rows of `B` are the step's whole weight matrix for the
    /// recurrent product, too large for L2 at wide layers (36 MB at H = 1500), and the
    /// hardware prefetcher restarts cold at every block.
    pub(super) prefetch: *const T,
    /// Non-null in the first depth block of [`gemm_bias`](super::driver::gemm_bias): the
    /// bias of the panel's columns, stored with the tile (`C = bias + tile`) instead of
    /// adding the tile to C.
    pub(super) bias: *const T,
    /// A gathered panel's pieces (`pieces_len == 0`: its columns are consecutive).
    pub(super) pieces: *const Piece,
    pub(super) pieces_len: usize,
    /// The first tile of its row block on this panel: the one that brings the panel's
    /// rows into L1 (see [`L1_PREFETCH_ROWS`](super::params::L1_PREFETCH_ROWS)); the tiles
    /// after it find them there.
    pub(super) first_tile: bool,
}

impl<T> Micro<T> {
    /// The same call on another element type of the same values (the caller checked that
    /// the types are the same).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) fn cast<U>(self) -> Micro<U> {
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
pub(super) unsafe fn load<T: Real, const NR: usize>(p: *const T) -> [T; NR] {
    // SAFETY: the caller's panel holds NR values at p.
    unsafe { core::ptr::read_unaligned(p as *const [T; NR]) }
}

/// `C = base + tile` on a tile row's valid columns: `0..width` where the panel's columns
/// are consecutive, else piece by piece. `c` and `base` point at the panel's first
/// column in C's row and in what the tile is added to.
///
/// # Safety
/// `c` and `base` cover the columns of every piece of the panel.
#[inline(always)]
pub(super) unsafe fn store_pieces<T: Real>(m: &Micro<T>, tile: &[T], c: *mut T, base: *const T) {
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
