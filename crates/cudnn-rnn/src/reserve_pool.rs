//! The reserve-space pool ([`CallReuse::reserve_pool`](crate::CallReuse::reserve_pool)):
//! a training forward takes its reserve space from the buffers that earlier forwards'
//! [`ReserveSpace`](crate::ReserveSpace)s gave back when they were dropped, instead of a
//! `cuMemAllocAsync` per forward and a `cuMemFreeAsync` per backward.
//!
//! The policy is pure and generic over the buffer ([`PoolBuffer`]), so that it is tested
//! without a device:
//! - [`FreeList`]: the idle buffers; a call takes the smallest one that is large enough
//!   (best fit), and at most [`RESERVE_POOL_MAX_IDLE`] stay idle, the smallest freed
//!   first (a larger buffer serves every call a smaller one would);
//! - [`reserve_capacity`]: new buffers are rounded up to [`RESERVE_POOL_GRANULE`], so
//!   that calls whose sizes differ by a little share them;
//! - [`lend`] and [`Lent`]: a buffer lent to one forward and its backward, given back to
//!   its list when dropped, or freed when the list is gone (its handle dropped) or the
//!   list already holds enough.
//!
//! Why reuse is sound (the device side) is in [`CudnnHandle`](crate::CudnnHandle)'s
//! documentation.

use std::sync::{Arc, Mutex, Weak};

/// Idle reserve spaces a handle keeps at most. Several training forwards may be
/// outstanding at once (a model with several recurrent stacks, or gradient accumulation);
/// beyond this many given back before they are taken again, the smallest are freed.
pub const RESERVE_POOL_MAX_IDLE: usize = 4;

/// New pooled reserve spaces are allocated in whole multiples of this (1 MiB).
pub const RESERVE_POOL_GRANULE: usize = 1 << 20;

/// A buffer the pool can hold: all it needs to know is its size.
pub(crate) trait PoolBuffer {
    /// Bytes of the buffer.
    fn bytes(&self) -> usize;
}

impl PoolBuffer for cudarc::driver::CudaSlice<u8> {
    fn bytes(&self) -> usize {
        self.len()
    }
}

/// The size a pooled reserve space of at least `wanted` bytes is allocated with:
/// `wanted` (at least 1) rounded up to [`RESERVE_POOL_GRANULE`]; `wanted` itself where
/// rounding would overflow.
pub fn reserve_capacity(wanted: usize) -> usize {
    let wanted = wanted.max(1);
    wanted
        .checked_next_multiple_of(RESERVE_POOL_GRANULE)
        .unwrap_or(wanted)
}

/// The idle buffers of a pool, at most `max_idle` of them.
#[derive(Debug)]
pub(crate) struct FreeList<B> {
    /// Least recently given back first.
    idle: Vec<B>,
    max_idle: usize,
}

impl<B: PoolBuffer> FreeList<B> {
    /// An empty list that keeps at most `max_idle` buffers (0: none, every buffer given
    /// back is freed).
    pub(crate) fn new(max_idle: usize) -> Self {
        Self {
            idle: Vec::with_capacity(max_idle.saturating_add(1).min(16)),
            max_idle,
        }
    }

    /// The smallest idle buffer of at least `wanted` bytes (among equal sizes the most
    /// recently given back), taken out of the list; `None` when none is large enough.
    pub(crate) fn take(&mut self, wanted: usize) -> Option<B> {
        let at = self
            .idle
            .iter()
            .enumerate()
            .filter(|(_, buffer)| buffer.bytes() >= wanted)
            .min_by_key(|&(at, buffer)| (buffer.bytes(), std::cmp::Reverse(at)))
            .map(|(at, _)| at)?;
        Some(self.idle.remove(at))
    }

    /// Keeps `buffer` idle. Returns the buffer to free when that would leave more than
    /// `max_idle` idle: the smallest (among equal sizes the least recently given back),
    /// which may be `buffer` itself.
    pub(crate) fn give_back(&mut self, buffer: B) -> Option<B> {
        self.idle.push(buffer);
        if self.idle.len() <= self.max_idle {
            return None;
        }
        let at = self
            .idle
            .iter()
            .enumerate()
            .min_by_key(|&(at, buffer)| (buffer.bytes(), at))
            .map(|(at, _)| at)?;
        Some(self.idle.remove(at))
    }

    /// Bytes held idle.
    pub(crate) fn idle_bytes(&self) -> usize {
        self.idle.iter().map(PoolBuffer::bytes).sum()
    }

