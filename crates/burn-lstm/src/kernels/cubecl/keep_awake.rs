//! Keeps a GPU's runner threads polling while the op is being called (on by default on
//! machines with 8 hardware threads or more; `BURN_LSTM_KEEP_AWAKE` or
//! [`set_keep_awake`] decide otherwise).
//!
//! CubeCL 0.10 runs a device's work on runner threads, each fed through a queue of task
//! slots: Burn's fusion thread (the upstream stage) and CubeCL's device thread (the
//! downstream stage). An idle runner spins (8,192 spin-loop hints), yields (64 times),
//! then sleeps in steps of 150 µs, and a task sent to it waits for the end of the current
//! step. So a blocking call that reaches a sleeping runner (the op's read of its buffer
//! addresses, a flush, a synchronisation) first waits up to a step plus the kernel's
//! timer slack. Between two of the op's calls the device thread can be idle for longer
//! than its spin and yield phases (cuDNN's host work for one call can take that long),
//! and the next call's address read then finds it asleep (`BURN_LSTM_CUDNN_TRACE=1`
//! times that read, phase "buffer addresses").
//! `lstm-bench`'s `runner-wake` measures a machine's round trip to a runner against the
//! time it was idle.
//! CubeCL 0.11 parks an idle runner instead and unparks it when a client fills its
//! queue (`cubecl-common` 0.11.3, `custom_channel::Server::park`): this module is for
//! CubeCL 0.10.
//!
//! While the setting is on, each call of the op (and, on a fused backend, each
//! registration of its fusion operations) names its runner ([`note`]) and opens a
//! window of [`WINDOW`]. Until the window closes, one thread of this crate flushes those
//! runners' queues every [`POKE_EVERY`]: a flush fills the queue's free slots with empty
//! tasks, which the runner runs at its next poll, so it starts its spin phase again and
//! never reaches the sleep phase. A flush changes no order (the queue stays first in,
//! first out); it only runs queued tasks earlier. After the window the thread waits on a
//! condition variable and uses no CPU time. The cost: each runner spins through the
//! window, about one core each while calls come.
//!
//! How a runner's queue is reached: Burn's fusion thread through the fusion client's own
//! non-blocking `flush_queue`; CubeCL's device thread through a handle to an empty
//! device service ([`Poke`]) on it, which the op creates on that thread itself (inside
//! `exclusive`: [`device_thread_flusher`]). Creating a service handle from another
//! thread holds CubeCL's global channel lock while it waits for the runner, and a runner
//! busy with a task that needs that lock (Burn's fusion thread loading a CubeCL client,
//! for one) would never answer.

use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cubecl_common::device::{DeviceId, DeviceService, DeviceServiceStage};
use cubecl_common::device_handle::DeviceHandle;

use crate::kernels::switch::OptInSwitch;

/// How long after the last [`note`] the runners are kept polling: longer than the host
/// time between two calls of a training step at the shapes where a wake-up counts.
pub(crate) const WINDOW: Duration = Duration::from_millis(5);

/// How often a kept runner's queue is flushed: well inside a runner's spin and yield
/// phases (about 0.25 ms on the CPUs measured), the waker's own sleep overshooting it by
/// the timer slack (50 µs by default on Linux).
pub(crate) const POKE_EVERY: Duration = Duration::from_micros(50);

static SWITCH: OptInSwitch = OptInSwitch::new("BURN_LSTM_KEEP_AWAKE", true);

/// The fewest hardware threads on which keeping the runners awake is on by default:
/// while calls come, the two runners spin (a core each) and the waker wakes every
/// [`POKE_EVERY`], beside the thread that calls the op and whatever else the program
/// runs (data loading, for one). With fewer, the spinning threads take the cores the
/// work needs (on a 2-core machine, `runner-wake`'s 90th percentile grew to 3-4 ms with
/// pokes); asking for it explicitly still turns it on.
pub(crate) const MIN_HARDWARE_THREADS: usize = 8;

/// Whether the op keeps its GPU's runner threads (Burn's fusion thread, CubeCL's device
/// thread) polling while it is being called, so that its blocking calls to them do not
/// wait for a sleeping thread to wake. On by default where the process may run on at
/// least 8 hardware threads, off below that: it costs about a core per runner while calls
/// come, and with fewer threads the spinning runners take the cores the work needs.
/// `BURN_LSTM_KEEP_AWAKE` (`1` on, anything else off) decides on any machine until
/// [`set_keep_awake`] is called.
pub fn keep_awake() -> bool {
    resolved(SWITCH.explicit(), SWITCH.default_on(), hardware_threads())
}

/// Whether keeping the runners awake is on: as asked (`explicit`), else the default,
/// which applies only with at least [`MIN_HARDWARE_THREADS`] hardware threads
/// (`hardware_threads`, `None` where unknown).
fn resolved(explicit: Option<bool>, default_on: bool, hardware_threads: Option<usize>) -> bool {
    explicit.unwrap_or_else(|| {
        default_on && hardware_threads.is_some_and(|threads| threads >= MIN_HARDWARE_THREADS)
    })
}

