//! On Burn's fused backends (`burn::backend::Cuda`, `Wgpu`), inference reuses the flat
//! parameter buffer built from a module's parameters while they are unchanged, keyed on
//! the parameters' fusion tensor ids (`kernels/identity_cache.rs` says why an entry is
//! never stale). The buffer then keeps its own id from call to call, which is what lets
//! the cuDNN op reuse the weight space it copied from it (`kernels/cudnn/ops.rs`).
//!
//! On by default; `BURN_LSTM_GPU_WEIGHT_CACHE=0` or [`set_gpu_weight_cache`] turns it
//! off. At most [`MAX_ENTRIES`] modules and `BURN_LSTM_WEIGHT_CACHE_MIB` (default 512) of
//! buffers.

use std::any::Any;
use std::sync::Mutex;

use burn::tensor::{TensorMetadata, ops::FloatTensor};
use burn_fusion::{Fusion, FusionBackend};
use burn_ir::TensorId;

use crate::kernels::cubecl::flat_join::untracked_buffer;
use crate::kernels::env_number::weight_cache_limit_bytes;
use crate::kernels::identity_cache::IdentityCache;
use crate::kernels::switch::OptInSwitch;
use crate::op::contract::RnnBackend;

/// Most modules whose flat buffer is kept.
pub(crate) const MAX_ENTRIES: usize = 8;

static SWITCH: OptInSwitch = OptInSwitch::new("BURN_LSTM_GPU_WEIGHT_CACHE", true);

/// Whether inference on a GPU backend keeps derived copies of unchanged parameters (the
/// flat buffer on the fused backends, cuDNN's weight space). On by default;
/// `BURN_LSTM_GPU_WEIGHT_CACHE` (`1` on, anything else off) decides until
/// [`set_gpu_weight_cache`] is called.
pub fn gpu_weight_cache() -> bool {
    SWITCH.get()
}

/// Turns the GPU weight cache on or off for calls that start after this one (see
/// [`gpu_weight_cache`]); turning it off empties it (the flat buffers at once, cuDNN's
/// weight spaces at each device's next call).
pub fn set_gpu_weight_cache(enabled: bool) {
    SWITCH.set(enabled);
    if !enabled {
        release();
    }
}

/// Drops every kept flat buffer (their memory goes back to the backend's allocator once
/// no call uses them).
pub(crate) fn release() {
    entries().clear();
}

/// A module's parameters, by identity: each part's id, in order.
type Key = Vec<TensorId>;

static ENTRIES: Mutex<Option<IdentityCache<Key, Box<dyn Any + Send + Sync>>>> = Mutex::new(None);

fn entries() -> CacheGuard {
    CacheGuard(ENTRIES.lock().unwrap_or_else(|e| e.into_inner()))
}

struct CacheGuard(
    std::sync::MutexGuard<'static, Option<IdentityCache<Key, Box<dyn Any + Send + Sync>>>>,
);

impl CacheGuard {
    fn cache(&mut self) -> &mut IdentityCache<Key, Box<dyn Any + Send + Sync>> {
        self.0
            .get_or_insert_with(|| IdentityCache::new(MAX_ENTRIES, weight_cache_limit_bytes()))
    }

    fn clear(&mut self) {
        if let Some(cache) = self.0.as_mut() {
            cache.clear();
        }
    }
}

/// The flat buffer of `parts` (untracked parameters: inference), the one built for the
/// same parameters before when the cache is on.
pub(crate) fn flat_weights<B: FusionBackend + RnnBackend>(
    parts: Vec<FloatTensor<Fusion<B>>>,
) -> FloatTensor<Fusion<B>> {
    if !gpu_weight_cache() {
        return untracked_buffer::<B>(parts);
    }
    let key: Key = parts.iter().map(|part| part.id).collect();
    let mut guard = entries();
    if let Some(flat) = guard
        .cache()
        .get(&key)
        .and_then(|flat| flat.downcast_ref::<FloatTensor<Fusion<B>>>())
    {
        return flat.clone();
    }
    let flat = untracked_buffer::<B>(parts);
    let bytes = flat.shape().num_elements() * flat.dtype().size();
    guard.cache().insert(key, Box::new(flat.clone()), bytes);
    flat
}
