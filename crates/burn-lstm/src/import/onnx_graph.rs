//! An index of an ONNX graph for the readers that follow tensors back through it (the
//! link check, shape computations, the zero-state check): each tensor's producing node,
//! the constants no caller can replace, and the shapes the graph's inputs declare.
//!
//! Only what a runtime holds the graph to is trusted: an initializer also listed among
//! the graph's inputs is a default the caller may replace, and `value_info` and output
//! shapes are hints that runtimes do not check (input shapes they do). Nodes of other
//! domains than ONNX's own are named with their domain, so no reader takes a custom
//! `Reshape` for ONNX's.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::import::onnx_proto::{GraphProto, NodeProto, TensorProto, ValueInfoProto, attr};
use crate::import::onnx_tensor::all_zero;

/// Longest integer list read as a constant: shapes, axes, permutations, slice bounds.
pub(crate) const MAX_LIST: usize = 64;

/// ONNX's `TensorProto.DataType` values read here.
const INT32: i32 = 6;
const INT64: i32 = 7;
const BOOL: i32 = 9;

/// A constant of the graph.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Constant<'g> {
    /// An initializer or a `Constant` node's `value`.
    Tensor(&'g TensorProto),
    /// A `Constant` node's `value_ints` / `value_int`.
    Ints(&'g [i64]),
    Int(i64),
    /// A `Constant` node's `value_floats` / `value_float`.
    Floats(&'g [f32]),
    Float(f32),
}

/// A node that produces a tensor: the node, its operator (`domain.op` outside ONNX's
/// own domain) and which of its outputs the tensor is.
pub(crate) struct Producer<'g> {
    pub node: &'g NodeProto,
    pub op: String,
    pub output: usize,
    /// The node's place in the graph's list.
    pub position: usize,
}

/// See the module's documentation.
pub(crate) struct GraphIndex<'g> {
    producers: HashMap<&'g str, (&'g NodeProto, usize, usize)>,
    constants: HashMap<&'g str, Constant<'g>>,
    /// Initializers that are also graph inputs: defaults a caller may replace.
    defaults: HashMap<&'g str, &'g TensorProto>,
    inputs: HashMap<&'g str, Vec<Option<i64>>>,
}

impl<'g> GraphIndex<'g> {
    /// The index of `graph`, of a model of IR version `ir_version` (before IR 4, every
    /// initializer was also listed among the inputs, and is a constant).
    pub(crate) fn new(graph: &'g GraphProto, ir_version: Option<i64>) -> Self {
        let replaceable = ir_version.is_none_or(|v| v >= 4);
        let inputs: HashSet<&str> = graph
            .input
            .iter()
            .filter_map(|v| v.name.as_deref())
            .filter(|_| replaceable)
            .collect();
        let (defaults, initializers): (HashMap<&str, &TensorProto>, HashMap<&str, &TensorProto>) =
            graph
                .initializer
                .iter()
                .filter_map(|t| t.name.as_deref().map(|n| (n, t)))
                .partition(|(n, _)| inputs.contains(n));
        let mut constants: HashMap<&str, Constant> = initializers
            .into_iter()
            .map(|(n, t)| (n, Constant::Tensor(t)))
            .collect();
        let mut producers = HashMap::new();
        for (position, node) in graph.node.iter().enumerate() {
            for (i, output) in node.output.iter().enumerate() {
                producers
                    .entry(output.as_str())
                    .or_insert((node, i, position));
            }
            let Some(output) = node.output.first() else {
                continue;
            };
            if node.op_type.as_deref() != Some("Constant") || !is_onnx(node) {
                continue;
            }
            let value = if let Some(t) = attr(node, "value").and_then(|a| a.t.as_ref()) {
                Some(Constant::Tensor(t))
            } else if let Some(a) = attr(node, "value_ints") {
                Some(Constant::Ints(&a.ints))
            } else if let Some(a) = attr(node, "value_floats") {
                Some(Constant::Floats(&a.floats))
            } else if let Some(i) = attr(node, "value_int").and_then(|a| a.i) {
                Some(Constant::Int(i))
            } else {
                attr(node, "value_float")
                    .and_then(|a| a.f)
                    .map(Constant::Float)
            };
            if let Some(value) = value {
                constants.insert(output.as_str(), value);
            }
        }
        let inputs = graph
            .input
            .iter()
            .filter(|v| v.name.as_deref().is_some_and(|n| !defaults.contains_key(n)))
            .filter_map(|v| Some((v.name.as_deref()?, declared_shape(v)?)))
            .collect();
        Self {
            producers,
            constants,
            defaults,
            inputs,
        }
    }

