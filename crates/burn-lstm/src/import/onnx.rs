//! [`OnnxModel`]: the `LSTM` and `GRU` nodes of an ONNX graph, loaded into
//! [`CudnnCompatibleLstm`] / [`CudnnCompatibleGru`] with the config they imply.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::backend::Backend;
use prost::Message;

use crate::error::RnnError;
use crate::import::MAX_UNITS;
use crate::import::cell_name;
use crate::import::gates::{ONNX_GRU, ONNX_LSTM, onnx_matrix, reorder};
use crate::import::hdf5::io;
use crate::import::host::{DirectionParams, HostTensor, StackParams, build_gru, build_lstm};
use crate::import::onnx_graph::GraphIndex;
use crate::import::onnx_link;
use crate::import::onnx_proto::{AttributeProto, GraphProto, ModelProto, NodeProto, attr};
use crate::import::onnx_tensor::{external_path, tensor_values};
use crate::import::onnx_zeros::ZeroCheck;
use crate::import::selection::{RecurrentSelection, resolve};
use crate::module::config::CudnnCompatibleLstmConfig;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::gru_config::CudnnCompatibleGruConfig;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::op::spec::CellKind;

/// One `LSTM` or `GRU` node of an ONNX graph.
#[derive(Debug, Clone, PartialEq)]
pub struct OnnxRecurrentNode {
    /// The node's name (its first output's name when the node has none).
    pub name: String,
    /// `LSTM` or `GRU`.
    pub op_type: String,
    /// LSTM or GRU.
    pub cell: CellKind,
    /// Features of each input step (from `W`).
    pub input_size: usize,
    /// `hidden_size`.
    pub hidden_size: usize,
    /// `direction` is `bidirectional`.
    pub bidirectional: bool,
    /// `layout` is 1 (`X` is `[batch, seq, input]`); 0, ONNX's default, is
    /// sequence-major.
    pub batch_first: bool,
    /// The node has a bias `B`.
    pub bias: bool,
    /// The name of its `sequence_lens` input, when it has one: pass those lengths to
    /// `forward_with_lengths` (ONNX's semantics are the module's: zeros past each
    /// row's length, final states at it, the reverse direction from it).
    pub sequence_lens: Option<String>,
    /// The name of its `initial_h` input, when it has one that is not zeros: pass it
    /// as the state. A constant's values are [`OnnxModel::lstm_initial_state`]'s (or
    /// `gru_initial_state`'s), in the module's layout. A graph input's you give: with
    /// `layout` 0 it is `[dirs, batch, hidden]`, the module's layout (nodes loaded as
    /// one module: theirs concatenated on dimension 0, bottom first); with `layout` 1 it
    /// is `[batch, dirs, hidden]`: swap its first two dimensions first (and those of the
    /// final states to compare them with ONNX's `Y_h` / `Y_c`). `None` also when the
    /// input is zeros whatever the graph's inputs (a constant of zeros, or one expanded
    /// or sliced from zeros: how PyTorch's default exporter writes the default state):
    /// the module's default state, for any batch.
    pub initial_h: Option<String>,
    /// The name of its `initial_c` input (LSTM), when it has one: as `initial_h`.
    pub initial_c: Option<String>,
    /// Why the node cannot be loaded (an attribute or input cuDNN cannot run, weights
    /// that are not constants or have other shapes), returned when it is selected;
    /// `None` when it can.
    pub refusal: Option<RnnError>,
}

impl OnnxRecurrentNode {
    /// Directions: 2 when bidirectional, else 1.
    pub(crate) fn directions(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }
}

/// A node's parameters: its forward direction, and its reverse one when bidirectional.
type Params = (DirectionParams, Option<DirectionParams>);

pub(super) struct Node {
    pub(super) info: OnnxRecurrentNode,
    params: Result<Arc<Params>, RnnError>,
    /// Index in the graph's node list.
    index: usize,
}

