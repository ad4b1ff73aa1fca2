//! A Keras model's architecture JSON (`model.to_json()`, the `model_config` attribute of
//! an `.h5`, `config.json` of a `.keras`): its layers (those of nested models and an
//! `RNN`'s stacked cells included), what feeds each, and the group a Keras 3 file keeps
//! each in. A recurrent layer's settings are `keras_settings`'.

use serde_json::Value;

use crate::error::RnnError;

/// How deep models may nest in one another (a Keras model used as a layer of another):
/// deeper is refused rather than followed.
pub(crate) const MAX_NESTING: usize = 16;

/// One layer of the model: a top-level layer, or a layer of a model nested in it.
#[derive(Debug, Clone)]
pub(crate) struct LayerEntry {
    /// Its name in the whole model: a nested model's layers are `outer/inner`.
    pub name: String,
    /// The names from the top-level layer down to this one (one for a top-level layer).
    pub path: Vec<String>,
    /// The group a Keras 3 file keeps its weights in, below `layers/`: the class name in
    /// snake case numbered within its model (`lstm_1`); a nested model's layer's is
    /// `functional/layers/lstm`.
    pub native_group: String,
    pub class_name: String,
    pub config: Value,
    /// The layers whose outputs it takes (Sequential: the previous layer), by name; a
    /// nested model's: its output layers, and its input layers': the nested model's.
    pub inbound: Vec<String>,
    /// A nested model or a nested model's input layer: its output is its inbound's.
    pub pass_through: bool,
}

/// Every layer of a model's architecture JSON, in order, nested models' layers after
/// the nested model itself.
pub(crate) fn layers(source: &str, model: &Value) -> Result<Vec<LayerEntry>, RnnError> {
    let class = model
        .get("class_name")
        .and_then(Value::as_str)
        .ok_or_else(|| no(source, "'class_name'"))?;
    let list = model_layers(model).ok_or_else(|| {
        no(
            source,
            &format!(
                "'config.layers' ({class} model; a subclassed model's file is read without one)"
            ),
        )
    })?;
    let mut out = Vec::new();
    add_layers(source, model, list, &Scope::default(), &mut out)?;
    Ok(out)
}

/// Whether a model's config lists its layers (a subclassed model's does not).
pub(crate) fn lists_layers(model: &Value) -> bool {
    model_layers(model).is_some()
}

fn no(source: &str, what: &str) -> RnnError {
    RnnError::Io {
        path: source.to_string(),
        message: format!("the model's architecture JSON has no {what}"),
    }
}

/// The layer list of a model's config, when `value` is a model: its `config.layers`
/// (`Sequential`, `Functional`, Keras 2's `Model`, a subclass of one). Keras up to
/// 2.2.2 wrote a Sequential model's `config` as the list of its layers.
fn model_layers(value: &Value) -> Option<&Vec<Value>> {
    let class = value.get("class_name").and_then(Value::as_str)?;
    value.get("config").and_then(|c| match c {
        Value::Array(layers) if class == "Sequential" => Some(layers),
        _ => c.get("layers").and_then(Value::as_array),
    })
}

/// Where a model's layers sit: the nested model's path of names, its Keras 3 group and
/// its inputs (all empty at the top).
#[derive(Default)]
struct Scope {
    path: Vec<String>,
    native_group: String,
    inbound: Vec<String>,
}