/// The hardware threads this process may run on, read once (the read can open cgroup
/// files).
fn hardware_threads() -> Option<usize> {
    static THREADS: OnceLock<Option<usize>> = OnceLock::new();
    *THREADS.get_or_init(|| {
        std::thread::available_parallelism()
            .ok()
            .map(std::num::NonZero::get)
    })
}

/// Turns keeping the runner threads awake on or off for calls that start after this one
/// (see [`keep_awake`]). Off, the waker thread finishes its current window and waits.
pub fn set_keep_awake(enabled: bool) {
    SWITCH.set(enabled);
}

/// Which of a device's runner threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Stage {
    /// Burn's fusion thread (fused backends only).
    Fusion,
    /// CubeCL's device thread (named by the cuDNN op).
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    Device,
}

/// One runner thread: a device's stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Runner {
    pub device: DeviceId,
    pub stage: Stage,
}

/// Flushes one runner's queue without waiting.
pub(crate) type Flush = Box<dyn Fn() + Send>;

/// Keeps `runner` polling for [`WINDOW`] from now, when [`keep_awake`] is on.
/// `flusher` makes the runner's [`Flush`] the first time the runner is named (`None`:
/// it could not be made, the runner is left alone); it runs on the calling thread.
pub(crate) fn note(runner: Runner, flusher: impl FnOnce() -> Option<Flush>) {
    if keep_awake() {
        waker().note(runner, flusher);
    }
}

/// What makes the [`Flush`] of CubeCL's device thread of `device`, to be run on that
/// thread (by `exclusive`): see the module's doc for why not elsewhere.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn device_thread_flusher(device: DeviceId) -> impl FnOnce() -> Flush + Send {
    move || {
        let handle: DeviceHandle<Poke> = DeviceHandle::new(device);
        Box::new(move || handle.flush_queue())
    }
}

/// What the waker does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Flush every known runner's queue, then sleep [`POKE_EVERY`].
    Poke,
    /// Wait for the next [`note`].
    Park,
}

/// The waker's window and the runners it keeps: what [`note`] changes, and what the
/// waker thread reads.
#[derive(Default)]
struct Schedule {
    /// The end of the window; `None` when it has closed.
    until: Option<Instant>,
    /// Every runner named so far, each once (a call names the same few again and again).
    runners: Vec<Runner>,
    /// The flushers of runners added since the waker last looked, for it to take.
    new_flushers: Vec<Flush>,
}

impl Schedule {
    /// Moves the window's end to `now + WINDOW` if that is later. Returns whether the
    /// window was closed (the waker may be parked).
    fn extend(&mut self, now: Instant) -> bool {
        let was_closed = self.until.is_none();
        let end = now + WINDOW;
        self.until = Some(self.until.map_or(end, |until| until.max(end)));
        was_closed
    }

    /// Adds `runner` with its flusher unless it is known already (two threads may have
    /// made one for it at once: the second is dropped).
    fn add(&mut self, runner: Runner, flush: Flush) {
        if !self.runners.contains(&runner) {
            self.runners.push(runner);
            self.new_flushers.push(flush);
        }
    }

    /// The step at `now`: poke while the window is open, else park (the window closes).
    fn step(&mut self, now: Instant) -> Step {
        match self.until {
            Some(until) if now < until => Step::Poke,
            _ => {
                self.until = None;
                Step::Park
            }
        }
    }
}

/// An empty device service: a handle to it reaches a runner's queue (the runner is the
/// device's and the stage's, whatever the service) without touching another service's
/// state. On the downstream stage: CubeCL's device thread.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct Poke;

impl DeviceService for Poke {
    fn init(_device: DeviceId) -> Self {
        Self
    }

    fn utilities(&self) -> cubecl_common::device::ServerUtilitiesHandle {
        Arc::new(())
    }

    fn stage() -> DeviceServiceStage {
        DeviceServiceStage::Downstream
    }
}

/// The shared state of [`note`] and the waker thread.
struct Waker {
    schedule: Mutex<Schedule>,
    wake: Condvar,
}

impl Waker {
    fn schedule(&self) -> std::sync::MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn note(&self, runner: Runner, flusher: impl FnOnce() -> Option<Flush>) {
        let mut schedule = self.schedule();
        if !schedule.runners.contains(&runner) {
            // Made without the lock: making it may wait for the runner.
            drop(schedule);
            let flush = flusher();
            schedule = self.schedule();
            if let Some(flush) = flush {
                schedule.add(runner, flush);
            }
        }
        let was_closed = schedule.extend(Instant::now());
        drop(schedule);
        if was_closed {
            self.wake.notify_one();
        }
    }

    /// The waker thread's loop: flush the known runners' queues while the window is
    /// open, park while it is closed.
    fn run(&self) {
        let mut flushers: Vec<Flush> = Vec::new();
        loop {
            let mut schedule = self.schedule();
            while schedule.step(Instant::now()) == Step::Park {
                schedule = self.wake.wait(schedule).unwrap_or_else(|e| e.into_inner());
            }
            flushers.append(&mut schedule.new_flushers);
            drop(schedule);
            for flush in &flushers {
                flush();
            }
            std::thread::sleep(POKE_EVERY);
        }
    }
}

