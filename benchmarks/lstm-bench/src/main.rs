//! Times LSTM implementations on the shapes of `shared/peers/lstm_peers.py`, with the same
//! flags, and prints one JSON line with the same fields, so ratios against PyTorch, ONNX
//! Runtime and Keras come from one run.
//!
//! ```text
//! cargo run --release -p lstm-bench -- --impl portable --mode infer [--cell lstm|gru] [--backend flex|ndarray] \
//!     --batch 16 --seq 50 --input 256 --hidden 256 [--layers L] [--bidirectional] [--dropout P] [--threads N] [--iters K] [--sync-every S] [--gap-us U]
//! cargo run --release -p lstm-bench -- --impl list
//! cargo run --release -p lstm-bench -- --help
//! ```

mod args;
#[cfg(feature = "cuda")]
mod cudnn_raw;
mod impls;
mod model;
mod profile;
mod stdout_line;
mod timed;
mod timings;

use std::time::{Duration, Instant};

use args::{Args, Mode};
use timings::Timings;

use clap::Parser;

/// Floating-point operations of one call (same formula as the peer script: 2 per
/// multiply-add of the gate products, 4 gates for an LSTM, 3 for a GRU).
fn flops(a: &Args) -> f64 {
    let per_gate_pair = 2.0 * a.cell.kind().gates() as f64;
    let dirs = if a.bidirectional { 2 } else { 1 };
    let mut input = a.input;
    let mut total = 0.0;
    for _ in 0..a.layers {
        total += per_gate_pair * (a.seq * a.batch * a.hidden * (input + a.hidden) * dirs) as f64;
        input = a.hidden * dirs;
    }
    total * if a.mode == Mode::Train { 3.0 } else { 1.0 }
}

/// The timings of `iters` timed calls after `warmup` untimed ones, each timed call after
/// `gap` of sleep, per step of the `steps` each call runs; the timed calls are profiled
/// when `LSTM_BENCH_PROFILE` asks.
fn timed_calls(
    mut call: impl FnMut(),
    warmup: usize,
    iters: usize,
    steps: usize,
    gap: Duration,
) -> Result<Timings, String> {
    for _ in 0..warmup {
        call();
    }
    let profile = profile::Profile::start()?;
    let times: Vec<f64> = (0..iters)
        .map(|_| {
            if !gap.is_zero() {
                std::thread::sleep(gap);
            }
            let start = Instant::now();
            call();
            start.elapsed().as_secs_f64() / steps as f64
        })
        .collect();
    profile.finish()?;
    Ok(Timings::of(&times))
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in MiB; `null` elsewhere.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kib / 1024.0 * 10.0).round() / 10.0)
}

fn main() {
    if args::wants_list() {
        for name in impls::NAMES {
            print_line(name);
        }
        return;
    }
    let args = Args::parse();
    // Both CPU thread pools read these once, on first use.
    // SAFETY: set before any other thread exists.
    unsafe {
        std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
        std::env::set_var("MATMUL_NUM_THREADS", args.threads.to_string());
    }
    let mut call = match impls::build(&args) {
        Ok(call) => call,
        Err(message) => {
            eprintln!("lstm-bench: {message}");
            std::process::exit(2);
        }
    };
    let gap = Duration::from_micros(args.gap_us);
    let timings = timed_calls(
        &mut *call,
        args.warmup_calls(),
        args.iters,
        args.sync_every,
        gap,
    )
    .unwrap_or_else(|message| {
        eprintln!("lstm-bench: {message}");
        std::process::exit(2);
    });
    let seconds = timings.median;
    let line = serde_json::json!({
        "impl": args.implementation,
        "cell": args.cell.kind().name(),
        "device": args.device.name(),
        "backend": impls::backend_name(&args),
        "mode": args.mode.name(),
        "dtype": args.dtype.name(),
        "batch": args.batch,
        "seq": args.seq,
        "input": args.input,
        "hidden": args.hidden,
        "layers": args.layers,
        "bidirectional": args.bidirectional,
        "proj_size": args.proj_size,
        "lengths": args.lengths_name(),
        "dropout": args.dropout,
        "threads": args.threads,
        "gap_us": args.gap_us,
        "sync_every": args.sync_every,
        "seconds": seconds,
        "first_tenth_seconds": timings.first_tenth,
        "last_tenth_seconds": timings.last_tenth,
        "seq_steps_per_s": (args.batch * args.seq) as f64 / seconds,
        "gflops": flops(&args) / seconds / 1e9,
        "peak_rss_mib": peak_rss_mib(),
    });
    print_line(line);
}

/// Prints `line` on stdout. A reader that has gone (`lstm-bench ... | head -c 0`) ends the
/// run with a one-line error and exit code 1 (the result did not arrive).
fn print_line(line: impl std::fmt::Display) {
    if let Err(error) = stdout_line::print_line(line) {
        eprintln!("lstm-bench: cannot write the result to stdout: {error}");
        std::process::exit(1);
    }
}
