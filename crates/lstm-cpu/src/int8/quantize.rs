//! The quantized operands: weights quantized once per output row, activations per row at
//! run time.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::buffers::{keep_bytes, take_bytes};
use crate::call::{CallError, len_check};
use crate::int8::dot::{DotKernel, dot_kernel};
use crate::int8::panels::Panels;
use crate::int8::{MAX_DEPTH, QuantLevels};
#[cfg(target_arch = "x86_64")]
use crate::simd::{Isa, isa};
use crate::team::{Shared, aligned_part, run_parts};

/// A `rows × cols` f32 matrix quantized symmetric per row: row `n` is
/// `scales[n] · values[n, ..]`, `values` in `-levels..=levels`, stored in the panels of
/// the kernel that runs its products on this CPU (`panels.rs`) and nowhere else: its
/// int8 bytes are `rows · cols`, rounded up to whole panels and groups of four inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedMatrix {
    levels: QuantLevels,
    kernel: DotKernel,
    panels: Panels,
    scales: Vec<f32>,
    /// `128 · Σ_k values[n, k]` of each row: the activations' zero point's share of the
    /// raw sums.
    zero_point_sums: Vec<i32>,
}

impl QuantizedMatrix {
    /// Quantizes the row-major `rows × cols` matrix `w` (each row an output channel):
    /// `scale = max |w[n, ..]| / levels`, `q = round(w · (1 / scale))` (half away from
    /// zero; the quotient is taken as a product with the inverse scale, so a value
    /// within a rounding of a tie may round either way). A row of zeros gets scale 0.
    /// Errors name `w` when its length is not `rows · cols` or a value is not finite,
    /// `cols` when it is 0 or past [`MAX_DEPTH`], and `rows` when `rows · cols` passes
    /// `usize`.
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        levels: QuantLevels,
    ) -> Result<Self, CallError> {
        Self::quantize_for(dot_kernel(levels), w, rows, cols, levels)
    }

    /// [`Self::quantize`], in the panels of `kernel` (which runs weights of `levels`).
    pub(crate) fn quantize_for(
        kernel: DotKernel,
        w: &[f32],
        rows: usize,
        cols: usize,
        levels: QuantLevels,
    ) -> Result<Self, CallError> {
        check_matrix("w", w, rows, cols)?;
        debug_assert!(kernel.levels().max() >= levels.max());
        let max = levels.max() as f32;
        let mut values = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows);
        let mut zero_point_sums = Vec::with_capacity(rows);
        let mut row_values = vec![0i8; cols];
        for row in w.chunks_exact(cols.max(1)).take(rows) {
            let scale = row_scale(row, max);
            quantize_row(row, scale, max, &mut row_values, |q| q as i8);
            values.extend_from_slice(&row_values);
            scales.push(scale);
            let sum: i32 = row_values.iter().map(|&q| i32::from(q)).sum();
            zero_point_sums.push(128 * sum);
        }
        Ok(Self {
            levels,
            kernel,
            panels: Panels::pack(&values, rows, cols, kernel.panel_rows()),
            scales,
            zero_point_sums,
        })
    }

    /// Output rows (channels).
    pub fn rows(&self) -> usize {
        self.panels.rows()
    }

    /// Inputs of each row.
    pub fn cols(&self) -> usize {
        self.panels.cols()
    }

    /// The range the values were quantized to.
    pub fn levels(&self) -> QuantLevels {
        self.levels
    }

    /// The quantized values, row-major (a copy: the matrix keeps only its panels).
    pub fn to_row_major(&self) -> Vec<i8> {
        self.panels.to_row_major()
    }

    /// Bytes of the stored int8 values: `rows · cols`, rounded up to whole panels of
    /// the kernel's rows and whole groups of four inputs.
    pub fn stored_bytes(&self) -> usize {
        self.panels.bytes().len()
    }

    /// Each row's scale.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// `128 · Σ_k values[n, k]` of each row.
    pub(crate) fn zero_point_sums(&self) -> &[i32] {
        &self.zero_point_sums
    }

    /// The kernel that runs this matrix's products, and whose panels hold it.
    pub(crate) fn kernel(&self) -> DotKernel {
        self.kernel
    }

    /// The packed values.
    pub(crate) fn panels(&self) -> &Panels {
        &self.panels
    }

    /// The f32 matrix the quantized one stands for, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(&self.to_row_major(), &self.scales, self.cols(), f32::from)
    }
}

