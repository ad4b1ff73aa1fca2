//! The op as a function on Burn tensors.

use burn::tensor::Tensor;

use crate::op::contract::RnnBackend;
use crate::op::shapes::debug_check_non_empty;
use crate::op::spec::RnnSpec;
use crate::op::tensor::{primitive, tensor};
use crate::op::zero_state;

/// Runs a whole recurrent layer stack: an LSTM stack with `B`'s kernel (a GRU stack when `spec.arch.cell`
/// is [`CellKind::Gru`](crate::CellKind::Gru)).
///
/// `input` is sequence-major `[T, B, I]`, `weights` the flat parameter buffer
/// ([`RnnArch::direction_layout`](crate::RnnArch::direction_layout)), `h0`
/// `[layers * dirs, B, H_out]`, `c0` `[layers * dirs, B, H]`. Returns `(y, h_n, c_n)`.
/// A GRU has no cell state: its `c0` is ignored and its `c_n` is `None`; an LSTM called
/// with `c0 = None` starts from a zero cell state, and its `c_n` is always `Some`.
/// On an autodiff backend the result is differentiable with respect to every input.
/// Shapes are not checked here: [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm) does.
pub fn rnn<B: RnnBackend>(
    input: Tensor<B, 3>,
    weights: Tensor<B, 1>,
    h0: Tensor<B, 3>,
    c0: Option<Tensor<B, 3>>,
    spec: &RnnSpec,
) -> (Tensor<B, 3>, Tensor<B, 3>, Option<Tensor<B, 3>>) {
    let arch = &spec.arch;
    let c0 = match (arch.cell_state_size(), c0) {
        (0, _) => None,
        (_, Some(c0)) => Some(c0),
        (size, None) => Some(zero_state::zeros(
            [arch.cells(), spec.batch, size],
            (&h0.device(), h0.dtype()),
        )),
    };
    let [input, weights, h0] = [primitive(input), primitive(weights), primitive(h0)];
    let c0 = c0.map(primitive);
    debug_check_non_empty::<B>(
        "lstm inputs",
        [&input, &weights, &h0].into_iter().chain(&c0),
    );
    let out = B::rnn_forward(input, weights, h0, c0, spec);
    debug_check_non_empty::<B>(
        "lstm results",
        [&out.y, &out.h_n].into_iter().chain(&out.c_n),
    );
    (tensor(out.y), tensor(out.h_n), out.c_n.map(tensor))
}
