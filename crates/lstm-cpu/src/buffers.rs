//! Large scratch buffers (packed weights, gate chunks, the training tape, layer outputs,
//! the int8 path's quantized activations) recycled across calls through a process-wide
//! cache.
//!
//! Why: a call needs megabytes of scratch, and the system allocator hands such blocks
//! back to the kernel when they are freed (glibc maps blocks above its threshold anew
//! and trims the top of the heap). Every call then page-faults its buffers in again,
//! and each unmap interrupts the other team members' CPUs to flush their TLBs
//! (docs/dev/fused-cpu-measurements.md has what that cost).
//!
//! The cache keeps freed buffers (up to [`cache_limit_bytes`], default 1 GiB, the
//! `LSTM_CPU_BUFFER_CACHE_MIB` environment variable) and hands the best fitting one to
//! the next request, zeroed. [`release_cached_buffers`] gives them all back. Buffers
//! under 32 KiB bypass the cache: the allocator keeps those in its heap anyway.

use core::any::{Any, TypeId};
use core::ops::{Deref, DerefMut};
use std::sync::{Mutex, OnceLock};

use crate::real::Real;

/// Buffers smaller than this go straight to the allocator.
const MIN_CACHED_BYTES: usize = 32 * 1024;
/// Most buffers the cache keeps per element type (a layer stack needs a handful per
/// layer and direction).
const MAX_CACHED_BUFFERS: usize = 64;

struct Cache<T> {
    free: Vec<Vec<T>>,
    bytes: usize,
}

impl<T> Cache<T> {
    /// A kept vector with room for `len` values, holding what it held when it was put
    /// back: the smallest that fits, and not more than four times too large (a small
    /// request must not hold a huge block).
    fn take(&mut self, len: usize) -> Option<Vec<T>> {
        let (index, _) = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, v)| (len..=len.saturating_mul(4)).contains(&v.capacity()))
            .min_by_key(|(_, v)| v.capacity())?;
        let data = self.free.swap_remove(index);
        self.bytes -= data.capacity() * core::mem::size_of::<T>();
        Some(data)
    }

    /// Keeps `data` unless that would pass `limit` bytes; returns what is not kept (to
    /// be freed outside the lock): `data` itself, or the smallest kept vector when
    /// there are more than [`MAX_CACHED_BUFFERS`].
    fn put(&mut self, data: Vec<T>, limit: usize) -> Option<Vec<T>> {
        let bytes = data.capacity() * core::mem::size_of::<T>();
        if self.bytes + bytes > limit {
            return Some(data);
        }
        self.bytes += bytes;
        self.free.push(data);
        if self.free.len() <= MAX_CACHED_BUFFERS {
            return None;
        }
        let (smallest, _) = self
            .free
            .iter()
            .enumerate()
            .min_by_key(|(_, v)| v.capacity())?;
        let evicted = self.free.swap_remove(smallest);
        self.bytes -= evicted.capacity() * core::mem::size_of::<T>();
        Some(evicted)
    }

    fn clear(&mut self) -> Vec<Vec<T>> {
        self.bytes = 0;
        core::mem::take(&mut self.free)
    }
}

static F32_CACHE: Mutex<Cache<f32>> = Mutex::new(Cache {
    free: Vec::new(),
    bytes: 0,
});
static F64_CACHE: Mutex<Cache<f64>> = Mutex::new(Cache {
    free: Vec::new(),
    bytes: 0,
});
/// The int8 path's quantized activations (`u8`).
static U8_CACHE: Mutex<Cache<u8>> = Mutex::new(Cache {
    free: Vec::new(),
    bytes: 0,
});

/// The cache of `T`'s buffers (`None` for element types without one).
fn cache<T: 'static>() -> Option<&'static Mutex<Cache<T>>> {
    let any: &'static dyn Any = if TypeId::of::<T>() == TypeId::of::<f32>() {
        &F32_CACHE
    } else if TypeId::of::<T>() == TypeId::of::<f64>() {
        &F64_CACHE
    } else if TypeId::of::<T>() == TypeId::of::<u8>() {
        &U8_CACHE
    } else {
        return None;
    };
    any.downcast_ref()
}

fn lock<T>(cache: &Mutex<Cache<T>>) -> std::sync::MutexGuard<'_, Cache<T>> {
    cache
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Most bytes of freed buffers kept for reuse: `LSTM_CPU_BUFFER_CACHE_MIB` (read once;
/// `0` turns the cache off), else 1 GiB.
pub fn cache_limit_bytes() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("LSTM_CPU_BUFFER_CACHE_MIB")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or(1024)
            .saturating_mul(1 << 20)
    })
}

