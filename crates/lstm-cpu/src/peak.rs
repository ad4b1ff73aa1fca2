//! What this machine's cores and this crate's GEMM reach, for the benchmarks' "what
//! limits it" (`benchmarks/lstm-bench`, binary `cpu-peak`): the multiply-add peak of
//! the vector units (no memory traffic at all), and the GEMM on a given shape with the
//! team split of the recurrent step. Not part of the kernel; no numbers are kept.

use std::time::Instant;

use crate::buffers::Buffer;
use crate::gemm::{PackedB, gemm, panel};
use crate::team::{Shared, run_team, split_aligned};

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
    unsafe { vector_rounds::<S, 24>(rounds) }
}

/// AVX2 has 16: 12 chains and the two constants. (16 chains, the probe's old count,
/// spilled to the stack and measured the store port instead: half the peak.)
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_rounds<S: crate::vector::Vector<E = f32>>(rounds: u64) -> (f32, f64) {
    unsafe { vector_rounds::<S, 12>(rounds) }
}

/// `CHAINS` independent chains, all in registers: two FMA pipes with four or five cycles
/// of latency (Intel, AMD) need at least eight to ten in flight.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn vector_rounds<S: crate::vector::Vector<E = f32>, const CHAINS: usize>(
    rounds: u64,
) -> (f32, f64) {
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
    let c_s = Shared(c.as_mut_ptr());
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
