//! The recurrent state a call starts from and ends with.

use burn::tensor::{Tensor, backend::Backend};

/// Hidden and cell state of every layer and direction (PyTorch's `(h, c)`), index
/// `layer * dirs + direction`.
#[derive(Debug, Clone)]
pub struct LstmState<B: Backend> {
    /// `[layers * dirs, batch, H_out]`.
    pub hidden: Tensor<B, 3>,
    /// `[layers * dirs, batch, H]`.
    pub cell: Tensor<B, 3>,
}

impl<B: Backend> LstmState<B> {
    /// A state from its hidden and cell parts.
    pub fn new(hidden: Tensor<B, 3>, cell: Tensor<B, 3>) -> Self {
        Self { hidden, cell }
    }
}

/// Hidden state of every layer and direction of a GRU (PyTorch's `h`), index
/// `layer * dirs + direction`. A GRU has no cell state.
#[derive(Debug, Clone)]
pub struct GruState<B: Backend> {
    /// `[layers * dirs, batch, H]`.
    pub hidden: Tensor<B, 3>,
}

impl<B: Backend> GruState<B> {
    /// A state from its hidden part.
    pub fn new(hidden: Tensor<B, 3>) -> Self {
        Self { hidden }
    }
}
