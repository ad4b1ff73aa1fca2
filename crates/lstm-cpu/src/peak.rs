//! What this machine's cores and this crate's GEMM reach, for the benchmarks' "what
//! limits it" (`benchmarks/lstm-bench`, binary `cpu-peak`): the multiply-add peak of
//! the vector units (no memory traffic at all), the GEMM on a given shape with the
//! team split of the recurrent step, and how far apart a team's two threads are (a
//! cache line's round trip between them). Not part of the kernel; no numbers are kept.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::buffers::Buffer;
use crate::gemm::{PackedB, gemm, panel};
use crate::team::{Shared, run_team, run_team_placed, split_aligned};

/// `f32` GFLOP/s of fused multiply-adds on `threads` threads, each running independent
/// chains on registers only, for about `seconds`: the ceiling no kernel can pass. On
/// the instruction set the kernel uses (`LSTM_CPU_ISA` caps it as for the kernel).
pub fn fma_gflops(threads: usize, seconds: f64) -> f64 {
    // Calibrated so one batch takes a few milliseconds on a current core.
    const ROUNDS_PER_BATCH: u64 = 1 << 20;
    let threads = threads.max(1);
    let start = Instant::now();
    let flops_per_thread = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let mut flops = 0f64;
                    let mut sink = 0f32;
                    while start.elapsed().as_secs_f64() < seconds {
                        let (result, batch_flops) = fma_rounds(ROUNDS_PER_BATCH);
                        sink += result;
                        flops += batch_flops;
                    }
                    core::hint::black_box(sink);
                    flops
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("an FMA thread"))
            .collect::<Vec<_>>()
    });
    flops_per_thread.iter().sum::<f64>() / start.elapsed().as_secs_f64() / 1e9
}

/// Runs `rounds` rounds of independent multiply-add chains of full vectors (as many as
/// the registers hold); returns a value depending on all of them (so nothing is
/// optimised away) and the flops done.
fn fma_rounds(rounds: u64) -> (f32, f64) {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::Isa;
        use crate::vector::{F32x8, F32x16};
        // SAFETY: the CPU reported the instruction set `isa()` names.
        unsafe {
            match crate::simd::isa() {
                Isa::Avx512 => return avx512_rounds::<F32x16>(rounds),
                Isa::Avx2 => return avx2_rounds::<F32x8>(rounds),
                Isa::Baseline => {}
            }
        }
    }
    scalar_rounds(rounds)
}

/// AVX-512 has 32 vector registers: 24 chains and the two constants stay in them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn avx512_rounds<S: crate::vector::Vector<E = f32>>(rounds: u64) -> (f32, f64) {
    // SAFETY: compiled for AVX-512, and the caller runs it only where the CPU has it.
    unsafe { vector_rounds::<S, 24>(rounds) }
}

/// AVX2 has 16: 12 chains and the two constants. (16 chains, the probe's old count,
/// spilled to the stack and measured the store port instead: half the peak.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_rounds<S: crate::vector::Vector<E = f32>>(rounds: u64) -> (f32, f64) {
    // SAFETY: compiled for AVX2+FMA, and the caller runs it only where the CPU has them.
    unsafe { vector_rounds::<S, 12>(rounds) }
}

/// `CHAINS` independent chains, all in registers: two FMA pipes with four or five cycles
/// of latency (Intel, AMD) need at least eight to ten in flight.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn vector_rounds<S: crate::vector::Vector<E = f32>, const CHAINS: usize>(
    rounds: u64,
) -> (f32, f64) {
    // SAFETY: inlined into `avx512_rounds` / `avx2_rounds`, which run on `S`'s
    // instruction set; register operations only, no memory.
    unsafe {
        let (a, b) = (S::splat(0.999_999), S::splat(1e-7));
        let mut chains = [S::splat(1.0); CHAINS];
        for _ in 0..rounds {
            for chain in chains.iter_mut() {
                *chain = S::fma(*chain, a, b);
            }
        }
        let mut sum = S::zero();
        for chain in chains {
            sum = S::add(sum, chain);
        }
        let mut lanes = [0f32; 16];
        S::store(lanes.as_mut_ptr(), sum);
        let flops = rounds as f64 * CHAINS as f64 * S::LANES as f64 * 2.0;
        (lanes[..S::LANES].iter().sum(), flops)
    }
}

fn scalar_rounds(rounds: u64) -> (f32, f64) {
    let mut chains = [1f32; 16];
    for _ in 0..rounds {
        for chain in chains.iter_mut() {
            *chain = chain.mul_add(0.999_999, 1e-7);
        }
    }
    (chains.iter().sum(), rounds as f64 * 16.0 * 2.0)
}