/// A `rows × cols` f32 matrix quantized symmetric per row to `-127..=127`, stored as
/// `q + 128` (`u8`): row `r` is `scales[r] · (values[r, ..] − 128)`. The default is the
/// empty matrix, whose buffers [`Self::quantize_into`] grows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuantizedActivations {
    rows: usize,
    cols: usize,
    values: Vec<u8>,
    scales: Vec<f32>,
}

impl QuantizedActivations {
    /// Quantizes the row-major `rows × cols` activations `x`, each row with its own
    /// scale (`max |x[r, ..]| / 127`). Errors as [`QuantizedMatrix::quantize`]'s, naming
    /// `x`.
    pub fn quantize(x: &[f32], rows: usize, cols: usize) -> Result<Self, CallError> {
        let mut quantized = Self::default();
        quantized.quantize_into(x, rows, cols)?;
        Ok(quantized)
    }

    /// [`Self::quantize`] into this value's buffers (no allocation once they are large
    /// enough): for the same product at every step.
    pub fn quantize_into(&mut self, x: &[f32], rows: usize, cols: usize) -> Result<(), CallError> {
        check_matrix("x", x, rows, cols)?;
        let (values, scales) = self.rows_mut(rows, cols);
        quantize_activation_rows(x, cols, values, scales);
        Ok(())
    }

    /// [`Self::quantize`] with its rows split over up to `threads` threads (the
    /// kernel's team) when there are enough values: the same result on any number. Each
    /// part checks its rows are finite too; the error, the same as [`Self::quantize`]'s,
    /// is found after.
    pub(crate) fn quantize_on(
        threads: usize,
        x: &[f32],
        rows: usize,
        cols: usize,
    ) -> Result<Self, CallError> {
        check_shape("x", x, rows, cols)?;
        let finite = AtomicBool::new(true);
        // Every value is written below: a recycled buffer is not zeroed first.
        let mut quantized = Self {
            values: take_bytes(rows * cols),
            ..Self::default()
        };
        let parts = if rows * cols >= TEAM_VALUES {
            threads.clamp(1, rows.max(1))
        } else {
            1
        };
        let (values, scales) = quantized.rows_mut(rows, cols);
        // SAFETY: each part writes only its own rows (disjoint ranges of
        // `aligned_part`) of `values` and `scales`, which are read only after
        // `run_parts` returns.
        let (values, scales) = unsafe { (Shared::new(values), Shared::new(scales)) };
        run_parts(threads, parts, |part| {
            let rows = aligned_part(rows, parts, 1, part);
            let n = rows.len();
            let part_x = &x[rows.start * cols..][..n * cols];
            if !all_finite(part_x) {
                // Quantized anyway (any value will do): the call fails below.
                finite.store(false, Ordering::Relaxed);
            }
            // SAFETY: this part's rows, within both buffers (`rows_mut`'s sizes).
            unsafe {
                quantize_activation_rows(
                    part_x,
                    cols,
                    values.slice(rows.start * cols, n * cols),
                    scales.slice(rows.start, n),
                );
            }
        });
        if !finite.into_inner() {
            check_finite("x", x)?;
        }
        Ok(quantized)
    }

    /// Gives the values' memory back to the crate's buffer cache, for the next call's
    /// [`Self::quantize_on`].
    pub(crate) fn recycle(self) {
        keep_bytes(self.values);
    }

    /// The values and scales of a `rows × cols` matrix, to be written by
    /// [`quantize_activation_rows`] (row by row, by several threads).
    pub(crate) fn rows_mut(&mut self, rows: usize, cols: usize) -> (&mut [u8], &mut [f32]) {
        self.values.resize(rows * cols, 0);
        self.scales.resize(rows, 0.0);
        (self.rows, self.cols) = (rows, cols);
        (&mut self.values, &mut self.scales)
    }

