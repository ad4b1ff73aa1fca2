//! A recurrent layer's settings in a Keras architecture (a `LayerEntry`'s config): its
//! kind (`LSTM`, `RNN(GRUCell)`, a `Bidirectional` of one, or one this crate does not
//! load), checked against what cuDNN's LSTM and GRU run.

use serde_json::Value;

use crate::error::RnnError;
use crate::import::keras_config::{LayerEntry, rnn_cell};
use crate::import::{MAX_UNITS, cell_name};
use crate::op::spec::CellKind;

/// The recurrent cells this crate loads: Keras's class name → (cell, cuDNN layer).
fn recurrent_class(class_name: &str) -> Option<(CellKind, bool)> {
    match class_name {
        "LSTM" | "LSTMV1" => Some((CellKind::Lstm, false)),
        "GRU" | "GRUV1" => Some((CellKind::Gru, false)),
        "CuDNNLSTM" => Some((CellKind::Lstm, true)),
        "CuDNNGRU" => Some((CellKind::Gru, true)),
        _ => None,
    }
}

/// Recurrent layers this crate does not load (named in errors rather than ignored).
fn other_recurrent(class_name: &str) -> bool {
    matches!(
        class_name,
        "SimpleRNN" | "RNN" | "ConvLSTM1D" | "ConvLSTM2D" | "ConvLSTM3D" | "StackedRNNCells"
    )
}

/// What recurrent layer a layer of class `class_name` and settings `config` is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RecurrentKind {
    /// One this crate loads: its cell, whether it is a cuDNN layer, and its class as
    /// listed (`LSTM`, `RNN(GRUCell)`).
    Loaded {
        cell: CellKind,
        cudnn: bool,
        class: String,
    },
    /// A recurrent layer this crate does not load, its class as listed (`SimpleRNN`,
    /// `RNN(StackedRNNCells)`).
    Other(String),
    /// Not a recurrent layer.
    NotRecurrent,
}

/// The kind of a layer; an `RNN` layer is its cell's (`RNN(LSTMCell)` runs Keras's LSTM).
pub(crate) fn recurrent_kind(class_name: &str, config: &Value) -> RecurrentKind {
    if class_name == "RNN" {
        let cell = rnn_cell(config)
            .and_then(|c| c.get("class_name"))
            .and_then(Value::as_str)
            .unwrap_or("?");
        let class = format!("RNN({cell})");
        return match cell {
            "LSTMCell" => RecurrentKind::Loaded {
                cell: CellKind::Lstm,
                cudnn: false,
                class,
            },
            "GRUCell" => RecurrentKind::Loaded {
                cell: CellKind::Gru,
                cudnn: false,
                class,
            },
            _ => RecurrentKind::Other(class),
        };
    }
    match recurrent_class(class_name) {
        Some((cell, cudnn)) => RecurrentKind::Loaded {
            cell,
            cudnn,
            class: class_name.to_string(),
        },
        None if other_recurrent(class_name) => RecurrentKind::Other(class_name.to_string()),
        None => RecurrentKind::NotRecurrent,
    }
}

/// The units a layer's config declares (an `RNN`'s: its cell's), unchecked.
pub(crate) fn declared_units(config: &Value) -> Option<u64> {
    config
        .get("units")
        .or_else(|| rnn_cell(config)?.get("config")?.get("units"))
        .and_then(Value::as_u64)
}

/// The settings of an `RNN` layer of one cell, as its cell's layer has them: the
/// cell's (units, activations, bias, `reset_after`) with the layer's.
fn rnn_settings(config: &Value) -> Value {
    let mut merged = rnn_cell(config)
        .and_then(|c| c.get("config"))
        .filter(|c| c.is_object())
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    for key in [
        "return_sequences",
        "go_backwards",
        "stateful",
        "unroll",
        "time_major",
    ] {
        if let (Some(value), Some(map)) = (config.get(key), merged.as_object_mut()) {
            map.insert(key.to_string(), value.clone());
        }
    }
    merged
}

/// What a recurrent layer's settings say, once checked.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub cell: CellKind,
    /// A `CuDNNLSTM` / `CuDNNGRU` layer (its weights are laid out for cuDNN).
    pub cudnn: bool,
    pub units: usize,
    pub bidirectional: bool,
    pub bias: bool,
    pub return_sequences: bool,
    pub batch_first: bool,
    /// The wrapped class, e.g. `LSTM` for `Bidirectional(LSTM)`.
    pub inner_class: String,
}

