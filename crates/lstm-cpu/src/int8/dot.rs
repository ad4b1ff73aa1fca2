//! The raw integer sums of a quantized product, `Σ_k a[k] · w[n, k]` of one row of `u8`
//! activations against every row of `i8` weights, by the kernel this CPU runs: chosen
//! once per process, every kernel exact (the sums stay within `i32` up to
//! [`MAX_DEPTH`](crate::int8::MAX_DEPTH) inputs).

use std::sync::OnceLock;

use crate::simd::{Isa, isa};

/// The kernels of the raw sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DotKernel {
    /// One product at a time, in `i32`: the reference.
    Scalar,
    /// AVX-512 VNNI: `vpdpbusd`, four `u8 × i8` products into each of 16 `i32` lanes.
    Avx512Vnni,
}

impl DotKernel {
    /// The kernels this CPU can run, the scalar one first (each is checked against it).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        let mut kernels = vec![Self::Scalar];
        if vnni_detected() {
            kernels.push(Self::Avx512Vnni);
        }
        kernels
    }

    /// The name [`kernel_name`] reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx512Vnni => "avx512-vnni",
        }
    }

    /// `out[n] = Σ_k a_row[k] · w[n · depth + k]` for each of `out.len()` weight rows of
    /// `depth = a_row.len()` values.
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
            Self::Avx512Vnni => vnni(a_row, w, out),
        }
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

#[cfg(not(target_arch = "x86_64"))]
fn vnni(_: &[u8], _: &[i8], _: &mut [i32]) {
    unreachable!("AVX-512 VNNI is never chosen off x86_64")
}

/// Whether this CPU runs AVX-512 VNNI with the byte loads it needs, and the instruction
/// sets this process runs include AVX-512 (`LSTM_CPU_ISA` caps them).
fn vnni_detected() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        isa() == Isa::Avx512
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (isa(), Isa::Baseline);
        false
    }
}

/// The fastest kernel this CPU runs, chosen once.
pub(crate) fn dot_kernel() -> DotKernel {
    static KERNEL: OnceLock<DotKernel> = OnceLock::new();
    *KERNEL.get_or_init(|| {
        if vnni_detected() {
            DotKernel::Avx512Vnni
        } else {
            DotKernel::Scalar
        }
    })
}

/// The int8 product's kernel in this process: `avx512-vnni` or `scalar`.
pub fn kernel_name() -> &'static str {
    dot_kernel().name()
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
