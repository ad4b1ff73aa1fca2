//! The parameters of one layer stack: per layer a forward and an optional reverse
//! direction, each in PyTorch's and cuDNN's canonical layout. The LSTM and the GRU
//! share these types (a GRU has three gate blocks and no `weight_hr`).

use burn::module::{Module, Param};
use burn::tensor::{Tensor, backend::Backend};

use crate::op::contract::LstmBackend;
use crate::op::tensor::{primitive, tensor};

/// Parameters of one direction of one layer. Gate blocks along the rows: (i, f, g, o)
/// for an LSTM (`4H` rows), (r, z, n) for a GRU (`3H` rows).
#[derive(Module, Debug)]
pub struct LstmDirectionWeights<B: Backend> {
    /// Input-to-gates weights, `[4H, in]` (GRU: `[3H, in]`).
    pub weight_ih: Param<Tensor<B, 2>>,
    /// Hidden-to-gates weights, `[4H, H_out]` (GRU: `[3H, H]`).
    pub weight_hh: Param<Tensor<B, 2>>,
    /// Input-side gate bias, `[4H]` or `[3H]` (with `bias`).
    pub bias_ih: Option<Param<Tensor<B, 1>>>,
    /// Hidden-side gate bias, `[4H]` or `[3H]` (with `bias`).
    pub bias_hh: Option<Param<Tensor<B, 1>>>,
    /// Projection of the hidden state, `[H_out, H]` (LSTM with `proj_size > 0`; never
    /// for a GRU).
    pub weight_hr: Option<Param<Tensor<B, 2>>>,
}

/// One layer: its forward direction and, when bidirectional, its reverse direction.
#[derive(Module, Debug)]
pub struct LstmLayer<B: Backend> {
    /// Runs from the first step to the last.
    pub forward: LstmDirectionWeights<B>,
    /// Runs from each row's last valid step to the first.
    pub reverse: Option<LstmDirectionWeights<B>>,
}

/// Every (layer, direction) of `layers`, in the canonical order `layer * dirs + direction`.
pub(crate) fn directions<B: Backend>(
    layers: &[LstmLayer<B>],
) -> impl Iterator<Item = &LstmDirectionWeights<B>> {
    layers
        .iter()
        .flat_map(|layer| core::iter::once(&layer.forward).chain(layer.reverse.as_ref()))
}

/// All parameters of `layers` in one flat tensor, in the op's canonical layout, built
/// by [`LstmBackend::lstm_flat_weights`]. Differentiable: gradients reach every `Param`.
pub(crate) fn flat_parameters<B: LstmBackend>(layers: &[LstmLayer<B>]) -> Tensor<B, 1> {
    let mut parts = Vec::new();
    for cell in directions(layers) {
        parts.push(primitive(cell.weight_ih.val()));
        parts.push(primitive(cell.weight_hh.val()));
        parts.extend(cell.bias_ih.as_ref().map(|b| primitive(b.val())));
        parts.extend(cell.bias_hh.as_ref().map(|b| primitive(b.val())));
        parts.extend(cell.weight_hr.as_ref().map(|w| primitive(w.val())));
    }
    tensor(B::lstm_flat_weights(parts))
}
