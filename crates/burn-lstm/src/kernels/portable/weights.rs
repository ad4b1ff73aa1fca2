//! Views of one (layer, direction)'s parameters in the flat buffer, prepared for the
//! portable kernel.

use burn::tensor::{DType, Tensor, TensorData, backend::Backend};

use crate::op::spec::{DirectionLayout, RnnArch, RnnSpec};

/// The affine map from `tanh(scaled pre-activation)` to the four gate activations:
/// `act = tanh(s·z)·s + b` with `s = [½, ½, 1, ½]` and `b = [½, ½, 0, ½]` per gate
/// block (i, f, g, o). For the sigmoid gates this is `σ(z)`, for `g` it is `tanh(z)`.
pub(crate) struct GateAffine<B: Backend> {
    /// `s` as `[1, 4H]`; also the row scale folded into the weights.
    pub scale: Tensor<B, 2>,
    /// `b` as `[1, 4H]`.
    pub offset: Tensor<B, 2>,
}

impl<B: Backend> GateAffine<B> {
    pub fn new(hidden: usize, device: &B::Device, dtype: DType) -> Self {
        let block = |values: [f32; 4]| {
            let data: Vec<f32> = values
                .iter()
                .flat_map(|&v| core::iter::repeat_n(v, hidden))
                .collect();
            Tensor::<B, 1>::from_data(TensorData::new(data, [4 * hidden]), (device, dtype))
                .reshape([1, 4 * hidden])
        };
        Self {
            scale: block([0.5, 0.5, 1.0, 0.5]),
            offset: block([0.5, 0.5, 0.0, 0.5]),
        }
    }
}

/// One cell's weights as they are stored: what the backward multiplies by.
pub(crate) struct CellMatrices<B: Backend> {
    /// `W_ih`, `[4H, in]` (for the input gradient).
    pub weight_ih: Tensor<B, 2>,
    /// `W_hh`, `[4H, H_out]` (for the state gradient).
    pub weight_hh: Tensor<B, 2>,
    /// `W_hr`, `[H_out, H]`.
    pub weight_hr: Option<Tensor<B, 2>>,
    /// Whether the cell has biases.
    pub bias: bool,
}

impl<B: Backend> CellMatrices<B> {
    pub fn new(flat: &Tensor<B, 1>, arch: &RnnArch, layout: &DirectionLayout) -> Self {
        Self {
            weight_ih: matrix(flat, layout.weight_ih.clone(), layout.input_size),
            weight_hh: matrix(flat, layout.weight_hh.clone(), arch.output_size()),
            weight_hr: layout
                .weight_hr
                .clone()
                .map(|range| matrix(flat, range, arch.hidden_size)),
            bias: layout.bias_ih.is_some(),
        }
    }
}

/// One cell's weights for the forward: the stored ones, and the products' operands laid
/// out once per call. `*_scaled` have the gate rows multiplied by [`GateAffine::scale`].
pub(crate) struct CellWeights<B: Backend> {
    /// As stored.
    pub stored: CellMatrices<B>,
    /// `(s ⊙ W_ih)ᵀ`, `[in, 4H]`.
    pub weight_ih_scaled_t: Tensor<B, 2>,
    /// `(s ⊙ W_hh)ᵀ`, `[H_out, 4H]`.
    pub weight_hh_scaled_t: Tensor<B, 2>,
    /// `s ⊙ (b_ih + b_hh)`, `[1, 4H]`.
    pub bias_scaled: Option<Tensor<B, 2>>,
    /// `W_hrᵀ`, `[H, H_out]`.
    pub weight_hr_t: Option<Tensor<B, 2>>,
}

/// `tensor` in row-major layout. A transposed view is strided, and backends such as
/// NdArray copy strided operands inside every matmul; the step loop reuses these
/// matrices `T` times, so they are laid out once per call instead.
pub(super) fn row_major<B: Backend>(tensor: Tensor<B, 2>) -> Tensor<B, 2> {
    let dims = tensor.dims();
    tensor.reshape([-1]).reshape(dims)
}

pub(super) fn matrix<B: Backend>(
    flat: &Tensor<B, 1>,
    range: core::ops::Range<usize>,
    cols: usize,
) -> Tensor<B, 2> {
    let rows = range.len() / cols;
    flat.clone().slice([range]).reshape([rows, cols])
}

impl<B: Backend> CellWeights<B> {
    pub fn new(
        flat: &Tensor<B, 1>,
        arch: &RnnArch,
        layout: &DirectionLayout,
        affine: &GateAffine<B>,
    ) -> Self {
        let stored = CellMatrices::new(flat, arch, layout);
        let scale_rows = affine.scale.clone().transpose(); // [4H, 1]
        let bias_scaled = match (&layout.bias_ih, &layout.bias_hh) {
            (Some(ih), Some(hh)) => {
                let sum = flat.clone().slice([ih.clone()]) + flat.clone().slice([hh.clone()]);
                Some(sum.reshape([1, 4 * arch.hidden_size]) * affine.scale.clone())
            }
            _ => None,
        };
        Self {
            weight_ih_scaled_t: row_major(
                (stored.weight_ih.clone() * scale_rows.clone()).transpose(),
            ),
            weight_hh_scaled_t: row_major((stored.weight_hh.clone() * scale_rows).transpose()),
            weight_hr_t: stored.weight_hr.clone().map(|w| row_major(w.transpose())),
            bias_scaled,
            stored,
        }
    }
}

/// Per-row validity masks `[T, B, 1]` (1 where `t < length`), or `None` without padding.
pub(crate) fn step_masks<B: Backend>(
    spec: &RnnSpec,
    device: &B::Device,
    dtype: DType,
) -> Option<Tensor<B, 3>> {
    let (seq_len, batch) = (spec.seq_len, spec.batch);
    let lengths = spec.lengths.as_deref().filter(|_| spec.has_padding())?;
    let data: Vec<f32> = (0..seq_len)
        .flat_map(|t| {
            lengths
                .iter()
                .map(move |&len| if t < len { 1.0 } else { 0.0 })
        })
        .collect();
    Some(Tensor::from_data(
        TensorData::new(data, [seq_len, batch, 1]),
        (device, dtype),
    ))
}

/// `input` `[T, B, I]` with its padded steps (`t >= lengths[b]`) set to zero, or
/// unchanged without padding. Padded values never reach a result through the masks, but
/// the input products read them and a NaN there survives a multiplication by zero: the
/// gradient of `weight_ih` would turn NaN (PyTorch's packed sequences never read them).
pub(crate) fn zero_padding<B: Backend>(input: Tensor<B, 3>, spec: &RnnSpec) -> Tensor<B, 3> {
    let Some(lengths) = spec.lengths.as_deref().filter(|_| spec.has_padding()) else {
        return input;
    };
    let [seq_len, batch, features] = input.dims();
    let padded: Vec<bool> = (0..seq_len)
        .flat_map(|t| lengths.iter().map(move |&len| t >= len))
        .flat_map(|pad| core::iter::repeat_n(pad, features))
        .collect();
    let device = input.device();
    let mask = Tensor::from_data(TensorData::new(padded, [seq_len, batch, features]), &device);
    input.mask_fill(mask, 0.0)
}
