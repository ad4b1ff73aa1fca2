//! Gate orders and weight layouts of Keras and ONNX, mapped onto PyTorch's and cuDNN's
//! (LSTM gates i, f, g, o; GRU gates r, z, n; `weight_ih [G*H, in]`).
//!
//! | source | tensors | gate order | to ours |
//! | --- | --- | --- | --- |
//! | Keras `LSTM` | `kernel [in, 4H]`, `recurrent_kernel [H, 4H]`, `bias [4H]` | i, f, c, o | transpose; bias → `bias_ih`, `bias_hh` = 0 |
//! | Keras `GRU(reset_after=True)` | `kernel [in, 3H]`, `recurrent_kernel [H, 3H]`, `bias [2, 3H]` | z, r, h | transpose, blocks (1, 0, 2); bias rows → `bias_ih`, `bias_hh` |
//! | Keras `CuDNNLSTM` | as `LSTM`, `bias [8H]` (input half, recurrent half) | i, f, c, o | per gate: input block reshaped, recurrent block as is |
//! | Keras `CuDNNGRU` | as `GRU`, `bias [6H]` | z, r, h | per gate as `CuDNNLSTM`, blocks (1, 0, 2) |
//! | ONNX `LSTM` | `W [dirs, 4H, in]`, `R [dirs, 4H, H]`, `B [dirs, 8H]` | i, o, f, c | blocks (0, 2, 3, 1) |
//! | ONNX `GRU` | `W [dirs, 3H, in]`, `R`, `B [dirs, 6H]` | z, r, h | blocks (1, 0, 2) |
//!
//! The cuDNN layers of Keras hand each gate's `[in, H]` slice of `kernel` to cuDNN
//! flattened, and cuDNN reads it as a row-major `[H, in]` matrix: the gate's `weight_ih`
//! block is that slice reshaped, not transposed (and the recurrent block is the slice
//! itself). This is tf-keras's own conversion (`_convert_rnn_weights`).

use crate::import::host::HostTensor;

/// Our LSTM gates (i, f, g, o) from Keras's (i, f, c, o).
pub(crate) const KERAS_LSTM: [usize; 4] = [0, 1, 2, 3];
/// Our GRU gates (r, z, n) from Keras's (z, r, h).
pub(crate) const KERAS_GRU: [usize; 3] = [1, 0, 2];
/// Our LSTM gates (i, f, g, o) from ONNX's (i, o, f, c).
pub(crate) const ONNX_LSTM: [usize; 4] = [0, 2, 3, 1];
/// Our GRU gates (r, z, n) from ONNX's (z, r, h).
pub(crate) const ONNX_GRU: [usize; 3] = [1, 0, 2];

/// `weight [G*H, rows]` from a Keras `kernel [rows, G*H]`: each gate block transposed,
/// blocks in our order (`order[g]` is the source block of our gate `g`).
pub(crate) fn keras_kernel(kernel: &HostTensor, order: &[usize]) -> HostTensor {
    let (rows, cols) = (kernel.shape[0], kernel.shape[1]);
    let h = cols / order.len();
    let mut values = Vec::with_capacity(kernel.len());
    for &source in order {
        for j in 0..h {
            for k in 0..rows {
                values.push(kernel.values[k * cols + source * h + j]);
            }
        }
    }
    HostTensor {
        shape: vec![cols, rows],
        values,
    }
}

/// `weight_ih [G*H, in]` from a Keras cuDNN layer's `kernel [in, G*H]`: each gate's
/// `[in, H]` block flattened row-major and read as `[H, in]`.
pub(crate) fn cudnn_input_kernel(kernel: &HostTensor, order: &[usize]) -> HostTensor {
    let (rows, cols) = (kernel.shape[0], kernel.shape[1]);
    let h = cols / order.len();
    let mut values = Vec::with_capacity(kernel.len());
    for &source in order {
        // The block flattened: element `k * h + j` is `kernel[k, source * h + j]`.
        let block = |flat: usize| kernel.values[(flat / h) * cols + source * h + flat % h];
        for r in 0..h {
            for c in 0..rows {
                values.push(block(r * rows + c));
            }
        }
    }
    HostTensor {
        shape: vec![cols, rows],
        values,
    }
}

