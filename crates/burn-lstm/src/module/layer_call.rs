//! What both modules' `try_forward` do around the op, whatever the cell: the checks of
//! the input and the lengths (before the state is looked at), and the op call in the
//! module's layout (batch-first or sequence-major; the op is sequence-major).

use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::validate;
use crate::op::call::rnn;
use crate::op::contract::RnnBackend;
use crate::op::spec::{RnnArch, RnnSpec};

/// `[batch, seq_len]` of `input` once it and `lengths` are checked against `arch`.
pub(crate) fn checked_shape<B: Backend>(
    input: &Tensor<B, 3>,
    arch: &RnnArch,
    batch_first: bool,
    lengths: Option<&[usize]>,
) -> Result<[usize; 2], RnnError> {
    let [batch, seq_len] = validate::input(input, arch, batch_first)?;
    if let Some(lengths) = lengths {
        validate::lengths(lengths, batch, seq_len)?;
    }
    Ok([batch, seq_len])
}

/// `(y, h_n, c_n)` of the op on `input` in the module's layout, `y` in that layout too.
pub(crate) fn run_in_layout<B: RnnBackend>(
    input: Tensor<B, 3>,
    batch_first: bool,
    weights: Tensor<B, 1>,
    (h0, c0): (Tensor<B, 3>, Option<Tensor<B, 3>>),
    spec: &RnnSpec,
) -> (Tensor<B, 3>, Tensor<B, 3>, Option<Tensor<B, 3>>) {
    let swap = |t: Tensor<B, 3>| if batch_first { t.swap_dims(0, 1) } else { t };
    let (y, h_n, c_n) = rnn(swap(input), weights, h0, c0, spec);
    (swap(y), h_n, c_n)
}
