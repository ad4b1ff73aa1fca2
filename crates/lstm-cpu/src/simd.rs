//! Run-time choice of the instruction set, read once per process.

use std::sync::OnceLock;

/// The vector instruction sets the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Isa {
    /// AVX-512F (with FMA): 512-bit vectors, 32 registers.
    Avx512,
    /// AVX2 with FMA: 256-bit vectors.
    Avx2,
    /// Whatever the compilation target guarantees (SSE2 on x86-64).
    Baseline,
}

impl Isa {
    /// Bytes per vector register (the baseline keeps AVX2's panel shape).
    pub fn vector_bytes(self) -> usize {
        match self {
            Isa::Avx512 => 64,
            Isa::Avx2 | Isa::Baseline => 32,
        }
    }
}

/// The best instruction set this CPU runs. `LSTM_CPU_ISA=avx2` or `=baseline` caps it,
/// to compare or to test the other code paths on any machine.
pub(crate) fn isa() -> Isa {
    static DETECTED: OnceLock<Isa> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        let cap = std::env::var("LSTM_CPU_ISA").unwrap_or_default();
        let detected = detect();
        match (cap.as_str(), detected) {
            ("baseline", _) => Isa::Baseline,
            ("avx2", Isa::Avx512) => Isa::Avx2,
            _ => detected,
        }
    })
}

fn detect() -> Isa {
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        let avx2 = std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma");
        if avx2 && std::is_x86_feature_detected!("avx512f") {
            return Isa::Avx512;
        }
        if avx2 {
            return Isa::Avx2;
        }
    }
    Isa::Baseline
}

/// Defines `fn $name` whose body is compiled three times (AVX-512, AVX2+FMA, baseline)
/// and runs the best one this CPU has: the same source, three code paths. Functions the
/// body calls must be `#[inline(always)]` to be compiled with the features too. In each
/// copy the constant `FMA` says whether it has fused multiply-adds (for
/// [`Real::sigmoid_on`](crate::Real::sigmoid_on) and the like).
macro_rules! dispatch {
    ($(#[$meta:meta])* $vis:vis fn $name:ident<$t:ident: Real>($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        $vis fn $name<$t: Real>($($arg: $ty),*) {
            #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
            {
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512<$t: Real>($($arg: $ty),*) {
                    #[allow(dead_code)]
                    const FMA: bool = true;
                    $body
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2<$t: Real>($($arg: $ty),*) {
                    #[allow(dead_code)]
                    const FMA: bool = true;
                    $body
                }
                match crate::simd::isa() {
                    // SAFETY: the CPU reported these features.
                    crate::simd::Isa::Avx512 => return unsafe { avx512::<$t>($($arg),*) },
                    // SAFETY: the CPU reported these features.
                    crate::simd::Isa::Avx2 => return unsafe { avx2::<$t>($($arg),*) },
                    crate::simd::Isa::Baseline => {}
                }
            }
            {
                // The compilation target's own features.
                #[allow(dead_code)]
                const FMA: bool = cfg!(target_feature = "fma");
                $body
            }
        }
    };
}
pub(crate) use dispatch;