    /// Rows `rows` of each step in `steps` of `x` (`[T · B, cols]`, `batch` rows a
    /// step) copied into this value's buffers, step after step: a team member's rows of
    /// a chunk of steps, for one product over them.
    ///
    /// # Panics
    /// When a step's rows reach past `x`'s.
    pub(crate) fn copy_step_rows(
        &mut self,
        x: &QuantizedActivations,
        steps: core::ops::Range<usize>,
        batch: usize,
        rows: core::ops::Range<usize>,
    ) {
        let (cols, n) = (x.cols, rows.len());
        let (values, scales) = self.rows_mut(steps.len() * n, cols);
        let own = values
            .chunks_exact_mut((n * cols).max(1))
            .zip(scales.chunks_exact_mut(n.max(1)));
        for (t, (values, scales)) in steps.zip(own) {
            let from = t * batch + rows.start;
            values.copy_from_slice(&x.values[from * cols..][..n * cols]);
            scales.copy_from_slice(&x.scales[from..][..n]);
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Values of each row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The stored values (`q + 128`), row-major.
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// Each row's scale.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// Rows `rows` of the matrix, for a product over part of it.
    ///
    /// # Panics
    /// When `rows` reaches past the last row.
    pub(crate) fn rows_of(&self, rows: core::ops::Range<usize>) -> ActivationRows<'_> {
        ActivationRows {
            values: &self.values[rows.start * self.cols..rows.end * self.cols],
            scales: &self.scales[rows.clone()],
            cols: self.cols,
        }
    }

    /// All rows of the matrix.
    pub(crate) fn all_rows(&self) -> ActivationRows<'_> {
        self.rows_of(0..self.rows)
    }

    /// The f32 matrix the quantized one stands for, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(&self.values, &self.scales, self.cols, |q| {
            f32::from(i16::from(q) - 128)
        })
    }
}

/// Activations of fewer values than this are quantized by the calling thread alone.
const TEAM_VALUES: usize = 1 << 15;

/// Quantizes the rows of `cols` finite values of `x` into `values` (`q + 128`) and
/// `scales`, each row with its own scale, with the widest vectors the CPU has.
pub(crate) fn quantize_activation_rows(
    x: &[f32],
    cols: usize,
    values: &mut [u8],
    scales: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    match isa() {
        // SAFETY: the CPU reported avx512f and avx2 (`Isa::Avx512`).
        Isa::Avx512 => unsafe { activation_rows_avx512(x, cols, values, scales) },
        // SAFETY: the CPU reported avx2 (`Isa::Avx2`).
        Isa::Avx2 => unsafe { activation_rows_avx2(x, cols, values, scales) },
        Isa::Baseline => activation_rows(x, cols, values, scales),
    }
    #[cfg(not(target_arch = "x86_64"))]
    activation_rows(x, cols, values, scales);
}

/// Quantizes each row of `cols` values of `x` into `values` (`q + 128`, in `1..=255`)
/// and its scale into `scales`: inlined into each instruction set's copy below, which
/// the compiler vectorizes for that set's width.
#[inline(always)]
fn activation_rows(x: &[f32], cols: usize, values: &mut [u8], scales: &mut [f32]) {
    let max = QuantLevels::Full.max() as f32;
    let rows = x
        .chunks_exact(cols.max(1))
        .zip(values.chunks_exact_mut(cols.max(1)));
    for ((row, values), scale) in rows.zip(scales) {
        *scale = row_scale(row, max);
        quantize_row(row, *scale, max, values, |q| (q + 128) as u8);
    }
}

/// [`activation_rows`] compiled for AVX-512.
///
/// # Safety
/// The CPU has avx512f and avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn activation_rows_avx512(x: &[f32], cols: usize, values: &mut [u8], scales: &mut [f32]) {
    activation_rows(x, cols, values, scales);
}

/// [`activation_rows`] compiled for AVX2.
///
/// # Safety
/// The CPU has avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn activation_rows_avx2(x: &[f32], cols: usize, values: &mut [u8], scales: &mut [f32]) {
    activation_rows(x, cols, values, scales);
}

/// Consecutive rows of a [`QuantizedActivations`]: a product's left operand.
#[derive(Clone, Copy)]
pub(crate) struct ActivationRows<'a> {
    /// The stored values (`q + 128`), row-major.
    pub values: &'a [u8],
    /// Each row's scale.
    pub scales: &'a [f32],
    /// Values of each row.
    pub cols: usize,
}

impl ActivationRows<'_> {
    /// Rows.
    pub(crate) fn rows(&self) -> usize {
        self.scales.len()
    }
}

/// `max |row| / max`, 0 for a row of zeros (`row` finite). The running maximum is kept
/// in 16 independent lanes, a loop the compiler vectorizes (a single running maximum is
/// a chain of dependent scalar operations), and the lanes are folded in halves (vector
/// maxima, where one lane after another took 15 dependent steps a row).
#[inline(always)]
fn row_scale(row: &[f32], max: f32) -> f32 {
    const LANES: usize = 16;
    let larger = |m: f32, v: f32| if v > m { v } else { m };
    let mut lanes = [0.0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, v) in lanes.iter_mut().zip(chunk) {
            *m = larger(*m, v.abs());
        }
    }
    for (m, v) in lanes.iter_mut().zip(chunks.remainder()) {
        *m = larger(*m, v.abs());
    }
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        let (low, high) = lanes.split_at_mut(width);
        for (m, &v) in low.iter_mut().zip(&high[..width]) {
            *m = larger(*m, v);
        }
    }
    lanes[0] / max
}

