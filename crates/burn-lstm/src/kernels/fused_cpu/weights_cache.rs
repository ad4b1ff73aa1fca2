//! Inference on a CPU backend reuses a module's flat parameter buffer and its packed copy
//! (`lstm_cpu::PackedWeights`) while the parameters are unchanged, as ONNX Runtime packs
//! its weights once per session. At batch 1 (H = 128) flattening and packing were
//! ~15 % of a call, at 16×50×256 ~8 % (perf, docs/fused-cpu.md).
//!
//! **Why a cached copy can never be stale.** An entry is keyed on the backend and the
//! identity of the parameter tensors ([`ValuesKey`]: data address, shape, strides,
//! dtype; for a parameter Burn quantized, those of its stored integers, its scheme and
//! its scales, and the flat copy holds the dequantized values) and *holds a clone* of
//! each. NdArray and Flex change a tensor's storage in place only when nobody else
//! holds it (a strong count of one; NdArray's borrowed storage never; see
//! `HostTensors`), so while the entry's clone lives, any change to a parameter (an
//! optimizer step, `Param::map`, loading a record) makes new storage with a new address,
//! which misses the cache. The storage an entry holds cannot be freed, so its address
//! cannot be reused by other values.
//!
//! Only inference uses the packed copy: a training call's parameters change every step.
//! The cache keeps at most [`max_entries`] entries (`BURN_LSTM_WEIGHT_CACHE_ENTRIES`,
//! default 8) and `BURN_LSTM_WEIGHT_CACHE_MIB` (default 512; `0` turns it off) of flat
//! and packed copies plus the parameters it keeps alive, least recently used first out,
//! one entry per key; an entry one of whose parameters only it still holds goes at the
//! next miss (its module is gone or was changed: evaluations between training steps
//! leave one such entry each); [`release`] empties it (through
//! `burn_lstm::release_cpu_buffers`).

use std::any::{Any, TypeId};
use std::sync::{Arc, Mutex, OnceLock};

use burn::tensor::{TensorMetadata, TensorPrimitive, ops::FloatTensor};
use lstm_cpu::PackedWeights;

use super::host::{HostElement, HostTensors, ValuesKey, flatten};
use crate::kernels::env_number::{usize_from_env, weight_cache_limit_bytes};
use crate::op::spec::RnnArch;

/// Most entries kept (one per module whose inference ran recently) unless
/// `BURN_LSTM_WEIGHT_CACHE_ENTRIES` says otherwise.
const DEFAULT_MAX_ENTRIES: usize = 8;

/// Most entries kept: `BURN_LSTM_WEIGHT_CACHE_ENTRIES` (read once), else 8.
pub(crate) fn max_entries() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        usize_from_env("BURN_LSTM_WEIGHT_CACHE_ENTRIES").unwrap_or(DEFAULT_MAX_ENTRIES)
    })
}

struct Entry {
    /// The backend whose tensors these are (keys of two backends never match).
    backend: TypeId,
    part_keys: Vec<ValuesKey>,
    /// Clones of the parameters, each a `TensorPrimitive` of the backend (see the module
    /// docs: they keep the values fixed).
    parts: Vec<Box<dyn Any + Send + Sync>>,
    /// Whether the entry holds the last reference to one of `parts`' values.
    orphaned: fn(&Entry) -> bool,
    flat_key: ValuesKey,
    /// The flat buffer built from the parameters (a `FloatTensor` of the backend).
    flat: Box<dyn Any + Send + Sync>,
    /// `PackedWeights<T>` of the flat buffer, once an inference call has packed it.
    packed: Option<(RnnArch, Arc<dyn Any + Send + Sync>)>,
    bytes: usize,
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn entries() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    ENTRIES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Entries held now and the bytes they account for.
pub(crate) fn usage() -> (usize, usize) {
    let entries = entries();
    (entries.len(), entries.iter().map(|e| e.bytes).sum())
}

/// Empties the cache (the parameters it kept alive can then be freed).
pub(crate) fn release() {
    let dropped = std::mem::take(&mut *entries());
    drop(dropped);
}

/// The flat parameter buffer of `parts` (not tracked by autodiff): the cached one when
/// these very tensors built it before, else a new one ([`flatten`]), remembered for the
/// next call.
pub(crate) fn flat_weights<B: HostTensors>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    cached_flat::<B>(parts.into_iter().map(TensorPrimitive::Float).collect())
}

