//! Giving back the GPU memory the layers keep between calls.

use crate::kernels::cubecl::flat_cache;
use crate::op::zero_state;

/// Gives back the GPU memory the layers keep between calls: the flat parameter buffers
/// of the GPU weight cache ([`gpu_weight_cache`](crate::gpu_weight_cache)), the kept
/// zero initial states (at most 16 of 1 MiB, on any backend) and, on CUDA
/// (feature `cuda`), each GPU's cuDNN weight spaces, pooled work space and idle reserve
/// spaces ([`cudnn_pool_usage`](crate::cudnn_pool_usage) reports them). Call this after
/// a phase that used a large model (training, or serving a model no longer needed) to
/// hand that memory to Burn's allocator. Later calls work as before and fill the caches
/// and pools again; the settings are unchanged. The GPU counterpart of
/// [`release_cpu_buffers`](crate::release_cpu_buffers).
pub fn release_gpu_buffers() {
    flat_cache::release();
    zero_state::release();
    #[cfg(feature = "cuda")]
    crate::kernels::cudnn::device::release_buffers();
}