/// `weight_hh [G*H, H]` from a Keras cuDNN layer's `recurrent_kernel [H, G*H]`: each
/// gate's `[H, H]` block as it is.
pub(crate) fn cudnn_recurrent_kernel(kernel: &HostTensor, order: &[usize]) -> HostTensor {
    let (rows, cols) = (kernel.shape[0], kernel.shape[1]);
    let h = cols / order.len();
    let mut values = Vec::with_capacity(kernel.len());
    for &source in order {
        for r in 0..h {
            for c in 0..rows {
                values.push(kernel.values[r * cols + source * h + c]);
            }
        }
    }
    HostTensor {
        shape: vec![cols, rows],
        values,
    }
}

/// A `[G*H]` bias with its gate blocks in our order.
pub(crate) fn reorder(bias: &[f64], order: &[usize]) -> Vec<f64> {
    let h = bias.len() / order.len();
    order
        .iter()
        .flat_map(|&source| bias[source * h..(source + 1) * h].iter().copied())
        .collect()
}

/// `[G*H, cols]` rows of direction `d` of an ONNX `W`/`R` `[dirs, G*H, cols]`, gate
/// blocks in our order.
pub(crate) fn onnx_matrix(tensor: &HostTensor, d: usize, order: &[usize]) -> HostTensor {
    let (rows, cols) = (tensor.shape[1], tensor.shape[2]);
    let h = rows / order.len();
    let base = d * rows * cols;
    let mut values = Vec::with_capacity(rows * cols);
    for &source in order {
        let start = base + source * h * cols;
        values.extend_from_slice(&tensor.values[start..start + h * cols]);
    }
    HostTensor {
        shape: vec![rows, cols],
        values,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize]) -> HostTensor {
        let n = shape.iter().product();
        HostTensor {
            shape: shape.to_vec(),
            values: (0..n).map(|v| v as f64).collect(),
        }
    }

    #[test]
    fn keras_kernel_is_a_transpose_with_reordered_blocks() {
        // kernel [in=2, 3H=6] (H=2), gates z, r, h → r, z, n.
        let k = t(&[2, 6]);
        let w = keras_kernel(&k, &KERAS_GRU);
        assert_eq!(w.shape, vec![6, 2]);
        // Our row 0 is r's unit 0: Keras column 2 (block 1, unit 0): kernel[0,2], kernel[1,2].
        assert_eq!(&w.values[0..2], &[2.0, 8.0]);
        // Our row 2 is z's unit 0: Keras column 0.
        assert_eq!(&w.values[4..6], &[0.0, 6.0]);
    }

    #[test]
    fn cudnn_kernels_reshape_each_gate_block() {
        // kernel [in=3, 4H=8] (H=2): gate 0's block is columns 0..2, flattened
        // [k00, k01, k10, k11, k20, k21] and read as [2, 3].
        let k = t(&[3, 8]);
        let w = cudnn_input_kernel(&k, &KERAS_LSTM);
        assert_eq!(w.shape, vec![8, 3]);
        assert_eq!(&w.values[0..6], &[0.0, 1.0, 8.0, 9.0, 16.0, 17.0]);
        let r = t(&[2, 8]);
        let u = cudnn_recurrent_kernel(&r, &KERAS_LSTM);
        assert_eq!(u.shape, vec![8, 2]);
        // Gate 1's block is columns 2..4 as they are: rows [2, 3], [10, 11].
        assert_eq!(&u.values[4..8], &[2.0, 3.0, 10.0, 11.0]);
    }

    #[test]
    fn onnx_blocks_follow_the_gate_order() {
        // W [1, 4H=4, in=1] (H=1), gates i, o, f, c → i, f, g, o.
        let w = t(&[1, 4, 1]);
        assert_eq!(
            onnx_matrix(&w, 0, &ONNX_LSTM).values,
            vec![0.0, 2.0, 3.0, 1.0]
        );
        assert_eq!(
            reorder(&[0.0, 1.0, 2.0, 3.0], &ONNX_LSTM),
            vec![0.0, 2.0, 3.0, 1.0]
        );
    }
}