    /// The node that produces the tensor `name`, where a node does.
    pub(crate) fn producer(&self, name: &str) -> Option<Producer<'g>> {
        let &(node, output, position) = self.producers.get(name)?;
        let op_type = node.op_type.as_deref().unwrap_or_default();
        let op = if is_onnx(node) {
            op_type.to_string()
        } else {
            format!("{}.{op_type}", node.domain.as_deref().unwrap_or_default())
        };
        Some(Producer {
            node,
            op,
            output,
            position,
        })
    }

    /// The constant `name`, where it is one no caller can replace.
    pub(crate) fn constant(&self, name: &str) -> Option<Constant<'g>> {
        self.constants.get(name).copied()
    }

    /// The tensor `name` where it is a constant tensor or a graph input's default (an
    /// initializer listed among the inputs): how exporters give weights, some of them
    /// as inputs with defaults.
    pub(crate) fn tensor_or_default(&self, name: &str) -> Option<&'g TensorProto> {
        match self.constant(name) {
            Some(Constant::Tensor(t)) => Some(t),
            Some(_) => None,
            None => self.defaults.get(name).copied(),
        }
    }

    /// The values of the integer constant `name` (INT64 or INT32; a scalar as one
    /// value), when it has at most [`MAX_LIST`].
    pub(crate) fn ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.constant(name)? {
            Constant::Tensor(t) => tensor_ints(t),
            Constant::Ints(v) => (v.len() <= MAX_LIST).then(|| v.to_vec()),
            Constant::Int(i) => Some(vec![i]),
            Constant::Floats(_) | Constant::Float(_) => None,
        }
    }

    /// Whether `name` is a boolean constant (inside the model) whose values are all
    /// false, as many as its shape says.
    pub(crate) fn is_false(&self, name: &str) -> bool {
        let Some(Constant::Tensor(t)) = self.constant(name) else {
            return false;
        };
        // Outside data is not read here: no folder is given.
        t.data_type == Some(BOOL) && t.data_location != Some(1) && all_zero(Path::new(""), t)
    }

    /// The shape the graph input `name` declares (each dimension's size where it is
    /// one), when `name` is an input no initializer gives a default to.
    pub(crate) fn input_shape(&self, name: &str) -> Option<&[Option<i64>]> {
        self.inputs.get(name).map(Vec::as_slice)
    }
}

/// Whether `node` is of ONNX's own domain.
pub(crate) fn is_onnx(node: &NodeProto) -> bool {
    matches!(node.domain.as_deref(), None | Some("" | "ai.onnx"))
}

/// A declared tensor shape: each dimension's size where it is a positive size.
fn declared_shape(value: &ValueInfoProto) -> Option<Vec<Option<i64>>> {
    let shape = value
        .r#type
        .as_ref()?
        .tensor_type
        .as_ref()?
        .shape
        .as_ref()?;
    Some(
        shape
            .dim
            .iter()
            .map(|d| d.dim_value.filter(|v| *v > 0))
            .collect(),
    )
}

/// An INT64 or INT32 tensor's values (`int64_data` / `int32_data` or little-endian
/// `raw_data`), when it has at most [`MAX_LIST`].
fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    if t.data_location == Some(1) {
        return None;
    }
    let width = match t.data_type? {
        INT64 => 8,
        INT32 => 4,
        _ => return None,
    };
    let len = t.raw_data.as_ref().map_or_else(
        || t.int64_data.len().max(t.int32_data.len()),
        |raw| raw.len() / width,
    );
    if len > MAX_LIST {
        return None;
    }
    match (&t.raw_data, width) {
        (Some(raw), _) if raw.len() % width != 0 => None,
        (Some(raw), 8) => Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        (Some(raw), _) => Some(
            raw.chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes(c.try_into().expect("4 bytes"))))
                .collect(),
        ),
        (None, 8) => Some(t.int64_data.clone()),
        (None, _) => Some(t.int32_data.iter().map(|&v| i64::from(v)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::build::{declared, int64s, ints_attr, node};

    #[test]
    fn constants_are_those_no_caller_replaces() {
        let int32 = TensorProto {
            name: Some("int32".into()),
            data_type: Some(INT32),
            dims: vec![2],
            raw_data: Some([(-1i32).to_le_bytes(), 7i32.to_le_bytes()].concat()),
            ..Default::default()
        };
        let long = int64s("long", &[1; MAX_LIST + 1]);
        let mut listed = node("Constant", &[], "listed");
        listed.attribute.push(ints_attr("value_ints", &[4, 5]));
        let mut foreign = node("Constant", &[], "foreign");
        foreign.domain = Some("com.example".into());
        foreign.attribute.push(ints_attr("value_ints", &[4, 5]));
        let falses = |name: &str, raw: &[u8]| TensorProto {
            name: Some(name.into()),
            data_type: Some(BOOL),
            dims: vec![raw.len() as i64],
            raw_data: Some(raw.to_vec()),
            ..Default::default()
        };
        let graph = GraphProto {
            node: vec![listed, foreign],
            initializer: vec![
                int32,
                long,
                int64s("default", &[3]),
                falses("off", &[0, 0]),
                falses("on", &[0, 1]),
                TensorProto {
                    dims: vec![3],
                    ..falses("short", &[0, 0])
                },
            ],
            input: vec![declared("default", &[1]), declared("x", &[6, 3])],
            ..Default::default()
        };
        let index = GraphIndex::new(&graph, Some(8));
        assert_eq!(index.ints("int32"), Some(vec![-1, 7]));
        assert_eq!(index.ints("listed"), Some(vec![4, 5]));
        // Too long for a shape, another domain's Constant, an input's default.
        assert_eq!(index.ints("long"), None);
        assert_eq!(index.ints("foreign"), None);
        assert_eq!(index.ints("default"), None);
        assert!(index.is_false("off") && !index.is_false("on") && !index.is_false("int32"));
        // Fewer values than the shape says: not a constant of false values.
        assert!(!index.is_false("short"));
        assert_eq!(index.input_shape("x"), Some(&[Some(6), Some(3)][..]));
        assert_eq!(index.input_shape("default"), None);
        let producer = index.producer("foreign").unwrap();
        // Before IR 4 an initializer listed among the inputs is a constant.
        assert_eq!(
            GraphIndex::new(&graph, Some(3)).ints("default"),
            Some(vec![3])
        );
        assert_eq!(
            (producer.op.as_str(), producer.output),
            ("com.example.Constant", 0)
        );
    }
}
