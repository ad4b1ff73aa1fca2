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

pub(crate) mod matrix;
pub(crate) mod ops;

pub use matrix::MatrixRef;

use crate::call::CallError;
use crate::compiled::kernel;
use crate::real::Real;

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
    (kernel::<T>().matmul)(threads, a, b, bias, c)
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
    (kernel::<T>().softmax_nll)(threads, logits, cols, targets)
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
    (kernel::<T>().softmax_nll_grad)(threads, probabilities, cols, targets, scale)
}

/// `sums[j] = Σ_i M(i, j)`: a bias's gradient from its layer's output gradient
/// (`m` row-major, `rows × sums.len()`).
pub fn column_sums<T: Real>(threads: usize, m: &[T], sums: &mut [T]) -> Result<(), CallError> {
    (kernel::<T>().column_sums)(threads, m, sums)
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

    /// The loss is the same to the last bit on any number of threads: the rows' losses
    /// add up in row order, not per thread's run.
    #[test]
    fn softmax_nll_is_the_same_on_any_number_of_threads() {
        let (rows, cols) = (101, 7);
        let logits: Vec<f64> = values(rows * cols, 9).iter().map(|x| 30.0 * x).collect();
        let targets: Vec<usize> = (0..rows).map(|r| r * 5 % cols).collect();
        let one = softmax_nll(1, &mut logits.clone(), cols, &targets).unwrap();
        for threads in 2..=8 {
            let nll = softmax_nll(threads, &mut logits.clone(), cols, &targets).unwrap();
            assert_eq!(
                nll.to_bits(),
                one.to_bits(),
                "{threads} threads: {nll} vs {one}"
            );
        }
    }

    /// A product of sizes that overflows is a named error (a wrapped `rows · cols` of 0
    /// would let an empty `c` through to the GEMM's writes).
    #[test]
    fn matmul_names_an_output_size_that_overflows() {
        let a = MatrixRef::new("a", &[1.0f32], 1 << 62, 1, 0, 0).unwrap();
        let b = MatrixRef::row_major("b", &[1.0f32; 4], 1, 4).unwrap();
        let err = matmul(1, a, b, None, &mut []).unwrap_err();
        assert_eq!(err.argument, "c", "{err}");
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
