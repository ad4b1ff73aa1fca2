//! The element types the kernel runs on (`f32` for speed, `f64` for tests) and their
//! gate non-linearities.
//!
//! `f32` uses a branch-free `exp` (a degree-6 polynomial after a `2ⁿ` range reduction,
//! [`exp_parts`]) so that the gate loops vectorise: `σ(x) = 1/(1 + e^-x)` and
//! `tanh(x) = m/(m + 2)` with `m = e^2x − 1`. Largest errors (unit test, `[-30, 30]`):
//! 1.4e-7 relative for σ, 1.5e-7 absolute for tanh and 1.6e-7 relative near 0, far
//! inside the golden tolerance. Code compiled for FMA evaluates them with fused
//! multiply-adds ([`Real::sigmoid_on`]): the gate math is bound by its count of vector
//! operations. `f64` calls the standard library: it exists for exact parity tests, not
//! for speed.

use core::fmt::Debug;
use core::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

/// A floating-point element type of the kernel: `f32` or `f64`.
///
/// Sealed: the micro-kernels pick their vector registers by asking whether the type is
/// `f32` and take any other for `f64`, so a third type would be read as the wrong one.
pub trait Real:
    sealed::Sealed
    + Copy
    + Send
    + Sync
    + Debug
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + 'static
{
    /// `0`.
    const ZERO: Self;
    /// `1`.
    const ONE: Self;
    /// Not a number (what scratch buffers hold in builds with debug assertions).
    const NAN: Self;

    /// The nearest value of this type.
    fn from_f64(value: f64) -> Self;
    /// The value as `f64` (exact).
    fn to_f64(self) -> f64;
    /// `self * a + b`, fused when the caller is compiled with FMA.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// Logistic function `1 / (1 + e^-x)`.
    #[inline(always)]
    fn sigmoid(self) -> Self {
        self.sigmoid_on::<false>()
    }
    /// Hyperbolic tangent.
    #[inline(always)]
    fn tanh(self) -> Self {
        self.tanh_on::<false>()
    }
    /// [`Real::sigmoid`] in code compiled with (`FMA = true`) or without fused
    /// multiply-adds: with, its polynomial uses them (a slow library call without).
    fn sigmoid_on<const FMA: bool>(self) -> Self;
    /// [`Real::tanh`], as [`Real::sigmoid_on`].
    fn tanh_on<const FMA: bool>(self) -> Self;
    /// `e^x`, as [`Real::sigmoid_on`]; in `f32`, `x` is taken within `[-87, 87]` (so
    /// below -87 it is `e^-87`, 1.6e-38, not 0: what a softmax sums is at least 1).
    fn exp_on<const FMA: bool>(self) -> Self;
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
}

/// The types [`Real`] is implemented for, and no others (see [`Real`]).
mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = Self::NAN;

    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value as f32
    }

    #[inline(always)]
    fn to_f64(self) -> f64 {
        f64::from(self)
    }

    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }

    #[inline(always)]
    fn sigmoid_on<const FMA: bool>(self) -> Self {
        // σ(x) = 1/(1 + e^-x), with -x kept where e^-x is a normal float: below -87
        // σ is under 1.7e-38 (and flushes there), above 87 it is 1 in f32.
        let (p, scale) = exp_parts::<FMA>(clamp(-self, 87.0));
        let e = fmadd::<f32, FMA>(scale, p, scale);
        1.0 / (1.0 + e)
    }

    #[inline(always)]
    fn tanh_on<const FMA: bool>(self) -> Self {
        // tanh(x) = m/(m + 2) with m = e^2x − 1, which keeps tanh's relative accuracy
        // near 0 (no cancellation: m comes from the polynomial without its 1 there). Past
        // |x| = 9, tanh is ±1 in f32.
        let (p, scale) = exp_parts::<FMA>(2.0 * clamp(self, 9.0));
        let m = fmadd::<f32, FMA>(scale, p, scale - 1.0);
        m / (m + 2.0)
    }

    #[inline(always)]
    fn exp_on<const FMA: bool>(self) -> Self {
        let (p, scale) = exp_parts::<FMA>(clamp(self, 87.0));
        fmadd::<f32, FMA>(scale, p, scale)
    }

    #[inline(always)]
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const NAN: Self = Self::NAN;

    #[inline(always)]
    fn from_f64(value: f64) -> Self {
        value
    }

    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }

    #[inline(always)]
    fn mul_add(self, a: Self, b: Self) -> Self {
        f64::mul_add(self, a, b)
    }

    #[inline(always)]
    fn sigmoid_on<const FMA: bool>(self) -> Self {
        let e = (-self.abs()).exp();
        let s = 1.0 / (1.0 + e);
        if self >= 0.0 { s } else { e * s }
    }

    #[inline(always)]
    fn tanh_on<const FMA: bool>(self) -> Self {
        f64::tanh(self)
    }

    #[inline(always)]
    fn exp_on<const FMA: bool>(self) -> Self {
        f64::exp(self)
    }

    #[inline(always)]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

/// `a · b + c`: fused where the caller is compiled with FMA (`FMA = true`), two plain
/// operations otherwise (there `mul_add` is a slow library call).
#[inline(always)]
pub(crate) fn fmadd<T: Real, const FMA: bool>(a: T, b: T, c: T) -> T {
    if FMA { a.mul_add(b, c) } else { a * b + c }
}

