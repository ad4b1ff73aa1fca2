//! [`MatrixRef`]: a strided view of a matrix, checked against its values.

use crate::call::CallError;

/// A read-only `rows × cols` matrix whose entry `(i, j)` is
/// `values[i * row_stride + j * col_stride]`.
#[derive(Clone, Copy, Debug)]
pub struct MatrixRef<'a, T> {
    pub(super) values: &'a [T],
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) row_stride: usize,
    pub(super) col_stride: usize,
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

/// The error naming `argument`.
pub(super) fn error(
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