    /// Buffers held idle.
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.len()
    }

    /// Every idle buffer, taken out of the list (to be freed by the caller).
    pub(crate) fn drain(&mut self) -> Vec<B> {
        std::mem::take(&mut self.idle)
    }
}

/// A free list shared by a handle and the buffers it lent.
pub(crate) type SharedFreeList<B> = Arc<Mutex<FreeList<B>>>;

/// Locks `list`, whatever a panic elsewhere left (its state is a plain `Vec`, consistent
/// between any two statements).
pub(crate) fn locked<B>(list: &Mutex<FreeList<B>>) -> std::sync::MutexGuard<'_, FreeList<B>> {
    list.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A buffer for one training forward and its backward: lent by a [`FreeList`] (given
/// back to it when dropped, or freed when the list is gone), or one of its own (freed
/// when dropped).
#[derive(Debug)]
pub(crate) struct Lent<B: PoolBuffer> {
    /// `Some` until dropped.
    buffer: Option<B>,
    /// The list it goes back to; dangling for a buffer of its own.
    home: Weak<Mutex<FreeList<B>>>,
}

impl<B: PoolBuffer> Lent<B> {
    /// `buffer`, belonging to no list.
    pub(crate) fn own(buffer: B) -> Self {
        Self {
            buffer: Some(buffer),
            home: Weak::new(),
        }
    }

    /// The buffer.
    pub(crate) fn get(&self) -> &B {
        self.buffer
            .as_ref()
            .expect("a lent buffer is present until dropped")
    }

    /// The buffer, mutably.
    pub(crate) fn get_mut(&mut self) -> &mut B {
        self.buffer
            .as_mut()
            .expect("a lent buffer is present until dropped")
    }

    /// Whether it goes back to `list` when dropped.
    #[cfg(test)]
    fn belongs_to(&self, list: &SharedFreeList<B>) -> bool {
        Weak::ptr_eq(&self.home, &Arc::downgrade(list))
    }
}

impl<B: PoolBuffer> Drop for Lent<B> {
    fn drop(&mut self) {
        let Some(buffer) = self.buffer.take() else {
            return;
        };
        let freed = match self.home.upgrade() {
            Some(list) => locked(&list).give_back(buffer),
            None => Some(buffer),
        };
        // Freed here, after the list's lock is released.
        drop(freed);
    }
}

/// A buffer of at least `wanted` bytes lent from `list`: its best fit, else a new one of
/// [`reserve_capacity`] bytes from `alloc`. When that allocation fails while buffers are
/// idle, they are freed and the allocation is tried once more: memory held idle goes
/// back before an error does.
pub(crate) fn lend<B: PoolBuffer, E>(
    list: &SharedFreeList<B>,
    wanted: usize,
    mut alloc: impl FnMut(usize) -> Result<B, E>,
) -> Result<Lent<B>, E> {
    let taken = locked(list).take(wanted);
    let buffer = match taken {
        Some(buffer) => buffer,
        None => {
            let capacity = reserve_capacity(wanted);
            match alloc(capacity) {
                Ok(buffer) => buffer,
                Err(error) => {
                    let idle = locked(list).drain();
                    if idle.is_empty() {
                        return Err(error);
                    }
                    drop(idle);
                    alloc(capacity)?
                }
            }
        }
    };
    Ok(Lent {
        buffer: Some(buffer),
        home: Arc::downgrade(list),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const MIB: usize = RESERVE_POOL_GRANULE;

    /// A host stand-in for a device buffer: its size, an id, and a count of the frees.
    #[derive(Debug)]
    struct Fake {
        bytes: usize,
        id: usize,
        frees: Arc<AtomicUsize>,
    }

    impl PoolBuffer for Fake {
        fn bytes(&self) -> usize {
            self.bytes
        }
    }

    impl Drop for Fake {
        fn drop(&mut self) {
            self.frees.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A fake device: allocates `Fake`s, numbered, and refuses an allocation that would
    /// take the bytes in use past `limit`.
    struct Device {
        next_id: usize,
        frees: Arc<AtomicUsize>,
        limit: usize,
    }

    impl Device {
        fn new(limit: usize) -> Self {
            Self {
                next_id: 0,
                frees: Arc::new(AtomicUsize::new(0)),
                limit,
            }
        }

        fn fake(&mut self, bytes: usize) -> Fake {
            self.next_id += 1;
            Fake {
                bytes,
                id: self.next_id,
                frees: self.frees.clone(),
            }
        }

        fn frees(&self) -> usize {
            self.frees.load(Ordering::Relaxed)
        }

        /// A new buffer of `bytes` beside `in_use` bytes (the fakes count only their
        /// frees, so the caller says what is in use).
        fn alloc(&mut self, bytes: usize, in_use: usize) -> Result<Fake, &'static str> {
            if in_use + bytes > self.limit {
                return Err("out of memory");
            }
            Ok(self.fake(bytes))
        }
    }

    fn ids(list: &FreeList<Fake>) -> Vec<usize> {
        list.idle.iter().map(|b| b.id).collect()
    }

    #[test]
    fn capacity_is_rounded_to_the_granule() {
        assert_eq!(reserve_capacity(0), MIB);
        assert_eq!(reserve_capacity(1), MIB);
        assert_eq!(reserve_capacity(MIB), MIB);
        assert_eq!(reserve_capacity(MIB + 1), 2 * MIB);
        assert_eq!(reserve_capacity(5 * MIB - 3), 5 * MIB);
        assert_eq!(reserve_capacity(usize::MAX - 3), usize::MAX - 3);
    }

    #[test]
    fn take_is_the_best_fit() {
        let mut device = Device::new(usize::MAX);
        let mut list = FreeList::new(8);
        for bytes in [4 * MIB, MIB, 2 * MIB, 8 * MIB] {
            assert!(list.give_back(device.fake(bytes)).is_none());
        }
        assert_eq!(list.idle_count(), 4);
        assert_eq!(list.idle_bytes(), 15 * MIB);
        // The smallest that is large enough, not the first or the largest.
        assert_eq!(list.take(MIB + 1).map(|b| b.bytes), Some(2 * MIB));
        assert_eq!(list.take(MIB).map(|b| b.bytes), Some(MIB));
        // Nothing is large enough: none taken, nothing changed.
        assert!(list.take(8 * MIB + 1).is_none());
        assert_eq!(list.idle_count(), 2);
        // A call with no reserve bytes takes the smallest there is.
        assert_eq!(list.take(0).map(|b| b.bytes), Some(4 * MIB));
        assert_eq!(list.take(1).map(|b| b.bytes), Some(8 * MIB));
        assert!(list.take(0).is_none());
    }

    #[test]
    fn among_equal_sizes_the_most_recently_given_back_is_taken() {
        let mut device = Device::new(usize::MAX);
        let mut list = FreeList::new(8);
        let (a, b) = (device.fake(MIB), device.fake(MIB));
        let (a_id, b_id) = (a.id, b.id);
        list.give_back(a);
        list.give_back(b);
        assert_eq!(list.take(MIB).map(|buffer| buffer.id), Some(b_id));
        assert_eq!(list.take(MIB).map(|buffer| buffer.id), Some(a_id));
    }

    #[test]
    fn beyond_max_idle_the_smallest_is_freed() {
        let mut device = Device::new(usize::MAX);
        let mut list = FreeList::new(2);
        assert!(list.give_back(device.fake(4 * MIB)).is_none());
        assert!(list.give_back(device.fake(2 * MIB)).is_none());
        // A third, larger: the 2 MiB one goes.
        let freed = list.give_back(device.fake(8 * MIB)).expect("one freed");
        assert_eq!(freed.bytes, 2 * MIB);
        assert_eq!(ids(&list), [1, 3]);
        // A third, smaller than both: it goes itself.
        let freed = list.give_back(device.fake(MIB)).expect("one freed");
        assert_eq!((freed.bytes, freed.id), (MIB, 4));
        assert_eq!(ids(&list), [1, 3]);
        // Equal sizes: the least recently given back goes.
        let mut equal = FreeList::new(1);
        equal.give_back(device.fake(MIB));
        let freed = equal.give_back(device.fake(MIB)).expect("one freed");
        assert_eq!(freed.id, 5);
        assert_eq!(ids(&equal), [6]);
        // A list of none frees every buffer given back.
        let mut none = FreeList::new(0);
        let freed = none.give_back(device.fake(MIB)).expect("freed");
        assert_eq!(freed.id, 7);
        assert_eq!(none.idle_count(), 0);
        drop(freed);
        let frees = device.frees();
        let drained = list.drain();
        assert_eq!(drained.len(), 2);
        assert_eq!((list.idle_count(), list.idle_bytes()), (0, 0));
        drop(drained);
        assert_eq!(device.frees(), frees + 2);
    }

    #[test]
    fn a_lent_buffer_goes_back_when_dropped_and_is_taken_again() {
        let mut device = Device::new(usize::MAX);
        let list: SharedFreeList<Fake> = Arc::new(Mutex::new(FreeList::new(RESERVE_POOL_MAX_IDLE)));
        let mut allocs = 0;
        let mut alloc = |bytes| {
            allocs += 1;
            Ok::<_, &str>(device.fake(bytes))
        };
        let first = lend(&list, 3 * MIB - 5, &mut alloc).unwrap();
        assert!(first.belongs_to(&list));
        assert_eq!(first.get().bytes, 3 * MIB);
        let first_id = first.get().id;
        drop(first);
        assert_eq!(locked(&list).idle_count(), 1);
        // The next call of the same or a smaller size takes the same buffer.
        let mut second = lend(&list, 2 * MIB, &mut alloc).unwrap();
        assert_eq!(second.get_mut().id, first_id);
        assert_eq!(locked(&list).idle_count(), 0);
        // Two outstanding at once: the second call allocates.
        let third = lend(&list, 2 * MIB, &mut alloc).unwrap();
        assert_ne!(third.get().id, first_id);
        drop((second, third));
        assert_eq!(locked(&list).idle_count(), 2);
        assert_eq!(allocs, 2);
        assert_eq!(device.frees(), 0);
    }

    #[test]
    fn ten_thousand_calls_hold_a_bounded_pool() {
        // The sizes of a language model's batches: the reserve space of each call varies
        // within a range; some calls are outstanding together (two stacks).
        let mut device = Device::new(usize::MAX);
        let list: SharedFreeList<Fake> = Arc::new(Mutex::new(FreeList::new(RESERVE_POOL_MAX_IDLE)));
        let mut allocs = 0;
        for call in 0..10_000usize {
            let wanted = MIB * (10 + (call * 7919) % 13) / 2;
            let mut alloc = |bytes| {
                allocs += 1;
                Ok::<_, &str>(device.fake(bytes))
            };
            let encoder = lend(&list, wanted, &mut alloc).unwrap();
            let decoder = lend(&list, wanted / 3, &mut alloc).unwrap();
            assert!(encoder.get().bytes >= wanted && decoder.get().bytes >= wanted / 3);
            drop((decoder, encoder));
            let list = locked(&list);
            assert!(list.idle_count() <= RESERVE_POOL_MAX_IDLE);
        }
        // The pool settles on the largest sizes: a few allocations, not one per call.
        assert!(allocs <= 20, "{allocs} allocations for 20,000 forwards");
        assert_eq!(allocs - device.frees(), locked(&list).idle_count());
    }

    #[test]
    fn a_buffer_outliving_its_list_is_freed() {
        let mut device = Device::new(usize::MAX);
        let list: SharedFreeList<Fake> = Arc::new(Mutex::new(FreeList::new(4)));
        let lent = lend(&list, MIB, |bytes| Ok::<_, ()>(device.fake(bytes))).unwrap();
        let idle = lend(&list, MIB, |bytes| Ok::<_, ()>(device.fake(bytes))).unwrap();
        drop(idle);
        // The handle goes: its idle buffer is freed with the list.
        drop(list);
        assert_eq!(device.frees(), 1);
        drop(lent);
        assert_eq!(device.frees(), 2);
        // A buffer of its own is freed when dropped.
        drop(Lent::own(device.fake(MIB)));
        assert_eq!(device.frees(), 3);
    }

    #[test]
    fn a_failed_allocation_frees_the_idle_buffers_and_tries_again() {
        let mut device = Device::new(10 * MIB);
        let list: SharedFreeList<Fake> = Arc::new(Mutex::new(FreeList::new(4)));
        let small = lend(&list, 4 * MIB, |bytes| device.alloc(bytes, 0)).unwrap();
        drop(small);
        // 8 MiB do not fit beside the 4 MiB idle: they are freed, the second try fits.
        // The bytes in use are the idle buffer's until its free is counted, so the
        // second try fits only if the pool freed it before trying again.
        let frees = device.frees.clone();
        let mut tries = 0;
        let big = lend(&list, 8 * MIB, |bytes| {
            tries += 1;
            let idle = if frees.load(Ordering::Relaxed) == 0 {
                4 * MIB
            } else {
                0
            };
            device.alloc(bytes, idle)
        })
        .unwrap();
        assert_eq!((tries, big.get().bytes), (2, 8 * MIB));
        assert_eq!(device.frees(), 1);
        assert_eq!(locked(&list).idle_count(), 0);
        // With nothing idle, an allocation that fails is the caller's error, tried once.
        let mut tries = 0;
        let error = lend(&list, 16 * MIB, |bytes| {
            tries += 1;
            device.alloc(bytes, 8 * MIB)
        })
        .unwrap_err();
        assert_eq!((error, tries), ("out of memory", 1));
        drop(big);
        assert_eq!(locked(&list).idle_count(), 1);
    }
}
