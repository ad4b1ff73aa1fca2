//! int8 building blocks for quantized inference: a weight matrix quantized once,
//! symmetric per output row (channel) with an f32 scale each ([`QuantizedMatrix`]),
//! activations quantized per row at run time ([`QuantizedActivations`]), and their
//! product accumulated in 32-bit integers ([`matmul_int8`]), as PyTorch's and ONNX
//! Runtime's dynamic quantization compute it.
//!
//! Activations are stored as `u8` with a zero point of 128 (`q + 128`, `q` in
//! `-127..=127`), the operand order of the `u8 × s8` multiply-add instructions
//! (`vpdpbusd`, `vpmaddubsw`); the product subtracts `128 · Σ_k w[n, k]`, kept with the
//! weights. AVX2's `vpmaddubsw` adds two `u8 × s8` products into a saturating `i16`:
//! weights quantized to [`QuantLevels::Reduced`] (±63) keep every such pair within
//! `i16` (2 · 255 · 63 = 32,130), as ONNX Runtime's `reduce_range` does on CPUs without
//! VNNI.
//!
//! This module is the scalar reference every vectorised int8 kernel is checked against:
//! its integer results are exact.
//!
//! ```
//! use lstm_cpu::int8::{QuantLevels, QuantizedActivations, QuantizedMatrix, matmul_int8};
//!
//! // y = x · Wᵀ, W of 2 output rows × 3 inputs.
//! let w = [1.0f32, -0.5, 0.25, 0.0, 2.0, -2.0];
//! let w = QuantizedMatrix::quantize(&w, 2, 3, QuantLevels::Full).unwrap();
//! let x = QuantizedActivations::quantize(&[1.0f32, 1.0, 1.0], 1, 3).unwrap();
//! let mut y = [0.0f32; 2];
//! matmul_int8(&x, &w, None, &mut y).unwrap();
//! assert!((y[0] - 0.75).abs() < 0.02 && y[1].abs() < 0.02);
//! ```

use crate::call::{CallError, len_check};

/// The integer range weights are quantized to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantLevels {
    /// `-127..=127`: for `vpdpbusd` (AVX-512 VNNI, AVX-VNNI) and the scalar kernel.
    Full,
    /// `-63..=63`: for AVX2's `vpmaddubsw`, whose pair sums then never saturate.
    Reduced,
}

impl QuantLevels {
    /// The largest magnitude of a quantized weight.
    pub fn max(self) -> i32 {
        match self {
            Self::Full => 127,
            Self::Reduced => 63,
        }
    }
}

/// The most inputs (`cols`) a product may have: `Σ_k a[k] · w[k]` over `u8` activations
/// and `i8` weights stays within `i32` (255 · 127 · 66,000 < 2^31).
pub const MAX_DEPTH: usize = 66_000;

/// A `rows × cols` f32 matrix quantized symmetric per row: row `n` is
/// `scales[n] · values[n, ..]`, `values` in `-levels..=levels`.
#[derive(Clone, Debug, PartialEq)]
pub struct QuantizedMatrix {
    rows: usize,
    cols: usize,
    levels: QuantLevels,
    values: Vec<i8>,
    scales: Vec<f32>,
    /// `Σ_k values[n, k]` of each row (the zero point's correction).
    row_sums: Vec<i32>,
}

