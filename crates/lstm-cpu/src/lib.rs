#![warn(missing_docs)]
//! A fused LSTM and GRU on plain slices: forward (inference and training) and
//! backpropagation through time, for whole layer stacks (multi-layer, bidirectional,
//! right-padded lengths, projection (LSTM), inter-layer dropout masks), in `f32` (fast)
//! and `f64` (tests). The cell is [`RnnArch::cell`]; the crate keeps its name (both
//! cells share every part of it but the gate math, and renaming would break users).
//!
//! No framework dependency: `burn-lstm` dispatches its NdArray backend here. Parameters
//! are PyTorch's and cuDNN's canonical flat layout ([`RnnArch::direction_layout`]).
//! No values are cached between calls: weights are packed at the start of every call, so
//! a changed parameter can never meet a stale packed copy; a caller that serves one set
//! of weights for many calls may pack them once itself ([`PackedWeights`],
//! [`forward_packed`]) and owns that copy. Only the memory of large scratch buffers is
//! kept for the next call ([`cache_limit_bytes`]), handed out zeroed.
//!
//! [`dense`] offers the kernel's GEMM and vectorised `exp` to the layers around a
//! recurrent stack (a language model's decoder and softmax loss). [`int8`] holds the
//! building blocks of quantized inference: per-row int8 weights, dynamically quantized
//! activations, their exact integer product (scalar, and AVX-512 VNNI where the CPU has
//! it).
//!
//! ```
//! use lstm_cpu::{CellKind, RnnArch, RnnCall, forward};
//!
//! let arch = RnnArch { cell: CellKind::Lstm, input_size: 3, hidden_size: 4, proj_size: 0,
//!                       num_layers: 1, bidirectional: false, bias: true };
//! let (t, b) = (5, 2);
//! let weights = vec![0.1f32; arch.weight_count()];
//! let input = vec![1.0f32; t * b * 3];
//! let zeros = vec![0.0f32; b * 4];
//! let call = RnnCall { arch: &arch, seq_len: t, batch: b, lengths: None, input: &input,
//!                       input_strides: None, weights: &weights, h0: &zeros, c0: &zeros, dropout_masks: &[],
//!                       threads: 1 };
//! let out = forward(&call).unwrap();
//! assert_eq!(out.y.len(), t * b * 4);
//! ```

mod arch;
mod backward;
mod buffers;
mod cache;
mod call;
mod cell;
mod cell_weights;
mod compiled;
pub mod dense;
mod deprecated;
mod entry;
mod forward;
mod gemm;
pub mod int8;
mod isa_runs;
mod packed;
#[cfg(feature = "testing")]
pub mod peak;
mod placement;
mod pool;
mod real;
mod simd;
mod tape;
mod team;
#[cfg(any(test, feature = "testing"))]
mod test_runs;
#[cfg(test)]
mod test_values;
mod vector;

pub use arch::{CellKind, DirectionLayout, RnnArch};
pub use buffers::{
    cache_limit_bytes, cached_buffer_bytes, recycle_vec, release_cached_buffers, vec_with_capacity,
};
pub use call::{CallError, InputStrides, OutputGrads, RnnCall, RnnGradients, RnnOutputs};
#[allow(deprecated)]
pub use deprecated::{LstmArch, LstmCall, LstmGradients, LstmOutputs};
pub use entry::{backward, forward, forward_packed, forward_train};
pub use isa_runs::instruction_set;
pub use packed::PackedWeights;
pub use real::Real;
pub use tape::Tape;
pub use team::run_parts;
#[cfg(any(test, feature = "testing"))]
pub use test_runs::{
    lower_instruction_sets, reran_in_child, rerun_test_on_lower_instruction_sets,
    rerun_test_with_env,
};
