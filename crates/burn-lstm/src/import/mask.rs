//! [`keras_mask_lengths`]: the rows' lengths a Keras `Masking` layer implies.

use burn::tensor::{DType, Tensor, backend::Backend, bf16, f16};

use crate::error::RnnError;
use crate::module::padding_mask::right_padded_length;

/// The valid length of each row of a batch-first input `[batch, seq, features]` as a
/// Keras `Masking(mask_value)` layer sees it: a step is masked when every feature
/// equals `mask_value`. Rows must be right-padded (no valid step after a masked one):
/// Keras skips masked steps wherever they are, which lengths cannot express, so such a
/// row is an error naming it and the step. Pass the result to `forward_with_lengths`.
/// Values are compared in the input's float type, as Keras compares them (`mask_value`
/// rounded to it).
///
/// Reads the input back to the host.
pub fn keras_mask_lengths<B: Backend>(
    input: &Tensor<B, 3>,
    mask_value: f64,
) -> Result<Vec<usize>, RnnError> {
    let [batch, seq, features] = input.dims();
    let data = input.clone().into_data();
    // Keras compares in the input's float type: `Masking(0.1)` on float32 input masks
    // the steps equal to 0.1f32, which 0.1 in f64 is not.
    let mask_value = match data.dtype {
        DType::F32 | DType::Flex32 => f64::from(mask_value as f32),
        DType::F16 => f16::from_f64(mask_value).to_f64(),
        DType::BF16 => bf16::from_f64(mask_value).to_f64(),
        _ => mask_value,
    };
    let values: Vec<f64> = data
        .convert::<f64>()
        .to_vec()
        .map_err(|e| RnnError::invalid("input", "float values", format!("{e:?}")))?;
    let masked = |b: usize, t: usize| {
        let start = (b * seq + t) * features;
        values[start..start + features]
            .iter()
            .all(|&v| v == mask_value)
    };
    (0..batch)
        .map(|b| {
            right_padded_length(seq, |t| masked(b, t)).map_err(|(length, t)| {
                RnnError::invalid(
                    format!("input row {b}"),
                    format!(
                        "a right-padded row: masked steps (every feature {mask_value}) only \
                         after the last valid one"
                    ),
                    format!("step {t} is valid after masked step {length}"),
                )
            })
        })
        .collect()
}
