//! The op as a function on Burn tensors.

use burn::tensor::Tensor;

use crate::op::contract::LstmBackend;
use crate::op::spec::LstmSpec;
use crate::op::tensor::{primitive, tensor};

/// Runs a whole LSTM layer stack with `B`'s kernel (a GRU stack when `spec.arch.cell`
/// is [`CellKind::Gru`](crate::CellKind::Gru)).
///
/// `input` is sequence-major `[T, B, I]`, `weights` the flat parameter buffer
/// ([`LstmArch::direction_layout`](crate::LstmArch::direction_layout)), `h0`
/// `[layers * dirs, B, H_out]`, `c0` `[layers * dirs, B, H]` (a GRU's is empty,
/// `[layers * dirs, B, 0]`, and so is its `c_n`). Returns `(y, h_n, c_n)`.
/// On an autodiff backend the result is differentiable with respect to all four inputs.
/// Shapes are not checked here: [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm) does.
pub fn lstm<B: LstmBackend>(
    input: Tensor<B, 3>,
    weights: Tensor<B, 1>,
    h0: Tensor<B, 3>,
    c0: Tensor<B, 3>,
    spec: &LstmSpec,
) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>) {
    let out = B::lstm_forward(
        primitive(input),
        primitive(weights),
        primitive(h0),
        primitive(c0),
        spec,
    );
    (tensor(out.y), tensor(out.h_n), tensor(out.c_n))
}
