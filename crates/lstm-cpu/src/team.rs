//! A team of threads that runs one closure each and meets at a spinning barrier.
//!
//! The recurrent loop needs every thread's slice of `h_t` before any thread starts step
//! `t + 1`: one barrier per step. A futex-based barrier costs several microseconds per
//! crossing, which is the whole step for small shapes; this one spins briefly and then
//! yields, so an oversubscribed machine (tests running in parallel) still makes progress.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A mutable slice shared by the members of a team, for as long as `'a` borrows it.
/// Each member writes a disjoint part (columns or rows it owns); a member reads another
/// member's part only after a barrier ([`Member::sync`]) that follows the write.
pub(crate) struct Shared<'a, T> {
    ptr: *mut T,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<T> Clone for Shared<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Shared<'_, T> {}

// SAFETY: a `Shared` is made only by `Shared::new`, whose caller promises the
// disjointness and barrier discipline above for every member it hands a copy to; under
// it, members on other threads never access one element at the same time unless all
// of them read it. `T: Send` because members write values of `T` on their own threads;
// `T: Sync` because `read` hands several threads `&[T]` over the same elements.
unsafe impl<T: Send + Sync> Send for Shared<'_, T> {}
// SAFETY: as for `Send`: shared references to a `Shared` only copy the pointer.
unsafe impl<T: Send + Sync> Sync for Shared<'_, T> {}

impl<'a, T> Shared<'a, T> {
    /// `slice`, to be handed to the members of a team.
    ///
    /// # Safety
    /// Until the last use of the result and of its copies, the members that hold one
    /// write disjoint parts of `slice`, and a member reads a part another member wrote
    /// only after a barrier that follows the write.
    pub unsafe fn new(slice: &'a mut [T]) -> Self {
        Self {
            ptr: slice.as_mut_ptr(),
            len: slice.len(),
            _borrow: PhantomData,
        }
    }

    /// Pointer to element `offset`.
    ///
    /// # Safety
    /// `offset <= len`; what is done through the pointer follows the discipline of
    /// [`Shared::new`].
    #[inline(always)]
    pub unsafe fn at(self, offset: usize) -> *mut T {
        debug_assert!(offset <= self.len, "{offset} past {}", self.len);
        // SAFETY: `offset <= len` (the caller's promise): inside the allocation or one past.
        unsafe { self.ptr.add(offset) }
    }

    /// `len` elements from `offset`, to read, for the rest of the borrow `'a`.
    ///
    /// # Safety
    /// The range is inside the slice, and no member writes it while the result is in
    /// use (until the next barrier, under the team's discipline).
    #[inline(always)]
    pub unsafe fn read(self, offset: usize, len: usize) -> &'a [T] {
        debug_assert!(offset + len <= self.len, "{offset}+{len} past {}", self.len);
        // SAFETY: in bounds of the borrowed slice (the caller's promise), which lives for
        // `'a`; nobody writes it while the caller reads (the team's discipline).
        unsafe { core::slice::from_raw_parts(self.ptr.add(offset), len) }
    }

    /// `len` elements from `offset`, for the rest of the borrow `'a`.
    ///
    /// # Safety
    /// The range is inside the slice, and no other member accesses it (or, if the
    /// result is only read, writes it) until the next barrier.
    #[inline(always)]
    pub unsafe fn slice(self, offset: usize, len: usize) -> &'a mut [T] {
        debug_assert!(offset + len <= self.len, "{offset}+{len} past {}", self.len);
        // SAFETY: in bounds of the borrowed slice (the caller's promise), which lives for
        // `'a`; exclusive for as long as the caller uses it (the team's discipline).
        unsafe { core::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }
}

/// A raw pointer handed to the members of a team, for operands known only by pointer
/// and strides (a GEMM's `A` and `C`). It hands out pointers, never references.
pub(crate) struct SharedPtr<T>(*mut T);

impl<T> Clone for SharedPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SharedPtr<T> {}

// SAFETY: made only by `SharedPtr::new`, whose caller promises the team's discipline
// (disjoint writes, reads of others' writes after a barrier) for every access through it;
// `T: Sync` because members on several threads may read one element at once.
unsafe impl<T: Send + Sync> Send for SharedPtr<T> {}
// SAFETY: as for `Send`: shared references to a `SharedPtr` only copy the pointer.
unsafe impl<T: Send + Sync> Sync for SharedPtr<T> {}

impl<T> SharedPtr<T> {
    /// `ptr`, to be handed to the members of a team.
    ///
    /// # Safety
    /// Until the last use of the result and its copies, the members write disjoint
    /// elements through it and read an element another member wrote only after a
    /// barrier that follows the write.
    pub unsafe fn new(ptr: *mut T) -> Self {
        Self(ptr)
    }

