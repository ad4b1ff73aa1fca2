//! Tensors of a generic CubeCL runtime `R` seen as tensors of the CUDA runtime, after
//! [`is_cuda`](crate::kernels::cudnn::choice::is_cuda) said `R` is it. Rust has no specialisation,
//! so the CubeBackend impl is generic over `R` and the CUDA path is picked at run time;
//! the casts go through `Any` and cannot reinterpret a wrong type.

use core::any::Any;

use burn_cubecl::{CubeRuntime, tensor::CubeTensor};
use cubecl_cuda::CudaRuntime;

/// `tensor` as a CUDA tensor. Panics if `R` is not `CudaRuntime` (callers check first).
pub(crate) fn to_cuda<R: CubeRuntime>(tensor: CubeTensor<R>) -> CubeTensor<CudaRuntime> {
    *(Box::new(tensor) as Box<dyn Any>)
        .downcast::<CubeTensor<CudaRuntime>>()
        .unwrap_or_else(|_| panic!("burn-lstm: the cuDNN path was taken on a non-CUDA runtime"))
}

/// Inverse of [`to_cuda`].
pub(crate) fn from_cuda<R: CubeRuntime>(tensor: CubeTensor<CudaRuntime>) -> CubeTensor<R> {
    *(Box::new(tensor) as Box<dyn Any>)
        .downcast::<CubeTensor<R>>()
        .unwrap_or_else(|_| panic!("burn-lstm: the cuDNN path was taken on a non-CUDA runtime"))
}
