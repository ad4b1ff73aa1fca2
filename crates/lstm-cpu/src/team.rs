//! A team of threads that runs one closure each and meets at a spinning barrier.
//!
//! The recurrent loop needs every thread's slice of `h_t` before any thread starts step
//! `t + 1`: one barrier per step. A futex-based barrier costs several microseconds per
//! crossing, which is the whole step for small shapes; this one spins briefly and then
//! yields, so an oversubscribed machine (tests running in parallel) still makes progress.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A raw pointer shared by the members of a team. Each member writes a disjoint part
/// (columns or rows it owns); reads of other members' parts are separated from their
/// writes by [`Member::sync`].
#[derive(Clone, Copy)]
pub(crate) struct Shared<T>(pub *mut T);

// SAFETY: the pointer is only dereferenced under the disjointness and barrier discipline
// documented on the type; every user states which part it owns.
unsafe impl<T: Send> Send for Shared<T> {}
unsafe impl<T: Send> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// Pointer to element `offset`.
    ///
    /// # Safety
    /// `offset` is inside the allocation the pointer came from.
    #[inline(always)]
    pub unsafe fn at(self, offset: usize) -> *mut T {
        unsafe { self.0.add(offset) }
    }

    /// `len` elements from `offset` as a mutable slice.
    ///
    /// # Safety
    /// The range is inside the allocation and no other member touches it until the next
    /// barrier.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice(self, offset: usize, len: usize) -> &'static mut [T] {
        unsafe { core::slice::from_raw_parts_mut(self.0.add(offset), len) }
    }
}

struct SpinBarrier {
    size: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
}

impl SpinBarrier {
    fn wait(&self) {
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.size {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == generation {
            if spins < 4096 {
                core::hint::spin_loop();
                spins += 1;
            } else {
                std::thread::yield_now();
            }
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
/// barrier every step. Only inference's recurrence asks for it: measured there (calls
/// 20 ms apart, 2 vCPUs) 1.7-2× faster, back to back unchanged; applied to every job of a
/// training call (whose short jobs follow the caller's own work), 16×50×512→128 training
/// went from 4.0 to 5.1-6.0 ms, as waking the other, halted vCPU cost more than
/// sharing one for a short job.
pub(crate) fn run_team_placed(size: usize, keep_apart: bool, work: impl Fn(Member<'_>) + Sync) {
    if size <= 1 {
        work(Member {
            id: 0,
            barrier: None,
        });
        return;
    }
    let barrier = SpinBarrier {
        size,
        arrived: AtomicUsize::new(0),
        generation: AtomicUsize::new(0),
    };
    let (barrier, work) = (&barrier, &work);
    let member = move |id: usize| {
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
/// part up to whole blocks instead gave the first parts all the extra: H = 1000 on two
/// threads split 512 + 488 units (16-unit AVX2 panels), and the caller's member, the
/// slower one already, took 10 % longer on each step while the other waited at the
/// barrier (2 ms of a 21 ms call). Fewer values than that keep the rounded-up split,
/// whose empty parts are all at the end.
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