/// `f32` GFLOP/s of this crate's GEMM on `C[m × n] += A[m × k] · B[k × n]`, with the
/// columns split over `threads` team members the way the recurrent step splits them:
/// each member packs its own columns of `B` once, then every round multiplies the whole
/// `A` by them and the members meet at the team's barrier (as the steps do). `rounds`
/// rounds after one warm-up; the time includes the barriers, not the packing.
pub fn gemm_gflops(m: usize, n: usize, k: usize, threads: usize, rounds: usize) -> f64 {
    let value = |i: usize| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5;
    let a: Vec<f32> = (0..m * k).map(value).collect();
    let b: Vec<f32> = (0..k * n).map(|i| value(i + 1)).collect();
    let mut c = Buffer::<f32>::zeroed(m * n);
    // SAFETY: each member writes only its own columns of C; nobody reads C.
    let c_s = unsafe { Shared::new(&mut c[..]) };
    let columns = split_aligned(n, threads.max(1), panel::<f32>());
    let seconds = std::sync::Mutex::new(0f64);
    run_team(columns.len(), |member| {
        let own = columns[member.id].clone();
        let packed = PackedB::pack(k, core::slice::from_ref(&own), &b, n, 1);
        let round = || {
            // SAFETY: this member writes only its own columns of C.
            unsafe { gemm(m, a.as_ptr(), k, 1, &packed, c_s.at(0), n) };
            member.sync();
        };
        round();
        let start = Instant::now();
        for _ in 0..rounds {
            round();
        }
        if member.id == 0 {
            *seconds.lock().expect("no member panics") = start.elapsed().as_secs_f64();
        }
    });
    core::hint::black_box(&c[..]);
    let seconds = seconds.into_inner().expect("no member panicked");
    2.0 * (m * n * k * rounds) as f64 / seconds / 1e9
}

/// Nanoseconds for one cache line to go from one member of a two-thread team to the
/// other and back (the caller and a pool worker, placed as inference places them),
/// averaged over about `seconds` of round trips; `None` where fewer than two CPUs are
/// available (two threads on one CPU would take a time slice a trip).
///
/// Why it is measured: on the shared 2-vCPU machine of docs/benchmarks.md, slow spells
/// were this latency going from ~100 to ~400 ns as the host moved the vCPUs apart, and
/// our 2-thread inference lost 20-25 % in them against ONNX Runtime's 1-4 %. Recorded
/// beside each sweep's timings, it tells a spell from a regression.
pub fn team_round_trip_ns(seconds: f64) -> Option<f64> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    // Member 0 writes odd values and waits for the next even one; member 1 answers each
    // odd value with the next even one. DONE ends member 1's loop.
    const DONE: u64 = u64::MAX;
    // Checking the clock every trip would time the clock as well.
    const TRIPS_PER_CHECK: u64 = 256;
    let line = CacheLine(AtomicU64::new(0));
    let result = std::sync::Mutex::new(None);
    run_team_placed(2, true, |member| {
        let flag = &line.0;
        if member.id == 0 {
            let start = Instant::now();
            let mut trips = 0u64;
            let elapsed = loop {
                flag.store(2 * trips + 1, Ordering::Release);
                while flag.load(Ordering::Acquire) != 2 * trips + 2 {
                    core::hint::spin_loop();
                }
                trips += 1;
                if trips.is_multiple_of(TRIPS_PER_CHECK) {
                    let elapsed = start.elapsed().as_secs_f64();
                    if elapsed >= seconds {
                        break elapsed;
                    }
                }
            };
            let ns = elapsed * 1e9 / trips as f64;
            flag.store(DONE, Ordering::Release);
            *result.lock().expect("no member panics") = Some(ns);
        } else {
            let mut trips = 0u64;
            loop {
                let seen = loop {
                    let seen = flag.load(Ordering::Acquire);
                    if seen == 2 * trips + 1 || seen == DONE {
                        break seen;
                    }
                    core::hint::spin_loop();
                };
                if seen == DONE {
                    break;
                }
                flag.store(2 * trips + 2, Ordering::Release);
                trips += 1;
            }
        }
    });
    result.into_inner().expect("no member panicked")
}

/// A value alone on its cache line (no neighbour's writes travel with it).
#[repr(align(128))]
struct CacheLine<T>(T);

#[cfg(test)]
mod tests {
    use super::*;

    /// The two members finish (the protocol neither hangs nor stops early) and report a
    /// time a trip that a cache line can take: more than nothing, less than the time
    /// slices a busy test machine hands out.
    #[test]
    fn team_round_trip_is_measured_where_two_cpus_are() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        match team_round_trip_ns(0.01) {
            Some(ns) => {
                assert!(cpus >= 2, "measured on {cpus} CPU");
                assert!(ns > 1.0 && ns < 1e8, "{ns} ns a round trip");
            }
            None => assert_eq!(cpus, 1, "no measurement on {cpus} CPUs"),
        }
    }
}