/// The process's waker, its thread started on first use.
fn waker() -> &'static Waker {
    static WAKER: OnceLock<&'static Waker> = OnceLock::new();
    WAKER.get_or_init(|| {
        let waker: &'static Waker = Box::leak(Box::new(Waker {
            schedule: Mutex::new(Schedule::default()),
            wake: Condvar::new(),
        }));
        let started = std::thread::Builder::new()
            .name("burn-lstm-keep-awake".into())
            .spawn(move || waker.run());
        if let Err(e) = started {
            log::warn!("burn-lstm: the keep-awake thread could not start ({e}); runners may sleep");
        }
        waker
    })
}

#[cfg(test)]
mod tests {
    // By its full path: the layout test reads `super` as this file's parent module.
    use crate::kernels::cubecl::keep_awake::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn runner(index: u16, stage: Stage) -> Runner {
        Runner {
            device: DeviceId::new(0xB57, index),
            stage,
        }
    }

    #[test]
    fn a_note_opens_or_extends_the_window_and_the_window_closes_after_it() {
        let start = Instant::now();
        let mut schedule = Schedule::default();
        assert_eq!(schedule.step(start), Step::Park, "no call yet");
        assert!(schedule.extend(start), "was closed");
        assert_eq!(schedule.step(start), Step::Poke);
        assert_eq!(schedule.step(start + WINDOW / 2), Step::Poke);
        // A later call moves the end; an earlier time never shortens it.
        assert!(!schedule.extend(start + WINDOW / 2), "was open");
        assert!(!schedule.extend(start), "was open");
        assert_eq!(schedule.until, Some(start + WINDOW / 2 + WINDOW));
        assert_eq!(schedule.step(start + WINDOW), Step::Poke);
        assert_eq!(schedule.step(start + WINDOW / 2 + WINDOW), Step::Park);
        assert_eq!(schedule.until, None, "closed");
        assert!(schedule.extend(start + 3 * WINDOW), "reopened");
    }

    #[test]
    fn the_default_applies_only_on_machines_with_cores_to_spare() {
        let few = Some(MIN_HARDWARE_THREADS - 1);
        let enough = Some(MIN_HARDWARE_THREADS);
        // (asked, default on, hardware threads) -> on
        let cases = [
            (None, false, enough, false),
            (None, true, enough, true),
            (None, true, Some(64), true),
            (None, true, few, false),
            (None, true, Some(2), false),
            (None, true, None, false),
            (Some(true), false, Some(2), true),
            (Some(true), true, None, true),
            (Some(false), true, enough, false),
            (Some(false), false, few, false),
        ];
        for (asked, default_on, threads, on) in cases {
            assert_eq!(
                resolved(asked, default_on, threads),
                on,
                "asked {asked:?}, default on {default_on}, {threads:?} hardware threads"
            );
        }
    }

    #[test]
    fn each_runner_is_kept_once_in_the_order_first_named() {
        let mut schedule = Schedule::default();
        let fusion = runner(0, Stage::Fusion);
        let device = runner(0, Stage::Device);
        let other = runner(1, Stage::Device);
        for named in [fusion, device, device, other, fusion] {
            schedule.add(named, Box::new(|| ()));
        }
        assert_eq!(schedule.runners, vec![fusion, device, other]);
        assert_eq!(schedule.new_flushers.len(), 3);
    }

    #[test]
    fn the_poke_service_runs_on_cubecls_device_thread() {
        assert_eq!(Poke::stage(), DeviceServiceStage::Downstream);
    }

    /// The waker thread calls a runner's flusher while the window is open and stops after
    /// it; a runner named again gets no second flusher. With the window's real length and
    /// generous bounds: the assertions are about whether flushes happen, not how fast.
    #[test]
    fn the_waker_flushes_while_the_window_is_open_and_then_parks() {
        let count = Arc::new(AtomicU64::new(0));
        let made = AtomicU64::new(0);
        let flusher = || {
            made.fetch_add(1, Ordering::Relaxed);
            let count = count.clone();
            Some(Box::new(move || {
                count.fetch_add(1, Ordering::Relaxed);
            }) as Flush)
        };
        let waker = waker();
        waker.note(runner(7, Stage::Device), flusher);
        waker.note(runner(7, Stage::Device), flusher);
        assert_eq!(made.load(Ordering::Relaxed), 1, "one flusher per runner");
        let flushed = || count.load(Ordering::Relaxed);
        let deadline = Instant::now() + Duration::from_secs(10);
        while flushed() == 0 {
            assert!(Instant::now() < deadline, "no flush within 10 s of a note");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Parked once the window has closed and no note came: the count stops moving.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            assert!(
                Instant::now() < deadline,
                "still flushing 10 s after the last note"
            );
            let before = flushed();
            std::thread::sleep(WINDOW * 4);
            if waker.schedule().until.is_none() && flushed() == before {
                break;
            }
        }
    }
}
