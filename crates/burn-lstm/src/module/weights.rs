//! The parameters of one layer stack: per layer a forward and an optional reverse
//! direction, each in PyTorch's and cuDNN's canonical layout.

use burn::module::{Module, Param};
use burn::tensor::{Tensor, backend::Backend};

/// Parameters of one direction of one layer, gate order (i, f, g, o) along the `4H` rows.
#[derive(Module, Debug)]
pub struct LstmDirectionWeights<B: Backend> {
    /// Input-to-gates weights, `[4H, in]`.
    pub weight_ih: Param<Tensor<B, 2>>,
    /// Hidden-to-gates weights, `[4H, H_out]`.
    pub weight_hh: Param<Tensor<B, 2>>,
    /// Input-side gate bias, `[4H]` (with `bias`).
    pub bias_ih: Option<Param<Tensor<B, 1>>>,
    /// Hidden-side gate bias, `[4H]` (with `bias`).
    pub bias_hh: Option<Param<Tensor<B, 1>>>,
    /// Projection of the hidden state, `[H_out, H]` (with `proj_size > 0`).
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