/// [`flat_weights`] of parameters some of which Burn quantized
/// (`Module::quantize_weights`): the buffer of their dequantized values, built once
/// while the quantized tensors are unchanged, as a float module's is.
pub(crate) fn flat_weights_quantized<B: HostTensors>(
    parts: Vec<TensorPrimitive<B>>,
) -> FloatTensor<B> {
    cached_flat::<B>(parts)
}

/// The flat buffer of `parts`, float or quantized: cached under their [`part_key`]s.
fn cached_flat<B: HostTensors>(parts: Vec<TensorPrimitive<B>>) -> FloatTensor<B> {
    let keys: Option<Vec<ValuesKey>> = parts.iter().map(part_key::<B>).collect();
    let Some(part_keys) = keys.filter(|_| weight_cache_limit_bytes() > 0) else {
        return flatten_parts::<B>(parts);
    };
    let backend = TypeId::of::<B>();
    {
        let mut entries = entries();
        if let Some(at) = entries.iter().position(|e| e.is_for(backend, &part_keys)) {
            let entry = entries.remove(at);
            let flat = entry.flat::<B>();
            entries.push(entry);
            return flat;
        }
    }
    drop_orphans();
    let kept: Vec<Box<dyn Any + Send + Sync>> = parts
        .iter()
        .map(|p| Box::new(p.clone()) as Box<dyn Any + Send + Sync>)
        .collect();
    let kept_bytes: usize = parts
        .iter()
        .zip(&part_keys)
        .map(|(part, key)| stored_bytes::<B>(part, key))
        .sum();
    let flat = flatten_parts::<B>(parts);
    let Some(flat_key) = B::values_key(&flat) else {
        return flat;
    };
    let flat_bytes = flat.shape().num_elements() * flat.dtype().size();
    let entry = Entry {
        backend,
        part_keys,
        parts: kept,
        orphaned: orphaned::<B>,
        flat_key,
        flat: Box::new(flat.clone()),
        packed: None,
        // The parameters kept alive, the flat copy and (later) a packed copy of it.
        bytes: kept_bytes + 2 * flat_bytes,
    };
    // Another thread's first call of the same module may have kept its own meanwhile:
    // one entry per key (two would hold each other's parameters alive, and neither
    // would ever be orphaned).
    insert::<B>(entry).unwrap_or(flat)
}

/// The identity of a part's values ([`HostTensors::values_key`], or for a quantized part
/// [`HostTensors::quantized_values_key`]).
fn part_key<B: HostTensors>(part: &TensorPrimitive<B>) -> Option<ValuesKey> {
    match part {
        TensorPrimitive::Float(t) => B::values_key(t),
        TensorPrimitive::QFloat(q) => B::quantized_values_key(q),
    }
}

/// The bytes a part's stored values take: a quantized value at most one, and its
/// scales (`key`'s, four bytes each).
fn stored_bytes<B: HostTensors>(part: &TensorPrimitive<B>, key: &ValuesKey) -> usize {
    match part {
        TensorPrimitive::Float(t) => t.shape().num_elements() * t.dtype().size(),
        TensorPrimitive::QFloat(q) => q.shape().num_elements() + 4 * key.scales.len(),
    }
}

/// [`flatten`] of the parts, quantized ones dequantized to the device's float type.
fn flatten_parts<B: HostTensors>(parts: Vec<TensorPrimitive<B>>) -> FloatTensor<B> {
    flatten::<B>(parts.into_iter().map(TensorPrimitive::tensor).collect())
}

impl Entry {
    /// Whether the entry was built from the parameters `part_keys` of `backend`.
    fn is_for(&self, backend: TypeId, part_keys: &[ValuesKey]) -> bool {
        self.backend == backend && self.part_keys == part_keys
    }

