//! Argument checks of the module's forward: each failure names the argument, the
//! expected and the actual value.

use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::state::LstmState;
use crate::op::spec::RnnArch;

/// Checks the input's feature size and non-empty dims; returns `[batch, seq_len]`.
pub(crate) fn input<B: Backend>(
    input: &Tensor<B, 3>,
    arch: &RnnArch,
    batch_first: bool,
) -> Result<[usize; 2], RnnError> {
    let dims = input.dims();
    let layout = if batch_first {
        "[batch, seq, input_size]"
    } else {
        "[seq, batch, input_size]"
    };
    let [batch, seq_len] = if batch_first {
        [dims[0], dims[1]]
    } else {
        [dims[1], dims[0]]
    };
    if dims[2] != arch.input_size || batch == 0 || seq_len == 0 {
        return Err(RnnError::invalid(
            "input",
            format!(
                "shape {layout} with input_size = {} and batch, seq >= 1",
                arch.input_size
            ),
            format!("{dims:?}"),
        ));
    }
    Ok([batch, seq_len])
}

/// Checks one length per row, each in `0..=seq_len` (0: an empty row).
pub(crate) fn lengths(lengths: &[usize], batch: usize, seq_len: usize) -> Result<(), RnnError> {
    if lengths.len() != batch {
        return Err(RnnError::invalid(
            "lengths",
            format!("one length per batch row ({batch})"),
            format!("{} lengths", lengths.len()),
        ));
    }
    if let Some((row, &len)) = lengths.iter().enumerate().find(|&(_, &len)| len > seq_len) {
        return Err(RnnError::invalid(
            format!("lengths[{row}]"),
            format!("a length in 0..={seq_len} (the sequence length)"),
            len.to_string(),
        ));
    }
    Ok(())
}

/// Checks the initial state's shapes.
pub(crate) fn state<B: Backend>(
    state: &LstmState<B>,
    arch: &RnnArch,
    batch: usize,
) -> Result<(), RnnError> {
    state_part(
        "state.hidden",
        state.hidden.dims(),
        [arch.cells(), batch, arch.output_size()],
        "H_out",
    )?;
    state_part(
        "state.cell",
        state.cell.dims(),
        [arch.cells(), batch, arch.hidden_size],
        "H",
    )
}

/// Checks one part of an initial state: `expected` is `[layers * dirs, batch, size]`,
/// with `size` named `size_name` in the error.
pub(crate) fn state_part(
    name: &str,
    actual: [usize; 3],
    expected: [usize; 3],
    size_name: &str,
) -> Result<(), RnnError> {
    if actual == expected {
        Ok(())
    } else {
        Err(RnnError::invalid(
            name,
            format!("shape {expected:?} ([layers * dirs, batch, {size_name}])"),
            format!("{actual:?}"),
        ))
    }
}

/// Counts non-finite values (reads the tensor back to the host).
pub(crate) fn finite<B: Backend>(name: &str, tensor: &Tensor<B, 3>) -> Result<(), RnnError> {
    let bad = tensor.clone().is_nan().int().sum() + tensor.clone().is_inf().int().sum();
    let count: i64 = bad.into_scalar().elem();
    if count > 0 {
        return Err(RnnError::NonFinite {
            argument: name.to_string(),
            count: count as usize,
        });
    }
    Ok(())
}

use burn::tensor::ElementConversion;
