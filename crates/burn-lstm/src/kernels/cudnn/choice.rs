//! Whether a call on a CubeCL backend runs on cuDNN, and why not.

use core::any::TypeId;

use burn::tensor::DType;
use cubecl_cuda::{CudaDevice, CudaRuntime};
use cudnn_rnn::{DataType, MathMode};

use crate::kernels::cudnn::device::{device, rnn_config};
use crate::kernels::cudnn::settings::cudnn_empty_rows;
use crate::op::choice::{KernelChoice, LstmKernel};
use crate::op::spec::LstmSpec;

/// Whether runtime `R` is CubeCL's CUDA runtime (the only one cuDNN runs on).
pub(crate) fn is_cuda<R: 'static>() -> bool {
    TypeId::of::<R>() == TypeId::of::<CudaRuntime>()
}

/// The cuDNN element type of `dtype`, if cuDNN runs it here.
pub(crate) fn data_type(dtype: DType) -> Option<DataType> {
    match dtype {
        DType::F32 | DType::Flex32 => Some(DataType::F32),
        DType::F64 => Some(DataType::F64),
        _ => None,
    }
}

/// The kernel a call with `spec` and element type `dtype` runs on CubeCL runtime `R`'s
/// `device`.
pub(crate) fn choice<R: 'static, D: 'static>(
    device_of: &D,
    spec: &LstmSpec,
    dtype: DType,
) -> KernelChoice {
    if !is_cuda::<R>() {
        return KernelChoice::portable_only(spec.kernel);
    }
    let portable = |reason: String| KernelChoice::fallback(LstmKernel::Portable, reason);
    match spec.kernel {
        Some(LstmKernel::Portable) => {
            return portable("the portable kernel was asked for (cuDNN is faster)".into());
        }
        Some(LstmKernel::FusedCpu) => {
            return portable("the fused-cpu kernel was asked for but runs only on the CPU backends (Flex, NdArray)".into());
        }
        None | Some(LstmKernel::Cudnn) => {}
    }
    let Some(data_type) = data_type(dtype) else {
        return portable(format!(
            "the cuDNN op runs f32 and f64; this backend computes in {dtype:?}"
        ));
    };
    if let Err(e) = rnn_config(&spec.arch, data_type, MathMode::Fma).validate() {
        return portable(format!("cuDNN does not run this architecture: {e}"));
    }
    let empty_rows = spec.lengths.as_deref().is_some_and(|l| l.contains(&0));
    if empty_rows && !cudnn_empty_rows() {
        return portable(
            "the batch has rows of length 0, which cuDNN refuses; running them around cuDNN \
             is off by default (unverified on a GPU: set BURN_LSTM_CUDNN_EMPTY_ROWS=1 or call set_cudnn_empty_rows(true))"
                .into(),
        );
    }
    let Some(cuda_device) = (device_of as &dyn core::any::Any).downcast_ref::<CudaDevice>() else {
        return portable("the device is not a CUDA device".into());
    };
    match device(cuda_device.index) {
        Ok(_) => KernelChoice::fastest(LstmKernel::Cudnn),
        Err(reason) => portable(reason),
    }
}
