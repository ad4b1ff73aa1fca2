//! The element types the kernel runs on (`f32` for speed, `f64` for tests) and their
//! gate non-linearities.
//!
//! `f32` uses a branch-free `exp` (Cephes' polynomial after a `2ⁿ` range reduction) so
//! that the gate loops vectorise; its error is a few ulp, far inside the golden
//! tolerance. Code compiled for FMA evaluates the polynomial with fused multiply-adds
//! ([`Real::sigmoid_on`]): half the dependent steps of the longest chain in the gate
//! math, which at small hidden sizes is a fifth of a step. `f64` calls the standard
//! library: it exists for exact parity tests, not for speed.

use core::fmt::Debug;
use core::ops::{Add, AddAssign, Div, Mul, Neg, Sub};

/// A floating-point element type of the kernel.
pub trait Real:
    Copy
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
    /// Whether the value is neither infinite nor NaN.
    fn is_finite(self) -> bool;
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
    fn mul_add(self, a: Self, b: Self) -> Self {
        f32::mul_add(self, a, b)
    }

    #[inline(always)]
    fn sigmoid_on<const FMA: bool>(self) -> Self {
        // e = e^-|x| never overflows; σ(x) = 1/(1+e) for x ≥ 0 and e/(1+e) below.
        let e = exp_f32::<FMA>(-self.abs());
        let s = 1.0 / (1.0 + e);
        if self >= 0.0 { s } else { e * s }
    }

    #[inline(always)]
    fn tanh_on<const FMA: bool>(self) -> Self {
        let a = self.abs();
        // Near 0, (1 − e)/(1 + e) cancels; the Taylor series is exact to f32 there.
        let a2 = a * a;
        let series = a * (1.0 + a2 * (-1.0 / 3.0 + a2 * (2.0 / 15.0 + a2 * (-17.0 / 315.0))));
        let e = exp_f32::<FMA>(-2.0 * a);
        let rational = (1.0 - e) / (1.0 + e);
        let t = if a < 0.0625 { series } else { rational };
        t.copysign(self)
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

/// `e^x` for `x ≤ 0` (the only arguments the gates need), branch-free so loops over it
/// vectorise. NaN stays NaN; below −87 it flushes towards the smallest normal. `FMA`:
/// the caller is compiled with fused multiply-adds.
#[inline(always)]
fn exp_f32<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = core::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Not `max`: it would turn NaN into −87, and NaN must propagate.
    let x = if x < -87.0 { -87.0 } else { x };
    let n = (x * LOG2E + 0.5).floor();
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = fmadd::<f32, FMA>(p, r, 1.398_2e-3);
    p = fmadd::<f32, FMA>(p, r, 8.333_452e-3);
    p = fmadd::<f32, FMA>(p, r, 4.166_579_6e-2);
    p = fmadd::<f32, FMA>(p, r, 1.666_666_5e-1);
    p = fmadd::<f32, FMA>(p, r, 0.5);
    let poly = fmadd::<f32, FMA>(p, r * r, r) + 1.0;
    // 2^n without a float-to-int cast (Rust's saturating `as i32` is scalarised inside
    // vector loops): n + 127 is an integer in 1..=127 here, and adding 2^23 puts it in
    // the low mantissa bits, from where the shift moves it into the exponent field. A
    // NaN `n` gives scale 0, and the NaN in `poly` still propagates.
    let biased = (n + (127.0 + 8_388_608.0)).to_bits();
    let scale = f32::from_bits(biased << 23);
    poly * scale
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
            x += 0.001_37;
        }
        assert!(
            worst_sigmoid < 2e-6,
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
    }
}
