#![warn(missing_docs)]
//! A safe wrapper of cuDNN 9's RNN API (the v8 calls) for LSTMs and GRUs, layered like
//! cudarc:
//! checked calls ([`CudnnRnnError`] names the call and the status), then RAII types.
//!
//! - [`check_cudnn`]: is libcudnn there, version >= 9, sub-libraries consistent.
//! - [`CudnnHandle`]: a cuDNN handle bound to one stream.
//! - [`DropoutState`]: the inter-layer dropout descriptor with its generator states.
//! - [`Rnn`]: a configured LSTM or GRU ([`RnnConfig`], [`RnnCell`]), its weight-space
//!   layout read from
//!   `cudnnGetRNNWeightParams` ([`WeightSpaceLayout`]), `forward` (inference or training
//!   with a [`ReserveSpace`]) and `backward` (data, then weights).
//! - [`RnnAlgo`] ([`RnnConfig::algo`], standard by default) and [`choose_algo`]: the
//!   persistent-kernel algorithm PyTorch's `get_algo` would run an [`AlgoCall`] with on a
//!   device ([`DeviceProps`]), as a pure function with the reason in words
//!   ([`AlgoChoice`]).
//! - [`SeqShape`]: sequence length, batch and right-padded row lengths (zero-length rows
//!   are refused before cuDNN sees them), in a [`SeqLayout`] (sequence- or batch-major).
//! - [`wait_for_context`] / [`context_waits_for`]: this crate's stream ordered against
//!   the context's other streams with events, not host synchronisation.
//! - [`first_accepted`]: a call's algorithm and layout, then its fallbacks
//!   ([`refusal_fallbacks`]) until cuDNN accepts one, what cuDNN refused remembered per
//!   configuration and call ([`Refusals`]).
//! - [`CopyPlan`]: merged device copies between the weight space and another layout.
//! - [`CallReuse`]: per-call host work a handle and its RNNs may keep between calls (a
//!   grow-only work-space pool, [`next_capacity`]; call descriptors and temp-space sizes
//!   cached per [`CallKey`]; a null `devSeqLengths` for full-length rows; a pool of
//!   reserve spaces given back by dropped [`ReserveSpace`]s, [`reserve_capacity`]), each
//!   switch off by default.
//!
//! libcuda and libcudnn are loaded at run time (cudarc's dynamic loading): the crate
//! builds without CUDA, and a missing library is an error, never a panic.

mod algo;
mod config;
mod descriptor;
mod dropout;
mod error;
mod handle;
mod library;
mod ordering;
mod refusals;
mod reserve_pool;
mod reuse;
mod rnn;
mod rnn_algo;
mod shape;
mod status;
mod version;
mod weights;

pub use algo::{
    AlgoCall, AlgoChoice, DeviceProps, SMALL_H_BACKWARD_MAX_HIDDEN, SMALL_H_FORWARD_MAX_HIDDEN,
    choose_algo, refusal_fallbacks,
};
pub use config::{DataType, MathMode, RnnCell, RnnConfig};
/// cuDNN's status codes ([`CudnnRnnError::Status`]'s `status`), as cudarc names them.
pub use cudarc::cudnn::sys::cudnnStatus_t as CudnnStatus;
pub use dropout::DropoutState;
pub use error::{CudnnRnnError, Result};
pub use handle::CudnnHandle;
pub use library::{CudnnVersion, REQUIRED_CUDNN_MAJOR, check_cudnn, driver_present};
pub use rnn::{BackwardBuffers, DeviceBuffer, ForwardBuffers, ReserveSpace, Rnn};

/// The name [`Rnn`] had before it held GRUs too.
#[deprecated(since = "0.2.0", note = "renamed `Rnn` (it holds GRUs too)")]
pub type Lstm = Rnn;
pub use ordering::{context_waits_for, wait_for_context};
pub use refusals::{Attempt, AttemptError, REFUSALS_KEPT, Refusals, first_accepted};
pub use reserve_pool::{RESERVE_POOL_GRANULE, RESERVE_POOL_MAX_IDLE, reserve_capacity};
pub use reuse::{
    CALL_CACHE_CAPACITY, CallKey, CallReuse, WORK_POOL_GRANULE, needs_dev_lengths, next_capacity,
};
pub use rnn_algo::RnnAlgo;
pub use shape::{SeqLayout, SeqShape, is_row_major};
pub use weights::{CopyPlan, CopyRun, WeightKind, WeightRegion, WeightSpaceLayout};
