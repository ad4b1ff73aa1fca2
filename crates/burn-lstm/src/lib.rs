#![warn(missing_docs)]
//! A cuDNN-compatible LSTM and GRU for [Burn](https://burn.dev) 0.21.
//!
//! [`CudnnCompatibleLstm`] and [`CudnnCompatibleGru`] are Burn `Module`s with ordinary
//! `Param` tensors in PyTorch's and cuDNN's canonical layout (per layer and direction
//! `weight_ih [4H, in]`, `weight_hh [4H, H_out]`, `bias_ih [4H]`, `bias_hh [4H]`,
//! `weight_hr [H_out, H]`; gates i, f, g, o, a GRU's r, z, n). The whole layer stack
//! runs as one op of the backend ([`RnnBackend`]) with an explicit backward: cuDNN on
//! Burn's Cuda backend (feature `cuda`), a fused kernel on Flex and NdArray, a portable
//! kernel of Burn tensor ops elsewhere. Outputs, final states and every gradient equal
//! PyTorch's `nn.LSTM` / `nn.GRU` (golden tests in float64 and float32).
//!
//! Multi-layer, bidirectional, inter-layer dropout (training only), initial and final
//! state, batch-first (the default, as Burn) or sequence-major input, right-padded
//! variable lengths ([`CudnnCompatibleLstm::forward_with_lengths`], rows of length 0
//! included), projection (`proj_size`, LSTMP), no bias, a NaN policy, and errors that
//! name the argument, the expected and the actual value
//! ([`CudnnCompatibleLstm::try_forward`], [`RnnError`]).
//!
//! ```
//! use burn::backend::Flex;
//! use burn::tensor::{Distribution, Tensor};
//! use burn_lstm::CudnnCompatibleLstmConfig;
//!
//! let device = Default::default();
//! let lstm = CudnnCompatibleLstmConfig::new(8, 16) // input_size, hidden_size
//!     .with_num_layers(2)
//!     .with_bidirectional(true)
//!     .init::<Flex>(&device);
//! let x = Tensor::<Flex, 3>::random([4, 10, 8], Distribution::Normal(0.0, 1.0), &device);
//! let (y, state) = lstm.forward(x, None);
//! assert_eq!(y.dims(), [4, 10, 32]); // [batch, seq, dirs * hidden]
//! assert_eq!(state.hidden.dims(), [4, 4, 16]); // [layers * dirs, batch, hidden]
//! println!("{}", lstm.kernel(&device, 4, 10)); // which kernel runs, and why not a faster one
//! ```
//!
//! # Checkpoints
//!
//! - Burn records: a bare layer with
//!   [`CudnnCompatibleLstmConfig::load_checkpoint`] /
//!   [`CudnnCompatibleGruConfig::load_checkpoint`]; a model that holds the layer with
//!   [`load_file_checked`]. Both check every tensor against the config (names, shapes,
//!   none missing or extra) and name the file, the expected and the actual value; a
//!   damaged file is an error, never a panic.
//! - PyTorch state dicts, `torch.save` files or safetensors:
//!   [`CudnnCompatibleLstmConfig::load_pytorch`],
//!   [`CudnnCompatibleLstmConfig::load_pytorch_with_prefix`] (either, told apart by
//!   content), [`CudnnCompatibleLstmConfig::load_pytorch_safetensors`],
//!   [`CudnnCompatibleLstmConfig::load_pytorch_safetensors_with_prefix`] (an `nn.LSTM`
//!   inside a larger module), [`CudnnCompatibleLstm::save_pytorch_safetensors`]; the
//!   GRU's alike.
//! - Burn's own layers: [`CudnnCompatibleLstm::from_burn_lstm`] / `from_burn_bilstm`,
//!   [`CudnnCompatibleGru::from_burn_gru`] / `from_burn_bigru`.
//!
//! # Features
//!
//! | feature | what it adds | who needs it |
//! | --- | --- | --- |
//! | (none) | Flex and NdArray (the fused CPU kernel), `Autodiff` over them | every binary; serving on CPU needs nothing more |
//! | `cuda` | Burn's Cuda backend with the cuDNN op (CUDA 13, cuDNN 9 loaded at run time) | only the binary that trains or serves on an NVIDIA GPU |
//! | `wgpu` | Burn's Wgpu backend (portable kernel) | a binary that runs on Wgpu |
//! | `dispatch` | Burn's `Dispatch` backend (device chosen at run time) | a binary that uses `Dispatch` |
//! | `cubecl` | the op on CubeCL backends; implied by `cuda` and `wgpu` | not turned on alone |
//!
//! `cuda` builds without CUDA installed: libcuda and libcudnn are loaded when a Cuda
//! device is first used, and where they are missing the layer runs the portable kernel
//! and [`KernelChoice`] says why.
//!
//! # Settings
//!
//! Threads, caches and the cuDNN switches are process-wide: [`settings`] lists every
//! environment variable with its default, its effect and the function that does the
//! same.
//!
//! # Guides
//!
//! This crate's repository has four task guides in its `docs/` folder, each a complete
//! program compiled as a doctest of this crate (and run, but for the PyTorch one, which
//! needs a file of the user's): `docs/migrating.md` (swap `burn::nn::Lstm` or `nn::Gru`
//! for this layer), `docs/train-cuda-serve-cpu.md` (train on CUDA, save, load with checks
//! and serve on CPU), `docs/pytorch.md` (bring a PyTorch model's weights) and
//! `docs/int8.md` (int8 inference on the CPU). `docs/kernels.md` says which kernel runs
//! where.