/// The `LSTM` and `GRU` nodes of an ONNX model file, with their weights read from the
/// graph's initializers (or `Constant` nodes) and checked when the file is opened.
///
/// ```no_run
/// # fn main() -> Result<(), burn_lstm::RnnError> {
/// use burn::backend::Flex;
/// use burn_lstm::{OnnxModel, RecurrentSelection};
///
/// let model = OnnxModel::open("model.onnx")?;
/// // PyTorch exports a 2-layer nn.LSTM as two LSTM nodes: load both as one module.
/// let (lstm, config) = model.lstm::<Flex>(RecurrentSelection::All, &Default::default())?;
/// assert!(!config.batch_first); // ONNX's layout 0: [seq, batch, features]
/// # Ok(())
/// # }
/// ```
pub struct OnnxModel {
    pub(super) source: String,
    pub(super) nodes: Vec<Node>,
    pub(super) graph: GraphProto,
    pub(super) ir_version: Option<i64>,
    /// The model file's folder, where its external data is.
    pub(super) dir: PathBuf,
}

impl core::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("source", &self.source)
            .field("nodes", &self.nodes())
            .finish()
    }
}

fn attr_string(a: &AttributeProto) -> String {
    String::from_utf8_lossy(a.s.as_deref().unwrap_or_default()).into_owned()
}

