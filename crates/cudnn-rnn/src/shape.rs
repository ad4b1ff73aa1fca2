//! The per-call shape: sequence length, batch and each row's valid length.

use crate::error::{CudnnRnnError, Result};

/// The shape of one call: `max_seq_len` steps of `batch` rows, row `b` valid for
/// `lengths[b]` steps (right-padded). cuDNN rejects zero-length rows, so they are refused
/// here, before any cuDNN call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqShape {
    max_seq_len: usize,
    lengths: Vec<i32>,
}

impl SeqShape {
    /// Every row valid for all `seq_len` steps.
    pub fn full(seq_len: usize, batch: usize) -> Result<Self> {
        Self::new(seq_len, batch, None)
    }

    /// `batch` rows of at most `max_seq_len` steps; `lengths` (one per row, each in
    /// `1..=max_seq_len`) or `None` for full rows.
    pub fn new(max_seq_len: usize, batch: usize, lengths: Option<&[usize]>) -> Result<Self> {
        if max_seq_len == 0 || max_seq_len > i32::MAX as usize {
            return Err(CudnnRnnError::invalid(
                "max_seq_len",
                "1..=i32::MAX",
                max_seq_len,
            ));
        }
        if batch == 0 || batch > i32::MAX as usize {
            return Err(CudnnRnnError::invalid("batch", "1..=i32::MAX", batch));
        }
        let lengths = match lengths {
            None => vec![max_seq_len as i32; batch],
            Some(lengths) => {
                if lengths.len() != batch {
                    return Err(CudnnRnnError::invalid(
                        "lengths",
                        format!("{batch} entries (one per batch row)"),
                        format!("{} entries", lengths.len()),
                    ));
                }
                if let Some((row, &len)) = lengths
                    .iter()
                    .enumerate()
                    .find(|&(_, &len)| len == 0 || len > max_seq_len)
                {
                    return Err(CudnnRnnError::invalid(
                        "lengths",
                        format!("every length in 1..={max_seq_len} (cuDNN rejects empty rows)"),
                        format!("{len} at row {row}"),
                    ));
                }
                lengths.iter().map(|&len| len as i32).collect()
            }
        };
        Ok(Self {
            max_seq_len,
            lengths,
        })
    }

    /// Steps of the longest row (the padded length).
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Rows.
    pub fn batch(&self) -> usize {
        self.lengths.len()
    }

    /// Valid steps of each row.
    pub fn lengths(&self) -> &[i32] {
        &self.lengths
    }

    /// Whether every row is valid for all [`SeqShape::max_seq_len`] steps (the lengths do
    /// not vary), however the shape was made.
    pub fn is_full(&self) -> bool {
        self.lengths
            .iter()
            .all(|&len| len as usize == self.max_seq_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_zero_and_overlong_rows_before_cudnn() {
        let err = SeqShape::new(5, 3, Some(&[5, 0, 2])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "lengths: expected every length in 1..=5 (cuDNN rejects empty rows), got 0 at row 1"
        );
        let err = SeqShape::new(5, 2, Some(&[6, 1])).unwrap_err();
        assert!(err.to_string().contains("got 6 at row 0"), "{err}");
        let err = SeqShape::new(5, 2, Some(&[1])).unwrap_err();
        assert!(err.to_string().contains("expected 2 entries"), "{err}");
        let err = SeqShape::full(0, 2).unwrap_err();
        assert!(err.to_string().starts_with("max_seq_len"), "{err}");
        let shape = SeqShape::new(4, 2, Some(&[4, 2])).unwrap();
        assert_eq!(shape.lengths(), &[4, 2]);
        assert_eq!(SeqShape::full(3, 2).unwrap().lengths(), &[3, 3]);
    }

    #[test]
    fn full_rows_are_recognised_however_given() {
        assert!(SeqShape::full(4, 3).unwrap().is_full());
        assert!(SeqShape::new(4, 2, Some(&[4, 4])).unwrap().is_full());
        assert!(!SeqShape::new(4, 2, Some(&[4, 3])).unwrap().is_full());
        assert!(!SeqShape::new(4, 1, Some(&[1])).unwrap().is_full());
        assert!(SeqShape::new(1, 1, Some(&[1])).unwrap().is_full());
    }
}
