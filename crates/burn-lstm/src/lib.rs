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

mod error;
mod kernels;
mod module;
mod op;

pub use error::LstmError;
#[cfg(feature = "cubecl")]
pub use kernels::cubecl::flat_cache::{gpu_weight_cache, set_gpu_weight_cache};
#[cfg(feature = "cuda")]
pub use kernels::cudnn::{
    CudnnAlgo, CudnnMath, CudnnRnnAlgo, cudnn_algo, cudnn_empty_rows, cudnn_events, cudnn_gru,
    cudnn_half, cudnn_math, cudnn_reuse, cudnn_runtime_errors, set_cudnn_algo,
    set_cudnn_empty_rows, set_cudnn_events, set_cudnn_gru, set_cudnn_half, set_cudnn_math,
    set_cudnn_reuse,
};
pub use kernels::fused_cpu::{
    CpuCacheUsage, cpu_cache_usage, cpu_threads, release_cpu_buffers, set_cpu_threads,
};
pub use module::config::{CudnnCompatibleLstmConfig, NanPolicy};
pub use module::gru::{CudnnCompatibleGru, CudnnCompatibleGruRecord};
pub use module::gru_config::CudnnCompatibleGruConfig;
pub use module::lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmRecord};
pub use module::state::{GruState, LstmState};
pub use module::weights::{LstmDirectionWeights, LstmLayer};
pub use op::call::lstm;
pub use op::choice::{KernelChoice, LstmKernel};
pub use op::contract::LstmBackend;
pub use op::flat_weights::{FlatBufferOps, GradientSplit};
pub use op::io::{HostResiduals, LstmGrads, LstmInputs, LstmOutput, LstmOutputGrads, LstmSaved};
pub use op::spec::{CellKind, DirectionLayout, LstmArch, LstmSpec};