impl OnnxModel {
    /// Opens an ONNX model file and reads its recurrent nodes.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RnnError> {
        let path = path.as_ref();
        let source = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| io(&source, e.to_string()))?;
        let model = ModelProto::decode(bytes.as_slice()).map_err(|e| {
            io(
                &source,
                format!("not an ONNX model (protobuf decoding failed: {e})"),
            )
        })?;
        let model_len = bytes.len() as u64;
        drop(bytes);
        let graph = model
            .graph
            .ok_or_else(|| io(&source, "an ONNX model without a graph"))?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let graph_index = GraphIndex::new(&graph, model.ir_version);
        let zero_check = ZeroCheck::new(&graph_index, &dir);
        let mut budget = ReadBudget::new(file_bytes(model_len, &dir, &graph));
        let mut shared: HashMap<SharedKey, (Arc<Params>, usize)> = HashMap::new();
        let mut nodes = Vec::new();
        for (index, node) in graph.node.iter().enumerate() {
            let op = node.op_type.as_deref().unwrap_or_default();
            let domain = node.domain.as_deref().unwrap_or_default();
            if !(op == "LSTM" || op == "GRU") || !(domain.is_empty() || domain == "ai.onnx") {
                continue;
            }
            let name = match node.name.as_deref() {
                Some(n) if !n.is_empty() => n.to_string(),
                _ => node
                    .output
                    .first()
                    .cloned()
                    .unwrap_or_else(|| format!("{op}#{index}")),
            };
            let cell = if op == "LSTM" {
                CellKind::Lstm
            } else {
                CellKind::Gru
            };
            let input = |i: usize| node.input.get(i).filter(|n| !n.is_empty()).cloned();
            let direction = attr(node, "direction")
                .map(attr_string)
                .unwrap_or_else(|| "forward".into());
            let hidden_size = attr(node, "hidden_size")
                .and_then(|a| a.i)
                .unwrap_or(0)
                .max(0) as usize;
            let zero = |name: &str| zero_check.zeros(name);
            let mut info = OnnxRecurrentNode {
                name,
                op_type: op.to_string(),
                cell,
                input_size: 0,
                hidden_size,
                bidirectional: direction == "bidirectional",
                batch_first: attr(node, "layout").and_then(|a| a.i) == Some(1),
                bias: input(3).is_some(),
                sequence_lens: input(4),
                initial_h: input(5).filter(|n| !zero(n)),
                initial_c: input(6).filter(|n| cell == CellKind::Lstm && !zero(n)),
                refusal: None,
            };
            let key: SharedKey = (
                (1..4).map(|i| input(i).unwrap_or_default()).collect(),
                cell,
                hidden_size,
                info.bidirectional,
            );
            let params = check(&source, node, &info, &direction, &zero).and_then(|()| {
                if let Some((params, input_size)) = shared.get(&key) {
                    info.input_size = *input_size;
                    return Ok(params.clone());
                }
                let params = Arc::new(weights(
                    &source,
                    &dir,
                    node,
                    &mut info,
                    &graph_index,
                    &mut budget,
                )?);
                shared.insert(key, (params.clone(), info.input_size));
                Ok(params)
            });
            info.refusal = params.as_ref().err().cloned();
            nodes.push(Node {
                info,
                params,
                index,
            });
        }
        Ok(Self {
            source,
            nodes,
            graph,
            ir_version: model.ir_version,
            dir,
        })
    }

    /// The file's name, as errors give it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The `LSTM` and `GRU` nodes, in the graph's order (an
    /// [`RecurrentSelection::Index`] counts among them).
    pub fn nodes(&self) -> Vec<&OnnxRecurrentNode> {
        self.nodes.iter().map(|n| &n.info).collect()
    }

    /// The node named `name`, when it is one of [`Self::nodes`].
    pub fn node(&self, name: &str) -> Option<&OnnxRecurrentNode> {
        self.nodes.iter().map(|n| &n.info).find(|n| n.name == name)
    }

    /// Loads the selected `LSTM` nodes as one module, with the config they imply
    /// (`batch_first` from `layout`, no dropout).
    pub fn lstm<B: Backend>(
        &self,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(CudnnCompatibleLstm<B>, CudnnCompatibleLstmConfig), RnnError> {
        build_lstm(self.stack(&nodes.into(), CellKind::Lstm)?, device)
    }

    /// Loads the selected `GRU` nodes (`linear_before_reset=1`) as one module, with the
    /// config they imply.
    pub fn gru<B: Backend>(
        &self,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(CudnnCompatibleGru<B>, CudnnCompatibleGruConfig), RnnError> {
        build_gru(self.stack(&nodes.into(), CellKind::Gru)?, device)
    }

    /// The nodes `selection` picks, in order, each a node of `cell` whose weights loaded.
    fn selected(
        &self,
        selection: &RecurrentSelection,
        cell: CellKind,
    ) -> Result<Vec<usize>, RnnError> {
        let names: Vec<&str> = self.nodes.iter().map(|n| n.info.name.as_str()).collect();
        let picked = resolve(selection, &names, &self.source, "ONNX node")?;
        for &index in &picked {
            let node = &self.nodes[index];
            node.params.as_ref().map_err(Clone::clone)?;
            if node.info.cell != cell {
                return Err(RnnError::invalid(
                    format!("{}: ONNX node '{}'", self.source, node.info.name),
                    format!(
                        "an {} node (this call loads {}s)",
                        cell_name(cell),
                        cell_name(cell)
                    ),
                    format!(
                        "a {} node: load it with OnnxModel::{}",
                        node.info.op_type,
                        node.info.op_type.to_lowercase()
                    ),
                ));
            }
        }
        Ok(picked)
    }

    /// The nodes `selection` picks when they make one module: [`Self::selected`], each
    /// node after the first linked to the one before ([`Self::check_link`]: same sizes
    /// and options).
    pub(super) fn module_nodes(
        &self,
        index: &GraphIndex,
        selection: &RecurrentSelection,
        cell: CellKind,
    ) -> Result<Vec<usize>, RnnError> {
        let picked = self.selected(selection, cell)?;
        for k in 1..picked.len() {
            self.check_link(
                index,
                &self.nodes[picked[0]],
                &self.nodes[picked[k - 1]],
                &self.nodes[picked[k]],
            )?;
        }
        Ok(picked)
    }

    fn stack(
        &self,
        selection: &RecurrentSelection,
        cell: CellKind,
    ) -> Result<StackParams, RnnError> {
        let index = GraphIndex::new(&self.graph, self.ir_version);
        let picked = self.module_nodes(&index, selection, cell)?;
        let layers = picked
            .iter()
            .map(|&index| {
                let params = self.nodes[index].params.as_ref().map_err(Clone::clone)?;
                Ok(Params::clone(params))
            })
            .collect::<Result<Vec<_>, RnnError>>()?;
        let first = &self.nodes[picked[0]].info;
        Ok(StackParams {
            cell,
            input_size: first.input_size,
            hidden_size: first.hidden_size,
            bidirectional: first.bidirectional,
            bias: first.bias,
            batch_first: first.batch_first,
            layers,
        })
    }

    /// Checks that `upper` can sit on `lower` in one module: same sizes and options,
    /// and `upper`'s `X` is `lower`'s `Y` with its direction axis folded into the
    /// features as PyTorch exports a stack (`onnx_link`).
    fn check_link(
        &self,
        index: &GraphIndex,
        bottom: &Node,
        lower: &Node,
        upper: &Node,
    ) -> Result<(), RnnError> {
        let (a, b) = (&lower.info, &upper.info);
        let what = |s: &str| {
            format!(
                "{}: ONNX node '{}' {s} (stacked on '{}')",
                self.source, b.name, a.name
            )
        };
        let same = |name: &str, x: String, y: String| {
            if x == y {
                Ok(())
            } else {
                Err(RnnError::invalid(
                    what(name),
                    format!("{x}, as '{}'", a.name),
                    y,
                ))
            }
        };
        same(
            "hidden_size",
            a.hidden_size.to_string(),
            b.hidden_size.to_string(),
        )?;
        same(
            "direction",
            a.bidirectional.to_string(),
            b.bidirectional.to_string(),
        )?;
        same("bias", a.bias.to_string(), b.bias.to_string())?;
        same(
            "layout",
            a.batch_first.to_string(),
            b.batch_first.to_string(),
        )?;
        same(
            "sequence_lens",
            format!("{:?}", a.sequence_lens),
            format!("{:?}", b.sequence_lens),
        )?;
        let feeds = a.hidden_size * a.directions();
        if b.input_size != feeds {
            return Err(RnnError::invalid(
                what("input size"),
                format!("{feeds} (the output of '{}')", a.name),
                b.input_size.to_string(),
            ));
        }
        fn first(names: &[String]) -> &str {
            names.first().map(String::as_str).unwrap_or_default()
        }
        let (lower_node, upper_node) =
            (&self.graph.node[lower.index], &self.graph.node[upper.index]);
        let link = onnx_link::Link {
            lower: &a.name,
            lower_x: first(&lower_node.input),
            input_size: a.input_size,
            bottom_x: first(&self.graph.node[bottom.index].input),
            bottom_input_size: bottom.info.input_size,
            y: first(&lower_node.output),
            x: first(&upper_node.input),
            directions: a.directions(),
            hidden: a.hidden_size,
            batch_first: a.batch_first,
        };
        onnx_link::check(index, &link)
            .map_err(|(expected, actual)| RnnError::invalid(what("input X"), expected, actual))
    }
}

/// Refuses what cuDNN's layers cannot run, naming the node, the attribute or input, the
/// expected and the actual value.
fn check(
    source: &str,
    node: &NodeProto,
    info: &OnnxRecurrentNode,
    direction: &str,
    zeros: &dyn Fn(&str) -> bool,
) -> Result<(), RnnError> {
    let what = |s: &str| format!("{source}: ONNX node '{}' {s}", info.name);
    let refuse =
        |s: &str, expected: &str, actual: String| Err(RnnError::invalid(what(s), expected, actual));
    if !(1..=MAX_UNITS).contains(&info.hidden_size) {
        return refuse(
            "hidden_size",
            &format!("an integer in 1..={MAX_UNITS}"),
            attr(node, "hidden_size")
                .and_then(|a| a.i)
                .map_or("none".into(), |v| v.to_string()),
        );
    }
    if direction != "forward" && direction != "bidirectional" {
        return refuse(
            "direction",
            "\"forward\" or \"bidirectional\" (a lone reverse direction has no cuDNN equivalent)",
            format!("{direction:?}"),
        );
    }
    if let Some(layout) = attr(node, "layout").and_then(|a| a.i)
        && layout != 0
        && layout != 1
    {
        return refuse("layout", "0 or 1", layout.to_string());
    }
    let dirs = info.directions();
    let defaults: &[&str] = match info.cell {
        CellKind::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        CellKind::Gru => &["Sigmoid", "Tanh"],
    };
    if let Some(a) = attr(node, "activations") {
        let given: Vec<String> = a
            .strings
            .iter()
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect();
        let expected: Vec<&str> = (0..dirs).flat_map(|_| defaults.iter().copied()).collect();
        // ONNX Runtime reads the names in any case, and an empty list as the defaults.
        let defaults_given = given.is_empty()
            || (given.len() == expected.len()
                && given
                    .iter()
                    .zip(&expected)
                    .all(|(g, e)| g.eq_ignore_ascii_case(e)));
        if !defaults_given {
            return refuse(
                "activations",
                &format!(
                    "{expected:?} (cuDNN's {}; the default)",
                    cell_name(info.cell)
                ),
                format!("{given:?}"),
            );
        }
    }
    for key in ["activation_alpha", "activation_beta"] {
        if let Some(a) = attr(node, key).filter(|a| !a.floats.is_empty()) {
            return refuse(
                key,
                "none (the default activations take no parameters)",
                format!("{:?}", a.floats),
            );
        }
    }
    if let Some(clip) = attr(node, "clip").and_then(|a| a.f) {
        return refuse(
            "clip",
            "none (cuDNN does not clip the cell input)",
            clip.to_string(),
        );
    }
    match info.cell {
        CellKind::Lstm => {
            let coupled = attr(node, "input_forget").and_then(|a| a.i).unwrap_or(0);
            if coupled != 0 {
                return refuse(
                    "input_forget",
                    "0 (separate input and forget gates)",
                    coupled.to_string(),
                );
            }
            if let Some(p) = node.input.get(7).filter(|n| !n.is_empty() && !zeros(n)) {
                return refuse(
                    "input P",
                    "none, or zeros (cuDNN's LSTM has no peephole connections)",
                    format!("'{p}'"),
                );
            }
        }
        CellKind::Gru => {
            let lbr = attr(node, "linear_before_reset")
                .and_then(|a| a.i)
                .unwrap_or(0);
            if lbr != 1 {
                return refuse(
                    "linear_before_reset",
                    "1 (the reset gate applied after the recurrent product: cuDNN's, PyTorch's, Keras's reset_after=True)",
                    lbr.to_string(),
                );
            }
        }
    }
    Ok(())
}

/// Weight values read while a model opens, bounded by what its files hold: one value a
/// byte of the model and of its external data files (float16, the narrowest type read,
/// takes two), plus 16 Mi. Nodes that name the same weights share one read (a decoder
/// unrolled over one LSTM); a file whose tensors alias the same bytes under many names
/// (external data at one offset) stops at the bound.
struct ReadBudget {
    limit: u64,
    total: u64,
}

impl ReadBudget {
    fn new(file_bytes: u64) -> Self {
        Self {
            limit: file_bytes.saturating_add(16 << 20),
            total: 0,
        }
    }

    /// Whether `count` more values may be read.
    fn allows(&self, count: u64) -> bool {
        self.total.saturating_add(count) <= self.limit
    }

    /// Counts `count` values read.
    fn spend(&mut self, count: u64) {
        self.total = self.total.saturating_add(count);
    }
}

/// The bytes of the model file `model_len` and of the distinct files its external data
/// names (the ones that exist in its folder).
fn file_bytes(model_len: u64, dir: &Path, graph: &GraphProto) -> u64 {
    let external: HashSet<_> = graph
        .initializer
        .iter()
        .filter(|t| t.data_location == Some(1))
        .filter_map(|t| external_path(dir, t).ok())
        .collect();
    external
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok())
        .fold(model_len, |n, m| n.saturating_add(m.len()))
}

