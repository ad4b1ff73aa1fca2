//! What one call of the LSTM op computes: the architecture (fixed by the module's
//! config) and the per-call shape (sequence length, batch, lengths, dropout).
//!
//! The parameters of a whole layer stack travel through the op as **one flat buffer**
//! in the canonical order (see [`RnnArch::direction_layout`]): this keeps the autodiff
//! op at a fixed number of parents, exactly as PyTorch's `flatten_parameters` does.

pub use lstm_cpu::{CellKind, DirectionLayout, RnnArch};
use std::sync::Arc;

use crate::op::choice::RnnKernel;

/// One call of the op: the architecture plus the shape of this batch.
#[derive(Clone, Debug, PartialEq)]
pub struct RnnSpec {
    /// The layer stack.
    pub arch: RnnArch,
    /// Time steps `T` (the padded length when `lengths` is set).
    pub seq_len: usize,
    /// Batch rows `B`.
    pub batch: usize,
    /// Valid steps of each batch row (right-padded rows), or `None` when every row is full.
    pub lengths: Option<Arc<[usize]>>,
    /// Probability of zeroing an element of a layer's output before the next layer.
    pub dropout: f64,
    /// Whether dropout is applied (training); inference never drops.
    pub training: bool,
    /// Seed of the dropout masks; `None` draws from the backend's generator.
    pub dropout_seed: Option<u64>,
    /// The kernel the caller asks for; `None` picks the fastest one the backend can run.
    /// A kernel the backend cannot run falls back, and the kernel-choice API says why.
    pub kernel: Option<RnnKernel>,
}

impl RnnSpec {
    /// The spec of a module's call: training when `device` tracks gradients.
    pub(crate) fn of_module<B: burn::tensor::backend::Backend>(
        arch: RnnArch,
        dropout: f64,
        kernel: Option<RnnKernel>,
        batch: usize,
        seq_len: usize,
        lengths: Option<&[usize]>,
        device: &B::Device,
    ) -> Self {
        Self {
            arch,
            seq_len,
            batch,
            lengths: lengths.map(Arc::from),
            dropout,
            training: B::ad_enabled(device),
            dropout_seed: None,
            kernel,
        }
    }

    /// Whether this call drops anything between layers.
    pub fn dropout_active(&self) -> bool {
        self.training && self.dropout > 0.0 && self.arch.num_layers > 1
    }

    /// Whether some row is shorter than `seq_len` (masking is needed).
    pub fn has_padding(&self) -> bool {
        self.lengths
            .as_ref()
            .is_some_and(|l| l.iter().any(|&len| len < self.seq_len))
    }

    /// Number of elements of the output sequence `[T, B, dirs * H_out]`.
    pub fn output_len(&self) -> usize {
        self.seq_len * self.batch * self.arch.dirs() * self.arch.output_size()
    }

    /// Number of elements of `h_n` (`[layers * dirs, B, H_out]`).
    pub fn h_n_len(&self) -> usize {
        self.arch.cells() * self.batch * self.arch.output_size()
    }

    /// Number of elements of `c_n` (`[layers * dirs, B, H]`; 0 for a GRU, which has no
    /// cell state).
    pub fn c_n_len(&self) -> usize {
        self.arch.cells() * self.batch * self.arch.cell_state_size()
    }
}
