//! What the portable kernel's GRU training forward keeps for its backward (the layer
//! part and the flattening are shared: `portable/residuals.rs`).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::kernels::portable::residuals::CellResidualTensors;
use crate::op::spec::RnnSpec;
use crate::op::tensor::primitive;

/// One GRU (layer, direction), every tensor indexed by time step `[T, B, ·]`.
pub(super) struct GruCellResiduals<B: Backend> {
    /// The gate activations `r`, `z`, `n`, `[T, B, 3H]`.
    pub gates: Tensor<B, 3>,
    /// `W_hn·h + b_hn`, the hidden side of the new gate before the reset gate, `[T, B, H]`.
    pub hidden_n: Tensor<B, 3>,
    /// Hidden state entering each step, `[T, B, H]`.
    pub hidden_prev: Tensor<B, 3>,
}

impl<B: Backend> CellResidualTensors<B> for GruCellResiduals<B> {
    fn into_tensors(self, out: &mut Vec<FloatTensor<B>>) {
        out.push(primitive(self.gates));
        out.push(primitive(self.hidden_n));
        out.push(primitive(self.hidden_prev));
    }

    fn from_tensors(_spec: &RnnSpec, next: &mut dyn FnMut() -> Tensor<B, 3>) -> Self {
        Self {
            gates: next(),
            hidden_n: next(),
            hidden_prev: next(),
        }
    }
}
