//! Keeps the members of a team off their caller's CPU.
//!
//! A team spins at a barrier every step, so two members that share one CPU take turns
//! through time slices and yields, slower than one thread alone. Linux puts them
//! together on its own in two cases: a
//! newly spawned thread starts on its parent's CPU, and a worker that slept between
//! calls is woken onto the CPU of the thread that woke it (the caller, who goes on to run
//! member 0) when the CPU it slept on looks unavailable: in a VM an idle vCPU is halted,
//! which the guest's scheduler counts as preempted. The woken worker then waits for the
//! caller's time slice, and the load balancer separates the two only tens of
//! milliseconds later: a process's first calls and calls that come apart (a server's
//! requests) run slow (docs/dev/fused-cpu-measurements.md).
//!
//! Two remedies, both keeping the user's affinity (only CPUs it allows are used, nothing
//! stays pinned, a single allowed CPU changes nothing; other systems: no-op):
//! - before waking a sleeping worker, the caller narrows the worker's affinity to the
//!   allowed CPUs other than its own ([`keep_off`]), so the wake-up goes elsewhere; the
//!   worker widens it back as it wakes ([`Narrowed::restore`]);
//! - a member that still starts a job on its caller's CPU (a new thread, a worker that
//!   was not asleep) steps off it ([`step_off`]): it narrows its own affinity, which
//!   moves it before the call returns, and widens it back at once (widening never moves a
//!   running thread).

/// The CPU this thread runs on now, where the system says.
#[cfg(target_os = "linux")]
pub(crate) fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on failure.
    let cpu = unsafe { libc::sched_getcpu() };
    usize::try_from(cpu).ok()
}

/// The CPU this thread runs on now, where the system says.
#[cfg(not(target_os = "linux"))]
pub(crate) fn current_cpu() -> Option<usize> {
    None
}

/// Moves this thread off `cpu` if it runs there and its affinity allows another CPU.
/// Returns the CPU it moved to.
pub(crate) fn step_off(cpu: Option<usize>) -> Option<usize> {
    match cpu {
        Some(cpu) if current_cpu() == Some(cpu) => move_off(cpu),
        _ => None,
    }
}

/// [`keep_off`] on this thread, which the kernel moves to an allowed CPU before the call
/// returns, then widened back at once: already elsewhere, the load balancer places it
/// as before.
fn move_off(cpu: usize) -> Option<usize> {
    let narrowed = keep_off(this_thread(), Some(cpu))?;
    let landed = current_cpu();
    narrowed.restore();
    landed
}

/// A thread, as [`keep_off`] names it (Linux: its thread id).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadRef(#[cfg(target_os = "linux")] libc::pid_t);

/// The calling thread.
pub(crate) fn this_thread() -> ThreadRef {
    // SAFETY: gettid has no arguments and cannot fail.
    #[cfg(target_os = "linux")]
    return ThreadRef(unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t);
    #[cfg(not(target_os = "linux"))]
    ThreadRef()
}

/// The affinity a thread had before [`keep_off`] narrowed it.
pub(crate) struct Narrowed {
    #[cfg(target_os = "linux")]
    allowed: libc::cpu_set_t,
}

/// Narrows `thread`'s affinity to the CPUs it allows other than `cpu`, for a thread that
/// is about to be woken. Returns the affinity to restore, or `None` where nothing changed
/// (`cpu` unknown or not allowed, no other CPU allowed, or the system refused).
pub(crate) fn keep_off(thread: ThreadRef, cpu: Option<usize>) -> Option<Narrowed> {
    #[cfg(target_os = "linux")]
    {
        // No CPU to keep off (a team not kept apart): no system call.
        let cpu = cpu?;
        let allowed = affinity_of(thread.0)?;
        let others = without(&allowed, cpu)?;
        // SAFETY: as in `affinity_of`.
        let set = unsafe { libc::sched_setaffinity(thread.0, SET_BYTES, &others) };
        (set == 0).then_some(Narrowed { allowed })
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (thread, cpu);
        None
    }
}

impl Narrowed {
    /// Gives the calling thread (the one narrowed) its affinity back.
    pub(crate) fn restore(self) {
        // SAFETY: as in `affinity_of`; thread id 0 is the calling thread.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::sched_setaffinity(0, SET_BYTES, &self.allowed);
        }
    }
}

#[cfg(target_os = "linux")]
const SET_BYTES: usize = core::mem::size_of::<libc::cpu_set_t>();

/// `thread`'s affinity (0: the calling thread); `None` where it does not fit a
/// `cpu_set_t` (more than 1024 CPUs) or the thread is gone.
#[cfg(target_os = "linux")]
fn affinity_of(thread: libc::pid_t) -> Option<libc::cpu_set_t> {
    // SAFETY: `cpu_set_t` is plain bits (all zero is the empty set); the call writes only
    // the set passed with its size.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        (libc::sched_getaffinity(thread, SET_BYTES, &mut set) == 0).then_some(set)
    }
}