impl Scope {
    fn full_name(&self, name: &str) -> String {
        self.path
            .iter()
            .map(String::as_str)
            .chain([name])
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// Appends the layers of `model` (whose layer list is `list`) in `scope` to `out`.
fn add_layers(
    source: &str,
    model: &Value,
    list: &[Value],
    scope: &Scope,
    out: &mut Vec<LayerEntry>,
) -> Result<(), RnnError> {
    let sequential = model.get("class_name").and_then(Value::as_str) == Some("Sequential");
    let mut classes = Vec::with_capacity(list.len());
    for entry in list {
        classes.push(
            entry
                .get("class_name")
                .and_then(Value::as_str)
                .ok_or_else(|| no(source, "'class_name' on a layer"))?,
        );
    }
    let groups = native_group_names(&classes);
    // A functional model's inputs, in the order the model is called with them.
    let mut input_names = Vec::new();
    if let Some(inputs) = model.get("config").and_then(|c| c.get("input_layers")) {
        inbound_names(inputs, &mut input_names);
    }
    let mut previous: Option<String> = None;
    for ((entry, class_name), group) in list.iter().zip(&classes).zip(groups) {
        let config = entry.get("config").cloned().unwrap_or(Value::Null);
        let own = entry
            .get("name")
            .or_else(|| config.get("name"))
            .and_then(Value::as_str)
            .ok_or_else(|| no(source, &format!("name on a {class_name} layer")))?;
        let name = scope.full_name(own);
        let input_layer = *class_name == "InputLayer";
        // A nested model's input layer takes the input the model is called with in
        // its place (all of them when that cannot be told).
        let input_at = input_names.iter().position(|n| n == own);
        let inbound = if input_layer || (sequential && previous.is_none()) {
            match input_at {
                Some(k) if input_names.len() == scope.inbound.len() => {
                    vec![scope.inbound[k].clone()]
                }
                _ => scope.inbound.clone(),
            }
        } else if sequential {
            previous.iter().cloned().collect()
        } else {
            let mut names = Vec::new();
            if let Some(nodes) = entry.get("inbound_nodes") {
                inbound_names(nodes, &mut names);
            }
            names.iter().map(|n| scope.full_name(n)).collect()
        };
        let native_group = if scope.native_group.is_empty() {
            group
        } else {
            format!("{}/layers/{group}", scope.native_group)
        };
        let mut path = scope.path.clone();
        path.push(own.to_string());
        previous = Some(name.clone());
        if let Some(cells) = stacked_cells(class_name, &config) {
            add_stacked_cells(&name, &path, &native_group, &config, cells, inbound, out);
            continue;
        }
        let Some(inner) = model_layers(entry) else {
            out.push(LayerEntry {
                name,
                path,
                native_group,
                class_name: class_name.to_string(),
                config,
                inbound,
                pass_through: input_layer && !scope.path.is_empty(),
            });
            continue;
        };
        if path.len() > MAX_NESTING {
            return Err(RnnError::invalid(
                format!("{source}: Keras layer '{name}'"),
                format!("models nested at most {MAX_NESTING} deep"),
                format!("a model nested {} deep", path.len()),
            ));
        }
        let at = out.len();
        let nested = Scope {
            path,
            native_group,
            inbound,
        };
        out.push(LayerEntry {
            name: name.clone(),
            path: nested.path.clone(),
            native_group: nested.native_group.clone(),
            class_name: class_name.to_string(),
            config: Value::Null,
            inbound: Vec::new(),
            pass_through: true,
        });
        add_layers(source, entry, inner, &nested, out)?;
        // The nested model's output: a Sequential's last layer, a Functional's
        // `output_layers`.
        out[at].inbound = if *class_name == "Sequential" {
            out[at + 1..]
                .iter()
                .rev()
                .find(|e| e.path.len() == nested.path.len() + 1)
                .map(|e| vec![e.name.clone()])
                .unwrap_or_default()
        } else {
            let mut names = Vec::new();
            if let Some(outputs) = entry.get("config").and_then(|c| c.get("output_layers")) {
                inbound_names(outputs, &mut names);
            }
            names.iter().map(|n| nested.full_name(n)).collect()
        };
    }
    Ok(())
}

/// Most cells of an `RNN` of a `StackedRNNCells` read as a stack of layers (more are
/// refused as the `RNN` they are).
const MAX_STACKED_CELLS: usize = 1024;

/// The cells of an `RNN` of a `StackedRNNCells` (`RNN([LSTMCell(8), LSTMCell(8)])`),
/// when each is an `LSTMCell` or a `GRUCell`: a stack of layers, each cell's output
/// the next one's input at every step.
fn stacked_cells<'a>(class_name: &str, config: &'a Value) -> Option<&'a Vec<Value>> {
    if class_name != "RNN" {
        return None;
    }
    let cell = rnn_cell(config)?;
    if cell.get("class_name").and_then(Value::as_str) != Some("StackedRNNCells") {
        return None;
    }
    let cells = cell.get("config")?.get("cells")?.as_array()?;
    let loaded = |c: &Value| {
        matches!(
            c.get("class_name").and_then(Value::as_str),
            Some("LSTMCell" | "GRUCell")
        ) && c
            .get("config")
            .and_then(|c| c.get("name"))
            .is_some_and(Value::is_string)
    };
    (!cells.is_empty() && cells.len() <= MAX_STACKED_CELLS && cells.iter().all(loaded))
        .then_some(cells)
}

