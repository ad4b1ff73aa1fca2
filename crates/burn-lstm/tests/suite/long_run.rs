//! Long runs on the CPU: many training calls (forward and backward) and inference calls
//! of one module, through NdArray and Flex, keep the resident memory flat after a
//! warm-up and both caches of the fused CPU kernel within their limits.
//!
//! The test runs the test binary again in a child process that runs only it: the resident
//! memory is then this test's alone, and the cache limits are in the child's environment
//! before its first call. CI runs few calls (seconds) with small cache limits, so that
//! the limits bind. The full run (10,000 training and 100,000 inference calls per
//! backend, the default limits) is
//!
//! ```text
//! LSTM_LONG_RUN=full cargo test --release -p burn-lstm --test suite long_run -- --nocapture
//! ```
//!
//! with its result in docs/robustness.md. Resident memory is `VmRSS` of
//! `/proc/self/status` (Linux; elsewhere the memory check is skipped).
//!
//! The batch has an empty row and padded rows (every masking path runs), and the
//! inference phase changes to a newly initialised module every 500 calls, keeping the
//! last eight alive, so the weight cache keeps meeting new parameters and its limits
//! must evict.

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnBackend, cpu_cache_usage};

/// Resident memory of this process in bytes (`None` off Linux).
fn rss_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Set in the child process that runs the long run (see the module's documentation).
const CHILD: &str = "BURN_LSTM_LONG_RUN_CHILD";

const LENGTHS: [usize; 6] = [16, 9, 0, 16, 1, 12];

fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(16, 32)
        .with_num_layers(2)
        .with_bidirectional(true)
}

/// Checks both caches against their limits.
fn caches_within_limits(label: &str, calls: usize) {
    let usage = cpu_cache_usage();
    assert!(
        usage.buffer_bytes <= usage.buffer_limit_bytes,
        "{label} after {calls} calls: {usage:?}"
    );
    assert!(
        usage.weight_entries <= usage.weight_max_entries
            && usage.weight_bytes <= usage.weight_limit_bytes,
        "{label} after {calls} calls: {usage:?}"
    );
}

/// Largest growth of the resident memory over its value after the warm-up (the first
/// tenth of the calls), sampled every `every` calls while `call(i)` runs `n` times.
fn growth(label: &str, n: usize, every: usize, mut call: impl FnMut(usize)) -> Option<isize> {
    let warm_up = (n / 10).max(1);
    let mut baseline = None;
    let mut worst = 0isize;
    let start = std::time::Instant::now();
    for i in 0..n {
        call(i);
        if i + 1 == warm_up {
            baseline = rss_bytes();
        }
        if (i + 1) % every == 0 || i + 1 == n {
            caches_within_limits(label, i + 1);
            if let (Some(base), Some(now)) = (baseline, rss_bytes()) {
                worst = worst.max(now as isize - base as isize);
            }
        }
    }
    let usage = cpu_cache_usage();
    println!(
        "{label}: {n} calls in {:.1} s, resident memory after warm-up {:.1} MiB, largest growth \
         {:.2} MiB; caches: buffers {:.1} of {:.0} MiB, weights {} entries {:.2} of {:.0} MiB",
        start.elapsed().as_secs_f64(),
        baseline.unwrap_or(0) as f64 / 1048576.0,
        worst as f64 / 1048576.0,
        usage.buffer_bytes as f64 / 1048576.0,
        usage.buffer_limit_bytes as f64 / 1048576.0,
        usage.weight_entries,
        usage.weight_bytes as f64 / 1048576.0,
        usage.weight_limit_bytes as f64 / 1048576.0,
    );
    baseline.map(|_| worst)
}

fn run<B: AutodiffBackend + RnnBackend>(
    label: &str,
    device: &B::Device,
    training: usize,
    inference: usize,
    bound: isize,
) where
    B::InnerBackend: RnnBackend,
{
    let (batch, seq) = (LENGTHS.len(), 16);
    let model: CudnnCompatibleLstm<B> = config().init(device);
    let x = Tensor::<B, 3>::random([batch, seq, 16], Distribution::Normal(0.0, 1.0), device);
    let grown = growth(&format!("{label} training"), training, 100, |_| {
        let x = x.clone().require_grad();
        let (y, state) = model
            .try_forward(x.clone(), None, Some(&LENGTHS))
            .expect("valid call");
        let grads = (y.sum() + state.hidden.sum() + state.cell.sum()).backward();
        assert!(x.grad(&grads).is_some());
    });
    if let Some(grown) = grown {
        assert!(
            grown <= bound,
            "{label} training: resident memory grew {grown} bytes"
        );
    }

    let x = x.inner();
    let mut model: CudnnCompatibleLstm<B::InnerBackend> = config().init(device);
    // The last modules stay alive, so that the weight cache's limits evict their
    // entries (it drops an entry at once when its module is gone).
    let mut earlier = std::collections::VecDeque::new();
    let grown = growth(&format!("{label} inference"), inference, 1000, |i| {
        if i % 500 == 499 {
            earlier.push_back(std::mem::replace(&mut model, config().init(device)));
            if earlier.len() > 8 {
                earlier.pop_front();
            }
        }
        let (y, _) = model
            .try_forward(x.clone(), None, Some(&LENGTHS))
            .expect("valid call");
        assert_eq!(y.dims(), [batch, seq, 64]);
    });
    if let Some(grown) = grown {
        assert!(
            grown <= bound,
            "{label} inference: resident memory grew {grown} bytes"
        );
    }
}

#[test]
fn long_runs_keep_memory_flat_and_caches_within_limits() {
    let full = std::env::var("LSTM_LONG_RUN").is_ok_and(|v| v == "full");
    let (training, inference) = if full {
        (10_000, 100_000)
    } else {
        (300, 3_000)
    };
    // Small limits, so that both caches reach them within CI's few calls (read once by a
    // process, before its first call); the full run keeps the defaults.
    let mut env = vec![(CHILD, "1")];
    if !full {
        env.extend([
            ("LSTM_CPU_BUFFER_CACHE_MIB", "1"),
            ("BURN_LSTM_WEIGHT_CACHE_MIB", "1"),
        ]);
    }
    if lstm_cpu::reran_in_child(
        module_path!(),
        "long_runs_keep_memory_flat_and_caches_within_limits",
        &env,
    ) {
        return;
    }
    // Growth allowed after the warm-up: the allocator's arenas settle over the first
    // calls (each thread of the kernel's pool has its own); a leak of one buffer per
    // call (>= 6 KiB here) would pass it within 3,000 calls.
    let bound = 16 << 20;
    run::<Autodiff<NdArray<f32>>>("ndarray", &Default::default(), training, inference, bound);
    run::<Autodiff<Flex>>("flex", &Default::default(), training, inference, bound);
}
