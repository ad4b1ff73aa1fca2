#![warn(missing_docs)]
//! A cuDNN-compatible LSTM for [Burn](https://burn.dev).
//!
//! - [`CudnnCompatibleLstm`]: a Burn `Module` with ordinary `Param` tensors in PyTorch's and
//!   cuDNN's canonical layout (per layer and direction `weight_ih [4H, in]`,
//!   `weight_hh [4H, H_out]`, `bias_ih [4H]`, `bias_hh [4H]`, `weight_hr [H_out, H]`,
//!   gates i, f, g, o). Multi-layer, bidirectional, inter-layer dropout, initial and final
//!   state, batch-first or sequence-major, right-padded variable lengths, projection.
//! - [`LstmBackend`]: the op contract, one call per layer stack, implemented for NdArray,
//!   the CubeCL backends (feature `cubecl`), their fused variants and `Autodiff`.
//! - Checkpoints: Burn recorders ([`CudnnCompatibleLstmConfig::load_checkpoint`]) and
//!   PyTorch state dicts in safetensors ([`CudnnCompatibleLstmConfig::load_pytorch_safetensors`],
//!   [`CudnnCompatibleLstm::save_pytorch_safetensors`]).
//!
//! ```
//! use burn::backend::NdArray;
//! use burn::tensor::{Distribution, Tensor};
//! use burn_lstm::CudnnCompatibleLstmConfig;
//!
//! let device = Default::default();
//! let lstm = CudnnCompatibleLstmConfig::new(8, 16)
//!     .with_num_layers(2)
//!     .with_bidirectional(true)
//!     .init::<NdArray>(&device);
//! let x = Tensor::<NdArray, 3>::random([4, 10, 8], Distribution::Normal(0.0, 1.0), &device);
//! let (y, state) = lstm.forward(x, None);
//! assert_eq!(y.dims(), [4, 10, 32]);
//! assert_eq!(state.hidden.dims(), [4, 4, 16]);
//! ```

mod autodiff;
mod backend;
mod backends;
mod checkpoint;
mod config;
mod convert;
#[cfg(feature = "cuda")]
mod cudnn;
mod error;
mod flat_weights;
mod fused_cpu;
#[cfg(feature = "cubecl")]
mod fusion_op;
mod kernel;
mod module;
mod ndarray_host;
mod op;
mod portable;
mod spec;
mod validate;
mod weights_cache;

pub use backend::{HostResiduals, LstmBackend, LstmGrads, LstmOutput, LstmOutputGrads, LstmSaved};
pub use config::{CudnnCompatibleLstmConfig, NanPolicy};
#[cfg(feature = "cuda")]
pub use cudnn::{CudnnMath, cudnn_math, cudnn_runtime_errors, set_cudnn_math};
pub use error::LstmError;
pub use fused_cpu::{cpu_threads, release_cpu_buffers, set_cpu_threads};
pub use kernel::{KernelChoice, LstmKernel};
pub use module::{
    CudnnCompatibleLstm, CudnnCompatibleLstmRecord, LstmDirectionWeights, LstmLayer, LstmState,
};
pub use op::lstm;
pub use spec::{DirectionLayout, LstmArch, LstmSpec};