    /// Pointer to element `offset`.
    ///
    /// # Safety
    /// `offset` is inside the allocation the pointer came from (or one past it).
    #[inline(always)]
    pub unsafe fn at(self, offset: usize) -> *mut T {
        // SAFETY: inside the allocation (the caller's promise).
        unsafe { self.0.add(offset) }
    }
}

struct SpinBarrier {
    size: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// Set when a member panicked: it will never arrive, so the others panic at their
    /// next barrier rather than wait for it forever, and the team's caller sees a panic.
    poisoned: AtomicBool,
}

impl SpinBarrier {
    fn new(size: usize) -> Self {
        Self {
            size,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            poisoned: AtomicBool::new(false),
        }
    }

    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if self.poisoned.load(Ordering::Relaxed) {
                panic!("another member of this lstm-cpu team panicked");
            }
            if spins < 4096 {
                core::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Poisons its barrier if dropped while its thread unwinds from a panic in the work.
struct PoisonOnPanic<'a>(&'a SpinBarrier);

impl Drop for PoisonOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poisoned.store(true, Ordering::Relaxed);
        }
    }
}

/// One thread of a team.
pub(crate) struct Member<'a> {
    /// Index in `0..size`.
    pub id: usize,
    barrier: Option<&'a SpinBarrier>,
}

impl Member<'_> {
    /// Waits until every member has reached this point.
    #[inline]
    pub fn sync(&self) {
        if let Some(barrier) = self.barrier {
            barrier.wait();
        }
    }
}

