//! Half-precision calls (f16, bf16) of the portable kernel compute in f32.
//!
//! An LSTM carries its cell state through every step: kept in f16 (11 significant bits)
//! or bf16 (8), each step's rounding adds up along the sequence, and a bf16 `c` stops
//! moving once an update is smaller than half its last place. cuDNN keeps the same
//! rule for half data (`CUDNN_DATA_FLOAT` math precision, as PyTorch configures it). So
//! a half call widens its inputs to f32 once, runs the kernel in f32 (products,
//! gate math, states and residuals) and rounds only the results back to the inputs'
//! type: the outputs and, in the backward, the gradients. The training forward keeps the
//! caller's half inputs (what it saves is the f32 residuals) and the backward widens
//! them again, so the saved inputs stay the tensors the op was given.
//!
//! f32 and f64 calls go straight through.

use burn::tensor::{DType, FloatDType, TensorMetadata, backend::Backend, ops::FloatTensor};

use super::{same_dtype_backward, same_dtype_forward};
use crate::op::io::{RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::spec::RnnSpec;

/// Whether `dtype` is a half type this module widens to f32.
fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}

fn cast<B: Backend>(tensor: FloatTensor<B>, dtype: DType) -> FloatTensor<B> {
    if tensor.dtype() == dtype {
        tensor
    } else {
        B::float_cast(tensor, FloatDType::from(dtype))
    }
}

/// The portable forward; a half call runs in f32 (see the module docs).
pub(crate) fn forward<B: Backend>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    let dtype = inputs.input.dtype();
    if !is_half(dtype) {
        return same_dtype_forward::<B>(inputs, spec, save);
    }
    let wide = inputs.clone().map(|t| cast::<B>(t, DType::F32));
    let (output, saved) = same_dtype_forward::<B>(wide, spec, save);
    let output = RnnOutput {
        y: cast::<B>(output.y, dtype),
        h_n: cast::<B>(output.h_n, dtype),
        c_n: output.c_n.map(|c_n| cast::<B>(c_n, dtype)),
    };
    // The caller's inputs, not their f32 copies: the backward widens them again.
    let saved = saved.map(|saved| RnnSaved { inputs, ..saved });
    (output, saved)
}

/// The portable backward; a half call (half saved inputs) runs in f32 and returns
/// gradients in the inputs' type.
pub(crate) fn backward<B: Backend>(saved: RnnSaved<B>, grads: RnnOutputGrads<B>) -> RnnGrads<B> {
    let dtype = saved.inputs.input.dtype();
    if !is_half(dtype) {
        return same_dtype_backward::<B>(saved, grads);
    }
    let wide = |t| cast::<B>(t, DType::F32);
    let saved = RnnSaved {
        inputs: saved.inputs.map(wide),
        ..saved
    };
    let grads = RnnOutputGrads {
        dy: wide(grads.dy),
        dh_n: wide(grads.dh_n),
        dc_n: grads.dc_n.map(wide),
        input_required: grads.input_required,
    };
    let narrow = |t| cast::<B>(t, dtype);
    let result = same_dtype_backward::<B>(saved, grads);
    RnnGrads {
        input: result.input.map(narrow),
        weights: narrow(result.weights),
        h0: narrow(result.h0),
        c0: result.c0.map(narrow),
    }
}
