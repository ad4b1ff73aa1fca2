//! Run-time CPU feature detection, read once per process.

use std::sync::OnceLock;

/// Whether this CPU runs AVX2 and FMA instructions (x86-64 only; `false` elsewhere).
/// `LSTM_CPU_NO_SIMD=1` forces the baseline code, to test it on any machine.
pub(crate) fn avx2_fma() -> bool {
    static DETECTED: OnceLock<bool> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        if std::env::var_os("LSTM_CPU_NO_SIMD").is_some_and(|v| v == "1") {
            return false;
        }
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        {
            std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
        }
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        {
            false
        }
    })
}
