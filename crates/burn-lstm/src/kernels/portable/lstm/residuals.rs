//! What the portable kernel's LSTM training forward keeps for its backward (the layer
//! part and the flattening are shared: `portable/residuals.rs`).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::kernels::portable::residuals::CellResidualTensors;
use crate::op::spec::RnnSpec;
use crate::op::tensor::primitive;

/// One LSTM (layer, direction), every tensor indexed by time step `[T, B, ·]`.
pub(crate) struct CellResiduals<B: Backend> {
    /// `tanh(s ⊙ z)` of the four gates, `[T, B, 4H]`.
    pub gate_tanh: Tensor<B, 3>,
    /// Cell state computed at each step (before padding masks), `[T, B, H]`.
    pub cell: Tensor<B, 3>,
    /// Cell state entering each step, `[T, B, H]`.
    pub cell_prev: Tensor<B, 3>,
    /// Hidden state entering each step, `[T, B, H_out]`.
    pub hidden_prev: Tensor<B, 3>,
    /// `o ⊙ tanh(c)` before the projection, `[T, B, H]` (projection only).
    pub unprojected: Option<Tensor<B, 3>>,
}

impl<B: Backend> CellResidualTensors<B> for CellResiduals<B> {
    fn into_tensors(self, out: &mut Vec<FloatTensor<B>>) {
        out.push(primitive(self.gate_tanh));
        out.push(primitive(self.cell));
        out.push(primitive(self.cell_prev));
        out.push(primitive(self.hidden_prev));
        out.extend(self.unprojected.map(primitive));
    }

    fn from_tensors(spec: &RnnSpec, next: &mut dyn FnMut() -> Tensor<B, 3>) -> Self {
        Self {
            gate_tanh: next(),
            cell: next(),
            cell_prev: next(),
            hidden_prev: next(),
            unprojected: (spec.arch.proj_size > 0).then(next),
        }
    }
}
