//! The layers around a recurrent stack, on the kernel's GEMM and `exp`: a matrix
//! product with an optional bias ([`matmul`]), and a row-wise softmax with the negative
//! log-likelihood of each row's target ([`softmax_nll`]) and its gradient
//! ([`softmax_nll_grad`]) — a language model's decoder and loss, whose products are
//! most of its training step.
//!
//! Operands are read in place through strides ([`MatrixRef`]), so transposed operands of
//! a backward need no copy; results are row-major. Every function checks its arguments
//! and returns a [`CallError`] naming the one that is wrong.
//!
//! ```
//! use lstm_cpu::dense::{MatrixRef, matmul};
//!
//! // [2 × 3] · [3 × 2] + bias.
//! let a = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
//! let b = [1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0];
//! let mut c = [0.0f32; 4];
//! matmul(
//!     1,
//!     MatrixRef::row_major("a", &a, 2, 3).unwrap(),
//!     MatrixRef::row_major("b", &b, 3, 2).unwrap(),
//!     Some(&[0.5, -0.5]),
//!     &mut c,
//! )
//! .unwrap();
//! assert_eq!(c, [4.5, 4.5, 10.5, 10.5]);
//! ```

use std::sync::Mutex;

use crate::call::CallError;
use crate::gemm::{PackedB, par_gemm_into};
use crate::real::Real;
use crate::simd::dispatch;
use crate::team::run_parts;