/// Bytes the cache holds now (freed buffers kept for the next call).
pub fn cached_buffer_bytes() -> usize {
    lock(&F32_CACHE).bytes + lock(&F64_CACHE).bytes + lock(&U8_CACHE).bytes
}

/// Returns every cached buffer to the allocator (for example after a large model's
/// last call), and, with glibc, asks it to give freed memory back to the system (it
/// keeps much of what several threads freed in their arenas otherwise). Calls
/// afterwards allocate afresh and fill the cache again.
pub fn release_cached_buffers() {
    let f32_buffers = lock(&F32_CACHE).clear();
    let f64_buffers = lock(&F64_CACHE).clear();
    let u8_buffers = lock(&U8_CACHE).clear();
    drop((f32_buffers, f64_buffers, u8_buffers));
    trim_allocator();
}

/// glibc's `malloc_trim(0)`: the free memory at the top of every arena, and whole free
/// pages inside them, back to the system.
#[cfg(all(target_os = "linux", target_env = "gnu", not(miri)))]
fn trim_allocator() {
    // SAFETY: malloc_trim takes a padding size and touches only the allocator's own
    // free lists, under the allocator's locks; it has no precondition on the caller.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu", not(miri))))]
fn trim_allocator() {}

/// A cached vector of bytes with room for `len`, holding what it held when it was kept
/// (its length included: a caller that overwrites every value resizes it without
/// zeroing what it keeps), or an empty new one. Give it back with [`keep_bytes`].
pub(crate) fn take_bytes(len: usize) -> Vec<u8> {
    if len < MIN_CACHED_BYTES {
        return Vec::new();
    }
    lock(&U8_CACHE).take(len).unwrap_or_default()
}

/// Keeps `bytes`' memory for a later [`take_bytes`] (within [`cache_limit_bytes`]).
pub(crate) fn keep_bytes(bytes: Vec<u8>) {
    if bytes.capacity() < MIN_CACHED_BYTES {
        return;
    }
    let not_kept = lock(&U8_CACHE).put(bytes, cache_limit_bytes());
    // Freed outside the lock.
    drop(not_kept);
}

/// An empty vector with room for `capacity` values: a cached one when the cache holds
/// one that fits, else a new one. Give it back with [`recycle_vec`] when done.
pub fn vec_with_capacity<T: Real>(capacity: usize) -> Vec<T> {
    let (mut data, _) = Buffer::<T>::room(capacity, Start::Allocation);
    data.clear();
    data
}

/// Keeps `values`' memory for later calls (see [`cache_limit_bytes`]) instead of
/// freeing it now.
pub fn recycle_vec<T: Real>(values: Vec<T>) {
    drop(Buffer {
        data: values,
        start: 0,
    });
}

/// The alignment of a scratch buffer's first value: a cache line.
const ALIGN_BYTES: usize = 64;

/// Where a buffer's first value lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// On a cache line: scratch that the kernel reads and writes a vector at a time.
    CacheLine,
    /// Where the allocation starts: a call's output, handed out with
    /// [`Buffer::into_vec`] without a copy.
    Allocation,
}

/// A buffer of `len` values that goes back to the cache when dropped.
///
/// Scratch buffers start on a cache line (64 bytes). Allocations above glibc's mmap
/// threshold start 16 bytes past a page, so the packed panels' rows of 64 bytes (AVX2)
/// or 128 (AVX-512) would straddle two lines at every other or every vector load. A
/// call's outputs
/// keep the allocation's own start instead (`output_*`), so that `into_vec` hands them
/// out as they are.
pub(crate) struct Buffer<T: Real> {
    data: Vec<T>,
    /// Index in `data` of the first value (the values are `data[start..]`).
    start: usize,
}

impl<T: Real> Buffer<T> {
    /// Values of room past the end for the first value to start a cache line.
    const PAD: usize = ALIGN_BYTES / core::mem::size_of::<T>();

    /// `len` zeros, starting a cache line.
    pub fn zeroed(len: usize) -> Self {
        Self::zeroed_at(len, Start::CacheLine)
    }

    /// `len` zeros, a call's output (see [`Start::Allocation`]).
    pub fn output_zeroed(len: usize) -> Self {
        Self::zeroed_at(len, Start::Allocation)
    }