/// Appends an `RNN` of stacked cells as one `RNN` layer per cell, named `rnn/cell`
/// (`stacked/lstm_cell_1`), each returning its sequence to the next (the last as the
/// `RNN` does), then the `RNN` itself as a pass-through to its last cell. A Keras 3
/// file keeps cell `k` in `{group}/cell/cells/{class}_{k}`.
fn add_stacked_cells(
    name: &str,
    path: &[String],
    native_group: &str,
    config: &Value,
    cells: &[Value],
    inbound: Vec<String>,
    out: &mut Vec<LayerEntry>,
) {
    let classes: Vec<&str> = cells
        .iter()
        .map(|c| match c.get("class_name").and_then(Value::as_str) {
            Some("GRUCell") => "GRUCell",
            _ => "LSTMCell",
        })
        .collect();
    let groups = native_group_names(&classes);
    // The RNN's settings without its cells, copied once per cell.
    let mut base = config.clone();
    if let Some(map) = base.as_object_mut() {
        map.remove("cell");
    }
    let mut previous = inbound;
    for (k, (cell, group)) in cells.iter().zip(groups).enumerate() {
        let own = cell["config"]["name"].as_str().unwrap_or_default();
        let mut layer = base.clone();
        if let Some(map) = layer.as_object_mut() {
            map.insert("cell".into(), cell.clone());
            if k + 1 < cells.len() {
                map.insert("return_sequences".into(), Value::Bool(true));
            }
        }
        let mut cell_path = path.to_vec();
        cell_path.push(own.to_string());
        let cell_name = format!("{name}/{own}");
        out.push(LayerEntry {
            name: cell_name.clone(),
            path: cell_path,
            native_group: format!("{native_group}/cell/cells/{group}"),
            class_name: "RNN".into(),
            config: layer,
            inbound: std::mem::replace(&mut previous, vec![cell_name]),
            pass_through: false,
        });
    }
    out.push(LayerEntry {
        name: name.to_string(),
        path: path.to_vec(),
        native_group: native_group.to_string(),
        class_name: "RNN(StackedRNNCells)".into(),
        config: Value::Null,
        inbound: previous,
        pass_through: true,
    });
}

/// The layer names of a layer's `inbound_nodes`: Keras 2 writes `[[["lstm", 0, 0, {}]]]`,
/// Keras 3 `[{"args": [{"config": {"keras_history": ["lstm", 0, 0]}}]}]`. A mask Keras 3
/// passes explicitly (`"kwargs": {"mask": ...}`, the output of its own mask operations)
/// is not an input.
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
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| key.as_str() != "mask")
            .for_each(|(_, v)| inbound_names(v, out)),
        _ => {}
    }
}

/// The group Keras 3 saves each of `classes` (a model's layers, in order) under:
/// the class name in snake case, `_1`, `_2`, ... for the second and later of a class
/// (Keras's `_get_unique_name`).
fn native_group_names(classes: &[&str]) -> Vec<String> {
    let mut numbering = Numbering::default();
    classes
        .iter()
        .map(|class| numbering.next(snake_case(class)))
        .collect()
}

/// Names in the order Keras gives them: a stem alone the first time, then `stem_1`,
/// `stem_2`, ...
#[derive(Default)]
pub(crate) struct Numbering(std::collections::HashMap<String, usize>);

impl Numbering {
    /// The name of the next of `stem`.
    pub(crate) fn next(&mut self, stem: String) -> String {
        let count = self.0.entry(stem.clone()).or_insert(0);
        let name = match *count {
            0 => stem,
            k => format!("{stem}_{k}"),
        };
        *count += 1;
        name
    }
}

