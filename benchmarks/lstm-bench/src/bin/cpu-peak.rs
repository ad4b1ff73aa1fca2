//! What limits the fused CPU kernel on this machine: the vector units' multiply-add peak
//! (registers only, no memory) on 1 and on `--threads` threads, a cache line's round trip
//! between the two threads of a team (`"ns"`), and `lstm-cpu`'s GEMM on a large square
//! product and on the recurrent step of each benchmark shape, with the step's team
//! split. One JSON line per measurement.
//!
//! ```sh
//! cargo run --release -p lstm-bench --bin cpu-peak -- --threads 2
//! ```

#[path = "../stdout_line.rs"]
mod stdout_line;

use clap::Parser;
use serde_json::json;

/// The machine's multiply-add peak and lstm-cpu's GEMM on the benchmark shapes.
#[derive(Parser, Debug)]
#[command(name = "cpu-peak")]
struct Args {
    /// Threads of the second peak measurement and of the GEMMs (default: every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// GEMM shapes `m,n,k` to time instead of the benchmark shapes (repeatable): a
    /// product `[m × k] · [k × n]` as the recurrent step runs it.
    #[arg(long = "gemm", value_name = "M,N,K", value_parser = parse_shape)]
    gemm: Vec<(usize, usize, usize)>,
}

/// `m,n,k` as three positive numbers.
fn parse_shape(text: &str) -> Result<(usize, usize, usize), String> {
    let dims: Vec<usize> = text
        .split(',')
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("expected m,n,k as three numbers, got {text:?}: {e}"))?;
    let [m, n, k] = dims[..] else {
        return Err(format!("expected m,n,k as three numbers, got {text:?}"));
    };
    if m == 0 || n == 0 || k == 0 {
        return Err(format!(
            "expected m,n,k as three positive numbers, got {text:?}"
        ));
    }
    // A, B and C hold m·k + k·n + m·n values; at most 2^32 of them keeps m·n·k (the
    // multiply-adds a round) within 2^48.
    let values = m
        .checked_mul(k)
        .zip(k.checked_mul(n))
        .zip(m.checked_mul(n))
        .and_then(|((a, b), c)| a.checked_add(b)?.checked_add(c));
    match values {
        Some(values) if values <= 1 << 32 => Ok((m, n, k)),
        _ => Err(format!(
            "{text:?}: A, B and C would hold more than 2^32 values"
        )),
    }
}

fn main() {
    let args = Args::parse();
    let threads = args.threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    if !args.gemm.is_empty() {
        for &(m, n, k) in &args.gemm {
            print_gemm(m, n, k, threads, "given");
        }
        return;
    }
    for t in [1, threads] {
        let gflops = lstm_cpu::peak::fma_gflops(t, 1.0);
        stdout_line::print_line_or_end(json!({"what": "fma-peak", "threads": t, "gflops": gflops}));
    }
    // How far apart a team's two threads are: ~100 ns in the shared machine's quiet
    // periods, ~400 in its slow spells (docs/dev/benchmarking.md).
    if threads >= 2
        && let Some(ns) = lstm_cpu::peak::team_round_trip_ns(0.2)
    {
        stdout_line::print_line_or_end(json!({"what": "team-round-trip", "threads": 2, "ns": ns}));
    }
    // (m, n, k, what): a large square product, then the recurrent step
    // [B, H] x [H, 4H] of the benchmark shapes (B, T, I=H) 16,50,256; 64,100,512;
    // 20,35,1500, and the issue's reference shape 64x512 by 512x2048.
    let shapes = [
        (2048, 2048, 2048, "square"),
        (16, 1024, 256, "step 16x50x256"),
        (64, 2048, 512, "step 64x100x512"),
        (20, 6000, 1500, "step 20x35x1500"),
    ];
    for (m, n, k, what) in shapes {
        print_gemm(m, n, k, threads, what);
    }
}

/// Times the GEMM `[m × k] · [k × n]` on `threads` threads for about 20 GFLOP and prints
/// its line.
fn print_gemm(m: usize, n: usize, k: usize, threads: usize, what: &str) {
    let flops_per_round = 2.0 * (m * n * k) as f64;
    let rounds = ((20e9 / flops_per_round) as usize).clamp(3, 20_000);
    let gflops = lstm_cpu::peak::gemm_gflops(m, n, k, threads, rounds);
    stdout_line::print_line_or_end(
        json!({"what": format!("gemm {what}"), "m": m, "n": n, "k": k,
                "threads": threads, "rounds": rounds, "gflops": gflops}),
    );
}
