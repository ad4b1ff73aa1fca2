//! Indexing of time steps and of cells, shared by the forward and the backward.

use burn::tensor::{Tensor, backend::Backend};

/// Entry `index` of the leading axis of a `[N, B, ·]` tensor (a time step of a sequence,
/// or a cell of a state), as `[B, ·]`.
pub(crate) fn index_leading<B: Backend>(tensor: &Tensor<B, 3>, index: usize) -> Tensor<B, 2> {
    let [_, rows, cols] = tensor.dims();
    tensor.clone().narrow(0, index, 1).reshape([rows, cols])
}

/// Time index of the `step`-th step a direction processes.
pub(super) fn time_index(step: usize, seq_len: usize, reverse: bool) -> usize {
    if reverse { seq_len - 1 - step } else { step }
}

/// `[T, B, ·]` from per-step `[B, ·]` tensors indexed by time.
pub(crate) fn stack_steps<B: Backend>(steps: Vec<Option<Tensor<B, 2>>>) -> Tensor<B, 3> {
    Tensor::stack(
        steps
            .into_iter()
            .map(|s| s.expect("every time step was computed"))
            .collect(),
        0,
    )
}
