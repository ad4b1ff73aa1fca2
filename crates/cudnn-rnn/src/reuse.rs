//! Per-call host work that can be kept between calls ([`CallReuse`]), as pure logic:
//! the growth of the work-space pool ([`next_capacity`]), the bounded cache of call
//! descriptors and temp-space sizes ([`CallCache`], keyed by [`CallKey`]), and when cuDNN
//! gets a null `devSeqLengths` ([`needs_dev_lengths`]). The reserve-space pool's policy
//! is in `reserve_pool.rs`.
//!
//! Everything here is off by default: with [`CallReuse::OFF`] every call builds its
//! descriptors, queries its temp-space sizes, allocates its work space and reserve space
//! and uploads its row lengths, as before.

use crate::shape::SeqShape;

/// Which per-call host work a [`CudnnHandle`](crate::CudnnHandle) and the
/// [`Rnn`](crate::Rnn)s called with it may keep between calls. Each switch is off by
/// default ([`CallReuse::OFF`]); a caller turns one on with
/// [`CudnnHandle::set_call_reuse`](crate::CudnnHandle::set_call_reuse) or
/// [`CudnnHandle::with_call_reuse`](crate::CudnnHandle::with_call_reuse) once a GPU run
/// has verified it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CallReuse {
    /// One grow-only work-space buffer per handle, used by every call in stream order,
    /// instead of a `cuMemAllocAsync` / `cuMemFreeAsync` pair per call. Sized by
    /// [`next_capacity`]. The reserve space of a training forward is not in it (it lives
    /// until its backward, and several may be outstanding): see
    /// [`reserve_pool`](Self::reserve_pool).
    pub work_pool: bool,
    /// The call descriptors (`cudnnSetRNNDataDescriptor`, `cudnnSetTensorNdDescriptor`)
    /// and the `cudnnGetRNNTempSpaceSizes` result kept per [`CallKey`] on each
    /// [`Rnn`](crate::Rnn), at most [`CALL_CACHE_CAPACITY`] of them, least recently
    /// used out.
    pub descriptor_cache: bool,
    /// A null `devSeqLengths` (as PyTorch passes it) when every row is full length, instead
    /// of uploading the lengths on each forward; see [`needs_dev_lengths`].
    pub null_dev_lengths: bool,
    /// Training forwards take their reserve space from the buffers earlier forwards'
    /// [`ReserveSpace`](crate::ReserveSpace)s gave back to the handle when dropped (best
    /// fit, at most [`RESERVE_POOL_MAX_IDLE`](crate::RESERVE_POOL_MAX_IDLE) idle, new ones
    /// rounded up to [`RESERVE_POOL_GRANULE`](crate::RESERVE_POOL_GRANULE)), instead of a
    /// `cuMemAllocAsync` per forward and a `cuMemFreeAsync` per backward.
    pub reserve_pool: bool,
}

impl CallReuse {
    /// Nothing is kept: the behaviour of this crate before the switches existed.
    pub const OFF: Self = Self {
        work_pool: false,
        descriptor_cache: false,
        null_dev_lengths: false,
        reserve_pool: false,
    };

    /// Every switch on.
    pub const ALL: Self = Self {
        work_pool: true,
        descriptor_cache: true,
        null_dev_lengths: true,
        reserve_pool: true,
    };

    /// [`CallReuse::ALL`] when `enabled`, else [`CallReuse::OFF`]: one setting for every
    /// switch, as a caller's on/off option gives it.
    pub const fn all_if(enabled: bool) -> Self {
        if enabled { Self::ALL } else { Self::OFF }
    }
}

/// The work-space pool grows in whole multiples of this (1 MiB).
pub const WORK_POOL_GRANULE: usize = 1 << 20;

/// Entries of an [`Rnn`](crate::Rnn)'s descriptor cache.
pub const CALL_CACHE_CAPACITY: usize = 16;

/// The capacity the work-space pool must grow to for a call that needs `wanted` bytes
/// when it holds `current` (0 for no buffer yet), or `None` when `current` suffices.
///
/// Growth is at least ×1.5 of `current` and at least `wanted` (never below one byte, as a
/// call with no work space still gets a valid address), rounded up to
/// [`WORK_POOL_GRANULE`], so that sizes creeping up one call at a time cost a logarithmic
/// number of reallocations. On overflow the result is `wanted` itself.
pub fn next_capacity(current: usize, wanted: usize) -> Option<usize> {
    let wanted = wanted.max(1);
    if current >= wanted {
        return None;
    }
    let grown = current.saturating_add(current / 2).max(wanted);
    let rounded = grown
        .checked_next_multiple_of(WORK_POOL_GRANULE)
        .unwrap_or(wanted);
    Some(rounded.max(wanted))
}

/// Whether a call of `shape` must give cuDNN the row lengths in device memory
/// (`devSeqLengths`): always, unless [`CallReuse::null_dev_lengths`] is on and every row
/// is full length ([`SeqShape::is_full`]), where cuDNN gets a null pointer as PyTorch
/// gives it.
pub fn needs_dev_lengths(reuse: CallReuse, shape: &SeqShape) -> bool {
    !(reuse.null_dev_lengths && shape.is_full())
}

