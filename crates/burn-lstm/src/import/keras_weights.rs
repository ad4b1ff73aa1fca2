//! A Keras file's recurrent layers, found (`keras_legacy`, `keras_native`) and read:
//! each layer's `kernel`, `recurrent_kernel` and `bias` converted into PyTorch's layout
//! with every shape checked.

use crate::error::RnnError;
use crate::import::MAX_UNITS;
use crate::import::cell_name;
use crate::import::gates::{
    KERAS_GRU, KERAS_LSTM, cudnn_input_kernel, cudnn_recurrent_kernel, keras_kernel, reorder,
};
use crate::import::hdf5::H5;
use crate::import::host::{DirectionParams, HostTensor};
use crate::import::keras_file::WeightLayout;
use crate::import::keras_paths::{DirectionPaths, LayerPaths};
use crate::import::keras_settings::setting;
use crate::import::{keras_legacy, keras_native};
use crate::op::spec::CellKind;

/// Every layer of the file that holds recurrent weights, in the file's order.
pub(crate) fn recurrent_layers(
    h5: &H5,
    layout: &WeightLayout,
) -> Result<Vec<LayerPaths>, RnnError> {
    match layout {
        WeightLayout::Legacy { root } => keras_legacy::layers(h5, root),
        WeightLayout::Native => keras_native::layers(h5),
    }
}

/// What the weights of a layer say about it.
#[derive(Debug, Clone)]
pub(crate) struct LoadedLayer {
    pub cell: CellKind,
    pub cudnn: bool,
    pub input_size: usize,
    pub units: usize,
    pub bias: bool,
    pub forward: DirectionParams,
    pub backward: Option<DirectionParams>,
}

/// What the architecture says a layer is, when the file has one.
pub(crate) struct Expected {
    pub cell: CellKind,
    pub cudnn: bool,
    pub units: usize,
    pub bias: bool,
}

/// Reads a layer's weights, checks every shape (against `expected` when the
/// architecture is known, else against each other) and converts them.
pub(crate) fn load(
    h5: &H5,
    source: &str,
    paths: &LayerPaths,
    expected: Option<&Expected>,
) -> Result<LoadedLayer, RnnError> {
    let forward = load_direction(h5, source, &paths.name, &paths.forward, expected)?;
    let backward = paths
        .backward
        .as_ref()
        .map(|b| load_direction(h5, source, &paths.name, b, expected))
        .transpose()?;
    if let Some(b) = &backward {
        same_kind(source, &paths.name, &forward, b)?;
    }
    Ok(LoadedLayer {
        backward: backward.map(|b| b.params),
        cell: forward.cell,
        cudnn: forward.cudnn,
        input_size: forward.input_size,
        units: forward.units,
        bias: forward.bias,
        forward: forward.params,
    })
}

/// Refuses a backward direction that differs from the forward one in kind, size, bias or
/// layout, naming what each holds.
fn same_kind(
    source: &str,
    layer: &str,
    forward: &Direction,
    backward: &Direction,
) -> Result<(), RnnError> {
    let kind = |d: &Direction| (d.cell, d.units, d.input_size, d.bias, d.cudnn);
    if kind(forward) == kind(backward) {
        return Ok(());
    }
    Err(RnnError::invalid(
        setting(source, layer, "backward weights"),
        format!(
            "the forward direction's kind, sizes, bias and layout ({})",
            forward.describe()
        ),
        backward.describe(),
    ))
}

struct Direction {
    cell: CellKind,
    cudnn: bool,
    input_size: usize,
    units: usize,
    bias: bool,
    params: DirectionParams,
}

impl Direction {
    /// Its kind, sizes, bias and layout, for errors: `LSTM of 8 units, input 3, with
    /// bias, Keras layout`.
    fn describe(&self) -> String {
        format!(
            "{} of {} units, input {}, {} bias, {} layout",
            cell_name(self.cell),
            self.units,
            self.input_size,
            if self.bias { "with" } else { "without" },
            if self.cudnn { "cuDNN" } else { "Keras" },
        )
    }
}

