//! Which instruction set the kernels run. The choice is read once per process
//! (`LSTM_CPU_ISA` caps it, see `simd.rs`).

use crate::simd::{Isa, isa};

pub(crate) fn name(isa: Isa) -> &'static str {
    match isa {
        Isa::Avx512 => "avx512",
        Isa::Avx2 => "avx2",
        Isa::Baseline => "baseline",
    }
}

/// The instruction set the kernels of this process run: `avx512`, `avx2` or
/// `baseline`.
pub fn instruction_set() -> &'static str {
    name(isa())
}
