//! The fused cuDNN op on Burn's CUDA backend (feature `cuda`).
//!
//! - [`device`]: one cuDNN handle, dropout state and configured LSTMs per GPU, created on
//!   first use; a device where cuDNN cannot run is remembered with the reason.
//! - [`choice`]: whether a call runs on cuDNN, and why not.
//! - [`algo`]: which of cuDNN's RNN algorithms a call runs (a policy, PyTorch's
//!   heuristics under `auto`), and why.
//! - [`layout`]: the memory layout of the tensors cuDNN takes (sequence- or batch-major),
//!   copied only where the memory is not.
//! - [`weights`]: the copy plan from the canonical flat parameters to cuDNN's weight space.
//! - [`pinned`]: the device addresses of a call's tensors, read from CubeCL in one round
//!   trip, their memory kept allocated while cuDNN uses it.
//! - [`ordering`]: how a call is ordered against CubeCL's work (events, or the host
//!   waits).
//! - [`test_refusal`]: cuDNN refusing an algorithm on purpose, for the GPU test of the
//!   op's answer to a refusal.
//! - [`ops`]: forward and backward on `CubeTensor<CudaRuntime>`: raw device pointers from
//!   CubeCL, the call ordered after CubeCL's earlier work and CubeCL's later work after
//!   it.
//!
//! On Burn's fused backend (`burn::backend::Cuda`) the op runs as one custom fusion
//! operation that calls this one (`op/fusion.rs`).

pub(crate) mod algo;
pub(crate) mod choice;
pub(crate) mod device;
mod layout;
pub(crate) mod ops;
mod ordering;
mod pinned;
pub(crate) mod runtime_cast;
mod settings;
mod test_refusal;
mod trace;
pub(crate) mod types;
pub(crate) mod weights;

pub use algo::{CudnnAlgo, cudnn_algo, set_cudnn_algo};
pub use cudnn_rnn::MathMode as CudnnMath;
pub use cudnn_rnn::RnnAlgo as CudnnRnnAlgo;
pub use device::{CudnnPoolUsage, cudnn_pool_usage, cudnn_runtime_errors};
pub use settings::{
    cudnn_batch_major, cudnn_call_reuse, cudnn_context_wait, cudnn_empty_rows, cudnn_events,
    cudnn_gru, cudnn_half, cudnn_math, cudnn_reserve_pool, cudnn_reuse, cudnn_skip_flush,
    set_cudnn_batch_major, set_cudnn_context_wait, set_cudnn_empty_rows, set_cudnn_events,
    set_cudnn_gru, set_cudnn_half, set_cudnn_math, set_cudnn_reserve_pool, set_cudnn_reuse,
    set_cudnn_skip_flush,
};
pub use types::PlainCuda;
