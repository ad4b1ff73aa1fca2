//! The initial state an ONNX graph gives its recurrent nodes as constants
//! ([`OnnxModel::lstm_initial_state`], [`OnnxModel::gru_initial_state`]), in the module's
//! layout.

use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

use crate::error::RnnError;
use crate::import::host::HostTensor;
use crate::import::onnx::{OnnxModel, OnnxRecurrentNode};
use crate::import::onnx_graph::GraphIndex;
use crate::import::onnx_tensor::tensor_values;
use crate::import::selection::RecurrentSelection;
use crate::module::state::{GruState, LstmState};
use crate::op::spec::CellKind;

/// A state input of a recurrent node: its name in ONNX's operator, and the name of the
/// graph's tensor a node gives it (`None` when none or zeros).
#[derive(Clone, Copy)]
struct StateInput {
    label: &'static str,
    given: fn(&OnnxRecurrentNode) -> Option<&str>,
}

const INITIAL_H: StateInput = StateInput {
    label: "initial_h",
    given: |node| node.initial_h.as_deref(),
};
const INITIAL_C: StateInput = StateInput {
    label: "initial_c",
    given: |node| node.initial_c.as_deref(),
};

impl OnnxModel {
    /// The initial state the selected `LSTM` nodes start from when the graph runs as
    /// stored: their `initial_h` and `initial_c` where those are constants (or graph
    /// inputs with default values, the defaults), zeros where a node has none, in the
    /// module's layout: `[nodes * dirs, batch, hidden]`, bottom node first (a `layout` 1
    /// node's `[batch, dirs, hidden]` transposed). Pass it to the module's `forward`
    /// to get the graph's outputs.
    ///
    /// `None` when every selected node starts from zeros ([`OnnxRecurrentNode`]'s
    /// `initial_h` and `initial_c` are `None`): the module's default state is the
    /// graph's, for any batch. A constant state fixes the batch size. A state the graph
    /// computes or takes from its caller is an error naming it (pass its values
    /// yourself; a learned state broadcast to the batch when the graph runs is named
    /// with its constant: exported for a fixed batch size, it is a constant), and so is
    /// one whose shape is not the node's or whose batch differs from another node's.
    ///
    /// [`OnnxRecurrentNode`]: crate::OnnxRecurrentNode
    pub fn lstm_initial_state<B: Backend>(
        &self,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<Option<LstmState<B>>, RnnError> {
        let Some(mut parts) =
            self.initial_parts(&nodes.into(), CellKind::Lstm, &[INITIAL_H, INITIAL_C])?
        else {
            return Ok(None);
        };
        let cell = parts.pop().expect("two parts");
        let hidden = parts.pop().expect("two parts");
        Ok(Some(LstmState::new(
            tensor(hidden, device),
            tensor(cell, device),
        )))
    }

    /// The initial state the selected `GRU` nodes start from when the graph runs as
    /// stored: as [`Self::lstm_initial_state`], from their `initial_h`.
    pub fn gru_initial_state<B: Backend>(
        &self,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<Option<GruState<B>>, RnnError> {
        let parts = self.initial_parts(&nodes.into(), CellKind::Gru, &[INITIAL_H])?;
        Ok(parts
            .and_then(|mut p| p.pop())
            .map(|h| GruState::new(tensor(h, device))))
    }

    /// For each of `inputs`, the selected nodes' values stacked as
    /// `[nodes * dirs, batch, hidden]` (zeros where a node has none); `None` when no
    /// selected node has a non-zero one.
    fn initial_parts(
        &self,
        selection: &RecurrentSelection,
        cell: CellKind,
        inputs: &[StateInput],
    ) -> Result<Option<Vec<HostTensor>>, RnnError> {
        let index = GraphIndex::new(&self.graph, self.ir_version);
        // The nodes of the module `lstm()` / `gru()` load: one size and layout.
        let picked = self.module_nodes(&index, selection, cell)?;
        // read[i][k]: input i of picked node k, `[dirs, batch, hidden]`.
        let mut read: Vec<Vec<Option<HostTensor>>> = Vec::with_capacity(inputs.len());
        let mut batch: Option<(usize, String)> = None;
        for &input in inputs {
            let mut values = Vec::with_capacity(picked.len());
            for &k in &picked {
                let value = self.initial_input(&index, k, input)?;
                if let Some(v) = &value {
                    let b = v.shape[1];
                    let node = &self.nodes[k].info.name;
                    let here = format!("{} of '{node}'", input.label);
                    match &batch {
                        Some((first, there)) if *first != b => {
                            return Err(RnnError::invalid(
                                format!(
                                    "{}: ONNX node '{node}' input {}",
                                    self.source, input.label
                                ),
                                format!("a batch of {first}, as {there}"),
                                format!("a batch of {b}"),
                            ));
                        }
                        Some(_) => {}
                        None => batch = Some((b, here)),
                    }
                }
                values.push(value);
            }
            read.push(values);
        }
        let Some((batch, _)) = batch else {
            return Ok(None);
        };
        let info = &self.nodes[picked[0]].info;
        let dirs = info.directions();
        let hidden = info.hidden_size;
        let per_node = dirs * batch * hidden;
        let stacked = read
            .into_iter()
            .map(|values| {
                let mut all = Vec::with_capacity(values.len() * per_node);
                for value in values {
                    match value {
                        Some(v) => all.extend(v.values),
                        None => all.resize(all.len() + per_node, 0.0),
                    }
                }
                HostTensor {
                    shape: vec![picked.len() * dirs, batch, hidden],
                    values: all,
                }
            })
            .collect();
        Ok(Some(stacked))
    }

    /// Input `input` of node `k` as `[dirs, batch, hidden]`, read from the graph's
    /// constants; `None` where the node has none or zeros.
    fn initial_input(
        &self,
        index: &GraphIndex,
        k: usize,
        input: StateInput,
    ) -> Result<Option<HostTensor>, RnnError> {
        let info = &self.nodes[k].info;
        let Some(name) = (input.given)(info) else {
            return Ok(None);
        };
        let what = format!(
            "{}: ONNX node '{}' input {}",
            self.source, info.name, input.label
        );
        let Some(tensor) = index.tensor_or_default(name) else {
            return Err(RnnError::invalid(
                what,
                "a constant (an initializer, a Constant node's tensor, or a graph input's default) to read the state from",
                format!("'{name}', {}", self.not_constant(index, name)),
            ));
        };
        let dirs = info.directions();
        let hidden = info.hidden_size;
        let dims = &tensor.dims;
        // The node's layout: `[dirs, batch, hidden]`, or `[batch, dirs, hidden]` for layout 1.
        let batch = match (dims.as_slice(), info.batch_first) {
            (&[d, b, h], false) | (&[b, d, h], true)
                if d == dirs as i64 && h == hidden as i64 && b > 0 =>
            {
                b as usize
            }
            _ => {
                return Err(RnnError::invalid(
                    what,
                    if info.batch_first {
                        format!("shape [batch, {dirs}, {hidden}] (layout 1)")
                    } else {
                        format!("shape [{dirs}, batch, {hidden}]")
                    },
                    format!("'{name}' of shape {dims:?}"),
                ));
            }
        };
        let values = tensor_values(&self.source, &self.dir, name, tensor)?;
        if !info.batch_first {
            return Ok(Some(values));
        }
        // [batch, dirs, hidden] to [dirs, batch, hidden].
        let mut swapped = Vec::with_capacity(values.len());
        for d in 0..dirs {
            for b in 0..batch {
                let at = (b * dirs + d) * hidden;
                swapped.extend_from_slice(&values.values[at..at + hidden]);
            }
        }
        Ok(Some(HostTensor {
            shape: vec![dirs, batch, hidden],
            values: swapped,
        }))
    }
}

impl OnnxModel {
    /// What the state `name`, which is not a constant, is, and what to do about it.
    fn not_constant(&self, index: &GraphIndex, name: &str) -> String {
        if index.constant(name).is_some() {
            return "a Constant node's list of values, not a tensor of the state's shape".into();
        }
        let pass = "pass its values as the module's state";
        let is_input = |n: &str| {
            self.graph
                .input
                .iter()
                .any(|i| i.name.as_deref() == Some(n))
        };
        let through = |ops: &[String]| ops.join(", ");
        let constant = |n: &str| {
            if index.constant(n).is_some() {
                format!("the constant '{n}'")
            } else {
                format!("the default of the graph input '{n}'")
            }
        };
        match origin(index, &is_input, name) {
            Origin::Input { input, ops } if ops.is_empty() => {
                debug_assert_eq!(input, name);
                format!("an input of the graph: {pass}")
            }
            Origin::Input { input, ops } => format!(
                "computed when the graph runs from the graph input '{input}' (through {}): {pass}",
                through(&ops)
            ),
            Origin::Broadcast { source, ops } => format!(
                "computed when the graph runs from {} (through {}: broadcast to a size known \
                 only then, as exporters give a learned state the batch size): export with a \
                 fixed batch size, which folds it into a constant, or {pass}",
                constant(&source),
                through(&ops)
            ),
            Origin::Reshaped { source, ops } => format!(
                "computed when the graph runs from {} (through {}), by operators this reader \
                 does not evaluate: export with constant folding (the exporters' default), \
                 or {pass}",
                constant(&source),
                through(&ops)
            ),
            Origin::Computed => format!("computed when the graph runs: {pass}"),
        }
    }
}

/// Where a tensor that is not a constant comes from, followed back through reshaping
/// and broadcasting operators (each step's first input); `ops` in the order they apply.
#[derive(Debug, PartialEq)]
enum Origin {
    /// A graph input without a default: the caller's values.
    Input { input: String, ops: Vec<String> },
    /// A constant (or a graph input's default) tiled or expanded to a size computed when
    /// the graph runs.
    Broadcast { source: String, ops: Vec<String> },
    /// A constant (or a graph input's default) reshaped to sizes the graph holds.
    Reshaped { source: String, ops: Vec<String> },
    /// Another operator, or past [`MAX_STEPS`].
    Computed,
}

/// The [`Origin`] of the tensor `name` (not a constant itself); `is_input`: whether a
/// name is a graph input.
fn origin(index: &GraphIndex, is_input: &dyn Fn(&str) -> bool, name: &str) -> Origin {
    const RESHAPING: [&str; 9] = [
        "Identity",
        "Cast",
        "Unsqueeze",
        "Squeeze",
        "Reshape",
        "Transpose",
        "Tile",
        "Expand",
        "Slice",
    ];
    let mut ops = Vec::new();
    let mut broadcast = false;
    let mut at = name;
    for step in 0..=MAX_STEPS {
        if step > 0 && index.tensor_or_default(at).is_some() {
            ops.reverse();
            let source = at.to_string();
            return if broadcast {
                Origin::Broadcast { source, ops }
            } else {
                Origin::Reshaped { source, ops }
            };
        }
        if is_input(at) {
            ops.reverse();
            let input = at.to_string();
            return Origin::Input { input, ops };
        }
        let Some(producer) = index.producer(at) else {
            return Origin::Computed;
        };
        if producer.output != 0 || !RESHAPING.contains(&producer.op.as_str()) {
            return Origin::Computed;
        }
        // Repeats or a shape that is not a constant: a size known when the graph runs.
        let sizes = producer.node.input.get(1).filter(|n| !n.is_empty());
        if matches!(producer.op.as_str(), "Tile" | "Expand")
            && sizes.is_some_and(|n| index.ints(n).is_none())
        {
            broadcast = true;
        }
        ops.push(producer.op.clone());
        let Some(input) = producer.node.input.first().filter(|n| !n.is_empty()) else {
            return Origin::Computed;
        };
        at = input;
    }
    Origin::Computed
}

/// Most steps [`origin`] follows.
const MAX_STEPS: usize = 16;

/// `t` on `device`, in its float type.
fn tensor<B: Backend>(t: HostTensor, device: &B::Device) -> Tensor<B, 3> {
    let shape: [usize; 3] = [t.shape[0], t.shape[1], t.shape[2]];
    Tensor::from_data(TensorData::new(t.values, shape), device)
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;

    use crate::import::onnx_proto::build::{int64s, ints_attr, node, write_model};
    use crate::import::onnx_proto::{
        AttributeProto, GraphProto, NodeProto, TensorProto, ValueInfoProto,
    };

    use super::*;

    const INPUT: usize = 3;
    const HIDDEN: usize = 2;

    fn floats(name: &str, dims: &[usize], value: impl Fn(usize) -> f32) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            data_type: Some(1),
            dims: dims.iter().map(|&d| d as i64).collect(),
            float_data: (0..dims.iter().product()).map(value).collect(),
            ..Default::default()
        }
    }

