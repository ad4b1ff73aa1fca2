//! [`padding_mask_lengths`]: the rows' lengths a Burn padding mask implies.

use burn::tensor::{Bool, Tensor, backend::Backend};

use crate::error::RnnError;

/// The valid length of each row of a batch from its padding mask `[batch, seq]`, `true`
/// at padding: the mask of Burn's `burn::nn::attention::generate_padding_mask` (its
/// `mask` field, which attention modules take as `mask_pad`). Pass the result to
/// `forward_with_lengths` (for a batch-first input `[batch, seq, features]` or a
/// sequence-major one alike: the mask is per row either way).
///
/// Rows must be right-padded, as `generate_padding_mask` pads them: a token after
/// padding is an error naming the row and the step (lengths cannot express it).
/// `generate_padding_mask` marks every token equal to its pad id, so a row with such a
/// token in the middle is that error too, and one that ends in it is shorter by it:
/// pick a pad id that no token takes. A batch whose rows are all empty gives a mask of
/// no steps, which the layers refuse: give `generate_padding_mask` a fixed length of at
/// least one. Reads the mask back to the host.
///
/// ```
/// use burn::backend::Flex;
/// use burn::nn::attention::generate_padding_mask;
/// use burn::nn::EmbeddingConfig;
/// use burn_lstm::{CudnnCompatibleLstmConfig, padding_mask_lengths};
///
/// let device = Default::default();
/// let (pad, words) = (0, 100);
/// let batch = generate_padding_mask::<Flex>(pad, vec![vec![5, 9, 2], vec![7]], None, &device);
/// let lengths = padding_mask_lengths(&batch.mask)?;
/// assert_eq!(lengths, [3, 1]);
///
/// let embedding = EmbeddingConfig::new(words, 8).init::<Flex>(&device);
/// let lstm = CudnnCompatibleLstmConfig::new(8, 16).init::<Flex>(&device);
/// let (y, _state) = lstm.forward_with_lengths(embedding.forward(batch.tensor), &lengths, None);
/// assert_eq!(y.dims(), [2, 3, 16]); // zeros past each row's length
/// # Ok::<(), burn_lstm::RnnError>(())
/// ```
pub fn padding_mask_lengths<B: Backend>(
    mask_pad: &Tensor<B, 2, Bool>,
) -> Result<Vec<usize>, RnnError> {
    let [batch, seq] = mask_pad.dims();
    if seq == 0 {
        return Ok(vec![0; batch]);
    }
    let padding: Vec<bool> = mask_pad.clone().into_data().iter::<bool>().collect();
    padding
        .chunks(seq)
        .enumerate()
        .map(|(row, row_padding)| row_length(row, row_padding))
        .collect()
}

/// The length of one right-padded row (`true` at padding), or the error naming its
/// first token after padding.
fn row_length(row: usize, padding: &[bool]) -> Result<usize, RnnError> {
    right_padded_length(padding.len(), |t| padding[t]).map_err(|(length, token)| {
        RnnError::invalid(
            format!("mask_pad row {row}"),
            "a right-padded row: padding (true) only after the last token",
            format!(
                "step {token} is a token after padding at step {length} (or a token equal \
                 to the pad id)"
            ),
        )
    })
}

/// The valid length of a row of `steps` steps whose step `t` is padding where
/// `padded(t)`: its first padded step (`steps` if none), or, where a valid step follows
/// padding, `Err((length, step))` with that first valid step.
pub(crate) fn right_padded_length(
    steps: usize,
    padded: impl Fn(usize) -> bool,
) -> Result<usize, (usize, usize)> {
    let length = (0..steps).find(|&t| padded(t)).unwrap_or(steps);
    match (length..steps).find(|&t| !padded(t)) {
        None => Ok(length),
        Some(step) => Err((length, step)),
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Flex, NdArray};
    use burn::nn::attention::generate_padding_mask;
    use burn::tensor::TensorData;

    use super::*;

    fn mask<B: Backend>(rows: &[&[bool]]) -> Tensor<B, 2, Bool> {
        let seq = rows.first().map_or(0, |r| r.len());
        let values: Vec<bool> = rows.iter().flat_map(|r| r.iter().copied()).collect();
        Tensor::from_data(
            TensorData::new(values, [rows.len(), seq]),
            &Default::default(),
        )
    }

    fn burns_masks_give_each_rows_token_count<B: Backend>() {
        let tokens = vec![vec![4, 8, 15, 16], vec![23], vec![], vec![42, 7]];
        let padded = generate_padding_mask::<B>(0, tokens, None, &Default::default());
        assert_eq!(padding_mask_lengths(&padded.mask).unwrap(), [4, 1, 0, 2]);
    }

    #[test]
    fn burns_padding_masks_give_each_rows_token_count() {
        burns_masks_give_each_rows_token_count::<NdArray<f32>>();
        burns_masks_give_each_rows_token_count::<Flex>();
    }

    #[test]
    fn a_token_after_padding_names_the_row_and_the_step() {
        let (t, f) = (true, false);
        let error = padding_mask_lengths(&mask::<Flex>(&[&[f, f, t], &[f, t, f]]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("mask_pad row 1"), "{error}");
        assert!(
            error.contains("step 2 is a token after padding at step 1"),
            "{error}"
        );
        let left_padded = mask::<NdArray<f32>>(&[&[t, f, f]]);
        assert!(padding_mask_lengths(&left_padded).is_err());
    }

    #[test]
    fn empty_batches_and_empty_rows() {
        assert_eq!(
            padding_mask_lengths(&mask::<Flex>(&[])).unwrap(),
            Vec::<usize>::new()
        );
        let no_steps = Tensor::<Flex, 2, Bool>::empty([3, 0], &Default::default());
        assert_eq!(padding_mask_lengths(&no_steps).unwrap(), [0, 0, 0]);
        let (t, f) = (true, false);
        let rows = mask::<NdArray<f32>>(&[&[t, t], &[f, f]]);
        assert_eq!(padding_mask_lengths(&rows).unwrap(), [0, 2]);
    }
}