/// Runs `work` on `size` threads (the caller's thread is member 0, the others come from
/// the persistent pool, see `pool.rs`) and returns when all are done. `size == 1` runs on the caller's thread with no synchronisation at all.
pub(crate) fn run_team(size: usize, work: impl Fn(Member<'_>) + Sync) {
    run_team_placed(size, false, work);
}

/// [`run_team`], with `keep_apart`: the members start on other CPUs than the caller's
/// where the system lets us (placement.rs), for a long job whose members meet at a
/// barrier every step. Only inference's recurrence asks for it: a training call's short
/// jobs follow the caller's own work, and for them waking another, halted vCPU costs more
/// than sharing one (docs/dev/fused-cpu-measurements.md).
pub(crate) fn run_team_placed(size: usize, keep_apart: bool, work: impl Fn(Member<'_>) + Sync) {
    if size <= 1 {
        work(Member {
            id: 0,
            barrier: None,
        });
        return;
    }
    let barrier = SpinBarrier::new(size);
    let (barrier, work) = (&barrier, &work);
    let member = move |id: usize| {
        let _poison = PoisonOnPanic(barrier);
        work(Member {
            id,
            barrier: Some(barrier),
        })
    };
    let caller_cpu = if keep_apart {
        crate::placement::current_cpu()
    } else {
        None
    };
    if crate::pool::try_run(size, caller_cpu, &member) {
        return;
    }
    // The pool serves another team: this call brings its own threads, which start on
    // this thread's CPU (placement.rs).
    std::thread::scope(|scope| {
        for id in 1..size {
            scope.spawn(move || {
                crate::placement::step_off(caller_cpu);
                member(id)
            });
        }
        member(0);
    });
}

/// Runs `work(part)` once for each `part` in `0..parts` on up to `threads` threads: the
/// caller's and the kernel's persistent workers (see `pool.rs`), which the glue around
/// the kernel uses too (burn-lstm's copy of a strided input: done by the caller alone,
/// the worker waited). Returns when every part is done.
pub fn run_parts(threads: usize, parts: usize, work: impl Fn(usize) + Sync) {
    let size = threads.min(parts).max(1);
    run_team(size, |member| {
        for part in (member.id..parts).step_by(size) {
            work(part);
        }
    });
}

/// Splits `0..len` into at most `parts` contiguous ranges whose starts are multiples of
/// `align` (so each range packs into whole GEMM panels), dropping empty ones.
pub(crate) fn split_aligned(
    len: usize,
    parts: usize,
    align: usize,
) -> Vec<core::ops::Range<usize>> {
    (0..parts.max(1))
        .map(|k| aligned_part(len, parts, align, k))
        .filter(|r| !r.is_empty())
        .collect()
}

/// Part `k` of [`split_aligned`]`(len, parts, align)` before empty parts are dropped
/// (empty past the last non-empty one), without building the others: for a loop that
/// must not allocate.
///
/// Where every part gets at least `align` values, part `k` starts at the multiple of
/// `align` nearest to `k · len / parts`, so the parts differ by at most one `align`
/// (and the last, partial block of `align` counts for what it holds). Rounding every
/// part up to whole blocks instead would give the first parts all the extra (H = 1000 on
/// two threads: 512 + 488 units of 16-unit AVX2 panels), and the caller's member, the
/// slower one already, would make the other wait at every barrier. Fewer values than
/// that keep the rounded-up split, whose empty parts are all at the end.
pub(crate) fn aligned_part(
    len: usize,
    parts: usize,
    align: usize,
    k: usize,
) -> core::ops::Range<usize> {
    let (parts, align) = (parts.max(1), align.max(1));
    if len < parts * align {
        let chunk = len.div_ceil(parts).div_ceil(align).max(1) * align;
        return (k * chunk).min(len)..((k + 1) * chunk).min(len);
    }
    let start = |k: usize| {
        if k >= parts {
            len
        } else {
            (k * len + parts * align / 2) / (parts * align) * align
        }
    };
    start(k)..start(k + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn split_covers_everything_once() {
        for (len, parts, align) in [
            (128, 2, 8),
            (100, 3, 8),
            (5, 4, 8),
            (512, 2, 16),
            (1, 1, 6),
            (1000, 2, 16),
            (50, 4, 16),
            (63, 4, 16),
            (64, 4, 16),
            (10, 3, 1),
            (256, 2, 6),
        ] {
            let ranges = split_aligned(len, parts, align);
            assert!(ranges.len() <= parts);
            assert_eq!(ranges[0].start, 0);
            assert_eq!(ranges.last().unwrap().end, len);
            for pair in ranges.windows(2) {
                assert_eq!(pair[0].end, pair[1].start);
                assert_eq!(pair[1].start % align, 0);
            }
            for (k, range) in ranges.iter().enumerate() {
                assert_eq!(aligned_part(len, parts, align, k), *range);
            }
            for k in ranges.len()..parts {
                assert!(aligned_part(len, parts, align, k).is_empty());
            }
            // As even as whole blocks of `align` allow, where every part gets one.
            if len >= parts * align {
                assert_eq!(ranges.len(), parts);
                let sizes: Vec<usize> = ranges.iter().map(|r| r.len()).collect();
                let (least, most) = (sizes.iter().min(), sizes.iter().max());
                assert!(
                    most.unwrap() - least.unwrap() <= align,
                    "{len}/{parts}/{align}: {sizes:?}"
                );
            }
        }
        assert_eq!(split_aligned(1000, 2, 16), [0..496, 496..1000]);
    }

    #[test]
    fn run_parts_runs_every_part_once() {
        for (threads, parts) in [(1, 5), (2, 5), (3, 2), (4, 0), (2, 1)] {
            let runs: Vec<AtomicU64> = (0..parts).map(|_| AtomicU64::new(0)).collect();
            run_parts(threads, parts, |part| {
                runs[part].fetch_add(1, Ordering::Relaxed);
            });
            assert!(
                runs.iter().all(|r| r.load(Ordering::Relaxed) == 1),
                "{threads} threads, {parts} parts"
            );
        }
    }

    /// A member that panics fails the whole team's call, on the pool and on threads of
    /// its own, wherever the others wait for it (they would otherwise spin forever at
    /// the barrier it never reaches).
    #[test]
    fn a_member_that_panics_fails_the_call_instead_of_hanging_the_team() {
        for (size, failing) in [(2, 1), (3, 2), (3, 0)] {
            let call = std::panic::catch_unwind(|| {
                run_team(size, |m| {
                    for round in 0..3 {
                        if m.id == failing && round == 1 {
                            panic!("member {failing} fails");
                        }
                        m.sync();
                    }
                })
            });
            assert!(call.is_err(), "{size} members, member {failing} panics");
        }
        // The team after is whole again.
        let runs = AtomicU64::new(0);
        run_team(3, |m| {
            m.sync();
            runs.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(runs.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn barrier_orders_phases() {
        // Each member adds its id in phase 1; after the barrier every member must see
        // the full sum, in each of many rounds.
        let sum = AtomicU64::new(0);
        let seen = AtomicU64::new(0);
        run_team(3, |m| {
            for round in 0..200u64 {
                sum.fetch_add(m.id as u64 + 1, Ordering::Relaxed);
                m.sync();
                if sum.load(Ordering::Relaxed) == 6 * (round + 1) {
                    seen.fetch_add(1, Ordering::Relaxed);
                }
                m.sync();
            }
        });
        assert_eq!(seen.load(Ordering::Relaxed), 600);
    }
}
