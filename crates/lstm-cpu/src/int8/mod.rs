//! int8 building blocks for quantized inference: a weight matrix quantized once,
//! symmetric per output row (channel) with an f32 scale each ([`QuantizedMatrix`]),
//! activations quantized per row at run time ([`QuantizedActivations`]), and their
//! product accumulated in 32-bit integers ([`matmul_int8`]), as PyTorch's and ONNX
//! Runtime's dynamic quantization compute it.
//!
//! Activations are stored as `u8` with a zero point of 128 (`q + 128`, `q` in
//! `-127..=127`), the operand order of the `u8 × s8` multiply-add instructions
//! (`vpdpbusd`, `vpmaddubsw`); the product subtracts `128 · Σ_k w[n, k]`, kept with the
//! weights. AVX2's `vpmaddubsw` adds two `u8 × s8` products into a saturating `i16`:
//! weights quantized to [`QuantLevels::Reduced`] (±63) keep every such pair within
//! `i16` (2 · 255 · 63 = 32,130), as ONNX Runtime's `reduce_range` does on CPUs without
//! VNNI.
//!
//! The integer sums are exact on every path: the scalar reference (`dot.rs`), the
//! AVX-512 VNNI kernel (`vnni.rs`, `vpdpbusd`), the AVX-VNNI kernel (its 256-bit form)
//! and, for weights of [`QuantLevels::Reduced`], the AVX2 kernel (`vpmaddubsw`; both
//! 256-bit kernels in `avx256.rs`), each reading the weights in its panels
//! (`panels.rs`); the fastest the CPU runs is chosen when the weights are quantized
//! ([`kernel_name`] says which; `LSTM_CPU_ISA` caps it: `avx2` keeps AVX-VNNI, a 256-bit
//! instruction set).
//!
//! ```
//! use lstm_cpu::int8::{QuantLevels, QuantizedActivations, QuantizedMatrix, matmul_int8};
//!
//! // y = x · Wᵀ, W of 2 output rows × 3 inputs.
//! let w = [1.0f32, -0.5, 0.25, 0.0, 2.0, -2.0];
//! let w = QuantizedMatrix::quantize(&w, 2, 3, QuantLevels::Full).unwrap();
//! let x = QuantizedActivations::quantize(&[1.0f32, 1.0, 1.0], 1, 3).unwrap();
//! let mut y = [0.0f32; 2];
//! matmul_int8(&x, &w, None, &mut y).unwrap();
//! assert!((y[0] - 0.75).abs() < 0.02 && y[1].abs() < 0.02);
//! ```

#[cfg(target_arch = "x86_64")]
mod avx256;
mod cell;
mod direction;
mod dot;
mod forward;
#[cfg(test)]
mod forward_tests;
mod matmul;
mod panels;
mod quantize;
#[cfg(test)]
mod tests;
mod tile;
#[cfg(target_arch = "x86_64")]
mod vnni;

pub use dot::{fastest_levels, kernel_name};
pub use forward::QuantizedRnn;
pub use matmul::matmul_int8;
pub use quantize::{QuantizedActivations, QuantizedMatrix};

/// The integer range weights are quantized to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantLevels {
    /// `-127..=127`: for `vpdpbusd` (AVX-512 VNNI, AVX-VNNI) and the scalar kernel.
    Full,
    /// `-63..=63`: for AVX2's `vpmaddubsw`, whose pair sums then never saturate.
    Reduced,
}

impl QuantLevels {
    /// The largest magnitude of a quantized weight.
    pub fn max(self) -> i32 {
        match self {
            Self::Full => 127,
            Self::Reduced => 63,
        }
    }
}

/// The most inputs (`cols`) a product may have: `Σ_k a[k] · w[k]` over `u8` activations
/// and `i8` weights stays within `i32` (255 · 127 · 66,000 < 2^31).
pub const MAX_DEPTH: usize = 66_000;
