//! Truncated backpropagation through time's data: a token stream cut into `batch_size`
//! columns (`batchify`), and windows of `bptt` steps over it with their next-word
//! targets (`get_batch`), both as in PyTorch's `main.py`.

use burn::tensor::{Int, Tensor, TensorData, backend::Backend};

use super::error::LmError;

/// `ids` cut into `batch_size` columns, time-major: `[steps, batch_size]` with
/// `steps = ids.len() / batch_size` (the remainder is dropped), column `b` holding
/// `ids[b * steps .. (b + 1) * steps]`. The columns are independent streams: the model
/// never learns across their boundaries, which is what makes the batch possible.
///
/// `split` names the data in the error when there are fewer than two steps (a window
/// needs a word and the next).
pub fn batchify<B: Backend>(
    ids: &[u32],
    batch_size: usize,
    split: &str,
    device: &B::Device,
) -> Result<Tensor<B, 2, Int>, LmError> {
    if batch_size == 0 {
        return Err(LmError::Usage(format!(
            "batch size of {split}: expected at least 1, got 0"
        )));
    }
    let steps = ids.len() / batch_size;
    if steps < 2 {
        return Err(LmError::Usage(format!(
            "{split}: expected at least 2 * batch size ({}) words to cut into {batch_size} \
             columns, got {}",
            2 * batch_size,
            ids.len()
        )));
    }
    let mut data = Vec::with_capacity(steps * batch_size);
    for t in 0..steps {
        data.extend((0..batch_size).map(|b| i64::from(ids[b * steps + t])));
    }
    Ok(Tensor::from_data(
        TensorData::new(data, [steps, batch_size]),
        device,
    ))
}

/// The windows of `bptt` steps over a batchified source of `steps` rows, as
/// `(start, len)`: starts `0, bptt, 2 * bptt, ...` below `steps - 1`, the last window
/// shorter when `steps - 1` is not a multiple of `bptt` (`range(0, len(source) - 1, bptt)`
/// with `seq_len = min(bptt, len(source) - 1 - i)`).
pub fn windows(steps: usize, bptt: usize) -> impl Iterator<Item = (usize, usize)> {
    let last = steps.saturating_sub(1);
    (0..last)
        .step_by(bptt.max(1))
        .map(move |start| (start, bptt.max(1).min(last - start)))
}

/// Number of windows [`windows`] gives.
pub fn window_count(steps: usize, bptt: usize) -> usize {
    steps.saturating_sub(1).div_ceil(bptt.max(1))
}

/// The window `(start, len)` of `source [steps, batch]`: the input words `[len, batch]`
/// and their next words flattened time-major `[len * batch]` (PyTorch's `get_batch`).
pub fn get_batch<B: Backend>(
    source: &Tensor<B, 2, Int>,
    (start, len): (usize, usize),
) -> (Tensor<B, 2, Int>, Tensor<B, 1, Int>) {
    let [_, batch] = source.dims();
    let data = source.clone().slice([start..start + len, 0..batch]);
    let targets = source
        .clone()
        .slice([start + 1..start + 1 + len, 0..batch])
        .reshape([len * batch]);
    (data, targets)
}