impl Settings {
    /// What a `Bidirectional`'s two layers must share, for errors: `LSTM with 8 units,
    /// use_bias true` (a `CuDNNLSTM`'s class names its cuDNN layout).
    fn shape(&self) -> String {
        format!(
            "{} with {} units, use_bias {}",
            self.inner_class, self.units, self.bias
        )
    }
}

/// The setting of a layer, for errors: `file: Keras layer 'name' setting`.
pub(crate) fn setting(source: &str, layer: &str, name: &str) -> String {
    format!("{source}: Keras layer '{layer}' {name}")
}

/// Reads and checks a recurrent layer's settings (of a `Bidirectional` wrapper: its
/// merge mode and both wrapped layers'). The first setting that cuDNN's layers cannot
/// run is the error, naming the layer, the setting, the expected and the actual value.
pub(crate) fn settings(source: &str, entry: &LayerEntry) -> Result<Settings, RnnError> {
    let name = entry.name.as_str();
    if entry.class_name == "Bidirectional" {
        let merge = entry
            .config
            .get("merge_mode")
            .cloned()
            .unwrap_or(Value::Null);
        if merge.as_str() != Some("concat") {
            return Err(RnnError::invalid(
                setting(source, name, "merge_mode"),
                "\"concat\" (both directions side by side, as cuDNN returns them)",
                merge.to_string(),
            ));
        }
        let inner = entry.config.get("layer").ok_or_else(|| {
            RnnError::invalid(
                setting(source, name, "layer"),
                "the wrapped recurrent layer's config",
                "none",
            )
        })?;
        let forward = inner_settings(source, name, inner, false)?;
        if let Some(backward) = entry.config.get("backward_layer").filter(|v| !v.is_null()) {
            let reverse = inner_settings(source, name, backward, true)?;
            if reverse.cell != forward.cell
                || reverse.units != forward.units
                || reverse.bias != forward.bias
                || reverse.cudnn != forward.cudnn
            {
                return Err(RnnError::invalid(
                    setting(source, name, "backward_layer"),
                    format!(
                        "the forward layer's class, size and bias ({})",
                        forward.shape()
                    ),
                    reverse.shape(),
                ));
            }
        }
        return Ok(Settings {
            bidirectional: true,
            ..forward
        });
    }
    inner_settings(
        source,
        name,
        &serde_json::json!({"class_name": entry.class_name, "config": entry.config}),
        false,
    )
}

/// The classes this crate loads, for errors.
pub(crate) const LOADED_CLASSES: &str = "LSTM, GRU, CuDNNLSTM, CuDNNGRU, RNN of an LSTMCell or a GRUCell, or Bidirectional of one of them";

fn wrong_class(source: &str, name: &str, class: String) -> RnnError {
    RnnError::invalid(setting(source, name, "class"), LOADED_CLASSES, class)
}