    /// `len` values that the caller overwrites, every one, before it reads any: what
    /// an earlier call left in a recycled buffer (zeros where it held fewer), so that
    /// no time goes into zeroing memory about to be written (a training call's packed
    /// panels, tape and gradients: megabytes, zeroed on one thread while the others
    /// wait). Builds with debug assertions (the tests) fill it with NaN instead, so that
    /// a value read before it is written shows in every result it reaches. Starts a
    /// cache line.
    pub fn for_overwrite(len: usize) -> Self {
        Self::for_overwrite_at(len, Start::CacheLine)
    }

    /// [`Self::for_overwrite`] for a call's output (see [`Start::Allocation`]).
    pub fn output_for_overwrite(len: usize) -> Self {
        Self::for_overwrite_at(len, Start::Allocation)
    }

    /// A copy of `values`, starting a cache line.
    pub fn copied(values: &[T]) -> Self {
        let (mut data, start) = Self::room(values.len(), Start::CacheLine);
        data.clear();
        data.resize(start, T::ZERO);
        data.extend_from_slice(values);
        Self { data, start }
    }

    /// The values as a plain vector, which leaves the cache for good (a call's outputs).
    /// A buffer made for an output comes out as it is; a scratch buffer's values are
    /// first moved to the start of the allocation.
    pub fn into_vec(mut self) -> Vec<T> {
        let mut data = core::mem::take(&mut self.data);
        data.drain(..self.start);
        data
    }

    fn zeroed_at(len: usize, at: Start) -> Self {
        // Not `vec![0; len]`: calloc maps fresh blocks to the shared zero page, and the
        // first write after a read (a GEMM accumulating into the buffer) then faults
        // again and flushes every team member's TLB. Zeros written here fault once.
        let (mut data, start) = Self::room(len, at);
        data.clear();
        data.resize(start + len, T::ZERO);
        Self { data, start }
    }

    fn for_overwrite_at(len: usize, at: Start) -> Self {
        let (mut data, start) = Self::room(len, at);
        if cfg!(debug_assertions) {
            data.clear();
            data.resize(start + len, T::NAN);
        } else if data.len() >= start + len {
            data.truncate(start + len);
        } else {
            data.resize(start + len, T::ZERO);
        }
        Self { data, start }
    }

    /// A vector with room for `len` values from `at` on (a cached one holding what it
    /// held, or a new empty one), and the index where they start.
    fn room(len: usize, at: Start) -> (Vec<T>, usize) {
        let at = if len == 0 { Start::Allocation } else { at };
        let pad = match at {
            Start::CacheLine => Self::PAD,
            Start::Allocation => 0,
        };
        let mut data = Self::recycled(len + pad).unwrap_or_default();
        data.reserve_exact((len + pad).saturating_sub(data.len()));
        let start = match at {
            // The first index on a cache line (`size_of::<T>()` divides the address).
            Start::CacheLine => {
                (data.as_ptr() as usize).wrapping_neg() % ALIGN_BYTES / core::mem::size_of::<T>()
            }
            Start::Allocation => 0,
        };
        (data, start)
    }

    /// A cached vector with room for `len` values, if the cache has one, holding what
    /// it held before.
    fn recycled(len: usize) -> Option<Vec<T>> {
        if len * core::mem::size_of::<T>() < MIN_CACHED_BYTES {
            return None;
        }
        lock(cache::<T>()?).take(len)
    }
}

impl<T: Real> Drop for Buffer<T> {
    fn drop(&mut self) {
        let bytes = self.data.capacity() * core::mem::size_of::<T>();
        if bytes < MIN_CACHED_BYTES {
            return;
        }
        let Some(cache) = cache::<T>() else { return };
        let data = core::mem::take(&mut self.data);
        let not_kept = lock(cache).put(data, cache_limit_bytes());
        // Freed outside the lock.
        drop(not_kept);
    }
}

impl<T: Real> Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.data[self.start..]
    }
}

impl<T: Real> DerefMut for Buffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.data[self.start..]
    }
}

impl<T: Real> Clone for Buffer<T> {
    fn clone(&self) -> Self {
        Self::copied(self)
    }
}

