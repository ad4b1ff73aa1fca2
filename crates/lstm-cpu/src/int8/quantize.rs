//! The quantized operands: weights quantized once per output row, activations per row at
//! run time.

use crate::call::{CallError, len_check};
use crate::int8::{MAX_DEPTH, QuantLevels};

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

    /// `Σ_k values[n, k]` of each row (the activations' zero point's correction).
    pub(crate) fn row_sums(&self) -> &[i32] {
        &self.row_sums
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
