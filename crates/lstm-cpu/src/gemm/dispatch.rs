//! The micro-kernel for a call: by instruction set, panel width and rows, the single,
//! paired and tripled calls.

use crate::real::Real;
use crate::simd::Isa;

use super::micro::Micro;
use super::portable::kernel_body;
#[cfg(target_arch = "x86_64")]
use super::x86::{kernel_avx2, kernel_avx512, pair_avx2, pair_avx512, triple_avx2};

pub(super) const BASELINE: u8 = 0;
pub(super) const AVX2: u8 = 1;
pub(super) const AVX512: u8 = 2;

#[inline(always)]
pub(super) unsafe fn micro<T: Real>(rows: usize, isa: Isa, panel: usize, args: Micro<T>) {
    // SAFETY: `args` is a valid `Micro` (the caller's promise) and `isa` was reported by
    // the CPU; each arm's kernel reads and writes only what `args` covers.
    unsafe {
        match (isa, panel) {
            (Isa::Avx512, 32) => rows_dispatch::<T, 32, AVX512>(rows, args),
            (Isa::Avx512, 16) => rows_dispatch::<T, 16, AVX512>(rows, args),
            (Isa::Avx2, 16) => rows_dispatch::<T, 16, AVX2>(rows, args),
            (Isa::Avx2, 8) => rows_dispatch::<T, 8, AVX2>(rows, args),
            (Isa::Baseline, 16) => rows_dispatch::<T, 16, BASELINE>(rows, args),
            (Isa::Baseline, 8) => rows_dispatch::<T, 8, BASELINE>(rows, args),
            (isa, panel) => unreachable!("no micro-kernel for {isa:?} panels of {panel}"),
        }
    }
}

/// [`micro`] over two panels at once: `left`'s tile and `right`'s, the same rows of `A`
/// (see [`pair_rows`](super::params::pair_rows); `rows` is 2 to 4).
#[inline(always)]
pub(super) unsafe fn micro_pair<T: Real>(rows: usize, isa: Isa, left: Micro<T>, right: Micro<T>) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F32x16, F64x4, F64x8};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) `isa` names a feature set the CPU reported, the element type
        // matches the vector's, and the `Micro`s are valid (the caller's promise).
        unsafe {
            match (isa, f32, rows) {
                (Isa::Avx512, true, 2) => pair_avx512::<F32x16, 2>(left.cast(), right.cast()),
                (Isa::Avx512, true, 3) => pair_avx512::<F32x16, 3>(left.cast(), right.cast()),
                (Isa::Avx512, true, 4) => pair_avx512::<F32x16, 4>(left.cast(), right.cast()),
                (Isa::Avx512, false, 2) => pair_avx512::<F64x8, 2>(left.cast(), right.cast()),
                (Isa::Avx512, false, 3) => pair_avx512::<F64x8, 3>(left.cast(), right.cast()),
                (Isa::Avx512, false, 4) => pair_avx512::<F64x8, 4>(left.cast(), right.cast()),
                (Isa::Avx2, true, 2) => pair_avx2::<F32x8, 2>(left.cast(), right.cast()),
                (Isa::Avx2, false, 2) => pair_avx2::<F64x4, 2>(left.cast(), right.cast()),
                (isa, _, rows) => unreachable!("no paired micro-kernel of {rows} rows on {isa:?}"),
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, isa, left, right);
        unreachable!("paired panels are x86-64 only (pair_rows)");
    }
}

/// [`micro`] over three panels at once as two tiles of a panel and a half: `panels[0]`
/// and the low half of `panels[1]`, then its high half and `panels[2]` (see
/// [`triple_rows`](super::params::triple_rows); `rows` is 3).
#[inline(always)]
pub(super) unsafe fn micro_triple<T: Real>(rows: usize, isa: Isa, panels: [Micro<T>; 3]) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F64x4};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) `isa` names a feature set the CPU reported, the element type
        // matches the vector's, and the `Micro`s are valid (the caller's promise).
        unsafe {
            match (isa, f32, rows) {
                (Isa::Avx2, true, 3) => triple_avx2::<F32x8, 3>(panels.map(|p| p.cast())),
                (Isa::Avx2, false, 3) => triple_avx2::<F64x4, 3>(panels.map(|p| p.cast())),
                (isa, _, rows) => {
                    unreachable!("no three-panel micro-kernel of {rows} rows on {isa:?}")
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (rows, isa, panels);
        unreachable!("three-panel calls are x86-64 only (triple_rows)");
    }
}

#[inline(always)]
pub(super) unsafe fn rows_dispatch<T: Real, const NR: usize, const ISA: u8>(
    rows: usize,
    args: Micro<T>,
) {
    // SAFETY: `args` is a valid `Micro` of `rows` rows and ISA was reported by the CPU
    // (the caller's promise); each arm is the same kernel for a fixed row count.
    unsafe {
        match rows {
            1 => kernel::<T, 1, NR, ISA>(args),
            2 => kernel::<T, 2, NR, ISA>(args),
            3 => kernel::<T, 3, NR, ISA>(args),
            4 => kernel::<T, 4, NR, ISA>(args),
            5 => kernel::<T, 5, NR, ISA>(args),
            6 => kernel::<T, 6, NR, ISA>(args),
            7 => kernel::<T, 7, NR, ISA>(args),
            _ => kernel::<T, 8, NR, ISA>(args),
        }
    }
}

#[inline(always)]
pub(super) unsafe fn kernel<T: Real, const MR: usize, const NR: usize, const ISA: u8>(
    args: Micro<T>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::vector::{F32x8, F32x16, F64x4, F64x8};
        let f32 = core::any::TypeId::of::<T>() == core::any::TypeId::of::<f32>();
        // SAFETY: (all arms) ISA names a feature set the CPU reported, the element type
        // matches the vector's, and `args` is a valid `Micro` (the caller's promise).
        unsafe {
            match (ISA, f32) {
                (AVX512, true) => return kernel_avx512::<F32x16, MR>(args.cast()),
                (AVX512, false) => return kernel_avx512::<F64x8, MR>(args.cast()),
                (AVX2, true) => return kernel_avx2::<F32x8, MR>(args.cast()),
                (AVX2, false) => return kernel_avx2::<F64x4, MR>(args.cast()),
                _ => {}
            }
        }
    }
    // SAFETY: `args` is a valid `Micro` (the caller's promise); plain Rust arithmetic.
    unsafe { kernel_body::<T, MR, NR, false>(args) }
}