/// A read-only `rows × cols` matrix whose entry `(i, j)` is
/// `values[i * row_stride + j * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct MatrixRef<'a, T> {
    values: &'a [T],
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a, T> MatrixRef<'a, T> {
    /// The matrix of `values` with the given strides; `name` is the argument an error
    /// names. Every entry must lie inside `values`.
    pub fn new(
        name: &'static str,
        values: &'a [T],
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Result<Self, CallError> {
        let last = if rows == 0 || cols == 0 {
            None
        } else {
            (rows - 1)
                .checked_mul(row_stride)
                .and_then(|r| (cols - 1).checked_mul(col_stride).map(|c| (r, c)))
                .and_then(|(r, c)| r.checked_add(c))
                .map(Some)
                .ok_or_else(|| error(name, "strides whose offsets fit in memory", "overflow"))?
        };
        if let Some(last) = last
            && last >= values.len()
        {
            return Err(error(
                name,
                format!("at least {} values for {rows} × {cols}", last + 1),
                format!("{} values", values.len()),
            ));
        }
        Ok(Self {
            values,
            rows,
            cols,
            row_stride,
            col_stride,
        })
    }

    /// The row-major `rows × cols` matrix: exactly `rows * cols` values.
    pub fn row_major(
        name: &'static str,
        values: &'a [T],
        rows: usize,
        cols: usize,
    ) -> Result<Self, CallError> {
        if Some(values.len()) != rows.checked_mul(cols) {
            return Err(error(
                name,
                format!("{rows} × {cols} values"),
                format!("{} values", values.len()),
            ));
        }
        Self::new(name, values, rows, cols, cols, 1)
    }

    /// The transpose, reading the same values.
    pub fn transposed(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Columns.
    pub fn cols(&self) -> usize {
        self.cols
    }
}

fn error(
    argument: &'static str,
    expected: impl Into<String>,
    actual: impl Into<String>,
) -> CallError {
    CallError {
        argument,
        expected: expected.into(),
        actual: actual.into(),
    }
}

/// `C = A · B (+ bias)`, with `C` row-major `[rows(A) × cols(B)]` and `bias[j]` added to
/// column `j`, on up to `threads` threads (the kernel's persistent workers). `B` is
/// packed once (its whole size again in memory, for the call).
pub fn matmul<T: Real>(
    threads: usize,
    a: MatrixRef<'_, T>,
    b: MatrixRef<'_, T>,
    bias: Option<&[T]>,
    c: &mut [T],
) -> Result<(), CallError> {
    let (rows, depth, cols) = (a.rows, a.cols, b.cols);
    if b.rows != depth {
        return Err(error(
            "b",
            format!("{depth} rows (the columns of a)"),
            format!("{} rows", b.rows),
        ));
    }
    if c.len() != rows * cols {
        return Err(error(
            "c",
            format!("{rows} × {cols} values"),
            format!("{} values", c.len()),
        ));
    }
    if let Some(bias) = bias
        && bias.len() != cols
    {
        return Err(error(
            "bias",
            format!("{cols} values (the columns of b)"),
            format!("{} values", bias.len()),
        ));
    }
    if threads == 0 {
        return Err(error("threads", "at least 1", "0"));
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let zeros;
    let bias = match bias {
        Some(bias) => bias,
        None => {
            zeros = vec![T::ZERO; cols];
            &zeros
        }
    };
    let packed = PackedB::pack_all_on(threads, depth, cols, b.values, b.row_stride, b.col_stride);
    // SAFETY: `MatrixRef::new` checked that every `A(i, k)` lies in `a.values`; `c` holds
    // `rows × cols` values, row-major (checked above), and is borrowed mutably for the
    // call; `bias` has a value for every packed column (checked, or `zeros`).
    unsafe {
        par_gemm_into(
            threads,
            rows,
            a.values.as_ptr(),
            a.row_stride,
            a.col_stride,
            (&packed).into(),
            Some(bias),
            c.as_mut_ptr(),
            cols,
        )
    };
    Ok(())
}

/// Checks `logits` (`targets.len()` rows of `cols`) and the targets.
fn check_rows<T>(logits: &[T], cols: usize, targets: &[usize]) -> Result<(), CallError> {
    if Some(logits.len()) != targets.len().checked_mul(cols) {
        return Err(error(
            "logits",
            format!("{} rows (one a target) × {cols} values", targets.len()),
            format!("{} values", logits.len()),
        ));
    }
    if let Some((row, &target)) = targets.iter().enumerate().find(|(_, t)| **t >= cols) {
        return Err(error(
            "targets",
            format!("classes below {cols}"),
            format!("{target} at row {row}"),
        ));
    }
    Ok(())
}

/// Runs `work(first, run)` over `values` cut into up to `threads` runs of whole units of
/// `unit` values (`first`: the index of the run's first unit), and returns the sum of
/// what the runs returned.
fn over_runs<T: Send>(
    threads: usize,
    values: &mut [T],
    unit: usize,
    work: impl Fn(usize, &mut [T]) -> f64 + Sync,
) -> f64 {
    let unit = unit.max(1);
    let units = values.len() / unit;
    let per_part = units.div_ceil(threads.max(1)).max(1);
    let parts: Vec<Mutex<(usize, &mut [T], f64)>> = values
        .chunks_mut(per_part * unit)
        .enumerate()
        .map(|(i, run)| Mutex::new((i * per_part, run, 0.0)))
        .collect();
    run_parts(threads, parts.len(), |part| {
        let mut part = parts[part].lock().expect("no part's work panics");
        let (first, ref mut run, ref mut total) = *part;
        *total = work(first, run);
    });
    parts
        .into_iter()
        .map(|p| p.into_inner().expect("no part's work panics").2)
        .sum()
}

/// Replaces each row of `logits` (`targets.len()` rows of `cols` values, row-major) by
/// its softmax and returns the sum over the rows of `-ln softmax(row)[target]`, the
/// rows' negative log-likelihood, computed as `ln Σ e^(x - max) + max - x[target]`.
pub fn softmax_nll<T: Real>(
    threads: usize,
    logits: &mut [T],
    cols: usize,
    targets: &[usize],
) -> Result<f64, CallError> {
    check_rows(logits, cols, targets)?;
    if cols == 0 {
        return Ok(0.0);
    }
    Ok(over_runs(threads, logits, cols, |first, run| {
        let mut total = 0.0;
        for (row, values) in run.chunks_exact_mut(cols).enumerate() {
            let target = values[targets[first + row]].to_f64();
            let mut max_and_sum = [0.0; 2];
            softmax_row(values, &mut max_and_sum);
            let [max, sum] = max_and_sum;
            total += sum.ln() + max - target;
        }
        total
    }))
}

/// Lanes of the reductions in [`softmax_row`]: independent partial maxima and sums, so
/// that the loops vectorise (16 `f32` fill one AVX-512 register, two AVX2 ones).
const LANES: usize = 16;

dispatch! {
    /// Replaces `row` by its softmax; `out` receives its maximum and `Σ e^(x - max)`.
    fn softmax_row<T: Real>(row: &mut [T], out: &mut [f64; 2]) {
        let mut lanes = [row[0]; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (m, &x) in lanes.iter_mut().zip(chunk) {
                *m = if x > *m { x } else { *m };
            }
        }
        let mut max = chunks.remainder().iter().fold(row[0], |m, &x| if x > m { x } else { m });
        for &m in &lanes {
            max = if m > max { m } else { max };
        }
        let mut sums = [T::ZERO; LANES];
        let mut chunks = row.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            for (s, x) in sums.iter_mut().zip(chunk) {
                let e = (*x - max).exp_on::<FMA>();
                *x = e;
                *s += e;
            }
        }
        let mut sum = T::ZERO;
        for x in chunks.into_remainder() {
            let e = (*x - max).exp_on::<FMA>();
            *x = e;
            sum += e;
        }
        for s in sums {
            sum += s;
        }
        let scale = T::ONE / sum;
        for x in row.iter_mut() {
            *x = *x * scale;
        }
        *out = [max.to_f64(), sum.to_f64()];
    }
}

/// Turns the softmax [`softmax_nll`] left in `probabilities` into the gradient of
/// `scale × Σ_rows nll` with respect to the logits: `(softmax - one_hot(target)) × scale`
/// (for the mean over `n` rows, `scale = g / n`).
pub fn softmax_nll_grad<T: Real>(
    threads: usize,
    probabilities: &mut [T],
    cols: usize,
    targets: &[usize],
    scale: T,
) -> Result<(), CallError> {
    check_rows(probabilities, cols, targets)?;
    if cols == 0 {
        return Ok(());
    }
    over_runs(threads, probabilities, cols, |first, run| {
        for (row, values) in run.chunks_exact_mut(cols).enumerate() {
            scale_row(values, scale);
            values[targets[first + row]] += -scale;
        }
        0.0
    });
    Ok(())
}

dispatch! {
    /// `row *= scale`.
    fn scale_row<T: Real>(row: &mut [T], scale: T) {
        for x in row.iter_mut() {
            *x = *x * scale;
        }
    }
}

/// `sums[j] = Σ_i M(i, j)`: a bias's gradient from its layer's output gradient
/// (`m` row-major, `rows × sums.len()`).
pub fn column_sums<T: Real>(threads: usize, m: &[T], sums: &mut [T]) -> Result<(), CallError> {
    let cols = sums.len();
    if cols == 0 || !m.len().is_multiple_of(cols) {
        return Err(error(
            "m",
            format!("whole rows of {cols} values"),
            format!("{} values", m.len()),
        ));
    }
    // Threads take runs of columns; each adds its columns of every row in row order.
    over_runs(threads, sums, 1, |first, run| {
        run.fill(T::ZERO);
        for row in m.chunks_exact(cols) {
            add_row(run, &row[first..first + run.len()]);
        }
        0.0
    });
    Ok(())
}

dispatch! {
    /// `sums += row`.
    fn add_row<T: Real>(sums: &mut [T], row: &[T]) {
        for (s, &x) in sums.iter_mut().zip(row) {
            *s += x;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_values::values;

    /// `A · B + bias` by the definition, in f64.
    fn reference(a: &MatrixRef<'_, f64>, b: &MatrixRef<'_, f64>, bias: &[f64]) -> Vec<f64> {
        let at = |m: &MatrixRef<'_, f64>, i: usize, j: usize| {
            m.values[i * m.row_stride + j * m.col_stride]
        };
        let mut c = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                c[i * b.cols + j] =
                    bias[j] + (0..a.cols).map(|k| at(a, i, k) * at(b, k, j)).sum::<f64>();
            }
        }
        c
    }

    #[test]
    fn matmul_matches_the_definition_for_every_layout_of_the_operands() {
        for (rows, depth, cols) in [(1, 1, 1), (7, 300, 45), (70, 33, 200), (3, 5, 0)] {
            let a_values = values(rows * depth, 1);
            let b_values = values(depth * cols, 2);
            let bias = values(cols, 3);
            for (a_t, b_t) in [(false, false), (true, false), (false, true), (true, true)] {
                // A transposed: the values of `Aᵀ` row-major, read down its columns.
                let a = if a_t {
                    MatrixRef::row_major("a", &a_values, depth, rows)
                        .unwrap()
                        .transposed()
                } else {
                    MatrixRef::row_major("a", &a_values, rows, depth).unwrap()
                };
                let b = if b_t {
                    MatrixRef::row_major("b", &b_values, cols, depth)
                        .unwrap()
                        .transposed()
                } else {
                    MatrixRef::row_major("b", &b_values, depth, cols).unwrap()
                };
                let expected = reference(&a, &b, &bias);
                for threads in [1, 2] {
                    let mut c = vec![f64::NAN; rows * cols];
                    matmul(threads, a, b, Some(&bias), &mut c).unwrap();
                    for (got, want) in c.iter().zip(&expected) {
                        assert!(
                            (got - want).abs() <= 1e-12,
                            "{rows}×{depth}×{cols}: {got} vs {want}"
                        );
                    }
                    let mut c = vec![f64::NAN; rows * cols];
                    matmul(threads, a, b, None, &mut c).unwrap();
                    for ((got, want), bias) in c.iter().zip(&expected).zip(bias.iter().cycle()) {
                        assert!((got - (want - bias)).abs() <= 1e-12);
                    }
                }
            }
        }
    }

    #[test]
    fn matmul_names_the_argument_that_does_not_fit() {
        let v = [1.0f32; 6];
        let a = MatrixRef::row_major("a", &v, 2, 3).unwrap();
        let b = MatrixRef::row_major("b", &v, 2, 3).unwrap();
        let err = matmul(1, a, b, None, &mut [0.0; 6]).unwrap_err();
        assert_eq!((err.argument, err.actual.as_str()), ("b", "2 rows"));
        let b = b.transposed();
        let err = matmul(1, a, b, None, &mut [0.0; 5]).unwrap_err();
        assert_eq!(err.argument, "c");
        let err = matmul(1, a, b, Some(&[0.0]), &mut [0.0; 4]).unwrap_err();
        assert_eq!(err.argument, "bias");
        let err = MatrixRef::new("w", &v, 2, 3, 4, 1).unwrap_err();
        assert_eq!((err.argument, err.actual.as_str()), ("w", "6 values"));
    }

    /// The softmax, the loss and its gradient against the definitions, in f64 and f32
    /// (the f32 `exp` is a polynomial: within a few units in the last place).
    #[test]
    fn softmax_nll_and_its_gradient_match_the_definitions() {
        let (rows, cols) = (5, 37);
        let logits: Vec<f64> = values(rows * cols, 4).iter().map(|x| 20.0 * x).collect();
        let targets = [0, 36, 5, 17, 5];
        let mut expected_nll = 0.0;
        let mut expected_p = Vec::new();
        for (row, &target) in logits.chunks(cols).zip(&targets) {
            let sum: f64 = row.iter().map(|x| x.exp()).sum();
            expected_nll += sum.ln() - row[target];
            expected_p.extend(row.iter().map(|x| x.exp() / sum));
        }
        for threads in [1, 2, 3] {
            let mut p = logits.clone();
            let nll = softmax_nll(threads, &mut p, cols, &targets).unwrap();
            assert!((nll - expected_nll).abs() < 1e-12 * expected_nll.abs());
            for (got, want) in p.iter().zip(&expected_p) {
                assert!((got - want).abs() < 1e-15);
            }
            let mut p32: Vec<f32> = logits.iter().map(|&x| x as f32).collect();
            let nll32 = softmax_nll(threads, &mut p32, cols, &targets).unwrap();
            assert!((nll32 - expected_nll).abs() < 1e-5 * expected_nll.abs());
            for (got, want) in p32.iter().zip(&expected_p) {
                assert!((f64::from(*got) - want).abs() < 1e-6, "{got} vs {want}");
            }
            softmax_nll_grad(threads, &mut p, cols, &targets, 0.5).unwrap();
            for (i, (got, want)) in p.iter().zip(&expected_p).enumerate() {
                let one_hot = if targets[i / cols] == i % cols {
                    1.0
                } else {
                    0.0
                };
                assert!((got - 0.5 * (want - one_hot)).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn softmax_nll_rejects_a_target_outside_the_classes() {
        let err = softmax_nll(1, &mut [0.0f32; 6], 3, &[1, 3]).unwrap_err();
        assert_eq!(
            (err.argument, err.actual.as_str()),
            ("targets", "3 at row 1")
        );
        let err = softmax_nll(1, &mut [0.0f32; 5], 3, &[1, 2]).unwrap_err();
        assert_eq!(err.argument, "logits");
    }

    #[test]
    fn column_sums_add_every_row() {
        let m = values(13 * 41, 5);
        for threads in [1, 2, 5] {
            let mut sums = vec![f64::NAN; 41];
            column_sums(threads, &m, &mut sums).unwrap();
            for (j, s) in sums.iter().enumerate() {
                let want: f64 = m.chunks(41).map(|row| row[j]).sum();
                assert!((s - want).abs() < 1e-13);
            }
        }
        assert_eq!(column_sums(1, &m, &mut [0.0; 2]).unwrap_err().argument, "m");
    }
}