/// Every process-wide setting and environment variable, with its default, its effect
/// and its API.
#[doc = include_str!("settings.md")]
pub mod settings {}

// The guides of the repository's docs/ folder, compiled and run as doctests so that
// their code cannot drift from the crate (not part of the documentation).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/migrating.md")]
pub struct MigratingGuide;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/train-cuda-serve-cpu.md")]
pub struct TrainCudaServeCpuGuide;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/pytorch.md")]
pub struct PytorchGuide;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/int8.md")]
pub struct Int8Guide;
#[cfg(doctest)]
#[doc = include_str!("../../../docs/keras-onnx.md")]
pub struct KerasOnnxGuide;

mod bounded_read;
mod decoder_stack;
mod deprecated;
mod error;
mod int8;
mod kernels;
mod module;
mod op;

#[allow(deprecated)]
pub use deprecated::{
    LstmArch, LstmBackend, LstmDirectionWeights, LstmError, LstmGrads, LstmInputs, LstmKernel,
    LstmLayer, LstmOutput, LstmOutputGrads, LstmSaved, LstmSpec, lstm,
};
pub use error::RnnError;
pub use int8::models::{Int8Gru, Int8Lstm};
#[cfg(feature = "cubecl")]
pub use kernels::cubecl::flat_cache::{gpu_weight_cache, set_gpu_weight_cache};
#[cfg(feature = "cubecl")]
pub use kernels::cubecl::flat_join::{fusion_flat_join, set_fusion_flat_join};
#[cfg(feature = "cubecl")]
pub use kernels::cubecl::keep_awake::{keep_awake, set_keep_awake};
#[cfg(feature = "cubecl")]
pub use kernels::cubecl::release::release_gpu_buffers;
#[cfg(feature = "cuda")]
pub use kernels::cudnn::PlainCuda;
#[cfg(feature = "cuda")]
pub use kernels::cudnn::{
    CudnnAlgo, CudnnMath, CudnnPoolUsage, CudnnRnnAlgo, cudnn_algo, cudnn_batch_major,
    cudnn_call_reuse, cudnn_context_wait, cudnn_empty_rows, cudnn_events, cudnn_gru, cudnn_half,
    cudnn_math, cudnn_pool_usage, cudnn_reserve_pool, cudnn_reuse, cudnn_runtime_errors,
    cudnn_skip_flush, set_cudnn_algo, set_cudnn_batch_major, set_cudnn_context_wait,
    set_cudnn_empty_rows, set_cudnn_events, set_cudnn_gru, set_cudnn_half, set_cudnn_math,
    set_cudnn_reserve_pool, set_cudnn_reuse, set_cudnn_skip_flush,
};
pub use kernels::fused_cpu::{
    CpuCacheUsage, cpu_cache_usage, cpu_threads, cpu_threads_shared, release_cpu_buffers,
    set_cpu_threads, set_cpu_threads_shared,
};
pub use module::config::{CudnnCompatibleLstmConfig, NanPolicy};
pub use module::gru::{CudnnCompatibleGru, CudnnCompatibleGruRecord};
pub use module::gru_config::CudnnCompatibleGruConfig;
pub use module::lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmRecord};
pub use module::model_checkpoint::load_file_checked;
pub use module::padding_mask::padding_mask_lengths;
pub use module::state::{GruState, LstmState};
pub use module::weights::{RnnDirectionWeights, RnnLayer};
pub use op::call::rnn;
pub use op::choice::{KernelChoice, RnnKernel};
pub use op::contract::RnnBackend;
pub use op::flat_weights::{FlatBufferOps, FlatJoinOps, GradientSplit};
#[cfg(feature = "cubecl")]
#[doc(hidden)]
pub use op::fusion::set_one_operation_on_every_fused_backend;
pub use op::io::{HostResiduals, RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
pub use op::spec::{CellKind, DirectionLayout, RnnArch, RnnSpec};

// Keras (`.keras`, `.h5`) and ONNX import of recurrent layers (docs/keras-onnx.md).
mod import;
pub use import::{
    KerasModel, KerasRecurrentLayer, OnnxModel, OnnxRecurrentNode, RecurrentSelection,
    keras_mask_lengths,
};
