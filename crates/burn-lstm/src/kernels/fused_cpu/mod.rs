//! The fused CPU kernel of the `lstm-cpu` crate on Burn's CPU backends (f32 and f64;
//! other float types run the portable kernel). This folder is the part of the glue
//! written once: the call (`call.rs`), its threads (`threads.rs`), the reuse of packed
//! parameters (`weights_cache.rs`) and the trait each backend implements to reach its
//! tensors on the host (`host.rs`); `kernels/ndarray` and `kernels/flex` implement it.
//!
//! Inputs are copied to host vectors once per call, which is linear in their size and
//! small next to the kernel's work; the flat parameters are not: inference reads packed
//! copies it keeps while they are unchanged, training reads them in place in the flat
//! buffer tensor it keeps for the backward.

pub(crate) mod backend;
pub(crate) mod call;
pub(crate) mod host;
pub(crate) mod threads;
pub(crate) mod weights_cache;

pub use threads::{cpu_threads, cpu_threads_shared, set_cpu_threads, set_cpu_threads_shared};

use burn::tensor::DType;

use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::spec::RnnSpec;

/// Returns the fused CPU kernel's cached memory to the allocator: the freed scratch
/// buffers it keeps for the next call (up to `LSTM_CPU_BUFFER_CACHE_MIB`, default
/// 1024 MiB) and the flat and packed copies of recently used parameters that inference
/// reuses while they are unchanged (up to `BURN_LSTM_WEIGHT_CACHE_MIB`, default 512 MiB,
/// including the parameters those copies keep alive); see docs/fused-cpu.md. With
/// glibc's malloc as the allocator it then has it return its free pages to the system
/// (`malloc_trim`), which it keeps otherwise. Call this after a large model's last call
/// to give that memory back. Later calls work as before and fill the caches again.
pub fn release_cpu_buffers() {
    weights_cache::release();
    lstm_cpu::release_cached_buffers();
}

/// What the fused CPU kernel's two caches hold now, and their limits (see
/// [`release_cpu_buffers`] and docs/fused-cpu.md). For monitoring a long-running
/// process: neither cache grows past its limit, whatever the number of calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuCacheUsage {
    /// Bytes of freed scratch buffers kept for the next call.
    pub buffer_bytes: usize,
    /// Their limit (`LSTM_CPU_BUFFER_CACHE_MIB`, default 1024 MiB).
    pub buffer_limit_bytes: usize,
    /// Modules whose flat and packed parameters inference keeps.
    pub weight_entries: usize,
    /// Most such modules kept (`BURN_LSTM_WEIGHT_CACHE_ENTRIES`, default 8).
    pub weight_max_entries: usize,
    /// Bytes those entries account for (flat and packed copies plus the parameters they
    /// keep alive).
    pub weight_bytes: usize,
    /// Their limit (`BURN_LSTM_WEIGHT_CACHE_MIB`, default 512 MiB).
    pub weight_limit_bytes: usize,
}

/// The current [`CpuCacheUsage`].
pub fn cpu_cache_usage() -> CpuCacheUsage {
    let (weight_entries, weight_bytes) = weights_cache::usage();
    CpuCacheUsage {
        buffer_bytes: lstm_cpu::cached_buffer_bytes(),
        buffer_limit_bytes: lstm_cpu::cache_limit_bytes(),
        weight_entries,
        weight_max_entries: weights_cache::max_entries(),
        weight_bytes,
        weight_limit_bytes: crate::kernels::env_number::weight_cache_limit_bytes(),
    }
}

/// The kernel a CPU backend with the fused kernel runs for `spec` with float type `dtype`.
pub(crate) fn choice(dtype: DType, spec: &RnnSpec) -> KernelChoice {
    let supported = matches!(dtype, DType::F32 | DType::F64);
    match spec.kernel {
        Some(RnnKernel::Portable) => KernelChoice::fallback(
            RnnKernel::Portable,
            "the portable kernel was asked for (the fused CPU kernel is faster)",
        ),
        _ if !supported => KernelChoice::fallback(
            RnnKernel::Portable,
            format!("the fused CPU kernel runs f32 and f64; this backend computes in {dtype:?}"),
        ),
        Some(RnnKernel::Cudnn) => KernelChoice::fallback(
            RnnKernel::FusedCpu,
            "the cudnn kernel was asked for but runs only on CUDA",
        ),
        Some(RnnKernel::FusedCpuInt8) => KernelChoice::fallback(
            RnnKernel::FusedCpu,
            "the fused-cpu-int8 kernel was asked for but runs only the int8 copy of a \
             model (`quantized_int8()`)",
        ),
        None | Some(RnnKernel::FusedCpu) => KernelChoice::fastest(RnnKernel::FusedCpu),
    }
}