    /// A graph under construction: nodes and initializers.
    #[derive(Default)]
    struct Graph {
        nodes: Vec<NodeProto>,
        initializers: Vec<TensorProto>,
    }

    impl Graph {
        /// A bidirectional LSTM node `name` (hidden 2) on `x` of `input` features with
        /// `layout`, its `initial_h` and `initial_c` inputs and its weights; returns
        /// its output `Y`.
        fn lstm(
            &mut self,
            name: &str,
            x: &str,
            input: usize,
            layout: i64,
            h: &str,
            c: &str,
        ) -> String {
            let (w, r) = (format!("{name}_W"), format!("{name}_R"));
            let y = format!("{name}_Y");
            let mut n = node("LSTM", &[x, &w, &r, "", "", h, c], &y);
            n.name = Some(name.into());
            n.attribute.push(ints_attr("hidden_size", &[HIDDEN as i64]));
            n.attribute.push(ints_attr("layout", &[layout]));
            n.attribute.push(AttributeProto {
                name: Some("direction".into()),
                s: Some(b"bidirectional".to_vec()),
                ..Default::default()
            });
            self.nodes.push(n);
            for (name, dims) in [(w, [2, 4 * HIDDEN, input]), (r, [2, 4 * HIDDEN, HIDDEN])] {
                self.initializers
                    .push(floats(&name, &dims, |i| i as f32 / 64.0));
            }
            y
        }