impl QuantizedMatrix {
    /// Quantizes the row-major `rows × cols` matrix `w` (each row an output channel):
    /// `scale = max |w[n, ..]| / levels`, `q = round(w / scale)` (half away from zero).
    /// A row of zeros gets scale 0. Errors name `w` when its length is not
    /// `rows · cols` or a value is not finite, and `cols` past [`MAX_DEPTH`].
    pub fn quantize(
        w: &[f32],
        rows: usize,
        cols: usize,
        levels: QuantLevels,
    ) -> Result<Self, CallError> {
        check_matrix("w", w, rows, cols)?;
        let max = levels.max() as f32;
        let mut values = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows);
        let mut row_sums = Vec::with_capacity(rows);
        for row in w.chunks_exact(cols.max(1)).take(rows) {
            let (scale, start) = (row_scale(row, max), values.len());
            values.extend(row.iter().map(|&v| quantize_value(v, scale, max)));
            scales.push(scale);
            row_sums.push(values[start..].iter().map(|&q| i32::from(q)).sum());
        }
        Ok(Self {
            rows,
            cols,
            levels,
            values,
            scales,
            row_sums,
        })
    }

    /// Output rows (channels).
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Inputs of each row.
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The range the values were quantized to.
    pub fn levels(&self) -> QuantLevels {
        self.levels
    }

    /// The quantized values, row-major.
    pub fn values(&self) -> &[i8] {
        &self.values
    }

    /// Each row's scale.
    pub fn scales(&self) -> &[f32] {
        &self.scales
    }

    /// The f32 matrix the quantized one stands for, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(&self.values, &self.scales, self.cols, f32::from)
    }
}

/// A `rows × cols` f32 matrix quantized symmetric per row to `-127..=127`, stored as
/// `q + 128` (`u8`): row `r` is `scales[r] · (values[r, ..] − 128)`.
#[derive(Clone, Debug, PartialEq)]
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
        check_matrix("x", x, rows, cols)?;
        let max = QuantLevels::Full.max() as f32;
        let mut values = Vec::with_capacity(rows * cols);
        let mut scales = Vec::with_capacity(rows);
        for row in x.chunks_exact(cols.max(1)).take(rows) {
            let scale = row_scale(row, max);
            // In `-127..=127`: the sum is in `1..=255`.
            values.extend(
                row.iter()
                    .map(|&v| (i32::from(quantize_value(v, scale, max)) + 128) as u8),
            );
            scales.push(scale);
        }
        Ok(Self {
            rows,
            cols,
            values,
            scales,
        })
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

    /// The f32 matrix the quantized one stands for, row-major.
    pub fn dequantize(&self) -> Vec<f32> {
        dequantize_rows(&self.values, &self.scales, self.cols, |q| {
            f32::from(i16::from(q) - 128)
        })
    }
}