/// The parameters of nodes that name the same weights, read once: by the names of `W`,
/// `R`, `B`, the cell, `hidden_size` and the direction count.
type SharedKey = (Vec<String>, CellKind, usize, bool);

/// Reads `W`, `R`, `B` of `node` (constants of the graph), checks their shapes and
/// converts them; sets `info.input_size`.
fn weights(
    source: &str,
    dir: &Path,
    node: &NodeProto,
    info: &mut OnnxRecurrentNode,
    index: &GraphIndex,
    budget: &mut ReadBudget,
) -> Result<(DirectionParams, Option<DirectionParams>), RnnError> {
    let what = |s: &str| format!("{source}: ONNX node '{}' {s}", info.name);
    let mut read = |slot: usize, label: &str| -> Result<Option<HostTensor>, RnnError> {
        let Some(name) = node.input.get(slot).filter(|n| !n.is_empty()) else {
            return Ok(None);
        };
        let tensor = index.tensor_or_default(name).ok_or_else(|| {
            RnnError::invalid(
                what(&format!("input {label}")),
                "a constant (an initializer or a Constant node)",
                format!("'{name}', computed when the graph runs"),
            )
        })?;
        let count = tensor
            .dims
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(u64::try_from(d).ok()?));
        // A shape that is negative or overflows is tensor_values' error, before any read.
        if let Some(count) = count
            && !budget.allows(count)
        {
            return Err(io(
                source,
                format!(
                    "tensor '{name}': {count} values after {} read, more than the model's files hold ({} values at most)",
                    budget.total, budget.limit
                ),
            ));
        }
        let values = tensor_values(source, dir, name, tensor)?;
        budget.spend(values.values.len() as u64);
        Ok(Some(values))
    };
    let gates = match info.cell {
        CellKind::Lstm => 4,
        CellKind::Gru => 3,
    };
    let (dirs, h) = (info.directions(), info.hidden_size);
    let w = read(1, "W")?
        .ok_or_else(|| RnnError::invalid(what("input W"), "a weight tensor", "none"))?;
    let r = read(2, "R")?
        .ok_or_else(|| RnnError::invalid(what("input R"), "a weight tensor", "none"))?;
    let b = read(3, "B")?;
    let shape_error =
        |label: &str, expected: Vec<usize>, actual: &[usize]| RnnError::ParameterShape {
            name: what(&format!("input {label}")),
            expected,
            actual: actual.to_vec(),
        };
    match w.shape.as_slice() {
        &[d, rows, input] if d == dirs && rows == gates * h && input > 0 => info.input_size = input,
        actual => {
            return Err(shape_error(
                "W",
                vec![dirs, gates * h, actual.get(2).copied().unwrap_or(1).max(1)],
                actual,
            ));
        }
    }
    if r.shape != [dirs, gates * h, h] {
        return Err(shape_error("R", vec![dirs, gates * h, h], &r.shape));
    }
    if let Some(b) = &b
        && b.shape != [dirs, 2 * gates * h]
    {
        return Err(shape_error("B", vec![dirs, 2 * gates * h], &b.shape));
    }
    let order: &[usize] = match info.cell {
        CellKind::Lstm => &ONNX_LSTM,
        CellKind::Gru => &ONNX_GRU,
    };
    let direction = |d: usize| {
        let bias = b
            .as_ref()
            .map(|b| &b.values[d * 2 * gates * h..(d + 1) * 2 * gates * h]);
        DirectionParams {
            weight_ih: onnx_matrix(&w, d, order),
            weight_hh: onnx_matrix(&r, d, order),
            bias_ih: bias.map(|b| reorder(&b[..gates * h], order)),
            bias_hh: bias.map(|b| reorder(&b[gates * h..], order)),
        }
    };
    Ok((direction(0), info.bidirectional.then(|| direction(1))))
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// Loads `LSTM` nodes of an ONNX file: shorthand for [`OnnxModel::open`] then
    /// [`OnnxModel::lstm`]. Returns the module and the config it implies.
    pub fn from_onnx_file(
        path: impl AsRef<Path>,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(Self, CudnnCompatibleLstmConfig), RnnError> {
        OnnxModel::open(path)?.lstm(nodes, device)
    }
}