fn load_direction(
    h5: &H5,
    source: &str,
    layer: &str,
    paths: &DirectionPaths,
    expected: Option<&Expected>,
) -> Result<Direction, RnnError> {
    let read = |path: &str| -> Result<HostTensor, RnnError> {
        h5.dataset(path)?.ok_or_else(|| RnnError::CheckpointTensor {
            source_name: h5.source().to_string(),
            problem: "missing",
            name: format!("/{path}"),
            hint: Some(format!("a weight of Keras layer '{layer}'")),
        })
    };
    let shape_error =
        |role: &str, path: &str, expected: Vec<usize>, actual: &[usize]| RnnError::ParameterShape {
            name: format!("{source}: Keras layer '{layer}' {role} (/{path})"),
            expected,
            actual: actual.to_vec(),
        };
    let recurrent = read(&paths.recurrent_kernel)?;
    let kernel = read(&paths.kernel)?;
    let bias = paths.bias.as_deref().map(read).transpose()?;
    if let Some(e) = expected
        && e.bias != bias.is_some()
    {
        return Err(RnnError::CheckpointTensor {
            source_name: h5.source().to_string(),
            problem: if e.bias { "missing" } else { "unexpected" },
            name: format!("bias of Keras layer '{layer}'"),
            hint: Some(format!("the layer's use_bias is {}", e.bias)),
        });
    }
    // The recurrent kernel gives the units and, without an architecture, the cell.
    let (h, cell) = match (expected, recurrent.shape.as_slice()) {
        (Some(e), _) => (e.units, e.cell),
        // Units bounded first: no product below overflows, whatever extent the file claims.
        (None, &[rows, cols]) if (1..=MAX_UNITS).contains(&rows) && cols == 4 * rows => {
            (rows, CellKind::Lstm)
        }
        (None, &[rows, cols]) if (1..=MAX_UNITS).contains(&rows) && cols == 3 * rows => {
            (rows, CellKind::Gru)
        }
        (None, actual) => {
            let rows = actual.first().copied().unwrap_or(0);
            return Err(shape_error(
                "recurrent_kernel",
                &paths.recurrent_kernel,
                vec![rows, rows.saturating_mul(4)],
                actual,
            ));
        }
    };
    let gates = match cell {
        CellKind::Lstm => 4,
        CellKind::Gru => 3,
    };
    if recurrent.shape != [h, gates * h] {
        return Err(shape_error(
            "recurrent_kernel",
            &paths.recurrent_kernel,
            vec![h, gates * h],
            &recurrent.shape,
        ));
    }
    let input_size = match kernel.shape.as_slice() {
        &[rows, cols] if cols == gates * h && rows > 0 => rows,
        actual => {
            return Err(shape_error(
                "kernel",
                &paths.kernel,
                vec![actual.first().copied().unwrap_or(1).max(1), gates * h],
                actual,
            ));
        }
    };
    // The bias tells a cuDNN layer (two halves) from a plain one.
    let expected_cudnn = expected.map(|e| e.cudnn);
    let (cudnn, bias_ih, bias_hh) = match (&bias, cell) {
        (None, _) => (expected_cudnn.unwrap_or(false), None, None),
        (Some(b), CellKind::Lstm) => {
            let plain = b.shape == [4 * h];
            let cudnn = b.shape == [8 * h];
            match (plain, cudnn, expected_cudnn) {
                (true, _, None | Some(false)) => (
                    false,
                    Some(reorder(&b.values, &KERAS_LSTM)),
                    Some(vec![0.0; 4 * h]),
                ),
                (_, true, None | Some(true)) => (
                    true,
                    Some(reorder(&b.values[..4 * h], &KERAS_LSTM)),
                    Some(reorder(&b.values[4 * h..], &KERAS_LSTM)),
                ),
                _ => {
                    let want = if expected_cudnn == Some(true) {
                        8 * h
                    } else {
                        4 * h
                    };
                    return Err(shape_error(
                        "bias",
                        paths.bias.as_deref().unwrap_or(""),
                        vec![want],
                        &b.shape,
                    ));
                }
            }
        }
        (Some(b), CellKind::Gru) => {
            let plain = b.shape == [2, 3 * h];
            let cudnn = b.shape == [6 * h];
            match (plain, cudnn, expected_cudnn) {
                (true, _, None | Some(false)) | (_, true, None | Some(true)) => (
                    cudnn && !plain,
                    Some(reorder(&b.values[..3 * h], &KERAS_GRU)),
                    Some(reorder(&b.values[3 * h..], &KERAS_GRU)),
                ),
                _ if b.shape == [3 * h] => {
                    return Err(RnnError::invalid(
                        setting(source, layer, "reset_after"),
                        "true (a bias of shape [2, 3*units]; cuDNN's and PyTorch's GRU apply \
                         the reset gate after the recurrent product)",
                        format!("false (a bias of shape [{}])", 3 * h),
                    ));
                }
                _ => {
                    let want = if expected_cudnn == Some(true) {
                        vec![6 * h]
                    } else {
                        vec![2, 3 * h]
                    };
                    return Err(shape_error(
                        "bias",
                        paths.bias.as_deref().unwrap_or(""),
                        want,
                        &b.shape,
                    ));
                }
            }
        }
    };
    let order: &[usize] = match cell {
        CellKind::Lstm => &KERAS_LSTM,
        CellKind::Gru => &KERAS_GRU,
    };
    let (weight_ih, weight_hh) = if cudnn {
        (
            cudnn_input_kernel(&kernel, order),
            cudnn_recurrent_kernel(&recurrent, order),
        )
    } else {
        (
            keras_kernel(&kernel, order),
            keras_kernel(&recurrent, order),
        )
    };
    Ok(Direction {
        cell,
        cudnn,
        input_size,
        units: h,
        bias: bias_ih.is_some(),
        params: DirectionParams {
            weight_ih,
            weight_hh,
            bias_ih,
            bias_hh,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direction(bias: bool, cudnn: bool, units: usize) -> Direction {
        let empty = HostTensor {
            shape: vec![0],
            values: Vec::new(),
        };
        Direction {
            cell: CellKind::Lstm,
            cudnn,
            input_size: 3,
            units,
            bias,
            params: DirectionParams {
                weight_ih: empty.clone(),
                weight_hh: empty,
                bias_ih: None,
                bias_hh: None,
            },
        }
    }

    #[test]
    fn a_backward_direction_that_differs_names_what_each_holds() {
        let forward = direction(true, false, 8);
        assert!(same_kind("f.h5", "bi", &forward, &direction(true, false, 8)).is_ok());
        let expected = "expected the forward direction's kind, sizes, bias and layout \
                        (LSTM of 8 units, input 3, with bias, Keras layout), got";
        for (backward, got) in [
            (
                direction(false, false, 8),
                "LSTM of 8 units, input 3, without bias, Keras layout",
            ),
            (
                direction(true, true, 8),
                "LSTM of 8 units, input 3, with bias, cuDNN layout",
            ),
            (
                direction(true, false, 5),
                "LSTM of 5 units, input 3, with bias, Keras layout",
            ),
        ] {
            let e = same_kind("f.h5", "bi", &forward, &backward)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("Keras layer 'bi' backward weights")
                    && e.ends_with(&format!("{expected} {got}")),
                "{e}"
            );
        }
    }
}