/// The settings of one (possibly wrapped) recurrent layer; `backward`: the reverse
/// layer of a `Bidirectional`, which runs backwards by construction.
fn inner_settings(
    source: &str,
    name: &str,
    layer: &Value,
    backward: bool,
) -> Result<Settings, RnnError> {
    let class_name = layer
        .get("class_name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let config = layer.get("config").cloned().unwrap_or(Value::Null);
    let (cell, cudnn, class_name) = match recurrent_kind(&class_name, &config) {
        RecurrentKind::Loaded { cell, cudnn, class } => (cell, cudnn, class),
        RecurrentKind::Other(class) => return Err(wrong_class(source, name, class)),
        RecurrentKind::NotRecurrent if class_name.is_empty() => {
            return Err(wrong_class(source, name, "an unnamed class".into()));
        }
        RecurrentKind::NotRecurrent => return Err(wrong_class(source, name, class_name)),
    };
    let config = if class_name.starts_with("RNN(") {
        rnn_settings(&config)
    } else {
        config
    };
    let get = |key: &str| config.get(key).filter(|v| !v.is_null());
    // A flag that is not a boolean is refused (not read as its default).
    let flag = |key: &str, default: bool| match get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(RnnError::invalid(
            setting(source, name, key),
            "true or false",
            other.to_string(),
        )),
    };
    let refuse = |key: &str, expected: &str, actual: &Value| {
        Err(RnnError::invalid(
            setting(source, name, key),
            expected,
            actual.to_string(),
        ))
    };
    if !cudnn {
        // CuDNNLSTM and CuDNNGRU have no activation settings: cuDNN's own. A null
        // activation is Keras's linear one.
        for (key, expected) in [("activation", "tanh"), ("recurrent_activation", "sigmoid")] {
            if let Some(value) = config.get(key)
                && value.as_str() != Some(expected)
            {
                let hint = if value.as_str() == Some("hard_sigmoid") {
                    " (Keras 2's old default hard_sigmoid has no cuDNN equivalent)"
                } else {
                    ""
                };
                return refuse(
                    key,
                    &format!("\"{expected}\" (cuDNN's {}){hint}", cell_name(cell)),
                    value,
                );
            }
        }
    }
    // Keras has written `reset_after` since it has had the setting (2.1.3); before, its
    // GRU applied the reset gate before the product: an absent key is not `true`.
    if cell == CellKind::Gru && !cudnn && get("reset_after").and_then(Value::as_bool) != Some(true)
    {
        return refuse(
            "reset_after",
            "true (cuDNN's and PyTorch's GRU apply the reset gate after the recurrent product; \
             a GRU saved before Keras had the setting applies it before)",
            get("reset_after").unwrap_or(&Value::Null),
        );
    }
    let go_backwards = flag("go_backwards", false)?;
    if go_backwards != backward {
        return refuse(
            "go_backwards",
            if backward {
                "true (the backward layer of a Bidirectional)"
            } else {
                "false (a lone reverse direction has no cuDNN equivalent; wrap the layer in Bidirectional)"
            },
            &Value::Bool(go_backwards),
        );
    }
    for key in ["stateful", "unroll"] {
        if flag(key, false)? {
            let why = if key == "stateful" {
                "false (states carried between batches are not part of a module; pass them as the initial state)"
            } else {
                "false (re-save the layer with unroll=False: it computes the same values)"
            };
            return refuse(key, why, &Value::Bool(true));
        }
    }
    let units = get("units")
        .and_then(Value::as_u64)
        .and_then(|u| usize::try_from(u).ok())
        .filter(|&u| (1..=MAX_UNITS).contains(&u))
        .ok_or_else(|| {
            RnnError::invalid(
                setting(source, name, "units"),
                format!("an integer in 1..={MAX_UNITS}"),
                get("units").map_or("none".into(), |v| v.to_string()),
            )
        })?;
    Ok(Settings {
        cell,
        cudnn,
        units,
        bidirectional: false,
        bias: flag("use_bias", true)?,
        return_sequences: flag("return_sequences", false)?,
        batch_first: !flag("time_major", false)?,
        inner_class: class_name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The kinds: a layer class, an `RNN` of one cell, an `RNN` of stacked cells (read
    /// as one `RNN` layer per cell by `keras_config`), other recurrent layers, others.
    #[test]
    fn a_layers_kind_is_its_class_or_its_cells() {
        let rnn = |cell: Value| json!({"cell": cell});
        let loaded = |cell, class: &str| RecurrentKind::Loaded {
            cell,
            cudnn: false,
            class: class.into(),
        };
        assert_eq!(
            recurrent_kind("LSTM", &Value::Null),
            loaded(CellKind::Lstm, "LSTM")
        );
        assert_eq!(
            recurrent_kind("CuDNNGRU", &Value::Null),
            RecurrentKind::Loaded {
                cell: CellKind::Gru,
                cudnn: true,
                class: "CuDNNGRU".into()
            }
        );
        assert_eq!(
            recurrent_kind("RNN", &rnn(json!({"class_name": "GRUCell", "config": {}}))),
            loaded(CellKind::Gru, "RNN(GRUCell)")
        );
        assert_eq!(
            recurrent_kind(
                "RNN",
                &rnn(json!({"class_name": "StackedRNNCells", "config": {}}))
            ),
            RecurrentKind::Other("RNN(StackedRNNCells)".into())
        );
        assert_eq!(
            recurrent_kind("RNN", &Value::Null),
            RecurrentKind::Other("RNN(?)".into())
        );
        assert_eq!(
            recurrent_kind("SimpleRNN", &Value::Null),
            RecurrentKind::Other("SimpleRNN".into())
        );
        assert_eq!(
            recurrent_kind("Dense", &Value::Null),
            RecurrentKind::NotRecurrent
        );
        assert_eq!(
            recurrent_kind("RNN(StackedRNNCells)", &Value::Null),
            RecurrentKind::NotRecurrent
        );
    }
}
