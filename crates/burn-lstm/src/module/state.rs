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
