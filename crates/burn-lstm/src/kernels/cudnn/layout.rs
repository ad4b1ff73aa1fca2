//! The memory layout of the tensors cuDNN reads and writes, copied only where the memory
//! is not laid out as cuDNN is told.
//!
//! The op's sequence tensors are `[T, B, features]` views. Their memory is given to cuDNN
//! either sequence-major (row-major `[T, B, ..]`) or, for a batch-first module's input
//! (the `swap_dims(0, 1)` view of a row-major `[B, T, ..]`), batch-major
//! (`CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED`) when `BURN_LSTM_CUDNN_BATCH_MAJOR` is on:
//! then neither the input nor the output's gradient is copied into sequence-major memory,
//! and `y` and `dx` are written batch-major, their `[T, B, ..]` views swapped back to
//! row-major `[B, T, ..]` by the module. States and parameters are always row-major. A
//! dimension of size 1 never moves the address, so its stride does not matter (the
//! transposed view of a batch of one, `[1, T, I]` as `[T, 1, I]`, is row-major; CubeCL's
//! `into_contiguous` would copy it).

use burn::tensor::Shape;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use cudnn_rnn::{SeqLayout, is_row_major};

use crate::kernels::cudnn::settings::cudnn_batch_major;
use crate::kernels::cudnn::types::{CudaInputs, CudaTensor};
use crate::op::io::RnnInputs;

/// `tensor` with compact row-major strides: the same buffer when its memory already is
/// row-major ([`is_row_major`]), else a copy.
pub(crate) fn row_major(tensor: CudaTensor) -> CudaTensor {
    if tensor.is_contiguous() {
        return tensor;
    }
    let same_memory =
        tensor.qparams.is_none() && is_row_major(tensor.meta.shape(), tensor.meta.strides());
    if same_memory {
        let shape = tensor.meta.shape().clone();
        return CudaTensor::new_contiguous(
            tensor.client,
            tensor.device,
            shape,
            tensor.handle,
            tensor.dtype,
        );
    }
    into_contiguous(tensor)
}

/// The layout a call gives cuDNN for its input `x` (a `[T, B, I]` view): batch-major where
/// the setting is on and `x`'s memory is row-major `[B, T, I]` with more than one row and
/// step, sequence-major otherwise.
pub(crate) fn input_layout(x: &CudaTensor) -> SeqLayout {
    if !cudnn_batch_major() {
        return SeqLayout::SeqMajor;
    }
    let (shape, strides) = (x.meta.shape(), x.meta.strides());
    match (
        <[usize; 3]>::try_from(&shape[..]),
        <[usize; 3]>::try_from(&strides[..]),
    ) {
        (Ok(shape), Ok(strides)) if x.qparams.is_none() => {
            SeqLayout::of_view(shape, strides).unwrap_or(SeqLayout::SeqMajor)
        }
        _ => SeqLayout::SeqMajor,
    }
}

/// `tensor`, a `[T, B, ..]` view, with its memory in `layout`: the same buffer where it
/// already is, else a copy.
pub(crate) fn in_layout(tensor: CudaTensor, layout: SeqLayout) -> CudaTensor {
    match layout {
        SeqLayout::SeqMajor => row_major(tensor),
        SeqLayout::BatchMajor => swapped(row_major(swapped(tensor))),
    }
}

/// A call's inputs as cuDNN reads them: the input's memory in `layout`, the parameters
/// and states row-major (each the same buffer where it already is, else a copy).
pub(crate) fn inputs_in_layout(inputs: CudaInputs, layout: SeqLayout) -> CudaInputs {
    RnnInputs {
        input: in_layout(inputs.input, layout),
        weights: row_major(inputs.weights),
        h0: row_major(inputs.h0),
        c0: inputs.c0.map(row_major),
    }
}

/// A new `[T, B, ..]` tensor of `shape`, like `like`, whose memory is in `layout`.
pub(crate) fn empty_in_layout(like: &CudaTensor, shape: &[usize], layout: SeqLayout) -> CudaTensor {
    let mut memory_shape = shape.to_vec();
    if layout == SeqLayout::BatchMajor {
        memory_shape.swap(0, 1);
    }
    let tensor = empty_device_contiguous_dtype(
        like.client.clone(),
        like.device.clone(),
        Shape::from(memory_shape),
        like.dtype,
    );
    match layout {
        SeqLayout::SeqMajor => tensor,
        SeqLayout::BatchMajor => swapped(tensor),
    }
}

/// The view of `tensor` with its first two dimensions swapped (no copy).
fn swapped(mut tensor: CudaTensor) -> CudaTensor {
    tensor.meta.swap(0, 1);
    tensor
}
