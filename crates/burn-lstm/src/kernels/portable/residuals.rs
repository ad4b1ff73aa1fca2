//! What the portable kernel's training forward keeps for its backward, and its
//! flattening into [`RnnSaved::residuals`](crate::RnnSaved) (a fixed order, so the
//! backward can rebuild it from the spec alone). The layer part is shared by both
//! cells; each cell's own residuals say how they flatten ([`CellResidualTensors`]).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::op::spec::RnnSpec;
use crate::op::tensor::{primitive, tensor};

/// A cell's residuals as a fixed sequence of `[T, B, ·]` tensors.
pub(crate) trait CellResidualTensors<B: Backend>: Sized {
    /// Appends the tensors, in the order [`Self::from_tensors`] reads them.
    fn into_tensors(self, out: &mut Vec<FloatTensor<B>>);
    /// Reads them back (`next` yields them in order); `spec` says which are present.
    fn from_tensors(spec: &RnnSpec, next: &mut dyn FnMut() -> Tensor<B, 3>) -> Self;
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
