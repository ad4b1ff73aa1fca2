//! The threads of one fused CPU call: the process's setting ([`cpu_threads`]), and with
//! [`cpu_threads_shared`] on, that setting divided by the calls running as it starts.
//!
//! Calls that overlap (a server's request handlers) each bring a team of that many
//! threads: the first takes the kernel's pool of workers, the others spawn threads of
//! their own, and every team spins at each step's barrier while its members wait for
//! cores. Shared, a call that starts beside others takes its share of the threads (at
//! least one), and a call alone still takes them all. A share is fixed when its call
//! starts: calls that start one after another take all, a half, a third, ... of the
//! threads, so the shares of the calls running can add up to more than the setting
//! until the early ones end.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::kernels::switch::OptInSwitch;

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Threads the fused CPU kernel uses per call: set by [`set_cpu_threads`], else the
/// `BURN_LSTM_THREADS` environment variable, else every core the process may use.
/// Small shapes use fewer (one thread below ~32 K multiply-adds per thread and step,
/// a batch of one row counted as two), and so do calls that overlap where
/// [`cpu_threads_shared`] is on.
pub fn cpu_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            static FROM_ENV: OnceLock<usize> = OnceLock::new();
            *FROM_ENV.get_or_init(|| {
                crate::kernels::env_number::usize_from_env("BURN_LSTM_THREADS")
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            })
        }
        n => n,
    }
}

/// Sets the threads of the fused CPU kernel for this process (`0` restores the default
/// of [`cpu_threads`]).
pub fn set_cpu_threads(threads: usize) {
    THREADS.store(threads, Ordering::Relaxed);
}

static SHARED: OptInSwitch = OptInSwitch::new("BURN_LSTM_THREADS_SHARED", false);

/// Whether calls of the fused CPU kernels (f32, f64 and int8) that overlap share
/// [`cpu_threads`]: a call takes that many threads divided by the calls running as it
/// starts, itself included (at least one), fixed for the call. For a server whose
/// requests overlap: a lone request still runs on every thread, and overlapping ones on
/// a share each instead of a team of every thread each. Off by default, since a value
/// can then differ in its last bits with the load (products are summed in another
/// order on another number of threads); off, it depends on [`cpu_threads`] only. The
/// environment variable `BURN_LSTM_THREADS_SHARED` (`1` on, anything else off) decides
/// until [`set_cpu_threads_shared`] is called.
pub fn cpu_threads_shared() -> bool {
    SHARED.get()
}

/// Turns the sharing of threads between overlapping calls on or off for calls that start
/// after this one (see [`cpu_threads_shared`]).
pub fn set_cpu_threads_shared(enabled: bool) {
    SHARED.set(enabled);
}

/// Calls of the fused CPU kernels running now.
static RUNNING: Running = Running(AtomicUsize::new(0));

thread_local! {
    /// The threads of the call running on this thread, if one is: the glue's work inside
    /// it (the copy of a strided input) takes the same.
    static THIS_CALL: Cell<Option<usize>> = const { Cell::new(None) };
}

/// The share the last call on the process's count took (for tests of the glue).
#[cfg(test)]
pub(crate) static LAST_SHARE: AtomicUsize = AtomicUsize::new(0);

/// A count of running calls.
struct Running(AtomicUsize);

impl Running {
    /// A call starting now on this thread, of at most `threads` threads.
    fn start(&'static self, threads: usize, shared: bool) -> CallThreads {
        let running = self.0.fetch_add(1, Ordering::AcqRel) + 1;
        let threads = share(threads, running, shared);
        CallThreads {
            threads,
            running: self,
            outer: THIS_CALL.replace(Some(threads)),
            _this_thread: PhantomData,
        }
    }
}

/// One running call of a fused CPU kernel and the threads it may use; counted among the
/// running calls until dropped, on the thread that started it.
pub(crate) struct CallThreads {
    threads: usize,
    running: &'static Running,
    /// This thread's call before this one (a call made inside another), restored on drop.
    outer: Option<usize>,
    /// Not `Send`: it sets and restores its thread's [`THIS_CALL`].
    _this_thread: PhantomData<*const ()>,
}

impl CallThreads {
    /// A call starting now.
    pub(crate) fn start() -> Self {
        let call = RUNNING.start(cpu_threads(), cpu_threads_shared());
        #[cfg(test)]
        LAST_SHARE.store(call.threads, Ordering::Relaxed);
        call
    }

    /// Threads this call may use (at least one).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }
}

