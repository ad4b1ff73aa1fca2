//! Inference on NdArray reuses a module's flat parameter buffer and its packed copy
//! (`lstm_cpu::PackedWeights`) while the parameters are unchanged, as ONNX Runtime packs
//! its weights once per session. At batch 1 (H = 128) flattening and packing were
//! ~15 % of a call, at 16×50×256 ~8 % (perf, docs/fused-cpu.md).
//!
//! **Why a cached copy can never be stale.** An entry is keyed on the identity of the
//! parameter tensors (data address, shape, strides, dtype) and *holds a clone* of each.
//! NdArray changes a tensor's storage in place only when nobody else holds it
//! (`is_unique`, a strong count of one; borrowed storage never), so while the entry's
//! clone lives, any change to a parameter (an optimizer step, `Param::map`, loading a
//! record) makes new storage with a new address, which misses the cache. The storage an
//! entry holds cannot be freed, so its address cannot be reused by other values.
//!
//! Only inference uses the packed copy: a training call's parameters change every step.
//! The cache keeps at most [`MAX_ENTRIES`] entries and `BURN_LSTM_WEIGHT_CACHE_MIB`
//! (default 512; `0` turns it off) of flat and packed copies plus the parameters it keeps
//! alive, least recently used first out; [`release`] empties it (through
//! `burn_lstm::release_cpu_buffers`).

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock};

use burn::tensor::{DType, TensorMetadata, backend::Backend, ops::FloatTensor};
use burn_ndarray::NdArrayTensor;
use lstm_cpu::{PackedWeights, Real};

use crate::spec::LstmArch;

/// Most entries kept (one per module whose inference ran recently).
pub(crate) const MAX_ENTRIES: usize = 8;

/// Identity of an NdArray tensor's values: where they are and how they are laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TensorKey {
    address: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
    dtype: DType,
}

impl TensorKey {
    /// The key of `t` if it is a non-empty NdArray tensor of f32 or f64.
    fn of(t: &dyn Any) -> Option<Self> {
        match t.downcast_ref::<NdArrayTensor>()? {
            NdArrayTensor::F32(s) => {
                let v = s.view();
                Self::of_view(v.as_ptr(), v.shape(), v.strides(), DType::F32)
            }
            NdArrayTensor::F64(s) => {
                let v = s.view();
                Self::of_view(v.as_ptr(), v.shape(), v.strides(), DType::F64)
            }
            _ => None,
        }
    }

    /// The key of a view's values (`None` when it has none: an empty view's address is
    /// not its own).
    fn of_view<E>(
        data: *const E,
        shape: &[usize],
        strides: &[isize],
        dtype: DType,
    ) -> Option<Self> {
        (shape.iter().product::<usize>() > 0).then(|| Self {
            address: data as usize,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            dtype,
        })
    }
}

struct Entry {
    part_keys: Vec<TensorKey>,
    /// Clones of the parameters (see the module docs: they keep the values fixed).
    _parts: Vec<Box<dyn Any + Send + Sync>>,
    flat_key: TensorKey,
    /// The flat buffer built from the parameters (an NdArray tensor).
    flat: Box<dyn Any + Send + Sync>,
    /// `PackedWeights<T>` of the flat buffer, once an inference call has packed it.
    packed: Option<(LstmArch, Arc<dyn Any + Send + Sync>)>,
    bytes: usize,
}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn entries() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    ENTRIES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Most bytes the entries may hold: `BURN_LSTM_WEIGHT_CACHE_MIB` (read once), else 512 MiB.
fn limit_bytes() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("BURN_LSTM_WEIGHT_CACHE_MIB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(512)
            .saturating_mul(1 << 20)
    })
}

/// Empties the cache (the parameters it kept alive can then be freed).
pub(crate) fn release() {
    let dropped = std::mem::take(&mut *entries());
    drop(dropped);
}

/// The flat parameter buffer of `parts` (NdArray, not tracked by autodiff): the cached
/// one when these very tensors built it before, else a new one
/// ([`crate::ndarray_host::flatten`]), remembered for the next call.
pub(crate) fn flat_weights<B: Backend>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    let keys: Option<Vec<TensorKey>> = parts.iter().map(|p| TensorKey::of(p)).collect();
    let Some(part_keys) = keys.filter(|_| limit_bytes() > 0) else {
        return crate::ndarray_host::flatten::<B>(parts);
    };
    {
        let mut entries = entries();
        if let Some(at) = entries.iter().position(|e| e.part_keys == part_keys) {
            let entry = entries.remove(at);
            let flat = entry
                .flat
                .downcast_ref::<FloatTensor<B>>()
                .expect("an entry with these NdArray parts holds an NdArray flat buffer")
                .clone();
            entries.push(entry);
            return flat;
        }
    }
    let kept: Vec<Box<dyn Any + Send + Sync>> = parts
        .iter()
        .map(|p| Box::new(p.clone()) as Box<dyn Any + Send + Sync>)
        .collect();
    let parts_bytes: usize = parts
        .iter()
        .map(|p| p.shape().num_elements() * p.dtype().size())
        .sum();
    let flat = crate::ndarray_host::flatten::<B>(parts);
    let Some(flat_key) = TensorKey::of(&flat) else {
        return flat;
    };
    let entry = Entry {
        part_keys,
        _parts: kept,
        flat_key,
        flat: Box::new(flat.clone()),
        packed: None,
        // The parameters kept alive, the flat copy and (later) a packed copy of it.
        bytes: 3 * parts_bytes,
    };
    insert(entry);
    flat
}

/// Keeps `entry`, evicting the least recently used entries beyond the limits.
fn insert(entry: Entry) {
    let limit = limit_bytes();
    if entry.bytes > limit {
        return;
    }
    let evicted = {
        let mut entries = entries();
        entries.push(entry);
        let mut evicted = Vec::new();
        while entries.len() > MAX_ENTRIES || entries.iter().map(|e| e.bytes).sum::<usize>() > limit
        {
            evicted.push(entries.remove(0));
        }
        evicted
    };
    // Dropped outside the lock: dropping releases (possibly large) memory.
    drop(evicted);
}

/// The packed copy of `flat` for `arch` when `flat` is a flat buffer this cache built
/// ([`flat_weights`]): packed by the first inference call that asks, shared by the
/// next ones. `None` for any other tensor (the call packs its weights itself).
pub(crate) fn packed<B: Backend, T: Real>(
    flat: &FloatTensor<B>,
    arch: &LstmArch,
) -> Option<Arc<PackedWeights<T>>> {
    let key = TensorKey::of(flat)?;
    let flat_clone = {
        let entries = entries();
        let entry = entries.iter().find(|e| e.flat_key == key)?;
        if let Some((packed_arch, packed)) = &entry.packed
            && packed_arch == arch
            && let Ok(packed) = packed.clone().downcast::<PackedWeights<T>>()
        {
            return Some(packed);
        }
        entry.flat.downcast_ref::<FloatTensor<B>>()?.clone()
    };
    // Packed outside the lock (the first call of a large model packs for milliseconds).
    let packed = Arc::new(crate::ndarray_host::with_values::<B, T, _>(
        &flat_clone,
        |values| PackedWeights::new(arch, values).ok(),
    )??);
    let mut entries = entries();
    if let Some(entry) = entries.iter_mut().find(|e| e.flat_key == key) {
        entry.packed = Some((arch.clone(), packed.clone() as Arc<dyn Any + Send + Sync>));
    }
    Some(packed)
}
