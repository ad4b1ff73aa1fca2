//! How long a blocking call to a CubeCL 0.10 runner thread takes on this machine against
//! how long the runner was idle before it: the wait `burn_lstm::set_keep_awake` is about
//! (`crates/burn-lstm/src/kernels/cubecl/keep_awake.rs`). An idle runner spins, yields,
//! then sleeps in steps of 150 µs; a call that finds it asleep waits for the step's end.
//!
//! Two paths, each on runner threads of its own (a device id no backend uses): `device`,
//! the caller to one runner (the op's address read from the caller's thread on the plain
//! backend), and `fusion-then-device`, the caller to an upstream runner which calls a
//! downstream one (the fused backend: Burn's fusion thread running the op, reaching
//! CubeCL's device thread). The caller is busy for the idle time (as host work is), then
//! times the call. `--poke-every-us N` also runs a thread that flushes both runners'
//! queues every N µs, as the keep-awake setting does. One JSON line per idle time and
//! path.
//!
//! ```sh
//! cargo run --release -p lstm-bench --bin runner-wake -- --poke-every-us 50
//! ```

#[path = "../stdout_line.rs"]
mod stdout_line;

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use cubecl_common::device::{DeviceId, DeviceService, DeviceServiceStage, ServerUtilitiesHandle};
use cubecl_common::device_handle::DeviceHandle;
use serde_json::json;

/// Round trips to a CubeCL runner thread against its idle time.
#[derive(Parser, Debug)]
#[command(name = "runner-wake")]
struct Args {
    /// Calls timed per idle time and path.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(10..))]
    calls: u32,
    /// Flush both runners' queues every N µs from a thread of their own.
    #[arg(long)]
    poke_every_us: Option<u64>,
}

/// A runner's (empty) state; `UPSTREAM` picks the stage, so the two get a runner each.
struct Counter<const UPSTREAM: bool>(u64);

impl<const UPSTREAM: bool> DeviceService for Counter<UPSTREAM> {
    fn init(_: DeviceId) -> Self {
        Self(0)
    }

    fn utilities(&self) -> ServerUtilitiesHandle {
        Arc::new(())
    }

    fn stage() -> DeviceServiceStage {
        if UPSTREAM {
            DeviceServiceStage::Upstream
        } else {
            DeviceServiceStage::Downstream
        }
    }
}

/// Keeps the CPU busy for `time` (host work between two calls).
fn busy(time: Duration) {
    let start = Instant::now();
    while start.elapsed() < time {
        std::hint::spin_loop();
    }
}

/// Median and 90th percentile, µs, of `calls` timings of `call`, each after `idle`.
fn timed(calls: u32, idle: Duration, call: impl Fn()) -> (f64, f64) {
    let mut us: Vec<f64> = (0..calls)
        .map(|_| {
            busy(idle);
            let start = Instant::now();
            call();
            start.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

fn main() {
    let args = Args::parse();
    let id = DeviceId::new(0xB57, 0);
    let device: DeviceHandle<Counter<false>> = DeviceHandle::new(id);
    let fusion: DeviceHandle<Counter<true>> = DeviceHandle::new(id);
    if let Some(every) = args.poke_every_us {
        let (device, fusion) = (device.clone(), fusion.clone());
        std::thread::spawn(move || {
            loop {
                device.flush_queue();
                fusion.flush_queue();
                std::thread::sleep(Duration::from_micros(every));
            }
        });
    }
    let to_device = || {
        device.submit_blocking(|s| s.0 += 1).expect("the runner");
    };
    let through_fusion = || {
        let device = device.clone();
        fusion
            .submit_blocking(move |_| device.submit_blocking(|s| s.0 += 1).expect("the runner"))
            .expect("the runner");
    };
    for idle_us in [0u64, 50, 100, 200, 300, 500, 1000, 2000, 5000] {
        let idle = Duration::from_micros(idle_us);
        for (path, (median, p90)) in [
            ("device", timed(args.calls, idle, to_device)),
            (
                "fusion-then-device",
                timed(args.calls, idle, through_fusion),
            ),
        ] {
            stdout_line::print_line_or_end(json!({
                "what": "runner-wake", "path": path, "idle_us": idle_us,
                "poke_every_us": args.poke_every_us, "calls": args.calls,
                "median_us": median, "p90_us": p90,
            }));
        }
    }
}