        /// `y` (layout 0) folded into `[seq, batch, 2 * hidden]` as PyTorch links a
        /// stack: a Transpose, then a Reshape to `[0, 0, -1]`.
        fn fold(&mut self, y: &str) -> String {
            let (t, out) = (format!("{y}_t"), format!("{y}_folded"));
            let mut transpose = node("Transpose", &[y], &t);
            transpose.attribute.push(ints_attr("perm", &[0, 2, 1, 3]));
            self.nodes.push(transpose);
            self.nodes.push(node("Reshape", &[&t, "fold"], &out));
            if !self
                .initializers
                .iter()
                .any(|i| i.name.as_deref() == Some("fold"))
            {
                self.initializers.push(int64s("fold", &[0, 0, -1]));
            }
            out
        }

        /// The model with `states` among its initializers and a graph input `h0`,
        /// written to `dir` and opened.
        fn open(mut self, dir: &std::path::Path, states: Vec<TensorProto>) -> OnnxModel {
            self.initializers.extend(states);
            let graph = GraphProto {
                node: self.nodes,
                initializer: self.initializers,
                input: vec![ValueInfoProto {
                    name: Some("h0".into()),
                    ..Default::default()
                }],
                ..Default::default()
            };
            OnnxModel::open(write_model(dir, "states.onnx", graph)).unwrap()
        }
    }

