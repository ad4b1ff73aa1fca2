//! Persistent worker threads for the teams of [`run_team`](crate::team::run_team).
//!
//! Spawning a thread per call costs tens of microseconds and, worse, Linux often starts
//! it on its parent's CPU and moves it only milliseconds later: for a few-millisecond
//! LSTM call the two threads then share one core and spin at every barrier. Workers that
//! live for the whole process keep their CPU. Between jobs they spin briefly (calls
//! often come back to back: the next direction or layer), then sleep on a condvar.
//!
//! One team at a time uses the pool; a caller that finds it busy (several threads
//! running inference at once) spawns its own scoped threads instead.
//!
//! A caller wakes sleeping workers off its own CPU (`placement.rs`): woken onto it, a
//! worker shares one CPU with the caller's member 0 at every barrier.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

use crate::placement::{self, Narrowed, ThreadRef};

/// A job: `work(member_id)` for every member id in `1..size` (the caller runs 0).
#[derive(Clone, Copy)]
struct Job {
    work: *const (dyn Fn(usize) + Sync),
    size: usize,
    /// Where the caller runs member 0, for the others to keep off (placement.rs).
    caller_cpu: Option<usize>,
}

struct State {
    /// Bumped once per job, after the job is in `job`: what workers wait on.
    epoch: AtomicUsize,
    /// The newest job and its epoch, read together under the lock. A worker that was not
    /// a member of one job can be preempted between seeing its epoch and reading the
    /// job until the next job is published; reading the epoch and the job separately
    /// (as this pool first did, through an `UnsafeCell` written while such a worker
    /// could read it) would then run the newer job twice. Found by reading the code
    /// while chasing a hang that had another cause (forward/pass.rs, projection barrier).
    job: Mutex<(usize, Option<Job>)>,
    /// Workers of the current job that have not finished it.
    remaining: AtomicUsize,
    panicked: AtomicBool,
    /// Worker `id` is `sleepers[id - 1]`; waits on `wake` under this lock.
    sleep: Mutex<Vec<Sleeper>>,
    wake: Condvar,
}

/// What the caller knows of a worker's sleep, to wake it on another CPU than its own
/// (placement.rs): changed only under `State::sleep`.
struct Sleeper {
    /// Set by the worker as it starts.
    thread: Option<ThreadRef>,
    /// Waiting on the condvar.
    asleep: bool,
    /// Narrowed by a caller before waking it; the worker restores it as it wakes.
    narrowed: Option<Narrowed>,
}

// SAFETY: the raw closure pointer in `job` is only dereferenced by a member of its job,
// while the caller that published it waits for `remaining` to reach zero.
unsafe impl Sync for State {}
// SAFETY: as for `Sync`: the pointer is used only under that wait.
unsafe impl Send for State {}

struct Pool {
    state: Arc<State>,
    /// Held by the caller whose team is running; also guards the worker count.
    busy: Mutex<usize>,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        state: Arc::new(State {
            epoch: AtomicUsize::new(0),
            job: Mutex::new((0, None)),
            remaining: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            sleep: Mutex::new(Vec::new()),
            wake: Condvar::new(),
        }),
        busy: Mutex::new(0),
    })
}

/// Spins before sleeping: about 100 µs.
const SPINS: u32 = 20_000;

