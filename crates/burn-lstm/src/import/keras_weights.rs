//! Where a Keras file keeps each recurrent layer's `kernel`, `recurrent_kernel` and
//! `bias`, in its two layouts, and their conversion into PyTorch's layout with every
//! shape checked.
//!
//! - Keras 2 (and Keras 3's legacy `.h5`): `{root}/{layer}` has a `weight_names`
//!   attribute (`lstm/lstm_cell/kernel:0`, ...; a `Bidirectional`'s forward weights then
//!   its backward ones) and each weight is the dataset `{root}/{layer}/{weight name}`.
//! - Keras 3: `layers/{group}/cell/vars/{0,1,2}` (kernel, recurrent kernel, bias) or,
//!   for a `Bidirectional`, `layers/{group}/{forward,backward}_layer/cell/vars/...`;
//!   `layers/{group}/vars` carries the layer's name as its `name` attribute (the group
//!   itself is named after the class: `lstm`, `lstm_1`, ...).

use crate::error::RnnError;
use crate::import::MAX_UNITS;
use crate::import::gates::{
    KERAS_GRU, KERAS_LSTM, cudnn_input_kernel, cudnn_recurrent_kernel, keras_kernel, reorder,
};
use crate::import::hdf5::{H5, io};
use crate::import::host::{DirectionParams, HostTensor};
use crate::import::keras_config::{cell_name, setting};
use crate::import::keras_file::WeightLayout;
use crate::op::spec::CellKind;

/// The datasets of one direction of a layer.
#[derive(Debug, Clone)]
pub(crate) struct DirectionPaths {
    pub kernel: String,
    pub recurrent_kernel: String,
    pub bias: Option<String>,
}

/// The datasets of one recurrent layer.
#[derive(Debug, Clone)]
pub(crate) struct LayerPaths {
    /// The layer's name (Keras 3 layout without `name` attributes, as tf-keras writes
    /// `.weights.h5` files: its group's name).
    pub name: String,
    /// Keras 3 layout: the group under `layers/` and whether the file names the layer
    /// (tf-keras's files have no `name` attributes: their groups are matched to the
    /// architecture by class and position, as Keras does).
    pub group: Option<(String, bool)>,
    pub forward: DirectionPaths,
    pub backward: Option<DirectionPaths>,
}

/// Every layer of the file that holds recurrent weights, in the file's order.
pub(crate) fn recurrent_layers(
    h5: &H5,
    layout: &WeightLayout,
) -> Result<Vec<LayerPaths>, RnnError> {
    match layout {
        WeightLayout::Legacy { root } => legacy(h5, root),
        WeightLayout::Native => native(h5),
    }
}

fn join(root: &str, rest: &str) -> String {
    if root.is_empty() {
        rest.to_string()
    } else {
        format!("{root}/{rest}")
    }
}

fn legacy(h5: &H5, root: &str) -> Result<Vec<LayerPaths>, RnnError> {
    let names = h5.attr_strings(root, "layer_names")?.ok_or_else(|| {
        io(
            h5.source(),
            format!("no 'layer_names' attribute on '/{root}'"),
        )
    })?;
    let mut out = Vec::new();
    for name in names {
        let group = join(root, &name);
        let weights = h5.attr_strings(&group, "weight_names")?.unwrap_or_default();
        let role = |w: &String| {
            let last = w.rsplit('/').next().unwrap_or(w);
            last.split(':').next().unwrap_or(last).to_string()
        };
        let triples: Vec<(String, String)> =
            weights.iter().map(|w| (role(w), join(&group, w))).collect();
        if !triples.iter().any(|(r, _)| r == "recurrent_kernel") {
            continue;
        }
        let direction = |part: &[(String, String)]| -> Option<DirectionPaths> {
            let find = |r: &str| {
                part.iter()
                    .find(|(role, _)| role == r)
                    .map(|(_, p)| p.clone())
            };
            Some(DirectionPaths {
                kernel: find("kernel")?,
                recurrent_kernel: find("recurrent_kernel")?,
                bias: find("bias"),
            })
        };
        let bad = || {
            io(
                h5.source(),
                format!(
                    "layer '{name}': weight_names {weights:?} are not a recurrent layer's \
                     kernel, recurrent_kernel and bias"
                ),
            )
        };
        // A `Bidirectional` lists its forward layer's weights, then its backward
        // layer's: Keras reads them back as two halves, and so does this (a layer named
        // `backward_...` has that part in every weight name, its forward ones too).
        let kernels = triples.iter().filter(|(r, _)| r == "kernel").count();
        let (forward, backward) = if kernels == 2 && triples.len().is_multiple_of(2) {
            let half = triples.len() / 2;
            (
                direction(&triples[..half]).ok_or_else(bad)?,
                Some(direction(&triples[half..]).ok_or_else(bad)?),
            )
        } else if kernels == 1 {
            (direction(&triples).ok_or_else(bad)?, None)
        } else {
            return Err(bad());
        };
        out.push(LayerPaths {
            name,
            group: None,
            forward,
            backward,
        });
    }
    Ok(out)
}