/// `allowed` without `cpu`; `None` where `cpu` is not in it or nothing else is.
#[cfg(target_os = "linux")]
fn without(allowed: &libc::cpu_set_t, cpu: usize) -> Option<libc::cpu_set_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return None;
    }
    let mut others = *allowed;
    // SAFETY: `cpu` is within the set (checked above).
    unsafe {
        if !libc::CPU_ISSET(cpu, allowed) {
            return None;
        }
        libc::CPU_CLR(cpu, &mut others);
        (libc::CPU_COUNT(&others) > 0).then_some(others)
    }
}

/// Linux only: elsewhere placement does nothing.
#[cfg(all(test, target_os = "linux"))]
pub(crate) mod tests {
    use super::*;

    /// A thread on its caller's CPU leaves it when another CPU is allowed, and keeps its
    /// whole affinity afterwards (nothing stays pinned).
    #[test]
    fn a_member_on_its_callers_cpu_moves_and_keeps_its_affinity() {
        let allowed_before = affinity();
        let here = current_cpu().expect("sched_getcpu works on Linux");
        let landed = step_off(Some(here));
        let others: Vec<usize> = allowed_before
            .iter()
            .copied()
            .filter(|&c| c != here)
            .collect();
        // The kernel moves the calling thread before `sched_setaffinity` returns.
        match landed {
            Some(cpu) => assert!(others.contains(&cpu), "landed on {cpu}, allowed {others:?}"),
            None => assert!(
                others.is_empty(),
                "stayed on {here}, allowed {allowed_before:?}"
            ),
        }
        assert_eq!(affinity(), allowed_before, "the affinity is restored");
        // Another CPU than ours, or none known: nothing to do.
        assert_eq!(step_off(Some(usize::MAX)), None);
        assert_eq!(step_off(None), None);
    }

    /// With one allowed CPU the thread stays, and its affinity is untouched.
    #[test]
    fn a_thread_allowed_one_cpu_stays() {
        std::thread::spawn(|| {
            let here = current_cpu().unwrap();
            set_affinity(&[here]);
            assert_eq!(step_off(Some(here)), None);
            assert_eq!(current_cpu(), Some(here));
            assert_eq!(affinity(), vec![here]);
        })
        .join()
        .unwrap();
    }

    /// A sleeping thread narrowed off our CPU wakes elsewhere, and gets its affinity back
    /// when it restores it.
    #[test]
    fn a_thread_kept_off_a_cpu_wakes_elsewhere_and_restores() {
        use std::sync::mpsc;
        let allowed_before = affinity();
        let (to_sleeper, wake) = mpsc::channel::<Option<(usize, Narrowed)>>();
        let (report, from_sleeper) = mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            report.send(this_thread()).unwrap();
            // Blocks until the test has narrowed this thread.
            let (kept_off, narrowed) = wake.recv().unwrap()?;
            let woke_on = current_cpu().unwrap();
            let during = affinity();
            narrowed.restore();
            Some((kept_off, woke_on, during, affinity()))
        });
        let thread = from_sleeper.recv().unwrap();
        let here = current_cpu().unwrap();
        let narrowed = keep_off(thread, Some(here));
        assert_eq!(
            narrowed.is_some(),
            allowed_before.len() > 1,
            "allowed {allowed_before:?}"
        );
        to_sleeper.send(narrowed.map(|n| (here, n))).unwrap();
        if let Some((kept_off, woke_on, during, after)) = sleeper.join().unwrap() {
            let others: Vec<usize> = allowed_before
                .iter()
                .copied()
                .filter(|&c| c != kept_off)
                .collect();
            assert_eq!(during, others, "narrowed to the other allowed CPUs");
            assert_ne!(woke_on, kept_off, "woke on the CPU it was kept off");
            assert_eq!(after, allowed_before, "restored");
        }
        assert!(keep_off(this_thread(), Some(usize::MAX)).is_none());
        assert!(keep_off(this_thread(), None).is_none());
        assert_eq!(affinity(), allowed_before, "ours untouched");
    }

    fn set_affinity(cpus: &[usize]) {
        // SAFETY: as in `affinity_of`.
        unsafe {
            let mut set: libc::cpu_set_t = core::mem::zeroed();
            for &c in cpus {
                libc::CPU_SET(c, &mut set);
            }
            assert_eq!(
                libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set),
                0
            );
        }
    }

    /// The calling thread's allowed CPUs.
    pub(crate) fn affinity() -> Vec<usize> {
        let set = affinity_of(0).expect("the calling thread's affinity");
        (0..libc::CPU_SETSIZE as usize)
            // SAFETY: every index is below the set's size.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .collect()
    }
}