/// A Keras name split into its stem and its number (`lstm_2` → `lstm`, 2; `lstm` →
/// `lstm`, 0; a number too large to read sorts last).
pub(crate) fn stem_number(name: &str) -> (&str, u64) {
    match name.rsplit_once('_') {
        Some((stem, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => (
            stem,
            n.parse::<u64>().map_or(u64::MAX, |n| n.saturating_add(1)),
        ),
        _ => (name, 0),
    }
}

/// An `RNN` layer's cell: `{"class_name": "LSTMCell", "config": {...}}`.
pub(crate) fn rnn_cell(config: &Value) -> Option<&Value> {
    config.get("cell").filter(|c| c.is_object())
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

/// Whether a layer's name is the one Keras gives a layer of a class that passes its
/// input through at inference (`dropout`, `dropout_3`, `spatial_dropout1d`): what a
/// weights-only file says of a layer without weights.
pub(crate) fn identity_by_name(name: &str) -> bool {
    let stem = stem_number(name).0;
    IDENTITY_CLASSES
        .iter()
        .any(|class| snake_case(class) == stem)
}

const IDENTITY_CLASSES: [&str; 7] = [
    "Dropout",
    "SpatialDropout1D",
    "GaussianDropout",
    "GaussianNoise",
    "AlphaDropout",
    "ActivityRegularization",
    "Identity",
];

/// Layers that pass their input through unchanged at inference (and keep its mask).
pub(crate) fn identity_at_inference(class_name: &str) -> bool {
    IDENTITY_CLASSES.contains(&class_name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lstm(name: &str) -> Value {
        json!({"class_name": "LSTM", "config": {"name": name, "units": 4}})
    }

    /// Each entry's name, Keras 3 group, inbound layers and whether it passes through.
    fn described(entries: &[LayerEntry]) -> Vec<(&str, &str, Vec<&str>, bool)> {
        entries
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.native_group.as_str(),
                    e.inbound.iter().map(String::as_str).collect(),
                    e.pass_through,
                )
            })
            .collect()
    }

    /// A Sequential model named `name` of `layers`.
    fn sequential(name: &str, layers: Vec<Value>) -> Value {
        json!({"class_name": "Sequential", "config": {"name": name, "layers": layers}})
    }

    #[test]
    fn nested_models_layers_are_named_grouped_and_linked_through_their_models() {
        let inner = sequential("inner", vec![lstm("a"), lstm("b")]);
        let outer = sequential(
            "outer",
            vec![
                json!({"class_name": "Masking", "config": {"name": "masking"}}),
                sequential("enc", vec![inner, lstm("c")]),
                lstm("d"),
            ],
        );
        let entries = layers("f.json", &outer).unwrap();
        assert_eq!(
            described(&entries),
            [
                ("masking", "masking", vec![], false),
                ("enc", "sequential", vec!["enc/c"], true),
                (
                    "enc/inner",
                    "sequential/layers/sequential",
                    vec!["enc/inner/b"],
                    true
                ),
                (
                    "enc/inner/a",
                    "sequential/layers/sequential/layers/lstm",
                    vec!["masking"],
                    false
                ),
                (
                    "enc/inner/b",
                    "sequential/layers/sequential/layers/lstm_1",
                    vec!["enc/inner/a"],
                    false
                ),
                ("enc/c", "sequential/layers/lstm", vec!["enc/inner"], false),
                ("d", "lstm", vec!["enc"], false),
            ]
        );
        assert_eq!(entries[3].path, ["enc", "inner", "a"]);
    }

    #[test]
    fn a_functional_models_inputs_and_outputs_are_the_nested_layers() {
        let history = |name: &str| {
            json!([{"args": [{"config": {"keras_history": [name, 0, 0]}}],
            "kwargs": {"mask": {"config": {"keras_history": ["any", 0, 0]}}}}])
        };
        let encoder = json!({"class_name": "Functional", "name": "encoder",
            "config": {"name": "encoder", "output_layers": ["top", 0, 0], "layers": [
                {"class_name": "InputLayer", "name": "enc_in", "config": {}, "inbound_nodes": []},
                {"class_name": "LSTM", "name": "top", "config": {}, "inbound_nodes": history("enc_in")},
            ]},
            "inbound_nodes": history("masking")});
        let model = json!({"class_name": "Functional", "config": {"layers": [
            {"class_name": "Masking", "name": "masking", "config": {}, "inbound_nodes": []},
            encoder,
        ]}});
        let entries = layers("f.json", &model).unwrap();
        let inbound: Vec<(&str, Vec<&str>)> = entries
            .iter()
            .map(|e| {
                (
                    e.name.as_str(),
                    e.inbound.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        // The mask Keras 3 passes explicitly (from its `any` operation) is no input.
        assert_eq!(
            inbound,
            [
                ("masking", vec![]),
                ("encoder", vec!["encoder/top"]),
                ("encoder/enc_in", vec!["masking"]),
                ("encoder/top", vec!["encoder/enc_in"]),
            ]
        );
        assert!(entries[2].pass_through && !entries[3].pass_through);
    }

    /// A nested functional model of two inputs: each input layer takes the input the
    /// model is called with in its place. A model of another class with `config.layers`
    /// (a subclass of `Functional`) is read as a model.
    #[test]
    fn a_nested_models_inputs_are_matched_by_position() {
        let call = |names: &[&str]| {
            let args: Vec<Value> = names
                .iter()
                .map(|n| json!({"config": {"keras_history": [n, 0, 0]}}))
                .collect();
            json!([{"args": [args], "kwargs": {}}])
        };
        let encoder = json!({"class_name": "Functional", "name": "enc",
            "config": {"name": "enc", "input_layers": [["a", 0, 0], ["b", 0, 0]],
                "output_layers": [["lstm", 0, 0]], "layers": [
                {"class_name": "InputLayer", "name": "a", "config": {}, "inbound_nodes": []},
                {"class_name": "InputLayer", "name": "b", "config": {}, "inbound_nodes": []},
                {"class_name": "LSTM", "name": "lstm", "config": {}, "inbound_nodes": call(&["b"])},
            ]},
            "inbound_nodes": call(&["masking", "x2"])});
        let model = json!({"class_name": "MyModel", "config": {"layers": [
            {"class_name": "Masking", "name": "masking", "config": {}, "inbound_nodes": []},
            {"class_name": "InputLayer", "name": "x2", "config": {}, "inbound_nodes": []},
            encoder,
        ]}});
        let entries = layers("f.json", &model).unwrap();
        let inbound = |name: &str| {
            entries
                .iter()
                .find(|e| e.name == name)
                .map(|e| e.inbound.clone())
                .unwrap()
        };
        assert_eq!(inbound("enc/a"), ["masking"]);
        assert_eq!(inbound("enc/b"), ["x2"]);
        assert_eq!(inbound("enc/lstm"), ["enc/b"]);
    }

    #[test]
    fn layers_named_as_keras_names_dropout_are_identities() {
        for name in [
            "dropout",
            "dropout_12",
            "spatial_dropout1d",
            "gaussian_noise_1",
            "identity",
        ] {
            assert!(identity_by_name(name), "{name}");
        }
        for name in [
            "activation",
            "lambda_1",
            "masking",
            "drop",
            "dropout_",
            "dropout_x",
            "",
        ] {
            assert!(!identity_by_name(name), "{name}");
        }
    }

    /// An `RNN` of stacked cells is a layer per cell, each feeding the next; the `RNN`
    /// passes its last cell's output on.
    #[test]
    fn an_rnn_of_stacked_cells_is_a_layer_per_cell() {
        let cell = |class: &str, name: &str| json!({"class_name": class, "config": {"name": name, "units": 4}});
        let stacked = json!({"class_name": "RNN", "config": {"name": "stacked",
            "return_sequences": false, "cell": {"class_name": "StackedRNNCells",
            "config": {"cells": [cell("LSTMCell", "lstm_cell"), cell("LSTMCell", "lstm_cell_1")]}}}});
        let model = sequential("m", vec![lstm("first"), stacked, lstm("last")]);
        let entries = layers("f.json", &model).unwrap();
        assert_eq!(
            described(&entries),
            [
                ("first", "lstm", vec![], false),
                (
                    "stacked/lstm_cell",
                    "rnn/cell/cells/lstm_cell",
                    vec!["first"],
                    false
                ),
                (
                    "stacked/lstm_cell_1",
                    "rnn/cell/cells/lstm_cell_1",
                    vec!["stacked/lstm_cell"],
                    false
                ),
                ("stacked", "rnn", vec!["stacked/lstm_cell_1"], true),
                ("last", "lstm_1", vec!["stacked"], false),
            ]
        );
        // Each cell is an RNN of that cell; all but the last return their sequences.
        let returns: Vec<Value> = entries[1..3]
            .iter()
            .map(|e| e.config["return_sequences"].clone())
            .collect();
        assert_eq!(returns, [json!(true), json!(false)]);
        assert_eq!(entries[2].config["cell"]["config"]["name"], "lstm_cell_1");
        assert_eq!(
            (
                entries[1].class_name.as_str(),
                entries[3].class_name.as_str()
            ),
            ("RNN", "RNN(StackedRNNCells)")
        );
    }

    #[test]
    fn models_nested_deeper_than_the_limit_are_refused() {
        let nest = |depth: usize| {
            (0..depth).fold(lstm("cell"), |inner, k| {
                sequential(&format!("m{k}"), vec![inner])
            })
        };
        // `nest(k)`: the model and k - 1 models nested in it.
        let entries = layers("f.json", &nest(MAX_NESTING + 1)).unwrap();
        assert_eq!(entries.last().unwrap().path.len(), MAX_NESTING + 1);
        let e = layers("f.json", &nest(MAX_NESTING + 2))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!(
                "expected models nested at most {MAX_NESTING} deep, got a model nested 17 deep"
            )),
            "{e}"
        );
    }
}