    fn values(t: Tensor<NdArray<f32>, 3>) -> (Vec<usize>, Vec<f32>) {
        (t.dims().to_vec(), t.into_data().to_vec::<f32>().unwrap())
    }

    #[test]
    fn a_batch_first_nodes_state_is_transposed_and_a_missing_cell_state_is_zeros() {
        let dir = tempfile::tempdir().unwrap();
        // [batch 3, dirs 2, hidden 2] for layout 1, [dirs 2, batch 3, hidden 2] for 0:
        // the value at (d, b, k) is 100·d + 10·b + k in both.
        let at = |d: usize, b: usize, k: usize| (100 * d + 10 * b + k) as f32;
        let batch_first = floats("h_bf", &[3, 2, HIDDEN], |i| {
            at(i / HIDDEN % 2, i / (2 * HIDDEN), i % HIDDEN)
        });
        let seq_major = floats("h_sm", &[2, 3, HIDDEN], |i| {
            at(i / (3 * HIDDEN), i / HIDDEN % 3, i % HIDDEN)
        });
        let mut graph = Graph::default();
        graph.lstm("bf", "x", INPUT, 1, "h_bf", "");
        graph.lstm("sm", "x", INPUT, 0, "h_sm", "");
        let model = graph.open(dir.path(), vec![batch_first, seq_major.clone()]);
        let device = Default::default();
        let expected = (vec![2, 3, HIDDEN], seq_major.float_data.to_vec());
        for node in ["bf", "sm"] {
            let state = model
                .lstm_initial_state::<NdArray<f32>>(node, &device)
                .unwrap()
                .expect("a non-zero constant state");
            assert_eq!(values(state.hidden), expected, "{node}");
            assert_eq!(values(state.cell), (vec![2, 3, HIDDEN], vec![0.0; 12]));
        }
        // Nodes of two layouts are not one module: refused as lstm() refuses them.
        let mixed = RecurrentSelection::Stack(vec!["bf".into(), "sm".into()]);
        let error = model
            .lstm_initial_state::<NdArray<f32>>(mixed.clone(), &device)
            .unwrap_err()
            .to_string();
        let refused = model.lstm::<NdArray<f32>>(mixed, &device).unwrap_err();
        assert_eq!(error, refused.to_string());
    }