/// What a cached call plan depends on besides the [`Rnn`](crate::Rnn): the shape
/// (sequence length, batch and every row's length: cuDNN's data descriptors hold the
/// lengths array, `cudnnSetRNNDataDescriptor`) and the forward mode (the temp-space
/// sizes differ between inference and training; a backward uses the training entry of
/// its forward).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallKey {
    shape: SeqShape,
    training: bool,
}

impl CallKey {
    /// The key of a call of `shape`, training (or a backward) or inference.
    pub fn new(shape: &SeqShape, training: bool) -> Self {
        Self {
            shape: shape.clone(),
            training,
        }
    }

    /// The shape.
    pub fn shape(&self) -> &SeqShape {
        &self.shape
    }

    /// Whether this is a training forward (or its backward).
    pub fn training(&self) -> bool {
        self.training
    }

    /// Whether this is the key of a call of `shape` in mode `training`, without building
    /// that key (no allocation on a lookup).
    pub fn matches(&self, shape: &SeqShape, training: bool) -> bool {
        self.training == training && self.shape == *shape
    }
}

/// A bounded map of at most `capacity` entries, the least recently used evicted first.
/// Lookups are linear (the map is small: [`CALL_CACHE_CAPACITY`]); equal keys compare
/// their cheap fields first (`SeqShape` compares the sequence length before the
/// lengths).
#[derive(Debug)]
pub(crate) struct CallCache<K, V> {
    capacity: usize,
    /// Least recently used first.
    entries: Vec<(K, V)>,
}

