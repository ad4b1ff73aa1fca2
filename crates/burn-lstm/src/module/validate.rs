//! Argument checks of the module's forward, and of the fields of a module and its config:
//! each failure names the argument, the expected and the actual value.

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
                "shape {layout} with input_size = {} and batch, seq >= 1 (a batch of \
                 empty rows: one step, every length 0)",
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

/// The checks the LSTM's and the GRU's configs share: sizes of at least 1 and a dropout
/// probability in `[0, 1)`, naming the first field out of range.
fn validate_stack(
    input_size: usize,
    hidden_size: usize,
    num_layers: usize,
    dropout: f64,
) -> Result<(), RnnError> {
    let positive = |name: &str, value: usize| {
        if value == 0 {
            Err(RnnError::invalid(name, "a value of at least 1", "0"))
        } else {
            Ok(())
        }
    };
    positive("input_size", input_size)?;
    positive("hidden_size", hidden_size)?;
    positive("num_layers", num_layers)?;
    if !(0.0..1.0).contains(&dropout) {
        return Err(RnnError::invalid(
            "dropout",
            "a probability in [0, 1)",
            dropout.to_string(),
        ));
    }
    Ok(())
}

/// Every field of a module or config of architecture `arch`, naming the first out of
/// range: sizes of at least 1, dropout in [0, 1), a projection smaller than the hidden
/// size, a parameter count that fits.
pub(crate) fn validate_arch(arch: &RnnArch, dropout: f64) -> Result<(), RnnError> {
    validate_stack(arch.input_size, arch.hidden_size, arch.num_layers, dropout)?;
    if arch.proj_size > 0 && arch.proj_size >= arch.hidden_size {
        return Err(RnnError::invalid(
            "proj_size",
            format!("0 (none) or less than hidden_size ({})", arch.hidden_size),
            arch.proj_size.to_string(),
        ));
    }
    validate_size(arch)
}

/// Checks that `arch`'s parameter count fits (`RnnArch::MAX_WEIGHT_COUNT`: every size
/// computed from it, the flat buffer's bytes in f64 among them, fits in an address),
/// naming the sizes.
fn validate_size(arch: &RnnArch) -> Result<(), RnnError> {
    match arch.checked_weight_count() {
        Some(_) => Ok(()),
        None => Err(RnnError::invalid(
            "hidden_size, input_size and num_layers",
            format!(
                "sizes of at most {} parameters in all",
                RnnArch::MAX_WEIGHT_COUNT
            ),
            format!(
                "hidden_size {}, input_size {}, num_layers {}, whose parameter count overflows",
                arch.hidden_size, arch.input_size, arch.num_layers
            ),
        )),
    }
}
