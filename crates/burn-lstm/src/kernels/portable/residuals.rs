//! What the portable kernel's training forward keeps for its backward, and its
//! flattening into [`LstmSaved::residuals`](crate::LstmSaved) (a fixed order, so the
//! backward can rebuild it from the spec alone).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::op::spec::LstmSpec;
use crate::op::tensor::{primitive, tensor};

/// One (layer, direction), every tensor indexed by time step `[T, B, ·]`.
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

/// One layer.
pub(crate) struct LayerResiduals<B: Backend> {
    /// The layer's input (after inter-layer dropout), `[T, B, in]`.
    pub input: Tensor<B, 3>,
    /// The scaled dropout mask that produced `input` from the layer below's output.
    pub dropout_mask: Option<Tensor<B, 3>>,
    /// One entry per direction.
    pub cells: Vec<CellResiduals<B>>,
}

pub(crate) fn flatten<B: Backend>(layers: Vec<LayerResiduals<B>>) -> Vec<FloatTensor<B>> {
    let mut out = Vec::new();
    for layer in layers {
        out.push(primitive(layer.input));
        out.extend(layer.dropout_mask.map(primitive));
        for cell in layer.cells {
            out.push(primitive(cell.gate_tanh));
            out.push(primitive(cell.cell));
            out.push(primitive(cell.cell_prev));
            out.push(primitive(cell.hidden_prev));
            out.extend(cell.unprojected.map(primitive));
        }
    }
    out
}

pub(crate) fn unflatten<B: Backend>(
    spec: &LstmSpec,
    flat: Vec<FloatTensor<B>>,
) -> Vec<LayerResiduals<B>> {
    let arch = &spec.arch;
    let mut it = flat.into_iter();
    let mut next = || tensor::<B, 3>(it.next().expect("portable residuals are complete"));
    (0..arch.num_layers)
        .map(|layer| {
            let input = next();
            let dropout_mask = (layer > 0 && spec.dropout_active()).then(&mut next);
            let cells = (0..arch.dirs())
                .map(|_| CellResiduals {
                    gate_tanh: next(),
                    cell: next(),
                    cell_prev: next(),
                    hidden_prev: next(),
                    unprojected: (arch.proj_size > 0).then(&mut next),
                })
                .collect();
            LayerResiduals {
                input,
                dropout_mask,
                cells,
            }
        })
        .collect()
}