impl<B: Backend> CudnnCompatibleGru<B> {
    /// Loads `GRU` nodes of an ONNX file: shorthand for [`OnnxModel::open`] then
    /// [`OnnxModel::gru`].
    pub fn from_onnx_file(
        path: impl AsRef<Path>,
        nodes: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(Self, CudnnCompatibleGruConfig), RnnError> {
        OnnxModel::open(path)?.gru(nodes, device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stop_at_what_the_files_hold() {
        let mut budget = ReadBudget::new(1000);
        assert!(budget.allows((16 << 20) + 1000));
        assert!(!budget.allows((16 << 20) + 1001));
        budget.spend(16 << 20);
        assert!(budget.allows(1000) && !budget.allows(1001));
        budget.spend(u64::MAX);
        assert!(!budget.allows(0));
    }

    /// A model of `nodes` LSTM nodes (hidden 2, input 3) that all name one `W`, `R`,
    /// `B`, written to a file in `dir`.
    fn shared_weights_model(dir: &Path, nodes: usize) -> std::path::PathBuf {
        use crate::import::onnx_proto::TensorProto;
        use crate::import::onnx_proto::build::{ints_attr, node, write_model};
        let tensor = |name: &str, dims: &[i64]| TensorProto {
            name: Some(name.into()),
            data_type: Some(1),
            dims: dims.to_vec(),
            float_data: (0..dims.iter().product::<i64>())
                .map(|v| v as f32 / 16.0)
                .collect(),
            ..Default::default()
        };
        let graph = GraphProto {
            node: (0..nodes)
                .map(|k| {
                    let mut n = node("LSTM", &["x", "W", "R", "B"], &format!("y{k}"));
                    n.name = Some(format!("lstm{k}"));
                    n.attribute.push(ints_attr("hidden_size", &[2]));
                    n
                })
                .collect(),
            initializer: vec![
                tensor("W", &[1, 8, 3]),
                tensor("R", &[1, 8, 2]),
                tensor("B", &[1, 16]),
            ],
            ..Default::default()
        };
        write_model(dir, "shared.onnx", graph)
    }

    #[test]
    fn nodes_that_name_the_same_weights_share_one_read() {
        let dir = tempfile::tempdir().unwrap();
        let model = OnnxModel::open(shared_weights_model(dir.path(), 1000)).unwrap();
        assert_eq!(model.nodes().len(), 1000);
        let first = model.nodes[0].params.as_ref().unwrap();
        assert!(model.nodes.iter().all(|n| {
            n.info.refusal.is_none()
                && n.info.input_size == 3
                && Arc::ptr_eq(n.params.as_ref().unwrap(), first)
        }));
        let device = Default::default();
        let (one, _) = model
            .lstm::<burn::backend::NdArray<f32>>(999, &device)
            .unwrap();
        let (other, _) = model
            .lstm::<burn::backend::NdArray<f32>>(0, &device)
            .unwrap();
        assert_eq!(
            one.flat_weights().into_data(),
            other.flat_weights().into_data()
        );
    }

    #[test]
    fn names_that_alias_the_same_external_bytes_stop_at_the_files_size() {
        use crate::import::onnx_proto::build::{ints_attr, node, write_model};
        use crate::import::onnx_proto::{StringStringEntryProto, TensorProto};
        let dir = tempfile::tempdir().unwrap();
        let input = 1 << 17; // W: 8 × 2^17 = 1 Mi values, 4 MiB in data.bin
        std::fs::write(dir.path().join("data.bin"), vec![0u8; 8 * input * 4]).unwrap();
        let aliased = |name: String| TensorProto {
            name: Some(name),
            data_type: Some(1),
            dims: vec![1, 8, input as i64],
            data_location: Some(1),
            external_data: vec![StringStringEntryProto {
                key: Some("location".into()),
                value: Some("data.bin".into()),
            }],
            ..Default::default()
        };
        let r = TensorProto {
            name: Some("R".into()),
            data_type: Some(1),
            dims: vec![1, 8, 2],
            float_data: vec![0.0; 16],
            ..Default::default()
        };
        let nodes = 40;
        let graph = GraphProto {
            node: (0..nodes)
                .map(|k| {
                    let mut n = node("LSTM", &["x", &format!("W{k}"), "R"], &format!("y{k}"));
                    n.name = Some(format!("lstm{k}"));
                    n.attribute.push(ints_attr("hidden_size", &[2]));
                    n
                })
                .collect(),
            initializer: (0..nodes)
                .map(|k| aliased(format!("W{k}")))
                .chain([r])
                .collect(),
            ..Default::default()
        };
        let path = write_model(dir.path(), "aliased.onnx", graph);
        let model = OnnxModel::open(&path).unwrap();
        let refused: Vec<&RnnError> = model
            .nodes
            .iter()
            .filter_map(|n| n.info.refusal.as_ref())
            .collect();
        // 4 MiB of files and 16 Mi values of slack: about 20 reads of 1 Mi values.
        assert!(
            (15..=25).contains(&(nodes - refused.len())),
            "{}",
            refused.len()
        );
        assert!(
            refused[0]
                .to_string()
                .contains("more than the model's files hold"),
            "{}",
            refused[0]
        );
    }
}