impl Drop for CallThreads {
    fn drop(&mut self) {
        THIS_CALL.set(self.outer);
        self.running.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Threads for the glue's work: inside a call, the call's; outside one (the flat
/// parameters gathered before the op), the share a call starting now would take.
pub(crate) fn threads_now() -> usize {
    THIS_CALL.get().unwrap_or_else(|| {
        let running = RUNNING.0.load(Ordering::Acquire) + 1;
        share(cpu_threads(), running, cpu_threads_shared())
    })
}

/// A call's threads: all of `threads`, or with `shared`, its part of them among
/// `running` calls (at least one).
fn share(threads: usize, running: usize, shared: bool) -> usize {
    if shared {
        (threads / running.max(1)).max(1)
    } else {
        threads
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_calls_share_the_threads_only_when_asked() {
        for (threads, running, shared, expected) in [
            (8, 1, true, 8),
            (8, 2, true, 4),
            (8, 3, true, 2),
            (8, 8, true, 1),
            (8, 20, true, 1),
            (2, 2, true, 1),
            (1, 4, true, 1),
            (8, 0, true, 8),
            (8, 8, false, 8),
            (2, 1, false, 2),
        ] {
            assert_eq!(
                share(threads, running, shared),
                expected,
                "{threads} threads, {running} calls running, shared: {shared}"
            );
        }
    }

    /// A call counts from its start until it is dropped, and takes its share of the
    /// calls running as it starts (a count of this test's own: the process's count
    /// moves with the other tests' calls).
    #[test]
    fn a_call_counts_among_the_running_ones_until_it_ends() {
        static MINE: Running = Running(AtomicUsize::new(0));
        let first = MINE.start(8, true);
        let second = MINE.start(8, true);
        let third = MINE.start(8, true);
        assert_eq!(
            [first.threads(), second.threads(), third.threads()],
            [8, 4, 2]
        );
        drop(second);
        let fourth = MINE.start(8, true);
        assert_eq!(fourth.threads(), 2, "three running: first, third, fourth");
        let unshared = MINE.start(8, false);
        assert_eq!(unshared.threads(), 8);
        drop((first, third, fourth, unshared));
        assert_eq!(MINE.0.load(Ordering::Acquire), 0);
        assert_eq!(MINE.start(8, true).threads(), 8, "alone again");
    }

    /// Set in the child process of [`the_modules_calls_take_their_share`].
    const CHILD: &str = "BURN_LSTM_SHARE_TEST_CHILD";

    /// Through the modules, every call of the fused CPU kernels takes its share: with the
    /// setting on and 4 threads a call, a call beside two running ones (held here) takes
    /// 4 / 3 = 1 thread (f32 inference, the int8 copy, a training step's forward and
    /// backward), and a call alone all 4. In a child process, where no other test's
    /// calls run.
    #[test]
    fn the_modules_calls_take_their_share() {
        use burn::backend::{Autodiff, NdArray};
        use burn::tensor::Tensor;

        if lstm_cpu::reran_in_child(
            module_path!(),
            "the_modules_calls_take_their_share",
            &[
                (CHILD, "1"),
                ("BURN_LSTM_THREADS_SHARED", "1"),
                ("BURN_LSTM_THREADS", "4"),
            ],
        ) {
            return;
        }
        let device = Default::default();
        let config = crate::CudnnCompatibleLstmConfig::new(8, 16);
        let model = config.init::<NdArray>(&device);
        let int8 = model.quantized_int8().unwrap();
        let trained = config.init::<Autodiff<NdArray>>(&device);
        let x = Tensor::<NdArray, 3>::ones([2, 3, 8], &device);
        let share_of = |call: &dyn Fn()| {
            LAST_SHARE.store(0, Ordering::Relaxed);
            call();
            LAST_SHARE.load(Ordering::Relaxed)
        };
        let calls: [(&str, &dyn Fn()); 4] = [
            ("f32 inference", &|| drop(model.forward(x.clone(), None))),
            ("int8 inference", &|| drop(int8.forward(x.clone(), None))),
            ("a training forward", &|| {
                drop(trained.forward(Tensor::from_inner(x.clone()).require_grad(), None));
            }),
            ("a training step (its backward last)", &|| {
                let x = Tensor::from_inner(x.clone()).require_grad();
                drop(trained.forward(x, None).0.sum().backward());
            }),
        ];
        for (what, call) in calls {
            assert_eq!(share_of(call), 4, "{what}, alone");
            let running = (CallThreads::start(), CallThreads::start());
            assert_eq!(share_of(call), 1, "{what}, beside two running calls");
            drop(running);
            assert_eq!(share_of(call), 4, "{what}, alone again");
        }
    }
}
