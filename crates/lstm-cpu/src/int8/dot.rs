//! The raw integer sums of a quantized product, `Σ_k a[k] · w[n, k]` of one row of `u8`
//! activations against every row of `i8` weights, by the kernel this CPU runs for the
//! weights' [`QuantLevels`]: every kernel exact (the sums stay within `i32` up to
//! [`MAX_DEPTH`](crate::int8::MAX_DEPTH) inputs).

use std::sync::OnceLock;

use crate::int8::QuantLevels;
use crate::simd::{Isa, isa};

/// The kernels of the raw sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DotKernel {
    /// One product at a time, in `i32`: the reference.
    Scalar,
    /// AVX2: `vpmaddubsw` adds pairs of `u8 × i8` products into `i16` lanes, `vpmaddwd`
    /// widens them to `i32`. The pair sums saturate past `i16`, so only weights of
    /// [`QuantLevels::Reduced`] run it (2 · 255 · 63 = 32,130).
    Avx2,
    /// AVX-512 VNNI: `vpdpbusd`, four `u8 × i8` products into each of 16 `i32` lanes.
    Avx512Vnni,
}

/// What this CPU runs, read once (`LSTM_CPU_ISA` caps it as it caps the f32 kernels).
#[derive(Clone, Copy)]
struct Detected {
    avx2: bool,
    vnni: bool,
}

fn detected() -> Detected {
    static DETECTED: OnceLock<Detected> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        let isa = isa();
        #[cfg(target_arch = "x86_64")]
        let vnni = isa == Isa::Avx512
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni");
        #[cfg(not(target_arch = "x86_64"))]
        let vnni = false;
        Detected {
            avx2: cfg!(target_arch = "x86_64") && isa != Isa::Baseline,
            vnni,
        }
    })
}

impl DotKernel {
    /// The kernels this CPU can run, the scalar one first (each is checked against it).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        let Detected { avx2, vnni } = detected();
        [
            (Self::Scalar, true),
            (Self::Avx2, avx2),
            (Self::Avx512Vnni, vnni),
        ]
        .into_iter()
        .filter_map(|(kernel, runs)| runs.then_some(kernel))
        .collect()
    }

    /// The name [`kernel_name`] reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx2 => "avx2",
            Self::Avx512Vnni => "avx512-vnni",
        }
    }

    /// The widest weight range whose sums this kernel computes exactly.
    pub(crate) fn levels(self) -> QuantLevels {
        match self {
            Self::Avx2 => QuantLevels::Reduced,
            Self::Scalar | Self::Avx512Vnni => QuantLevels::Full,
        }
    }

    /// `out[n] = Σ_k a_row[k] · w[n · depth + k]` for each of `out.len()` weight rows of
    /// `depth = a_row.len()` values, each in `-m..=m` for `m` of [`Self::levels`].
    ///
    /// # Panics
    /// When `w` holds fewer than `out.len() · a_row.len()` values (callers check the
    /// lengths first and name the argument).
    pub(crate) fn raw_sums(self, a_row: &[u8], w: &[i8], out: &mut [i32]) {
        let depth = a_row.len();
        assert!(
            w.len() >= out.len() * depth,
            "int8 weights shorter than their rows"
        );
        match self {
            Self::Scalar => scalar(a_row, w, out),
            Self::Avx2 => avx2(a_row, w, out),
            Self::Avx512Vnni => vnni(a_row, w, out),
        }
    }
}

/// The fastest kernel this CPU runs exactly for weights of `levels`.
pub(crate) fn dot_kernel(levels: QuantLevels) -> DotKernel {
    let Detected { avx2, vnni } = detected();
    [(DotKernel::Avx512Vnni, vnni), (DotKernel::Avx2, avx2)]
        .into_iter()
        .find(|&(kernel, runs)| runs && kernel.levels().max() >= levels.max())
        .map_or(DotKernel::Scalar, |(kernel, _)| kernel)
}

/// The kernel the int8 product runs in this process for weights quantized to `levels`:
/// `avx512-vnni`, `avx2` (weights of [`QuantLevels::Reduced`] only) or `scalar`.
pub fn kernel_name(levels: QuantLevels) -> &'static str {
    dot_kernel(levels).name()
}

fn scalar(a_row: &[u8], w: &[i8], out: &mut [i32]) {
    let depth = a_row.len();
    for (n, sum) in out.iter_mut().enumerate() {
        *sum = a_row
            .iter()
            .zip(&w[n * depth..][..depth])
            .map(|(&a, &v)| i32::from(a) * i32::from(v))
            .sum();
    }
}

/// [`DotKernel::Avx512Vnni`]'s sums.
#[cfg(target_arch = "x86_64")]
fn vnni(a_row: &[u8], w: &[i8], out: &mut [i32]) {
    // SAFETY: this kernel is only chosen (`dot_kernel`) or listed (`available`) where
    // the CPU reported avx512f, avx512bw and avx512vnni; `raw_sums` checked the length
    // of `w`.
    unsafe { crate::int8::vnni::raw_sums(a_row, w, out) }
}

/// [`DotKernel::Avx2`]'s sums.
#[cfg(target_arch = "x86_64")]
fn avx2(a_row: &[u8], w: &[i8], out: &mut [i32]) {
    // SAFETY: this kernel is only chosen (`dot_kernel`) or listed (`available`) where
    // the CPU reported avx2 (`Isa::Avx2` or wider); `raw_sums` checked the length of `w`.
    unsafe { crate::int8::avx2::raw_sums(a_row, w, out) }
}

#[cfg(not(target_arch = "x86_64"))]
fn vnni(_: &[u8], _: &[i8], _: &mut [i32]) {
    unreachable!("AVX-512 VNNI is never chosen off x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2(_: &[u8], _: &[i8], _: &mut [i32]) {
    unreachable!("AVX2 is never chosen off x86_64")
}
