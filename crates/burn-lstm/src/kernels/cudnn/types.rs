//! The CUDA runtime's tensor types as the cuDNN glue names them (a leaf: every file of
//! this folder may use it).

use burn_cubecl::{CubeBackend, tensor::CubeTensor};
use cubecl_cuda::CudaRuntime;

use crate::op::io::RnnInputs;

/// Burn's CUDA backend without fusion (`burn::backend::Cuda` is the fused one): each
/// tensor operation runs when it is called. The layer runs the same cuDNN op on both;
/// around it, a training step on this one skips the fusion stream's per-operation
/// processing, which at small batches is most of a step's host time (docs/cudnn.md,
/// "Fused or plain Cuda"). Wrap it in `Autodiff` to train.
pub type PlainCuda<F = f32> = CubeBackend<CudaRuntime, F, i32, u8>;

/// A tensor of the CUDA runtime.
pub(crate) type CudaTensor = CubeTensor<CudaRuntime>;

/// A backend whose float tensors are [`CudaTensor`]s (a CubeCL tensor carries its own
/// dtype: the element types here only name the type).
pub(crate) type CudaBackend = CubeBackend<CudaRuntime, f32, i32, u8>;

/// The op's inputs on the CUDA runtime; also the shape of the backward's results (the
/// gradient of each input).
pub(crate) type CudaInputs = RnnInputs<CudaBackend>;
