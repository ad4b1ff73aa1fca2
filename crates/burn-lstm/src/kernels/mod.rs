//! The kernels and their glue to Burn's backends: each folder implements the op
//! contract ([`RnnBackend`](crate::RnnBackend)) for some backends. Nothing here
//! imports `module/`.
//!
//! - `portable/`: Burn tensor ops only, every backend (the contract's defaults).
//! - `fused_cpu/`: the glue of `lstm-cpu`'s fused kernel, written once over the
//!   `HostTensors` trait that each CPU backend implements in its own folder:
//!   `ndarray/`, `flex/`.
//! - `cubecl/` (feature `cubecl`): Wgpu, Cuda and Rocm, fused or not; `cudnn/` (feature
//!   `cuda`): the cuDNN op those run on CUDA.
//! - `dispatch.rs` (feature `dispatch`): Burn's `Dispatch` backend.
//! - `env_number.rs`: sizes from environment variables (the weight caches' limits, the
//!   CPU kernel's threads).
//! - `empty_rows.rs`: rows of length 0 taken out of a call and put back, for a kernel
//!   that refuses them (cuDNN).
//! - `identity_cache.rs`: what was derived from unchanged parameters (the flat buffer,
//!   cuDNN's weight space), kept while they stay unchanged.
//! - `switch.rs` (feature `cubecl`): the on/off settings of the GPU paths.

#[cfg(feature = "cubecl")]
pub(crate) mod cubecl;
#[cfg(feature = "cuda")]
pub(crate) mod cudnn;
#[cfg(feature = "dispatch")]
mod dispatch;
// Used by the cuDNN glue (feature `cuda`) and by its own tests on the CPU kernels.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod empty_rows;
pub(crate) mod env_number;
pub(crate) mod flex;
pub(crate) mod fused_cpu;
// Used by the CubeCL and cuDNN glue (features `cubecl`, `cuda`: the cuDNN weight spaces
// use all of it) and by its own tests.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod identity_cache;
mod ndarray;
pub(crate) mod portable;
pub(crate) mod switch;
