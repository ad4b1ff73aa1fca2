//! Keras 2's layout (and Keras 3's legacy `.h5`): `{root}` has a `layer_names`
//! attribute, and each layer's group `{root}/{layer}` a `weight_names` attribute
//! (`lstm/lstm_cell/kernel:0`, ...; a `Bidirectional`'s forward weights then its
//! backward ones), each weight the dataset `{root}/{layer}/{weight name}`. A nested
//! model's group holds all its layers' weights in one list, told apart by their names.

use crate::error::RnnError;
use crate::import::hdf5::{H5, io};
use crate::import::keras_config::{identity_by_name, stem_number};
use crate::import::keras_paths::{DirectionPaths, LayerPaths, Place, join};

/// Every layer of a Keras 2 layout's groups under `root` that holds recurrent weights,
/// in the file's order.
pub(crate) fn layers(h5: &H5, root: &str) -> Result<Vec<LayerPaths>, RnnError> {
    let names = h5.attr_strings(root, "layer_names")?.ok_or_else(|| {
        io(
            h5.source(),
            format!("no 'layer_names' attribute on '/{root}'"),
        )
    })?;
    let mut out = Vec::new();
    let mut slot = 0;
    for name in names {
        let group = join(root, &name);
        let weight_names = h5.attr_strings(&group, "weight_names")?.unwrap_or_default();
        let weights: Vec<LegacyWeight> = weight_names
            .iter()
            .map(|w| LegacyWeight::new(w, &group))
            .collect();
        let (layers, slots) = legacy_layers(&weights).ok_or_else(|| {
            io(
                h5.source(),
                format!(
                    "layer '{name}': weight_names {weight_names:?} are not recurrent layers' \
                     kernel, recurrent_kernel and bias"
                ),
            )
        })?;
        // A group of one layer keeps the group's name (the layer's own, or a nested
        // model's of one layer); a nested model's layers are `model/layer`.
        let single = layers.len() == 1;
        // A group that is one layer (its weights scoped by its own name) has a place
        // among the model's layers. A nested model's group does not show its layers
        // without weights (an `Activation` between two LSTMs), and holds a frozen
        // layer's weights after the others': its layers have no known order.
        let own = single && layers[0].scope.last() == Some(&name);
        for layer in layers {
            let leaf = layer.scope.last().cloned().unwrap_or_default();
            out.push(LayerPaths {
                name: if single {
                    name.clone()
                } else {
                    format!("{name}/{leaf}")
                },
                place: Place::Legacy {
                    group: name.clone(),
                    scope: layer.scope,
                },
                slot: own.then_some(slot + layer.slot),
                forward: layer.forward,
                backward: layer.backward,
            });
        }
        // A layer without weights is seen by its name alone: Keras's names for dropout
        // layers take no slot (they pass their input through at inference), any other
        // name (an `Activation`, a `Masking`, a renamed `Dropout`) one.
        slot += if weight_names.is_empty() {
            usize::from(!identity_by_name(&name))
        } else {
            slots
        };
    }
    Ok(out)
}

/// One entry of a Keras 2 group's `weight_names`: `scope/.../role:0`.
struct LegacyWeight {
    /// The components before the role, less a trailing `lstm_cell` or `gru_cell` (or
    /// `lstm_cell_1`, a cell tf-keras numbered) unless the cell is one of a
    /// `StackedRNNCells`', whose own component is left out instead
    /// (`rnn/stacked_rnn_cells/gru_cell_1` → `rnn/gru_cell_1`: the cells are the
    /// layers, named as the architecture names them).
    scope: Vec<String>,
    role: String,
    path: String,
    /// A cell of stacked cells inside a `Bidirectional`
    /// (`bi/forward_rnn/stacked_rnn_cells/lstm_cell/kernel:0`).
    bidirectional_stack: bool,
}

impl LegacyWeight {
    fn new(name: &str, group: &str) -> Self {
        let mut scope: Vec<String> = name.split('/').map(str::to_string).collect();
        let last = scope.pop().unwrap_or_default();
        let role = last.split(':').next().unwrap_or(&last).to_string();
        let is_cell = |c: &str| matches!(stem_number(c).0, "lstm_cell" | "gru_cell");
        let stacked = scope.len() > 1 && scope[scope.len() - 2].starts_with("stacked_rnn_cells");
        let bidirectional_stack = stacked
            && scope[..scope.len() - 2]
                .iter()
                .any(|c| c.starts_with("forward_") || c.starts_with("backward_"));
        if stacked {
            scope.remove(scope.len() - 2);
        } else if scope.len() > 1 && scope.last().is_some_and(|c| is_cell(c)) {
            scope.pop();
        }
        Self {
            scope,
            role,
            path: join(group, name),
            bidirectional_stack,
        }
    }
}