fn worker(state: Arc<State>, id: usize, mut seen: usize) {
    sleepers(&state)[id - 1].thread = Some(placement::this_thread());
    loop {
        // Epochs only grow. `seen` can be ahead of `epoch`: a worker that reads the job
        // between its publication and the epoch's bump (below, in `try_run`) runs it
        // early, so it waits for a *newer* epoch than its own, not for any other one.
        // Waiting for `!= seen` (as this pool first did) let such a worker, back from
        // that job before the bump, take the same job again: two runs, two decrements
        // of `remaining`, which wrapped, and the caller spun forever (a CI hang of
        // `each_member_of_each_job_runs_once`, on 2 cores with 8 workers).
        let mut spins = 0;
        while state.epoch.load(Ordering::Acquire) <= seen {
            if spins < SPINS {
                core::hint::spin_loop();
                spins += 1;
            } else {
                let mut guard = sleepers(&state);
                if state.epoch.load(Ordering::Acquire) <= seen {
                    guard[id - 1].asleep = true;
                    guard = state.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
                    guard[id - 1].asleep = false;
                    let narrowed = guard[id - 1].narrowed.take();
                    drop(guard);
                    if let Some(narrowed) = narrowed {
                        narrowed.restore();
                    }
                }
            }
        }
        // Newer than `seen`: the job is published before its epoch is bumped, so the job
        // read here is at least as new as the epoch that ended the wait.
        let (epoch, job) = *state.job.lock().unwrap_or_else(|e| e.into_inner());
        seen = epoch;
        let job = job.expect("a job is published before its epoch");
        if id < job.size {
            // SAFETY: the caller waits for `remaining` to reach zero before the closure
            // goes out of scope.
            let work = unsafe { &*job.work };
            // A worker that starts here despite `keep_off` (new, or spinning when the
            // caller moved) would share one CPU with member 0 at every barrier.
            placement::step_off(job.caller_cpu);
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(id))).is_err() {
                state.panicked.store(true, Ordering::Relaxed);
            }
            state.remaining.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

fn sleepers(state: &State) -> MutexGuard<'_, Vec<Sleeper>> {
    state.sleep.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `work(id)` for `id` in `0..size` at the same time, `0` on the caller's thread,
/// the rest on pool workers. Returns `false` (running nothing) when another team holds
/// the pool.
/// With `caller_cpu` (the caller's CPU, for a team kept apart) sleeping members are woken
/// elsewhere and a member starting there steps off it (placement.rs).
pub(crate) fn try_run(
    size: usize,
    caller_cpu: Option<usize>,
    work: &(dyn Fn(usize) + Sync),
) -> bool {
    let pool = pool();
    let Ok(mut workers) = pool.busy.try_lock() else {
        return false;
    };
    let state = &pool.state;
    while *workers < size - 1 {
        *workers += 1;
        sleepers(state).push(Sleeper {
            thread: None,
            asleep: false,
            narrowed: None,
        });
        let (state, id, seen) = (state.clone(), *workers, state.epoch.load(Ordering::Acquire));
        std::thread::Builder::new()
            .name(format!("lstm-cpu-{id}"))
            .spawn(move || worker(state, id, seen))
            .expect("spawning an lstm-cpu worker thread");
    }
    // SAFETY: the lifetime is erased only until `remaining` is zero, below.
    let erased: *const (dyn Fn(usize) + Sync + 'static) = unsafe { core::mem::transmute(work) };
    state.remaining.store(size - 1, Ordering::Release);
    state.panicked.store(false, Ordering::Relaxed);
    let epoch = state.epoch.load(Ordering::Acquire) + 1;
    *state.job.lock().unwrap_or_else(|e| e.into_inner()) = (
        epoch,
        Some(Job {
            work: erased,
            size,
            caller_cpu,
        }),
    );
    #[cfg(test)]
    if tests::WIDEN_PUBLICATION.load(Ordering::Relaxed) {
        // The window between the job's publication and its epoch, held open.
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    {
        let mut sleepers = sleepers(state);
        // A sleeping member would often wake on this CPU, which runs member 0: keep it
        // off (placement.rs). Members that are still spinning stay where they are.
        for sleeper in sleepers.iter_mut().take(size - 1) {
            if let (true, None, Some(thread)) = (sleeper.asleep, &sleeper.narrowed, sleeper.thread)
            {
                sleeper.narrowed = placement::keep_off(thread, caller_cpu);
                #[cfg(test)]
                if sleeper.narrowed.is_some() {
                    tests::NARROWED.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        state.epoch.store(epoch, Ordering::Release);
        state.wake.notify_all();
    }
    let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(0)));
    let mut spins = 0u32;
    while state.remaining.load(Ordering::Acquire) != 0 {
        if spins < SPINS {
            core::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
    let worker_panicked = state.panicked.load(Ordering::Relaxed);
    drop(workers);
    if let Err(payload) = mine {
        std::panic::resume_unwind(payload);
    }
    assert!(!worker_panicked, "an lstm-cpu worker thread panicked");
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Set by the test below: `try_run` sleeps between publishing a job and bumping its
    /// epoch, the window in which a worker can take the job early.
    pub(super) static WIDEN_PUBLICATION: AtomicBool = AtomicBool::new(false);

    /// Sleeping workers a caller narrowed before waking them.
    pub(super) static NARROWED: AtomicUsize = AtomicUsize::new(0);

    /// A caller narrows a sleeping worker off its CPU before waking it (where another CPU
    /// is allowed), and the worker has its whole affinity back before it runs the job.
    #[test]
    #[cfg(target_os = "linux")]
    fn woken_workers_run_with_their_affinity_restored() {
        let allowed = crate::placement::tests::affinity();
        let narrowed_before = NARROWED.load(Ordering::Relaxed);
        for round in 0..20 {
            // Workers spin about 100 µs after a job, then sleep.
            std::thread::sleep(std::time::Duration::from_millis(2));
            let seen = Mutex::new(None);
            while !try_run(2, placement::current_cpu(), &|id| {
                if id == 1 {
                    *seen.lock().unwrap() = Some(crate::placement::tests::affinity());
                }
            }) {
                std::thread::yield_now();
            }
            assert_eq!(
                seen.into_inner().unwrap().as_ref(),
                Some(&allowed),
                "round {round}"
            );
        }
        if allowed.len() > 1 {
            assert!(
                NARROWED.load(Ordering::Relaxed) > narrowed_before,
                "no sleeping worker was narrowed in 20 rounds"
            );
        }
    }

    /// Jobs of changing sizes back to back, so that workers outside one job wake late
    /// into the next: every member of every job runs exactly once. Then again with the
    /// publication window held open: before the fix in `worker`, a worker that took a
    /// job in that window ran it twice and the caller hung (every run, at 2,000 rounds).
    #[test]
    fn each_member_of_each_job_runs_once() {
        run_rounds(3000);
        WIDEN_PUBLICATION.store(true, Ordering::Relaxed);
        run_rounds(500);
        WIDEN_PUBLICATION.store(false, Ordering::Relaxed);
    }

    fn run_rounds(rounds: usize) {
        let max = 9;
        let runs: Vec<AtomicUsize> = (0..max).map(|_| AtomicUsize::new(0)).collect();
        for round in 0..rounds {
            let size = 2 + (round * 7) % (max - 1);
            for r in &runs {
                r.store(0, Ordering::Relaxed);
            }
            // Other tests of this binary run teams on the same pool at the same time:
            // while one holds it, `try_run` runs nothing and says so, and the job is
            // offered again (the counts below are still of exactly one run).
            while !try_run(size, None, &|id| {
                runs[id].fetch_add(1, Ordering::Relaxed);
            }) {
                assert!(
                    runs.iter().all(|r| r.load(Ordering::Relaxed) == 0),
                    "round {round}: a refused job ran nothing"
                );
                std::thread::yield_now();
            }
            for (id, r) in runs.iter().enumerate() {
                let expected = usize::from(id < size);
                assert_eq!(
                    r.load(Ordering::Relaxed),
                    expected,
                    "round {round}, member {id} of {size}"
                );
            }
        }
    }
}