/// `out[k] = store(round(row[k] / scale))`, the quotient clamped to `-max..=max` and
/// rounded half away from zero (all zeros where the scale is 0), in a loop the compiler
/// vectorizes: the quotient as a product with `1 / scale` (one division per row; a
/// subnormal scale, whose inverse overflows, divides), rounded by adding the largest
/// float below one half, signed as the quotient, and truncating (a saturating `as` cast
/// and `round` are not vectorized on every instruction set).
#[inline(always)]
fn quantize_row<Q>(row: &[f32], scale: f32, max: f32, out: &mut [Q], store: impl Fn(i32) -> Q) {
    if scale == 0.0 {
        out.iter_mut().for_each(|q| *q = store(0));
        return;
    }
    let inverse = 1.0 / scale;
    if inverse.is_finite() {
        quantize_quotients(row, |v| v * inverse, max, out, store);
    } else {
        quantize_quotients(row, |v| v / scale, max, out, store);
    }
}

/// `0.5 − 2^-25`, the largest float below one half: for every f32 `|x| ≤ 127`,
/// `trunc(x + copysign(HALF_BELOW, x))` is `x` rounded half away from zero (checked on
/// every such float, 2026-11-27), where adding 0.5 would round `0.49999997` up to 1.
const HALF_BELOW: f32 = 0.499_999_97;

#[inline(always)]
fn quantize_quotients<Q>(
    row: &[f32],
    quotient: impl Fn(f32) -> f32,
    max: f32,
    out: &mut [Q],
    store: impl Fn(i32) -> Q,
) {
    debug_assert!(max <= 127.0);
    for (q, &v) in out.iter_mut().zip(row) {
        // Within `-max..=max`, NaN taken to `-max` (its comparisons are false): finite.
        let x = quotient(v);
        let x = if x > -max { x } else { -max };
        let x = if x < max { x } else { max };
        let shifted = x + HALF_BELOW.copysign(x);
        // SAFETY: `shifted` is finite and within ±128, so its truncation fits an `i32`.
        *q = store(unsafe { shifted.to_int_unchecked::<i32>() });
    }
}

fn dequantize_rows<Q: Copy>(
    values: &[Q],
    scales: &[f32],
    cols: usize,
    f: impl Fn(Q) -> f32,
) -> Vec<f32> {
    let f = &f;
    values
        .chunks_exact(cols.max(1))
        .zip(scales)
        .flat_map(|(row, &scale)| row.iter().map(move |&q| scale * f(q)))
        .collect()
}

fn check_matrix(name: &'static str, m: &[f32], rows: usize, cols: usize) -> Result<(), CallError> {
    check_shape(name, m, rows, cols)?;
    check_finite(name, m)
}

/// [`check_matrix`] but for the values' finiteness.
fn check_shape(name: &'static str, m: &[f32], rows: usize, cols: usize) -> Result<(), CallError> {
    if cols == 0 || cols > MAX_DEPTH {
        return Err(CallError {
            argument: "cols",
            expected: format!("1 to {MAX_DEPTH} (the i32 accumulator's bound)"),
            actual: cols.to_string(),
        });
    }
    let Some(values) = rows.checked_mul(cols) else {
        return Err(CallError {
            argument: "rows",
            expected: format!("rows · cols within {} values", usize::MAX),
            actual: format!("{rows} rows of {cols}"),
        });
    };
    len_check(name, "rows · cols", values, m.len())
}

/// Whether every value of `m` is finite: a fold over every value, which vectorizes.
fn all_finite(m: &[f32]) -> bool {
    m.iter().fold(true, |all, v| all & v.is_finite())
}

/// An error naming `name` at the first value of `m` that is not finite.
pub(crate) fn check_finite(name: &'static str, m: &[f32]) -> Result<(), CallError> {
    // The search only on failure.
    let finite = all_finite(m);
    if let Some(i) = (!finite)
        .then(|| m.iter().position(|v| !v.is_finite()))
        .flatten()
    {
        return Err(CallError {
            argument: name,
            expected: "finite values".into(),
            actual: format!("{} at index {i}", m[i]),
        });
    }
    Ok(())
}