/// One recurrent layer found in a Keras 2 group.
struct LegacyLayer {
    /// The scope of its weights' names, the layer's own name last (a
    /// `Bidirectional`'s: the scope of its two layers).
    scope: Vec<String>,
    /// Its position among the group's layers, counting each run of other layers'
    /// weights as one.
    slot: usize,
    forward: DirectionPaths,
    backward: Option<DirectionPaths>,
}

/// The recurrent layers among a group's weights, in order: each direction is a
/// `kernel`, `recurrent_kernel` (and `bias`) of one scope; a `Bidirectional` is a
/// direction scoped `.../forward_*` right before one scoped `.../backward_*` (Keras
/// names its two layers so). Other layers' weights (a nested model's `Dense`, a
/// `Bidirectional` of stacked cells) are passed over, each run of them taking a slot;
/// also returns how many slots the group takes (none without weights: a `Dropout`'s or
/// `Masking`'s). `None` when a recurrent kernel is left over.
fn legacy_layers(weights: &[LegacyWeight]) -> Option<(Vec<LegacyLayer>, usize)> {
    // Each direction with the number of runs of other layers' weights before it.
    let mut directions: Vec<(&[String], DirectionPaths, usize)> = Vec::new();
    let mut at = 0;
    let mut runs = 0;
    let mut other = false;
    while at < weights.len() {
        let same = |k: usize, role: &str| {
            weights
                .get(at + k)
                .is_some_and(|w| w.role == role && w.scope == weights[at].scope)
        };
        // A Bidirectional of stacked cells runs each direction through the whole
        // stack, which no cuDNN stack does: its weights are another layer's.
        if weights[at].bidirectional_stack {
            other = true;
            at += 1;
            continue;
        }
        if weights[at].role == "recurrent_kernel" {
            return None;
        }
        if !(weights[at].role == "kernel" && same(1, "recurrent_kernel")) {
            other = true;
            at += 1;
            continue;
        }
        if other {
            runs += 1;
            other = false;
        }
        let bias = same(2, "bias").then(|| weights[at + 2].path.clone());
        directions.push((
            &weights[at].scope,
            DirectionPaths {
                kernel: weights[at].path.clone(),
                recurrent_kernel: weights[at + 1].path.clone(),
                bias: bias.clone(),
            },
            runs,
        ));
        at += 2 + usize::from(bias.is_some());
    }
    let runs = runs + usize::from(other);
    let split = |scope: &[String], prefix: &str| match scope {
        [outer @ .., own] if !outer.is_empty() && own.starts_with(prefix) => Some(outer.to_vec()),
        _ => None,
    };
    let mut layers = Vec::new();
    let mut directions = directions.into_iter().peekable();
    while let Some((scope, forward, runs_before)) = directions.next() {
        let outer = split(scope, "forward_");
        let backward = directions
            .next_if(|(next, ..)| outer.is_some() && split(next, "backward_") == outer)
            .map(|(_, paths, _)| paths);
        let scope = match (&backward, outer) {
            (Some(_), Some(outer)) => outer,
            _ => scope.to_vec(),
        };
        layers.push(LegacyLayer {
            scope,
            slot: layers.len() + runs_before,
            forward,
            backward,
        });
    }
    let slots = layers.len() + runs;
    Some((layers, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(leaf, forward kernel, backward kernel)` of each layer `legacy_layers` finds in
    /// a group `g` whose `weight_names` are `names`.
    fn legacy(names: &[&str]) -> Option<Vec<(String, String, Option<String>)>> {
        let weights: Vec<LegacyWeight> = names.iter().map(|n| LegacyWeight::new(n, "g")).collect();
        Some(
            legacy_layers(&weights)?
                .0
                .into_iter()
                .map(|l| {
                    let leaf = l.scope.last().cloned().unwrap_or_default();
                    (leaf, l.forward.kernel, l.backward.map(|b| b.kernel))
                })
                .collect(),
        )
    }

    fn layer(
        leaf: &str,
        forward: &str,
        backward: Option<&str>,
    ) -> (String, String, Option<String>) {
        (
            leaf.to_string(),
            format!("g/{forward}"),
            backward.map(|b| format!("g/{b}")),
        )
    }

    #[test]
    fn a_keras_2_group_holds_one_layer_a_bidirectional_or_a_nested_models_layers() {
        let cell = |scope: &str| {
            ["kernel:0", "recurrent_kernel:0", "bias:0"].map(|r| format!("{scope}/{r}"))
        };
        let names =
            |scopes: &[&str]| -> Vec<String> { scopes.iter().flat_map(|s| cell(s)).collect() };
        let run = |scopes: &[&str]| {
            let names = names(scopes);
            legacy(&names.iter().map(String::as_str).collect::<Vec<_>>())
        };
        // One layer: Keras 2 (`lstm/lstm_cell`), cuDNN's (no cell), Keras 3 in a
        // Sequential (`model/layer/cell`).
        assert_eq!(
            run(&["lstm/lstm_cell"]),
            Some(vec![layer("lstm", "lstm/lstm_cell/kernel:0", None)])
        );
        assert_eq!(
            run(&["cudnn_lstm"]),
            Some(vec![layer("cudnn_lstm", "cudnn_lstm/kernel:0", None)])
        );
        assert_eq!(run(&["seq/gru_a/gru_cell"]).unwrap()[0].0, "gru_a");
        // tf-keras numbers the cells users create (`RNN(LSTMCell(4))`).
        assert_eq!(run(&["rnn_1/lstm_cell_1"]).unwrap()[0].0, "rnn_1");
        // A StackedRNNCells' cells are its layers, scoped as the architecture names
        // them (`rnn_2/gru_cell_1`, also inside a nested model).
        let found = run(&[
            "rnn_2/stacked_rnn_cells/gru_cell",
            "rnn_2/stacked_rnn_cells/gru_cell_1",
        ])
        .unwrap();
        let leaves: Vec<&str> = found.iter().map(|(leaf, ..)| leaf.as_str()).collect();
        assert_eq!(leaves, ["gru_cell", "gru_cell_1"]);
        let scope = LegacyWeight::new("seq/enc/s/stacked_rnn_cells/lstm_cell_1/kernel", "g").scope;
        assert_eq!(scope, ["seq", "enc", "s", "lstm_cell_1"]);
        // A Bidirectional of stacked cells is no layer of cuDNN's: passed over.
        assert_eq!(
            run(&[
                "bi/forward_rnn/stacked_rnn_cells/lstm_cell",
                "bi/forward_rnn/stacked_rnn_cells/lstm_cell_1",
                "bi/backward_rnn/stacked_rnn_cells/lstm_cell",
                "bi/backward_rnn/stacked_rnn_cells/lstm_cell_1",
            ]),
            Some(vec![])
        );
        // A Bidirectional, under any name (`backward_enc` too).
        for bi in ["bigru", "backward_enc", "outer/forward_x"] {
            let scopes = [
                format!("{bi}/forward_gru/gru_cell"),
                format!("{bi}/backward_gru/gru_cell"),
            ];
            let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
            let own = bi.rsplit('/').next().unwrap();
            assert_eq!(
                run(&scopes),
                Some(vec![layer(
                    own,
                    &format!("{bi}/forward_gru/gru_cell/kernel:0"),
                    Some(&format!("{bi}/backward_gru/gru_cell/kernel:0"))
                )]),
                "{bi}"
            );
        }
        // A nested model: its layers in order, a Bidirectional among them.
        assert_eq!(
            run(&["lstm/lstm_cell", "lstm_1/lstm_cell"]),
            Some(vec![
                layer("lstm", "lstm/lstm_cell/kernel:0", None),
                layer("lstm_1", "lstm_1/lstm_cell/kernel:0", None),
            ])
        );
        let found = run(&[
            "bi/forward_lstm/lstm_cell",
            "bi/backward_lstm/lstm_cell",
            "top/lstm_cell",
        ])
        .unwrap();
        let leaves: Vec<(&str, bool)> = found
            .iter()
            .map(|(leaf, _, backward)| (leaf.as_str(), backward.is_some()))
            .collect();
        assert_eq!(leaves, [("bi", true), ("top", false)]);
        // A forward layer without its backward one is a layer of its own name; two
        // backward ones do not pair.
        let leaves = |found: Vec<(String, String, Option<String>)>| -> Vec<(String, bool)> {
            found
                .into_iter()
                .map(|(l, _, b)| (l, b.is_some()))
                .collect()
        };
        assert_eq!(
            leaves(run(&["m/forward_a/lstm_cell", "m/other/lstm_cell"]).unwrap()),
            [
                ("forward_a".to_string(), false),
                ("other".to_string(), false)
            ]
        );
        assert_eq!(
            leaves(run(&["m/backward_a/lstm_cell", "m/backward_b/lstm_cell"]).unwrap()),
            [
                ("backward_a".to_string(), false),
                ("backward_b".to_string(), false)
            ]
        );
        // A Dense in the nested model is passed over; a bias-less layer has two weights.
        assert_eq!(
            legacy(&[
                "dense/kernel:0",
                "dense/bias:0",
                "lstm/lstm_cell/kernel:0",
                "lstm/lstm_cell/recurrent_kernel:0",
                "embedding/embeddings:0",
            ]),
            Some(vec![layer("lstm", "lstm/lstm_cell/kernel:0", None)])
        );
        // Only a cell's own scope is taken off: a cuDNN Bidirectional named `enc_cell`
        // (no cell scope) keeps its two directions.
        let found = legacy(&[
            "bidirectional/forward_enc_cell/kernel:0",
            "bidirectional/forward_enc_cell/recurrent_kernel:0",
            "bidirectional/backward_enc_cell/kernel:0",
            "bidirectional/backward_enc_cell/recurrent_kernel:0",
        ])
        .unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "bidirectional");
        assert!(found[0].2.is_some());
        // A recurrent kernel no kernel of its scope comes before is not read as anything.
        assert_eq!(legacy(&["a/kernel:0", "b/recurrent_kernel:0"]), None);
        assert_eq!(legacy(&["a/recurrent_kernel:0"]), None);
        assert_eq!(legacy(&[]), Some(vec![]));
    }

    /// A group's layers take consecutive slots unless other layers' weights sit
    /// between them; a group takes as many slots as its layers and runs of others.
    #[test]
    fn layers_with_weights_between_recurrent_layers_take_a_slot() {
        let slots = |names: &[&str]| {
            let weights: Vec<LegacyWeight> =
                names.iter().map(|n| LegacyWeight::new(n, "g")).collect();
            let (layers, total) = legacy_layers(&weights).unwrap();
            (layers.iter().map(|l| l.slot).collect::<Vec<_>>(), total)
        };
        let lstm = |scope: &'static str| {
            ["kernel:0", "recurrent_kernel:0"].map(move |r| format!("{scope}/lstm_cell/{r}"))
        };
        let join = |parts: &[Vec<String>]| -> Vec<String> { parts.concat() };
        let dense = vec!["dense/kernel:0".to_string(), "dense/bias:0".to_string()];
        let run = |parts: Vec<String>| slots(&parts.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(
            run(join(&[lstm("a").to_vec(), lstm("b").to_vec()])),
            (vec![0, 1], 2)
        );
        assert_eq!(
            run(join(&[
                lstm("a").to_vec(),
                dense.clone(),
                lstm("b").to_vec()
            ])),
            (vec![0, 2], 3)
        );
        assert_eq!(
            run(join(&[dense.clone(), lstm("a").to_vec(), dense.clone()])),
            (vec![1], 3)
        );
        assert_eq!(run(dense.clone()), (vec![], 1));
        // A Bidirectional is one layer: one slot for its two directions.
        let bi = |d: &'static str| {
            ["kernel:0", "recurrent_kernel:0"].map(move |r| format!("bi/{d}_lstm/lstm_cell/{r}"))
        };
        assert_eq!(
            run(join(&[
                bi("forward").to_vec(),
                bi("backward").to_vec(),
                lstm("b").to_vec()
            ])),
            (vec![0, 1], 2)
        );
        assert_eq!(
            run(join(&[
                bi("forward").to_vec(),
                bi("backward").to_vec(),
                dense,
                lstm("b").to_vec()
            ])),
            (vec![0, 2], 3)
        );
        assert_eq!(run(vec![]), (vec![], 0));
    }
}