/// `x` within `[-bound, bound]`; NaN stays NaN (a `max` or `min` would replace it).
#[inline(always)]
fn clamp(x: f32, bound: f32) -> f32 {
    let x = if x < -bound { -bound } else { x };
    if x > bound { bound } else { x }
}

/// `e^x` as `(p, s)` with `e^x = s · (1 + p)`, for `|x| ≤ 87` (callers clamp), so that
/// `e^x` is `s·p + s` and `e^x − 1` is `s·p + (s − 1)`, each one more multiply-add.
/// Branch-free so loops over it vectorise; NaN gives a NaN `p`. `FMA`: the caller is
/// compiled with fused multiply-adds.
///
/// `x = n·ln 2 + r` with `|r| ≤ ln 2 / 2`, `s = 2ⁿ`, and `p = e^r − 1 = r + r²·q(r)`
/// with `q` a degree-4 polynomial fitted to relative error (3e-8 for `1 + p` evaluated in
/// f32, below f32's half unit in the last place). The gate math is bound by its count
/// of vector operations, hence the fused range reduction, one coefficient fewer than
/// Cephes' `expf`, σ without a branch on the sign and tanh from `e^2x − 1` without a
/// series near 0 (docs/fused-cpu.md, "Gate math").
#[inline(always)]
fn exp_parts<const FMA: bool>(x: f32) -> (f32, f32) {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let n = fmadd::<f32, FMA>(x, LOG2E, 0.5).floor();
    let r = fmadd::<f32, FMA>(-n, LN2_LO, fmadd::<f32, FMA>(-n, LN2_HI, x));
    let mut q = 1.375_273_6e-3_f32;
    q = fmadd::<f32, FMA>(q, r, 8.368_912e-3);
    q = fmadd::<f32, FMA>(q, r, 4.166_951e-2);
    q = fmadd::<f32, FMA>(q, r, 1.666_651_8e-1);
    q = fmadd::<f32, FMA>(q, r, 4.999_998_8e-1);
    let p = fmadd::<f32, FMA>(q, r * r, r);
    // 2^n without a float-to-int cast (Rust's saturating `as i32` is scalarised inside
    // vector loops): n + 127 is an integer in 1..=254 here, and adding 2^23 puts it in
    // the low mantissa bits, from where the shift moves it into the exponent field. A
    // NaN `n` gives some scale, and the NaN in `p` propagates.
    let biased = (n + (127.0 + 8_388_608.0)).to_bits();
    (p, f32::from_bits(biased << 23))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_gates_match_f64_reference() {
        f32_gates_match_f64_reference_on::<false>();
        // Fused multiply-adds (a library call where the CPU has none: slow, exact).
        f32_gates_match_f64_reference_on::<true>();
    }

    fn f32_gates_match_f64_reference_on<const FMA: bool>() {
        let mut worst_sigmoid = 0.0f64;
        let mut worst_tanh = 0.0f64;
        let mut x = -30.0f64;
        while x <= 30.0 {
            let xf = x as f32;
            let s = xf.sigmoid_on::<FMA>() as f64;
            let t = xf.tanh_on::<FMA>() as f64;
            let xs = xf as f64;
            let s_ref = 1.0 / (1.0 + (-xs).exp());
            worst_sigmoid = worst_sigmoid.max((s - s_ref).abs() / s_ref.abs().max(1e-30));
            worst_tanh = worst_tanh.max((t - xs.tanh()).abs());
            assert!(
                t.abs() <= 1.0 && s <= 1.0,
                "FMA {FMA}: x {xf}: σ {s}, tanh {t}"
            );
            x += 0.001_37;
        }
        // Near 0 tanh keeps its relative accuracy (no cancellation in `1 − e^-2x`).
        let mut worst_rel_tanh = 0.0f64;
        let mut x = 1e-30f64;
        while x < 0.5 {
            for x in [x, -x] {
                let t = (x as f32).tanh_on::<FMA>() as f64;
                let r = (x as f32 as f64).tanh();
                worst_rel_tanh = worst_rel_tanh.max(((t - r) / r).abs());
            }
            x *= 1.001;
        }
        assert!(
            worst_rel_tanh < 3e-7,
            "FMA {FMA}: tanh relative error near 0 {worst_rel_tanh}"
        );
        assert!(
            worst_sigmoid < 3e-7,
            "FMA {FMA}: sigmoid relative error {worst_sigmoid}"
        );
        assert!(
            worst_tanh < 2e-7,
            "FMA {FMA}: tanh absolute error {worst_tanh}"
        );
        assert!(f32::NAN.sigmoid_on::<FMA>().is_nan());
        assert!(f32::NAN.tanh_on::<FMA>().is_nan());
        let tail = (-200.0f32).sigmoid_on::<FMA>();
        assert!(
            (0.0..1e-37).contains(&tail),
            "FMA {FMA}: sigmoid(-200) = {tail}"
        );
        assert_eq!(200.0f32.tanh_on::<FMA>(), 1.0);
        assert_eq!((-200.0f32).tanh_on::<FMA>(), -1.0);
        assert_eq!(200.0f32.sigmoid_on::<FMA>(), 1.0);
    }
}
