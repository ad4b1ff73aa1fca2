//! What the portable kernel's training forward keeps for its backward, and its
//! flattening into [`RnnSaved::residuals`](crate::RnnSaved) (a fixed order, so the
//! backward can rebuild it from the spec alone). The layer part is shared by both
//! cells; each cell's own residuals say how they flatten ([`CellResidualTensors`]).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::op::spec::RnnSpec;
use crate::op::tensor::{primitive, tensor};

/// A cell's residuals as a fixed sequence of `[T, B, ·]` tensors.
pub(super) trait CellResidualTensors<B: Backend>: Sized {
    /// Appends the tensors, in the order [`Self::from_tensors`] reads them.
    fn into_tensors(self, out: &mut Vec<FloatTensor<B>>);
    /// Reads them back (`next` yields them in order); `spec` says which are present.
    fn from_tensors(spec: &RnnSpec, next: &mut dyn FnMut() -> Tensor<B, 3>) -> Self;
}

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

/// One layer, with the residuals `C` of each of its directions.
pub(crate) struct LayerResiduals<B: Backend, C> {
    /// The layer's input (after inter-layer dropout), `[T, B, in]`.
    pub input: Tensor<B, 3>,
    /// The scaled dropout mask that produced `input` from the layer below's output.
    pub dropout_mask: Option<Tensor<B, 3>>,
    /// One entry per direction.
    pub cells: Vec<C>,
}

pub(super) fn flatten<B: Backend, C: CellResidualTensors<B>>(
    layers: Vec<LayerResiduals<B, C>>,
) -> Vec<FloatTensor<B>> {
    let mut out = Vec::new();
    for layer in layers {
        out.push(primitive(layer.input));
        out.extend(layer.dropout_mask.map(primitive));
        for cell in layer.cells {
            cell.into_tensors(&mut out);
        }
    }
    out
}

pub(super) fn unflatten<B: Backend, C: CellResidualTensors<B>>(
    spec: &RnnSpec,
    flat: Vec<FloatTensor<B>>,
) -> Vec<LayerResiduals<B, C>> {
    let arch = &spec.arch;
    let mut it = flat.into_iter();
    let mut next = || tensor::<B, 3>(it.next().expect("portable residuals are complete"));
    (0..arch.num_layers)
        .map(|layer| {
            let input = next();
            let dropout_mask = (layer > 0 && spec.dropout_active()).then(&mut next);
            let cells = (0..arch.dirs())
                .map(|_| C::from_tensors(spec, &mut next))
                .collect();
            LayerResiduals {
                input,
                dropout_mask,
                cells,
            }
        })
        .collect()
}