impl<T: Real> core::fmt::Debug for Buffer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Buffer(len {})", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> Cache<f64> {
        Cache {
            free: Vec::new(),
            bytes: 0,
        }
    }

    #[test]
    fn takes_the_smallest_fitting_buffer_and_never_a_far_too_large_one() {
        let mut c = cache();
        for len in [1000, 4000, 2000] {
            assert!(c.put(Vec::with_capacity(len), usize::MAX).is_none());
        }
        assert_eq!(c.bytes, 7000 * 8);
        let got = c.take(1500).expect("a buffer fits");
        assert_eq!((got.capacity(), got.len()), (2000, 0));
        assert_eq!(c.bytes, 5000 * 8);
        // 4000 is more than four times 900, 1000 is not.
        assert_eq!(c.take(900).map(|v| v.capacity()), Some(1000));
        assert!(
            c.take(900).is_none(),
            "only 4000 is left: too large for 900"
        );
        assert!(c.take(5000).is_none(), "nothing holds 5000");
        assert_eq!(c.take(4000).map(|v| v.capacity()), Some(4000));
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn keeps_at_most_the_limit_and_the_count() {
        let mut c = cache();
        assert!(c.put(Vec::with_capacity(100), 1000).is_none());
        let refused = c.put(Vec::with_capacity(100), 1000);
        assert_eq!(
            refused.map(|v| v.capacity()),
            Some(100),
            "800 + 800 > 1000 bytes"
        );
        for len in 0..MAX_CACHED_BUFFERS {
            let evicted = c.put(Vec::with_capacity(200 + len), usize::MAX);
            let expected = (len + 1 == MAX_CACHED_BUFFERS).then_some(100);
            assert_eq!(evicted.map(|v| v.capacity()), expected);
        }
        assert_eq!(c.free.len(), MAX_CACHED_BUFFERS);
        let kept: usize = c.free.iter().map(|v| v.capacity() * 8).sum();
        assert_eq!(c.bytes, kept);
        assert_eq!(c.clear().len(), MAX_CACHED_BUFFERS);
        assert_eq!(c.bytes, 0);
    }

    #[test]
    fn buffers_are_zeroed_or_copied_whatever_they_held() {
        // Through the process-wide cache: other tests may take the buffer in between,
        // which changes nothing here (every buffer handed out is zeroed or copied).
        for round in 0..3 {
            let mut b = Buffer::<f32>::zeroed(20_000 + round);
            assert!(b.iter().all(|&v| v == 0.0), "round {round}");
            b.iter_mut().for_each(|v| *v = f32::NAN);
            drop(b);
            let c = Buffer::copied(&vec![2.5f32; 19_000]);
            assert!(c.len() == 19_000 && c.iter().all(|&v| v == 2.5));
            assert_eq!(Buffer::<f32>::zeroed(30_000).into_vec().len(), 30_000);
        }
    }

    #[test]
    fn scratch_starts_a_cache_line_and_outputs_leave_without_a_copy() {
        for len in [1, 100, 20_000, 70_000] {
            let values: Vec<f32> = (0..len).map(|i| i as f32).collect();
            let scratch = [
                Buffer::<f32>::zeroed(len),
                Buffer::for_overwrite(len),
                Buffer::copied(&values),
            ];
            for b in &scratch {
                assert_eq!(b.as_ptr() as usize % ALIGN_BYTES, 0, "len {len}");
                assert_eq!(b.len(), len);
            }
            assert!(scratch[0].iter().all(|&v| v == 0.0));
            assert_eq!(&scratch[2][..], &values[..]);
            drop(scratch);
            // A scratch buffer's values move to the allocation's start; an output's
            // stay where they are.
            assert_eq!(Buffer::copied(&values).into_vec(), values);
            let mut output = Buffer::output_for_overwrite(len);
            output.copy_from_slice(&values);
            let at = output.as_ptr();
            let vec = output.into_vec();
            assert_eq!((vec.as_ptr(), &vec), (at, &values), "len {len}");
            let zeros = Buffer::<f64>::output_zeroed(len).into_vec();
            assert!(zeros.len() == len && zeros.iter().all(|&v| v == 0.0));
        }
        assert!(Buffer::<f32>::for_overwrite(0).is_empty());
        assert!(Buffer::<f32>::zeroed(0).into_vec().is_empty());
    }

    /// With debug assertions (the test builds of `.ci/run`) a value read before the
    /// kernel writes it is NaN, whatever the recycled buffer held: the golden tests see
    /// it.
    #[test]
    #[cfg(debug_assertions)]
    fn buffers_for_overwrite_hold_nan_where_tests_run() {
        for len in [10, 20_000, 50_000] {
            drop(Buffer::copied(&vec![1.5f64; len]));
            let b = Buffer::<f64>::for_overwrite(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|v| v.is_nan()), "len {len}");
        }
    }
}