    #[test]
    fn nodes_without_states_give_none_and_stacks_take_zeros_for_them() {
        let dir = tempfile::tempdir().unwrap();
        let c = floats("c", &[2, 1, HIDDEN], |i| i as f32 + 1.0);
        let zeros = floats("z", &[2, 1, HIDDEN], |_| 0.0);
        let mut graph = Graph::default();
        let y = graph.lstm("none", "x", INPUT, 0, "z", "");
        let folded = graph.fold(&y);
        graph.lstm("cell", &folded, 2 * HIDDEN, 0, "", "c");
        let model = graph.open(dir.path(), vec![c, zeros]);
        let device = Default::default();
        let none = model.lstm_initial_state::<NdArray<f32>>("none", &device);
        assert!(none.unwrap().is_none());
        let stack = model
            .lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device)
            .unwrap()
            .unwrap();
        assert_eq!(values(stack.hidden), (vec![4, 1, HIDDEN], vec![0.0; 8]));
        assert_eq!(
            values(stack.cell),
            (
                vec![4, 1, HIDDEN],
                vec![0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0]
            )
        );
        let gru = model.gru_initial_state::<NdArray<f32>>("none", &device);
        assert!(gru.unwrap_err().to_string().contains("OnnxModel::lstm"));
    }

    #[test]
    fn states_the_graph_does_not_hold_or_of_other_shapes_are_errors_naming_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut graph = Graph::default();
        graph.lstm("input", "x", INPUT, 0, "h0", "");
        graph.lstm("shape", "x", INPUT, 0, "wide", "");
        graph.lstm("batch", "x", INPUT, 0, "one", "two");
        graph.lstm("computed", "x", INPUT, 0, "x", "");
        let mut list = node("Constant", &[], "list");
        list.attribute.push(AttributeProto {
            name: Some("value_floats".into()),
            floats: vec![1.0; 4],
            ..Default::default()
        });
        graph.nodes.push(list);
        graph.lstm("list", "x", INPUT, 0, "list", "");
        // tf2onnx's learned state for a batch known at run time: a [1, hidden] constant
        // tiled to the batch, then given its direction axis.
        let mut tile = node("Tile", &["learned", "repeats"], "tiled");
        tile.name = Some("tile".into());
        graph.nodes.push(tile);
        graph
            .nodes
            .push(node("Unsqueeze", &["tiled", "axes"], "broadcast"));
        graph.lstm("broadcast", "x", INPUT, 0, "broadcast", "");
        // PyTorch's slice of the caller's h0 per layer; a constant reshaped to sizes the
        // graph holds; a cycle.
        graph
            .nodes
            .push(node("Slice", &["h0", "axes", "axes"], "sliced"));
        graph.lstm("sliced", "x", INPUT, 0, "sliced", "");
        graph
            .nodes
            .push(node("Expand", &["learned", "fixed"], "expanded"));
        graph.lstm("expanded", "x", INPUT, 0, "expanded", "");
        graph.nodes.push(node("Identity", &["loop_b"], "loop_a"));
        graph.nodes.push(node("Identity", &["loop_a"], "loop_b"));
        graph.lstm("cycle", "x", INPUT, 0, "loop_a", "");
        let model = graph.open(
            dir.path(),
            vec![
                floats("wide", &[2, 1, HIDDEN + 1], |_| 1.0),
                floats("one", &[2, 1, HIDDEN], |_| 1.0),
                floats("two", &[2, 2, HIDDEN], |_| 1.0),
                floats("learned", &[1, HIDDEN], |_| 1.0),
                int64s("axes", &[0]),
                int64s("fixed", &[2, 1, HIDDEN as i64]),
            ],
        );
        let device = Default::default();
        let error = |node: &str| {
            model
                .lstm_initial_state::<NdArray<f32>>(node, &device)
                .unwrap_err()
                .to_string()
        };
        let input = error("input");
        assert!(
            input.contains("'input' input initial_h")
                && input.contains("'h0', an input of the graph"),
            "{input}"
        );
        let computed = error("computed");
        assert!(
            computed.contains("'x', computed when the graph runs"),
            "{computed}"
        );
        let broadcast = error("broadcast");
        assert!(
            broadcast.contains("from the constant 'learned' (through Tile, Unsqueeze")
                && broadcast.contains("export with a fixed batch size"),
            "{broadcast}"
        );
        let sliced = error("sliced");
        assert!(
            sliced.contains("from the graph input 'h0' (through Slice): pass its values"),
            "{sliced}"
        );
        let expanded = error("expanded");
        assert!(
            expanded.contains("from the constant 'learned' (through Expand), by operators")
                && expanded.contains("export with constant folding"),
            "{expanded}"
        );
        let cycle = error("cycle");
        assert!(
            cycle.contains("'loop_a', computed when the graph runs: pass"),
            "{cycle}"
        );
        let list = error("list");
        assert!(list.contains("'list', a Constant node's list"), "{list}");
        let shape = error("shape");
        assert!(
            shape.contains("shape [2, batch, 2]") && shape.contains("[2, 1, 3]"),
            "{shape}"
        );
        let batch = error("batch");
        assert!(
            batch.contains("'batch' input initial_c")
                && batch.contains("a batch of 1, as initial_h of 'batch'")
                && batch.contains("a batch of 2"),
            "{batch}"
        );
    }
}