/// `out[r, n] = a.scales[r] · w.scales[n] · Σ_k (a[r, k] − 128) · w[n, k] + bias[n]`:
/// `x · Wᵀ` on the quantized operands, the sum exact in `i32` (computed as
/// `Σ_k a[r, k] · w[n, k] − 128 · Σ_k w[n, k]`, the form of the vector kernels), `out`
/// row-major `a.rows() × w.rows()`. Errors name `w` when its `cols` differ from `a`'s,
/// `bias` when its length is not `w.rows()`, `out` when its length is not
/// `a.rows() · w.rows()`.
pub fn matmul_int8(
    a: &QuantizedActivations,
    w: &QuantizedMatrix,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<(), CallError> {
    let depth = a.cols;
    len_check("w", "inputs of each row, as `a` has", depth, w.cols)?;
    if let Some(bias) = bias {
        len_check("bias", "one per row of `w`", w.rows, bias.len())?;
    }
    len_check("out", "a.rows() · w.rows()", a.rows * w.rows, out.len())?;
    for (r, out_row) in out.chunks_exact_mut(w.rows.max(1)).take(a.rows).enumerate() {
        let a_row = &a.values[r * depth..][..depth];
        for (n, y) in out_row.iter_mut().enumerate() {
            let w_row = &w.values[n * depth..][..depth];
            let raw: i32 = a_row
                .iter()
                .zip(w_row)
                .map(|(&x, &v)| i32::from(x) * i32::from(v))
                .sum();
            let acc = raw - 128 * w.row_sums[n];
            *y = a.scales[r] * w.scales[n] * acc as f32 + bias.map_or(0.0, |b| b[n]);
        }
    }
    Ok(())
}

/// `max |row| / max`, 0 for a row of zeros.
fn row_scale(row: &[f32], max: f32) -> f32 {
    row.iter().fold(0.0f32, |m, v| m.max(v.abs())) / max
}

/// `round(v / scale)` in `-max..=max` (0 where the scale is 0).
fn quantize_value(v: f32, scale: f32, max: f32) -> i8 {
    if scale == 0.0 {
        return 0;
    }
    // `|v| <= max · scale`; the clamp only catches the last bit of rounding.
    (v / scale).round().clamp(-max, max) as i8
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
    len_check(name, "rows · cols", rows * cols, m.len())?;
    if cols > MAX_DEPTH {
        return Err(CallError {
            argument: "cols",
            expected: format!("at most {MAX_DEPTH} (the i32 accumulator's bound)"),
            actual: cols.to_string(),
        });
    }
    if let Some(i) = m.iter().position(|v| !v.is_finite()) {
        return Err(CallError {
            argument: name,
            expected: "finite values".into(),
            actual: format!("{} at index {i}", m[i]),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_quantize_per_row_symmetric_rounding_half_away_from_zero() {
        // Scales of exactly 1 (a row's largest magnitude is the range's end): the ties
        // are exact.
        let w = [
            127.0f32, -63.5, 31.75, 0.0, /* row 2 */ 0.0, 0.0, 0.0, 0.0,
        ];
        let q = QuantizedMatrix::quantize(&w, 2, 4, QuantLevels::Full).unwrap();
        assert_eq!(q.values(), &[127, -64, 32, 0, 0, 0, 0, 0]);
        assert_eq!(q.scales(), &[1.0, 0.0]);
        assert_eq!(q.row_sums, vec![95, 0]);
        assert_eq!(q.dequantize()[4..], [0.0; 4], "a row of zeros stays zeros");
        let w = [63.0f32, -31.5, 15.75, 0.0];
        let reduced = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Reduced).unwrap();
        assert_eq!(reduced.values(), &[63, -32, 16, 0]);
        assert_eq!(reduced.scales(), &[1.0]);
        // The same row at the full range: scale 63 / 127.
        let full = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Full).unwrap();
        assert_eq!(full.values(), &[127, -64, 32, 0]);
    }

    #[test]
    fn quantization_moves_each_value_by_at_most_half_a_step() {
        let (rows, cols) = (5, 37);
        let w: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1 + i % 3) as f32)
            .collect();
        for levels in [QuantLevels::Full, QuantLevels::Reduced] {
            let q = QuantizedMatrix::quantize(&w, rows, cols, levels).unwrap();
            for (n, (row, back)) in w.chunks(cols).zip(q.dequantize().chunks(cols)).enumerate() {
                let step = q.scales()[n];
                for (v, b) in row.iter().zip(back) {
                    assert!(
                        (v - b).abs() <= step / 2.0 * 1.0001,
                        "{v} -> {b}, step {step}"
                    );
                }
            }
        }
        let x = QuantizedActivations::quantize(&w, rows, cols).unwrap();
        for (r, (row, back)) in w.chunks(cols).zip(x.dequantize().chunks(cols)).enumerate() {
            for (v, b) in row.iter().zip(back) {
                assert!((v - b).abs() <= x.scales()[r] / 2.0 * 1.0001);
            }
        }
    }

    #[test]
    fn extreme_and_bad_values() {
        let w = [f32::MAX, -f32::MAX, f32::MIN_POSITIVE, 1e-45];
        let q = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Full).unwrap();
        assert_eq!(q.values(), &[127, -127, 0, 0]);
        let x = QuantizedActivations::quantize(&w, 1, 4).unwrap();
        assert_eq!(x.values(), &[255, 1, 128, 128]);
        let err = QuantizedMatrix::quantize(&[1.0, f32::NAN], 1, 2, QuantLevels::Full).unwrap_err();
        assert_eq!(err.argument, "w");
        assert!(err.actual.contains("NaN at index 1"), "{err}");
        let err = QuantizedActivations::quantize(&[1.0; 5], 2, 3).unwrap_err();
        assert_eq!((err.argument, err.actual.as_str()), ("x", "5 values"));
        let err = QuantizedActivations::quantize(&[], 0, MAX_DEPTH + 1).unwrap_err();
        assert_eq!(err.argument, "cols");
    }

    /// The integer sum against a direct `i64` sum of `(a − 128) · w`, at the extremes
    /// of both ranges and a depth where `Σ a · w` nears `i32`'s bound.
    #[test]
    fn integer_sums_are_exact_at_the_extremes() {
        let depth = MAX_DEPTH;
        for (a_value, w_value) in [(1.0f32, 1.0f32), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)] {
            let x = QuantizedActivations::quantize(&vec![a_value; depth], 1, depth).unwrap();
            let w = QuantizedMatrix::quantize(&vec![w_value; depth], 1, depth, QuantLevels::Full)
                .unwrap();
            let mut y = [0.0f32];
            matmul_int8(&x, &w, None, &mut y).unwrap();
            let exact: i64 = x
                .values()
                .iter()
                .zip(w.values())
                .map(|(&a, &v)| (i64::from(a) - 128) * i64::from(v))
                .sum();
            assert_eq!(exact.abs(), 127 * 127 * depth as i64);
            let expected = x.scales()[0] * w.scales()[0] * exact as f32;
            assert_eq!(y[0], expected, "a {a_value}, w {w_value}");
            assert!((y[0] - a_value * w_value * depth as f32).abs() < 1e-3 * depth as f32);
        }
    }

    /// Against the f32 product: within the bound the two roundings allow,
    /// `Σ_k |x_k| δw + |w_k| δx + δx δw` (δ: half a step of each).
    #[test]
    fn products_are_within_the_rounding_bound_of_the_f32_product() {
        let (rows, depth, outs) = (3, 50, 4);
        let x: Vec<f32> = (0..rows * depth)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0)
            .collect();
        let w: Vec<f32> = (0..outs * depth)
            .map(|i| ((i * 53 % 97) as f32 - 48.0) / 40.0)
            .collect();
        let bias = [0.5f32, -1.0, 0.0, 2.0];
        let qx = QuantizedActivations::quantize(&x, rows, depth).unwrap();
        let qw = QuantizedMatrix::quantize(&w, outs, depth, QuantLevels::Full).unwrap();
        let mut y = vec![0.0f32; rows * outs];
        matmul_int8(&qx, &qw, Some(&bias), &mut y).unwrap();
        for r in 0..rows {
            for n in 0..outs {
                let (xr, wn) = (&x[r * depth..][..depth], &w[n * depth..][..depth]);
                let exact: f64 = xr
                    .iter()
                    .zip(wn)
                    .map(|(&a, &b)| f64::from(a) * f64::from(b))
                    .sum::<f64>()
                    + f64::from(bias[n]);
                let (dx, dw) = (
                    f64::from(qx.scales()[r]) / 2.0,
                    f64::from(qw.scales()[n]) / 2.0,
                );
                let bound: f64 = xr
                    .iter()
                    .zip(wn)
                    .map(|(&a, &b)| f64::from(a.abs()) * dw + f64::from(b.abs()) * dx + dx * dw)
                    .sum();
                let err = (f64::from(y[r * outs + n]) - exact).abs();
                assert!(err <= bound * 1.001 + 1e-5, "({r}, {n}): {err} > {bound}");
                assert!(
                    err > 0.0 || bound == 0.0,
                    "quantization changed nothing at ({r}, {n})"
                );
            }
        }
        let err = matmul_int8(&qx, &qw, Some(&bias[..3]), &mut y).unwrap_err();
        assert_eq!((err.argument, err.actual.as_str()), ("bias", "3 values"));
        let wrong =
            QuantizedMatrix::quantize(&w[..outs * 10], outs, 10, QuantLevels::Full).unwrap();
        assert_eq!(
            matmul_int8(&qx, &wrong, None, &mut y).unwrap_err().argument,
            "w"
        );
        assert_eq!(
            matmul_int8(&qx, &qw, None, &mut y[..5])
                .unwrap_err()
                .argument,
            "out"
        );
    }
}
