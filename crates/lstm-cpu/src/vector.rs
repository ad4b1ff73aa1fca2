//! Explicit vector registers for the GEMM micro-kernel.
//!
//! The plain-Rust micro-kernel over `[[T; NR]; MR]` arrays vectorises well for AVX2's
//! 6×16 `f32` tile, but LLVM does not unroll the row loop of AVX-512's 8×32 tile (it
//! unrolls the 32 scalar columns first and then finds the row loop too big), so the
//! accumulators live on the stack. Written with one value per vector register, the row
//! loop is small and unrolls, and every accumulator stays in a register.

#[cfg(target_arch = "x86_64")]
use core::arch::x86_64::*;

use crate::real::Real;

/// One vector register of `E`, on one instruction set.
///
/// # Safety
/// The methods use the instruction set's intrinsics: call them only from code compiled
/// with (and running on a CPU with) that instruction set. `load` reads and `store` writes
/// `LANES` consecutive values at the pointer, which must be valid for that.
pub(crate) trait Vector: Copy {
    type E: Real;
    type V: Copy;
    const LANES: usize;
    unsafe fn zero() -> Self::V;
    unsafe fn splat(x: Self::E) -> Self::V;
    unsafe fn load(p: *const Self::E) -> Self::V;
    unsafe fn store(p: *mut Self::E, v: Self::V);
    /// `a · b + c`, fused.
    unsafe fn fma(a: Self::V, b: Self::V, c: Self::V) -> Self::V;
    unsafe fn add(a: Self::V, b: Self::V) -> Self::V;
}

macro_rules! vector {
    ($name:ident, $e:ty, $v:ty, $lanes:expr, $zero:ident, $splat:ident, $load:ident,
     $store:ident, $fma:ident, $add:ident) => {
        #[cfg(target_arch = "x86_64")]
        #[derive(Clone, Copy)]
        pub(crate) struct $name;

        #[cfg(target_arch = "x86_64")]
        impl Vector for $name {
            type E = $e;
            type V = $v;
            const LANES: usize = $lanes;
            #[inline(always)]
            unsafe fn zero() -> $v {
                // SAFETY: the trait's contract: the caller runs on this instruction set.
                unsafe { $zero() }
            }
            #[inline(always)]
            unsafe fn splat(x: $e) -> $v {
                // SAFETY: the trait's contract: the caller runs on this instruction set.
                unsafe { $splat(x) }
            }
            #[inline(always)]
            unsafe fn load(p: *const $e) -> $v {
                // SAFETY: the trait's contract (instruction set, and `LANES` readable
                // values at `p`; an unaligned load needs no alignment).
                unsafe { $load(p) }
            }
            #[inline(always)]
            unsafe fn store(p: *mut $e, v: $v) {
                // SAFETY: the trait's contract (instruction set, and `LANES` writable
                // values at `p`; an unaligned store needs no alignment).
                unsafe { $store(p, v) }
            }
            #[inline(always)]
            unsafe fn fma(a: $v, b: $v, c: $v) -> $v {
                // SAFETY: the trait's contract: the caller runs on this instruction set.
                unsafe { $fma(a, b, c) }
            }
            #[inline(always)]
            unsafe fn add(a: $v, b: $v) -> $v {
                // SAFETY: the trait's contract: the caller runs on this instruction set.
                unsafe { $add(a, b) }
            }
        }
    };
}

vector!(
    F32x16,
    f32,
    __m512,
    16,
    _mm512_setzero_ps,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_storeu_ps,
    _mm512_fmadd_ps,
    _mm512_add_ps
);
vector!(
    F64x8,
    f64,
    __m512d,
    8,
    _mm512_setzero_pd,
    _mm512_set1_pd,
    _mm512_loadu_pd,
    _mm512_storeu_pd,
    _mm512_fmadd_pd,
    _mm512_add_pd
);
vector!(
    F32x8,
    f32,
    __m256,
    8,
    _mm256_setzero_ps,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_fmadd_ps,
    _mm256_add_ps
);
vector!(
    F64x4,
    f64,
    __m256d,
    4,
    _mm256_setzero_pd,
    _mm256_set1_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_fmadd_pd,
    _mm256_add_pd
);