    /// The flat buffer, as the `FloatTensor` of its backend `B`.
    fn flat<B: HostTensors>(&self) -> FloatTensor<B> {
        self.flat
            .downcast_ref::<FloatTensor<B>>()
            .expect("an entry of this backend holds a flat buffer of this backend")
            .clone()
    }
}

/// Whether `entry` (of backend `B`) holds the last reference to one of its parameters:
/// the module it was built for is gone or has new parameters, so no call can present
/// its key again (presenting it takes holding the parameters).
fn orphaned<B: HostTensors>(entry: &Entry) -> bool {
    entry
        .parts
        .iter()
        .any(|p| match p.downcast_ref::<TensorPrimitive<B>>() {
            Some(TensorPrimitive::Float(t)) => B::sole_holder(t),
            Some(TensorPrimitive::QFloat(q)) => B::quantized_sole_holder(q),
            None => false,
        })
}

/// Drops the [`orphaned`] entries. Without this, a training loop that evaluates between
/// steps would keep every evaluation's copies until the limits evict them.
fn drop_orphans() {
    let orphans: Vec<Entry> = {
        let mut entries = entries();
        let (orphans, live) = std::mem::take(&mut *entries)
            .into_iter()
            .partition(|e| (e.orphaned)(e));
        *entries = live;
        orphans
    };
    // Dropped outside the lock: dropping releases (possibly large) memory.
    drop(orphans);
}

/// Keeps `entry` (of backend `B`), evicting the least recently used entries beyond the
/// limits; where an entry of the same key is already kept, keeps that one instead and
/// returns its flat buffer.
fn insert<B: HostTensors>(entry: Entry) -> Option<FloatTensor<B>> {
    let limit = weight_cache_limit_bytes();
    if entry.bytes > limit {
        return None;
    }
    let evicted = {
        let mut entries = entries();
        if let Some(kept) = entries
            .iter()
            .find(|e| e.is_for(entry.backend, &entry.part_keys))
        {
            let flat = kept.flat::<B>();
            drop(entries);
            drop(entry);
            return Some(flat);
        }
        entries.push(entry);
        let mut evicted = Vec::new();
        let max_entries = max_entries();
        while entries.len() > max_entries || entries.iter().map(|e| e.bytes).sum::<usize>() > limit
        {
            evicted.push(entries.remove(0));
        }
        evicted
    };
    // Dropped outside the lock: dropping releases (possibly large) memory.
    drop(evicted);
    None
}

/// The packed copy of `flat` for `arch` when `flat` is a flat buffer this cache built
/// ([`flat_weights`]): packed by the first inference call that asks, shared by the
/// next ones. `None` for any other tensor (the call packs its weights itself).
pub(crate) fn packed<B: HostTensors, T: HostElement>(
    flat: &FloatTensor<B>,
    arch: &RnnArch,
) -> Option<Arc<PackedWeights<T>>> {
    let key = B::values_key(flat)?;
    let backend = TypeId::of::<B>();
    let flat_clone = {
        let entries = entries();
        let entry = entries
            .iter()
            .find(|e| e.backend == backend && e.flat_key == key)?;
        if let Some((packed_arch, packed)) = &entry.packed
            && packed_arch == arch
            && let Ok(packed) = packed.clone().downcast::<PackedWeights<T>>()
        {
            return Some(packed);
        }
        entry.flat.downcast_ref::<FloatTensor<B>>()?.clone()
    };
    // Packed outside the lock (the first call of a large model packs for milliseconds).
    let packed = Arc::new(B::with_values::<T, _>(&flat_clone, |values| {
        PackedWeights::new(arch, values).ok()
    })??);
    let mut entries = entries();
    if let Some(entry) = entries
        .iter_mut()
        .find(|e| e.backend == backend && e.flat_key == key)
    {
        entry.packed = Some((arch.clone(), packed.clone() as Arc<dyn Any + Send + Sync>));
    }
    Some(packed)
}
