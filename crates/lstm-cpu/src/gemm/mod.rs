//! The GEMM of the kernel: `C += A · B` with `B` packed once into panels of two vector
//! registers' width ([`panel`]) and a register-blocked micro-kernel for up to [`kernel_rows`]
//! rows of `A`.
//!
//! Why our own: the recurrent step multiplies a short `A` (the batch, often 1 to 64
//! rows) by the same `W_hhᵀ` at every step. General GEMM crates re-pack `B` on every
//! call and are tuned for large square products; here `B` is packed once per sequence
//! (see `docs/fused-cpu.md`), `A` is read in place through strides (so transposed
//! operands of the backward need no copy), and a one-row kernel with four independent
//! accumulator banks serves batch 1 as a matrix-vector product.
//!
//! The micro-kernel is plain Rust over fixed-size arrays; it is compiled three times,
//! for AVX-512, for AVX2+FMA and for the baseline target, and the best one the CPU runs
//! is chosen at run time, so the crate runs everywhere.

mod blocking;
mod dispatch;
mod driver;
mod micro;
mod packing;
mod params;
mod plan;
mod portable;
mod row_groups;
#[cfg(test)]
mod tests;
mod threading;
#[cfg(target_arch = "x86_64")]
mod x86;

pub(crate) use blocking::tile_calls;
pub(crate) use driver::{gemm, gemm_bias, gemm_bias_grouped};
pub(crate) use packing::{Packed, PackedB};
pub(crate) use params::{kernel_rows, panel};
pub(crate) use row_groups::RowGroups;
pub(crate) use threading::{Store, par_gemm, par_gemm_into};
