//! What the portable kernel's GRU training forward keeps for its backward, and its
//! flattening into [`LstmSaved::residuals`](crate::LstmSaved) (a fixed order, so the
//! backward can rebuild it from the spec alone).

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use crate::op::spec::LstmSpec;
use crate::op::tensor::{primitive, tensor};

/// One (layer, direction), every tensor indexed by time step `[T, B, ·]`.
pub(super) struct GruCellResiduals<B: Backend> {
    /// The gate activations `r`, `z`, `n`, `[T, B, 3H]`.
    pub gates: Tensor<B, 3>,
    /// `W_hn·h + b_hn`, the hidden side of the new gate before the reset gate, `[T, B, H]`.
    pub hidden_n: Tensor<B, 3>,
    /// Hidden state entering each step, `[T, B, H]`.
    pub hidden_prev: Tensor<B, 3>,
}

/// One layer.
pub(super) struct GruLayerResiduals<B: Backend> {
    /// The layer's input (after inter-layer dropout), `[T, B, in]`.
    pub input: Tensor<B, 3>,
    /// The scaled dropout mask that produced `input` from the layer below's output.
    pub dropout_mask: Option<Tensor<B, 3>>,
    /// One entry per direction.
    pub cells: Vec<GruCellResiduals<B>>,
}

pub(super) fn flatten<B: Backend>(layers: Vec<GruLayerResiduals<B>>) -> Vec<FloatTensor<B>> {
    let mut out = Vec::new();
    for layer in layers {
        out.push(primitive(layer.input));
        out.extend(layer.dropout_mask.map(primitive));
        for cell in layer.cells {
            out.push(primitive(cell.gates));
            out.push(primitive(cell.hidden_n));
            out.push(primitive(cell.hidden_prev));
        }
    }
    out
}

pub(super) fn unflatten<B: Backend>(
    spec: &LstmSpec,
    flat: Vec<FloatTensor<B>>,
) -> Vec<GruLayerResiduals<B>> {
    let arch = &spec.arch;
    let mut it = flat.into_iter();
    let mut next = || tensor::<B, 3>(it.next().expect("portable residuals are complete"));
    (0..arch.num_layers)
        .map(|layer| {
            let input = next();
            let dropout_mask = (layer > 0 && spec.dropout_active()).then(&mut next);
            let cells = (0..arch.dirs())
                .map(|_| GruCellResiduals {
                    gates: next(),
                    hidden_n: next(),
                    hidden_prev: next(),
                })
                .collect();
            GruLayerResiduals {
                input,
                dropout_mask,
                cells,
            }
        })
        .collect()
}