impl<K: PartialEq, V> CallCache<K, V> {
    /// An empty cache of at most `capacity` entries (at least 1).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            entries: Vec::with_capacity(capacity),
        }
    }

    /// The value of `key`, now the most recently used; `None` on a miss.
    #[cfg(test)]
    pub(crate) fn get(&mut self, key: &K) -> Option<&V> {
        self.find(|k| k == key)
    }

    /// The value of the first key `matches` accepts, now the most recently used; `None`
    /// on a miss.
    pub(crate) fn find(&mut self, matches: impl Fn(&K) -> bool) -> Option<&V> {
        let at = self.entries.iter().position(|(k, _)| matches(k))?;
        let entry = self.entries.remove(at);
        self.entries.push(entry);
        self.entries.last().map(|(_, v)| v)
    }

    /// Inserts (or replaces) `key`, the most recently used; returns the entry evicted to
    /// stay within the capacity.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<(K, V)> {
        if let Some(at) = self.entries.iter().position(|(k, _)| *k == key) {
            self.entries.remove(at);
        }
        let evicted = (self.entries.len() >= self.capacity).then(|| self.entries.remove(0));
        self.entries.push((key, value));
        evicted
    }

    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops every entry.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = WORK_POOL_GRANULE;

    #[test]
    fn all_if_is_all_or_nothing() {
        assert_eq!(CallReuse::all_if(true), CallReuse::ALL);
        assert_eq!(CallReuse::all_if(false), CallReuse::OFF);
    }

    #[test]
    fn off_is_the_default() {
        assert_eq!(CallReuse::default(), CallReuse::OFF);
        assert_ne!(CallReuse::ALL, CallReuse::OFF);
    }

    #[test]
    fn capacity_grows_only_when_needed() {
        assert_eq!(next_capacity(MIB, MIB), None);
        assert_eq!(next_capacity(4 * MIB, 1), None);
        assert_eq!(next_capacity(4 * MIB, 0), None);
        // A first buffer: rounded up to the granule, never empty.
        assert_eq!(next_capacity(0, 0), Some(MIB));
        assert_eq!(next_capacity(0, 1), Some(MIB));
        assert_eq!(next_capacity(0, MIB + 1), Some(2 * MIB));
        assert_eq!(next_capacity(0, 3 * MIB), Some(3 * MIB));
    }

    #[test]
    fn capacity_grows_geometrically() {
        // One byte more than held: ×1.5, rounded to the granule.
        assert_eq!(next_capacity(4 * MIB, 4 * MIB + 1), Some(6 * MIB));
        assert_eq!(next_capacity(3 * MIB, 3 * MIB + 1), Some(5 * MIB));
        // A jump past ×1.5 takes the wanted size.
        assert_eq!(next_capacity(2 * MIB, 10 * MIB + 5), Some(11 * MIB));
        // Creeping up by 1 KiB per call from 1 MiB to 1 GiB reallocates O(log) times.
        let (mut current, mut grows) = (MIB, 0);
        for wanted in (MIB..=1 << 30).step_by(1 << 10) {
            if let Some(next) = next_capacity(current, wanted) {
                assert!(next >= wanted && next % MIB == 0, "{next}");
                current = next;
                grows += 1;
            }
        }
        assert!(grows <= 20, "{grows} reallocations");
    }

    #[test]
    fn capacity_never_overflows() {
        assert_eq!(next_capacity(usize::MAX / 2, usize::MAX), Some(usize::MAX));
        assert_eq!(next_capacity(0, usize::MAX - 3), Some(usize::MAX - 3));
        assert_eq!(next_capacity(usize::MAX, usize::MAX), None);
    }

    #[test]
    fn null_dev_lengths_only_for_full_rows_and_when_switched_on() {
        let full = SeqShape::full(7, 3).unwrap();
        let full_given = SeqShape::new(7, 3, Some(&[7, 7, 7])).unwrap();
        let ragged = SeqShape::new(7, 3, Some(&[7, 2, 7])).unwrap();
        let on = CallReuse {
            null_dev_lengths: true,
            ..CallReuse::OFF
        };
        assert!(!needs_dev_lengths(on, &full));
        assert!(!needs_dev_lengths(on, &full_given));
        assert!(needs_dev_lengths(on, &ragged));
        for shape in [&full, &full_given, &ragged] {
            assert!(needs_dev_lengths(CallReuse::OFF, shape));
            let others = CallReuse {
                null_dev_lengths: false,
                ..CallReuse::ALL
            };
            assert!(needs_dev_lengths(others, shape));
        }
    }

    #[test]
    fn keys_differ_by_lengths_batch_length_and_mode() {
        let a = SeqShape::new(5, 3, Some(&[5, 4, 3])).unwrap();
        let b = SeqShape::new(5, 3, Some(&[5, 3, 4])).unwrap();
        let mut cache = CallCache::new(CALL_CACHE_CAPACITY);
        cache.insert(CallKey::new(&a, true), "a training");
        assert_eq!(cache.get(&CallKey::new(&a, true)), Some(&"a training"));
        // Same sequence length and batch, other lengths: a miss.
        assert_eq!(cache.get(&CallKey::new(&b, true)), None);
        // Same shape, inference: a miss.
        assert_eq!(cache.get(&CallKey::new(&a, false)), None);
        // Other batch, other sequence length: misses.
        let wider = SeqShape::full(5, 4).unwrap();
        let longer = SeqShape::full(6, 3).unwrap();
        assert_eq!(cache.get(&CallKey::new(&wider, true)), None);
        assert_eq!(cache.get(&CallKey::new(&longer, true)), None);
        // `full` and explicit full lengths are the same call.
        let full = SeqShape::full(5, 3).unwrap();
        cache.insert(CallKey::new(&full, false), "full");
        let given = SeqShape::new(5, 3, Some(&[5, 5, 5])).unwrap();
        assert_eq!(cache.get(&CallKey::new(&given, false)), Some(&"full"));
        let key = CallKey::new(&given, false);
        assert_eq!((key.shape(), key.training()), (&full, false));
        assert!(key.matches(&full, false));
        assert!(!key.matches(&full, true));
        assert!(!key.matches(&a, false));
        assert_eq!(cache.find(|k| k.matches(&full, false)), Some(&"full"));
        assert_eq!(cache.find(|k| k.matches(&b, false)), None);
    }

    #[test]
    fn least_recently_used_is_evicted() {
        let mut cache = CallCache::new(3);
        assert_eq!(cache.insert(1, 'a'), None);
        assert_eq!(cache.insert(2, 'b'), None);
        assert_eq!(cache.insert(3, 'c'), None);
        // Using 1 makes 2 the least recently used.
        assert_eq!(cache.get(&1), Some(&'a'));
        assert_eq!(cache.insert(4, 'd'), Some((2, 'b')));
        assert_eq!(cache.get(&2), None);
        assert_eq!(cache.len(), 3);
        // Replacing a key evicts nothing and refreshes it.
        assert_eq!(cache.insert(3, 'C'), None);
        assert_eq!(cache.insert(5, 'e'), Some((1, 'a')));
        assert_eq!(cache.get(&3), Some(&'C'));
        assert_eq!(cache.get(&4), Some(&'d'));
        assert_eq!(cache.get(&5), Some(&'e'));
        cache.clear();
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.get(&5), None);
        // A capacity of 0 still holds one entry.
        let mut tiny = CallCache::new(0);
        assert_eq!(tiny.insert('x', 1), None);
        assert_eq!(tiny.insert('y', 2), Some(('x', 1)));
    }

    #[test]
    fn a_full_cache_holds_capacity_entries() {
        let mut cache = CallCache::new(CALL_CACHE_CAPACITY);
        for len in 1..=CALL_CACHE_CAPACITY + 4 {
            let shape = SeqShape::full(len, 2).unwrap();
            cache.insert(CallKey::new(&shape, true), len);
        }
        assert_eq!(cache.len(), CALL_CACHE_CAPACITY);
        let oldest = SeqShape::full(4, 2).unwrap();
        assert_eq!(cache.get(&CallKey::new(&oldest, true)), None);
        let kept = SeqShape::full(5, 2).unwrap();
        assert_eq!(cache.get(&CallKey::new(&kept, true)), Some(&5));
    }
}
