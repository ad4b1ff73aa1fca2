//! A Keras model's architecture JSON (`model.to_json()`, the `model_config` attribute of
//! an `.h5`, `config.json` of a `.keras`): its top-level layers, what feeds each, and
//! the settings of its recurrent layers checked against what cuDNN's LSTM and GRU run.

use serde_json::Value;

use crate::error::RnnError;
use crate::import::MAX_UNITS;
use crate::op::spec::CellKind;

/// One top-level layer of the model.
#[derive(Debug, Clone)]
pub(crate) struct LayerEntry {
    pub name: String,
    pub class_name: String,
    pub config: Value,
    /// The layers whose outputs it takes (Sequential: the previous layer).
    pub inbound: Vec<String>,
}

/// The top-level layers of a model's architecture JSON, in order.
pub(crate) fn layers(source: &str, model: &Value) -> Result<Vec<LayerEntry>, RnnError> {
    let bad = |what: &str| RnnError::Io {
        path: source.to_string(),
        message: format!("the model's architecture JSON has no {what}"),
    };
    let class = model
        .get("class_name")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("'class_name'"))?;
    let sequential = class == "Sequential";
    // Keras up to 2.2.2 wrote a Sequential model's `config` as the list of its layers.
    let list = model
        .get("config")
        .and_then(|c| match c {
            Value::Array(layers) if sequential => Some(layers),
            _ => c.get("layers").and_then(Value::as_array),
        })
        .ok_or_else(|| bad(&format!("'config.layers' ({class} model)")))?;
    let mut out: Vec<LayerEntry> = Vec::with_capacity(list.len());
    for entry in list {
        let class_name = entry
            .get("class_name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("'class_name' on a layer"))?
            .to_string();
        let config = entry.get("config").cloned().unwrap_or(Value::Null);
        let name = entry
            .get("name")
            .or_else(|| config.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("name on a {class_name} layer")))?
            .to_string();
        let inbound = if sequential {
            out.last().map(|l| vec![l.name.clone()]).unwrap_or_default()
        } else {
            let mut names = Vec::new();
            if let Some(nodes) = entry.get("inbound_nodes") {
                inbound_names(nodes, &mut names);
            }
            names
        };
        out.push(LayerEntry {
            name,
            class_name,
            config,
            inbound,
        });
    }
    Ok(out)
}

/// The layer names of a layer's `inbound_nodes`: Keras 2 writes `[[["lstm", 0, 0, {}]]]`,
/// Keras 3 `[{"args": [{"config": {"keras_history": ["lstm", 0, 0]}}]}]`.
fn inbound_names(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => {
            let history = items.len() >= 3
                && items[0].is_string()
                && items[1].is_number()
                && items[2].is_number();
            if history {
                let name = items[0].as_str().unwrap_or_default().to_string();
                if !out.contains(&name) {
                    out.push(name);
                }
            } else {
                items.iter().for_each(|v| inbound_names(v, out));
            }
        }
        Value::Object(map) => map.values().for_each(|v| inbound_names(v, out)),
        _ => {}
    }
}

/// The recurrent cells this crate loads: Keras's class name → (cell, cuDNN layer).
pub(crate) fn recurrent_class(class_name: &str) -> Option<(CellKind, bool)> {
    match class_name {
        "LSTM" | "LSTMV1" => Some((CellKind::Lstm, false)),
        "GRU" | "GRUV1" => Some((CellKind::Gru, false)),
        "CuDNNLSTM" => Some((CellKind::Lstm, true)),
        "CuDNNGRU" => Some((CellKind::Gru, true)),
        _ => None,
    }
}

/// Recurrent layers this crate does not load (named in errors rather than ignored).
pub(crate) fn other_recurrent(class_name: &str) -> bool {
    matches!(
        class_name,
        "SimpleRNN" | "RNN" | "ConvLSTM1D" | "ConvLSTM2D" | "ConvLSTM3D" | "StackedRNNCells"
    )
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
    let Some((cell, cudnn)) = recurrent_class(&class_name) else {
        return Err(RnnError::invalid(
            setting(source, name, "class"),
            "LSTM, GRU, CuDNNLSTM, CuDNNGRU or Bidirectional of one of them",
            if class_name.is_empty() {
                "an unnamed class".to_string()
            } else {
                class_name
            },
        ));
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

/// `LSTM` or `GRU`.
pub(crate) fn cell_name(cell: CellKind) -> &'static str {
    match cell {
        CellKind::Lstm => "LSTM",
        CellKind::Gru => "GRU",
    }
}

/// Layers that pass their input through unchanged at inference (and keep its mask).
pub(crate) fn identity_at_inference(class_name: &str) -> bool {
    matches!(
        class_name,
        "Dropout"
            | "SpatialDropout1D"
            | "GaussianDropout"
            | "GaussianNoise"
            | "AlphaDropout"
            | "ActivityRegularization"
            | "Identity"
    )
}
