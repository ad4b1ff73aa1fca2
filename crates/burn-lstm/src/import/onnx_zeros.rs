//! Whether a recurrent node's initial state (or peepholes) is zeros whatever the
//! graph's inputs: how exporters write the default state (PyTorch's `dynamo` exporter a
//! constant of zeros, or zeros expanded to the batch size; tf2onnx zeros expanded, then
//! unsqueezed and joined), which is the module's own default.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;

use crate::import::onnx_graph::{Constant, GraphIndex};
use crate::import::onnx_proto::attr;
use crate::import::onnx_tensor::all_zero;

/// Most nodes walked through for one model (each tensor is tested once).
const MAX_VISITS: usize = 4096;
/// Deepest chain followed.
const MAX_DEPTH: usize = 32;

/// Tests tensors of one graph for zeros, remembering each answer.
pub(crate) struct ZeroCheck<'a, 'g> {
    index: &'a GraphIndex<'g>,
    /// The model's folder, where external data lies.
    dir: &'a Path,
    known: RefCell<HashMap<String, bool>>,
    visits: Cell<usize>,
}

impl<'a, 'g> ZeroCheck<'a, 'g> {
    pub(crate) fn new(index: &'a GraphIndex<'g>, dir: &'a Path) -> Self {
        Self {
            index,
            dir,
            known: RefCell::new(HashMap::new()),
            visits: Cell::new(0),
        }
    }

    /// Whether the tensor `name` holds zeros whatever the graph's inputs: a constant of
    /// zeros (one no caller can replace), `ConstantOfShape` of zero, or what reshaping,
    /// slicing, expanding, casting or joining only such tensors gives.
    pub(crate) fn zeros(&self, name: &str) -> bool {
        self.zeros_at(name, 0)
    }

    fn zeros_at(&self, name: &str, depth: usize) -> bool {
        if let Some(&known) = self.known.borrow().get(name) {
            return known;
        }
        self.visits.set(self.visits.get() + 1);
        if depth > MAX_DEPTH || self.visits.get() > MAX_VISITS {
            return false;
        }
        let zeros = self.test(name, depth);
        self.known.borrow_mut().insert(name.to_string(), zeros);
        zeros
    }

    fn test(&self, name: &str, depth: usize) -> bool {
        if let Some(constant) = self.index.constant(name) {
            return match constant {
                Constant::Tensor(t) => all_zero(self.dir, t),
                Constant::Ints(v) => v.iter().all(|&v| v == 0),
                Constant::Int(v) => v == 0,
                Constant::Floats(v) => v.iter().all(|&v| v == 0.0),
                Constant::Float(v) => v == 0.0,
            };
        }
        let Some(producer) = self.index.producer(name) else {
            return false;
        };
        let node = producer.node;
        if producer.output != 0 {
            return false;
        }
        let input_zeros = |i: usize| {
            node.input
                .get(i)
                .is_some_and(|n| !n.is_empty() && self.zeros_at(n, depth + 1))
        };
        match producer.op.as_str() {
            "Identity" | "Cast" | "CastLike" | "Reshape" | "Squeeze" | "Unsqueeze"
            | "Transpose" | "Slice" | "Gather" | "Expand" | "Tile" => input_zeros(0),
            "Concat" => !node.input.is_empty() && (0..node.input.len()).all(input_zeros),
            // Its value defaults to a float zero.
            "ConstantOfShape" => attr(node, "value")
                .and_then(|a| a.t.as_ref())
                .is_none_or(|t| all_zero(self.dir, t)),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::build::{floats, node};
    use crate::import::onnx_proto::{AttributeProto, GraphProto, NodeProto};

    fn with_attr(mut node: NodeProto, attr: AttributeProto) -> NodeProto {
        node.attribute.push(attr);
        node
    }

    #[test]
    fn zero_states_are_followed_through_reshaping_and_joins() {
        let value = |name: &str, t| AttributeProto {
            name: Some(name.into()),
            t: Some(t),
            ..Default::default()
        };
        let scalar = |name: &str, f: f32| AttributeProto {
            name: Some(name.into()),
            f: Some(f),
            ..Default::default()
        };
        let mut graph = GraphProto {
            node: vec![
                node("Expand", &["z", "shape"], "expanded"),
                node("Unsqueeze", &["expanded", "axes"], "state"),
                node("Concat", &["state", "z"], "both"),
                node("Concat", &["state", "w"], "mixed"),
                node("ConstantOfShape", &["shape"], "filled"),
                with_attr(
                    node("ConstantOfShape", &["shape"], "ones"),
                    value("value", floats("", &[1.0])),
                ),
                with_attr(
                    node("Constant", &[], "zero_float"),
                    scalar("value_float", 0.0),
                ),
                with_attr(node("Constant", &[], "half"), scalar("value_float", 0.5)),
                node("CastLike", &["zero_float", "w"], "cast_like"),
                node("Relu", &["z"], "computed"),
                NodeProto {
                    domain: Some("com.example".into()),
                    ..node("Expand", &["z", "shape"], "foreign")
                },
                node("Expand", &["default", "shape"], "replaceable"),
            ],
            initializer: vec![
                floats("z", &[0.0, -0.0]),
                floats("w", &[0.0, 0.5]),
                floats("default", &[0.0]),
            ],
            // `default` is a graph input: the caller may give other values.
            input: vec![crate::import::onnx_proto::build::declared("default", &[1])],
            ..Default::default()
        };
        // 30 levels of a tensor joined with itself: each tested once.
        for k in 0..30 {
            let previous = if k == 0 {
                "z".to_string()
            } else {
                format!("d{}", k - 1)
            };
            graph
                .node
                .push(node("Concat", &[&previous, &previous], &format!("d{k}")));
        }
        let index = GraphIndex::new(&graph, None);
        let check = ZeroCheck::new(&index, Path::new(""));
        for (name, want) in [
            ("z", true),
            ("w", false),
            ("state", true),
            ("both", true),
            ("mixed", false),
            ("filled", true),
            ("ones", false),
            ("zero_float", true),
            ("half", false),
            ("cast_like", true),
            ("computed", false),
            ("foreign", false),
            ("replaceable", false),
            ("absent", false),
            ("d29", true),
        ] {
            assert_eq!(check.zeros(name), want, "{name}");
        }
        assert!(check.visits.get() < 100, "{} visits", check.visits.get());
    }
}
