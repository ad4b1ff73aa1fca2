//! The per-call shape: sequence length, batch, each row's valid length, and how the
//! sequence tensors lie in memory.

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};

/// How a call's sequence tensors (`x`, `y` and their gradients) lie in memory; both are
/// right-padded (unpacked). The hidden and cell states are `[layers * dirs, B, H]` in
/// either.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SeqLayout {
    /// `[T, B, features]`: each step's rows together (`batch_first = false`).
    #[default]
    SeqMajor,
    /// `[B, T, features]`: each row's steps together, the memory of a batch-first tensor
    /// (`CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED`).
    BatchMajor,
}

impl SeqLayout {
    /// cuDNN's name for the layout.
    pub(crate) fn cudnn(self) -> sys::cudnnRNNDataLayout_t {
        match self {
            Self::SeqMajor => sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED,
            Self::BatchMajor => {
                sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
            }
        }
    }

    /// The layout of a `[T, B, features]` view with element `strides` over its memory:
    /// [`SeqLayout::SeqMajor`] where that memory is row-major `[T, B, features]`,
    /// [`SeqLayout::BatchMajor`] where it is row-major `[B, T, features]` (the view a
    /// batch-first tensor's `swap_dims(0, 1)` gives), `None` where it is neither (a copy
    /// is needed). A dimension of size 1 never moves the address, so its stride does not
    /// count; memory that is both (a batch of one, one step) is sequence-major.
    pub fn of_view(shape: [usize; 3], strides: [usize; 3]) -> Option<Self> {
        let [t, b, f] = shape;
        let [st, sb, sf] = strides;
        if is_row_major(&shape, &strides) {
            Some(Self::SeqMajor)
        } else if is_row_major(&[b, t, f], &[sb, st, sf]) {
            Some(Self::BatchMajor)
        } else {
            None
        }
    }

    /// A short name for traces and reasons.
    pub fn name(self) -> &'static str {
        match self {
            Self::SeqMajor => "sequence-major",
            Self::BatchMajor => "batch-major",
        }
    }
}

/// Whether `strides` address the elements of `shape` exactly as the compact row-major
/// strides of `shape` do: every dimension larger than 1 has the row-major stride.
pub fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    let mut expected = 1;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim == 1 {
            continue;
        }
        if stride != expected {
            return false;
        }
        expected *= dim;
    }
    true
}

/// The shape of one call: `max_seq_len` steps of `batch` rows, row `b` valid for
/// `lengths[b]` steps (right-padded). cuDNN rejects zero-length rows, so they are refused
/// here, before any cuDNN call. The memory layout of its sequence tensors is part of the
/// shape ([`SeqShape::with_layout`]; sequence-major unless set), so calls in different
/// layouts never share cached descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqShape {
    max_seq_len: usize,
    lengths: Vec<i32>,
    layout: SeqLayout,
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
            layout: SeqLayout::SeqMajor,
        })
    }

    /// The same shape with its sequence tensors laid out as `layout`.
    pub fn with_layout(self, layout: SeqLayout) -> Self {
        Self { layout, ..self }
    }

    /// How the sequence tensors lie in memory.
    pub fn layout(&self) -> SeqLayout {
        self.layout
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

    #[test]
    fn unit_dimensions_may_have_any_stride() {
        // `[1, 100, 128]` batch-first, seen sequence-major by `swap_dims(0, 1)`.
        assert!(is_row_major(&[100, 1, 128], &[128, 12_800, 1]));
        assert!(is_row_major(&[1, 1, 1], &[7, 0, 3]));
        assert!(is_row_major(&[4, 3], &[3, 1]));
    }

    #[test]
    fn a_real_transpose_or_broadcast_is_not_row_major() {
        // `[2, 100, 128]` swapped: rows of the batch interleave in memory.
        assert!(!is_row_major(&[100, 2, 128], &[128, 12_800, 1]));
        // A broadcast (stride 0) of a dimension larger than 1.
        assert!(!is_row_major(&[100, 4, 128], &[0, 128, 1]));
        assert!(!is_row_major(&[3, 4], &[1, 3]));
    }

    #[test]
    fn a_view_names_the_layout_of_its_memory() {
        use SeqLayout::{BatchMajor, SeqMajor};
        // (T, B, F) view, strides, layout.
        let cases: [([usize; 3], [usize; 3], Option<SeqLayout>); 9] = [
            // Contiguous `[T, B, F]`.
            ([50, 16, 256], [16 * 256, 256, 1], Some(SeqMajor)),
            // A contiguous batch-first `[16, 50, 256]` swapped to `[50, 16, 256]`.
            ([50, 16, 256], [256, 50 * 256, 1], Some(BatchMajor)),
            // A batch of one or a single step: both layouts are the same memory.
            ([100, 1, 128], [128, 100 * 128, 1], Some(SeqMajor)),
            ([1, 8, 128], [8 * 128, 128, 1], Some(SeqMajor)),
            ([1, 8, 128], [128, 128, 1], Some(SeqMajor)),
            // Features not contiguous: a slice of wider rows, either way round.
            ([50, 16, 256], [16 * 512, 512, 1], None),
            ([50, 16, 256], [512, 50 * 512, 1], None),
            // Steps interleaved otherwise, a broadcast batch.
            ([50, 16, 256], [256, 256 * 100, 1], None),
            ([50, 16, 256], [256, 0, 1], None),
        ];
        for (shape, strides, expected) in cases {
            assert_eq!(
                SeqLayout::of_view(shape, strides),
                expected,
                "{shape:?} {strides:?}"
            );
        }
    }

    #[test]
    fn the_layout_is_part_of_the_shape() {
        let seq_major = SeqShape::new(4, 2, Some(&[4, 3])).unwrap();
        assert_eq!(seq_major.layout(), SeqLayout::SeqMajor);
        let batch_major = seq_major.clone().with_layout(SeqLayout::BatchMajor);
        assert_eq!(batch_major.layout(), SeqLayout::BatchMajor);
        assert_eq!(batch_major.lengths(), seq_major.lengths());
        assert_ne!(batch_major, seq_major);
        assert_eq!(
            batch_major.layout().cudnn(),
            sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED
        );
        assert_eq!(
            seq_major.layout().cudnn(),
            sys::cudnnRNNDataLayout_t::CUDNN_RNN_DATA_LAYOUT_SEQ_MAJOR_UNPACKED
        );
    }
}