/// The group Keras 3 saves each of `classes` (the model's layers, in order) under:
/// the class name in snake case, `_1`, `_2`, ... for the second and later of a class
/// (Keras's `_get_unique_name`).
pub(crate) fn native_group_names(classes: &[&str]) -> Vec<String> {
    let mut used: std::collections::HashMap<String, usize> = Default::default();
    classes
        .iter()
        .map(|class| {
            let snake = snake_case(class);
            match used.get_mut(&snake) {
                Some(n) => {
                    *n += 1;
                    format!("{snake}_{n}")
                }
                None => {
                    used.insert(snake.clone(), 0);
                    snake
                }
            }
        })
        .collect()
}

/// Keras's `to_snake_case`: `SimpleRNN` → `simple_rnn`, `CuDNNLSTM` → `cu_dnnlstm`.
fn snake_case(name: &str) -> String {
    // (.)([A-Z][a-z]+) → \1_\2, then ([a-z])([A-Z]) → \1_\2, lower-cased.
    let chars: Vec<char> = name.chars().collect();
    let mut first = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let starts_word = i > 0
            && c.is_ascii_uppercase()
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
        if starts_word {
            first.push('_');
        }
        first.push(c);
    }
    let chars: Vec<char> = first.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if i > 0 && c.is_ascii_uppercase() && chars[i - 1].is_ascii_lowercase() {
            out.push('_');
        }
        out.push(c);
    }
    out.to_lowercase()
}

fn native(h5: &H5) -> Result<Vec<LayerPaths>, RnnError> {
    let Some((groups, _)) = h5.members("layers")? else {
        return Ok(Vec::new());
    };
    // h5py lists members alphabetically; Keras numbers groups in the model's order
    // (`lstm`, `lstm_1`, ..., `lstm_10`): sort by stem, then number.
    let mut groups = groups;
    groups.sort_by_key(|g| match g.rsplit_once('_') {
        Some((stem, n)) if n.chars().all(|c| c.is_ascii_digit()) => (
            stem.to_string(),
            n.parse::<u64>().map_or(0, |n| n.saturating_add(1)),
        ),
        _ => (g.clone(), 0),
    });
    let mut out = Vec::new();
    for group in groups {
        let path = format!("layers/{group}");
        let named = h5
            .attr_strings(&format!("{path}/vars"), "name")?
            .and_then(|v| v.into_iter().next());
        let name = named.clone().unwrap_or_else(|| group.clone());
        let group = Some((group, named.is_some()));
        let cell = |base: &str| -> Result<Option<DirectionPaths>, RnnError> {
            let vars = format!("{base}/cell/vars");
            let Some((_, datasets)) = h5.members(&vars)? else {
                return Ok(None);
            };
            if !datasets.iter().any(|d| d == "1") {
                return Ok(None);
            }
            Ok(Some(DirectionPaths {
                kernel: format!("{vars}/0"),
                recurrent_kernel: format!("{vars}/1"),
                bias: datasets
                    .iter()
                    .any(|d| d == "2")
                    .then(|| format!("{vars}/2")),
            }))
        };
        if let Some(forward) = cell(&path)? {
            out.push(LayerPaths {
                name,
                group,
                forward,
                backward: None,
            });
        } else if let (Some(forward), Some(backward)) = (
            cell(&format!("{path}/forward_layer"))?,
            cell(&format!("{path}/backward_layer"))?,
        ) {
            out.push(LayerPaths {
                name,
                group,
                forward,
                backward: Some(backward),
            });
        }
    }
    Ok(out)
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
