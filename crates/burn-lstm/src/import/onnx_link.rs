//! How one ONNX recurrent node feeds the next in an exported stack: the lower node's
//! output `Y` (`[seq, dirs, batch, hidden]`; `[batch, seq, dirs, hidden]` with
//! `layout` 1) with its direction axis folded into the features, which is what the
//! module feeds its next layer (`[seq, batch, dirs·hidden]`, each row's directions
//! side by side, forward first).
//!
//! The nodes between are read as what they do to `Y`'s layout: each axis of each
//! tensor is the row-major product of the factors `seq`, `batch`, directions and
//! `hidden`, and a link is accepted when the upper node's `X` has exactly the folded
//! layout, whatever the nodes that made it. PyTorch's TorchScript exporter writes
//! `Transpose` (0, 2, 1, 3) then `Reshape` to `[0, 0, -1]`; its default (`dynamo`)
//! exporter the same `Reshape` to static sizes, or to sizes computed from `Y`'s shape
//! (`onnx_shape` reads them); tf2onnx a `Squeeze` of the direction axis (then two
//! `Transpose`s that undo each other), or each direction `Slice`d, `Squeeze`d and joined
//! by `Concat` on the features. A `Reshape` alone on a sequence-major `Y`, a target that
//! swaps `seq` and `batch`, or another permutation has the right size with directions
//! and batch rows mixed: it is refused, with the layout it gives.

use std::collections::HashMap;

use crate::import::onnx_axes::permutation;
use crate::import::onnx_graph::GraphIndex;
use crate::import::onnx_layout::{Factor, Layout, Scale, size, squeeze, transpose, unsqueeze};
use crate::import::onnx_proto::{NodeProto, attr};
use crate::import::onnx_shape::{Dim, ShapeReader, Sizes};

/// The two recurrent nodes of a link, as the check needs them.
pub(crate) struct Link<'a> {
    /// The lower node's name.
    pub lower: &'a str,
    /// The lower node's input `X` and its feature count.
    pub lower_x: &'a str,
    pub input_size: usize,
    /// The stack's first node's input `X` and its feature count: its `seq` and
    /// `batch` are every node's (the links below are checked first).
    pub bottom_x: &'a str,
    pub bottom_input_size: usize,
    /// The lower node's output `Y`.
    pub y: &'a str,
    /// The upper node's input `X`.
    pub x: &'a str,
    pub directions: usize,
    pub hidden: usize,
    pub batch_first: bool,
}

impl Link<'_> {
    /// `seq` and `batch` in the order of the layout.
    fn outer(&self) -> [Factor; 2] {
        if self.batch_first {
            [Factor::Batch, Factor::Seq]
        } else {
            [Factor::Seq, Factor::Batch]
        }
    }

    fn all_directions(&self) -> Factor {
        Factor::Dirs {
            first: 0,
            count: self.directions,
        }
    }

    /// `Y`'s layout.
    fn y(&self) -> Layout {
        let [outer, inner] = self.outer();
        let dirs = vec![self.all_directions()];
        let axes = if self.batch_first {
            vec![vec![outer], vec![inner], dirs, vec![Factor::Hidden]]
        } else {
            vec![vec![outer], dirs, vec![inner], vec![Factor::Hidden]]
        };
        Layout {
            axes,
            direction: None,
        }
    }

    /// The layout the upper node's `X` must have.
    fn folded(&self) -> Layout {
        let [outer, inner] = self.outer();
        Layout {
            axes: vec![
                vec![outer],
                vec![inner],
                vec![self.all_directions(), Factor::Hidden],
            ],
            direction: None,
        }
    }
}

/// Checks that the tensor `link.x` is the tensor `link.y` with its direction axis
/// folded into the features (and `Identity` / `Dropout`, identities at inference,
/// anywhere). `Err((expected, actual))` otherwise, in words.
pub(crate) fn check(index: &GraphIndex, link: &Link) -> Result<(), (String, String)> {
    let mut shapes = ShapeReader::new(index);
    // The dimensions before any size is known: seq and batch as symbols.
    let symbolic = Scale {
        directions: link.directions,
        hidden: link.hidden,
        sizes: Sizes::default(),
    };
    if let Some(dims) = symbolic.dims(&link.y()) {
        shapes.know(link.y, dims);
    }
    let [outer, inner] = link.outer().map(|f| symbolic.size(f));
    for (x, features) in [
        (link.lower_x, link.input_size),
        (link.bottom_x, link.bottom_input_size),
    ] {
        let dims = vec![outer, inner, size(features)];
        // A batch-first graph input reaches the first node through a Transpose.
        let parent = shapes.index().producer(x).and_then(|p| {
            let perm = attr(p.node, "perm").map(|a| a.ints.clone())?;
            (p.op == "Transpose" && p.output == 0).then_some((p.node.input.first()?.clone(), perm))
        });
        if let Some((parent, perm)) = parent {
            // x's axis i is the parent's axis perm[i].
            if let Some(perm) = permutation(&perm, dims.len()) {
                let mut parent_dims = dims.clone();
                for (i, &p) in perm.iter().enumerate() {
                    parent_dims[p] = dims[i];
                }
                shapes.know(&parent, parent_dims);
            }
        }
        if !x.is_empty() {
            shapes.know(x, dims);
        }
    }
    let scale = Scale {
        sizes: shapes.declared_sizes(),
        ..symbolic
    };
    let expected = format!(
        "the output Y of '{}' with its direction axis folded into the features, {} (as PyTorch exports a stack: {})",
        link.lower,
        scale.describe_layout(&link.folded()),
        if link.batch_first {
            "Reshape to [0, 0, -1]"
        } else {
            "Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1]"
        }
    );
    let mut reader = Reader {
        link,
        scale,
        shapes,
        steps: Vec::new(),
        read: HashMap::new(),
    };
    let layout = reader.layout(link.x, 0);
    let mut steps = reader.steps;
    steps.sort_by_key(|(index, _)| *index);
    steps.dedup();
    let through = if steps.is_empty() {
        format!("Y unchanged ('{}')", link.x)
    } else {
        let names: Vec<&str> = steps.iter().map(|(_, s)| s.as_str()).collect();
        format!("Y through {}", names.join(" then "))
    };
    let actual = match layout {
        Ok(layout) => {
            let layout = scale.canonical(layout);
            if layout == scale.canonical(link.folded()) {
                return Ok(());
            }
            format!("{through}, which gives {}", scale.describe_layout(&layout))
        }
        Err(Failure::Unread(why)) => format!("{through}: {why}"),
        Err(Failure::NotFromY(why)) => why,
    };
    Err((expected, actual))
}

/// Why a tensor's layout could not be read.
enum Failure {
    /// It does not come from `Y` through reshaping nodes (in words).
    NotFromY(String),
    /// A node on the way does something the reader does not follow (in words).
    Unread(String),
}

/// Most nodes walked back from `X`, deep and in all (each tensor's layout is read once,
/// so a graph that joins a tensor with itself again and again costs no more).
const MAX_DEPTH: usize = 64;
const MAX_VISITS: usize = 4096;

/// Most tensors one `Concat` on the way joins (a fold joins one per direction).
const MAX_JOINED: usize = 16;

/// Reads the layouts of the tensors between `Y` and `X`.
struct Reader<'a, 'g, 'l> {
    link: &'l Link<'l>,
    scale: Scale,
    shapes: ShapeReader<'a, 'g>,
    /// The nodes walked through: index in the graph and description.
    steps: Vec<(usize, String)>,
    /// The layouts read so far, by tensor.
    read: HashMap<String, Layout>,
}

impl Reader<'_, '_, '_> {
    /// The layout of the tensor `name`.
    fn layout(&mut self, name: &str, depth: usize) -> Result<Layout, Failure> {
        if name == self.link.y && !name.is_empty() {
            return Ok(self.scale.canonical(self.link.y()));
        }
        if let Some(layout) = self.read.get(name) {
            return Ok(layout.clone());
        }
        let not_from_y =
            || Failure::NotFromY(format!("'{}', which does not come from it", self.link.x));
        if depth > MAX_DEPTH {
            return Err(Failure::Unread(format!("more than {MAX_DEPTH} nodes deep")));
        }
        if self.steps.len() > MAX_VISITS {
            return Err(Failure::Unread(format!("more than {MAX_VISITS} nodes")));
        }
        let Some(producer) = self.shapes.index().producer(name) else {
            return Err(not_from_y());
        };
        let (node, op, index) = (producer.node, producer.op, producer.position);
        let input = |i: usize| node.input.get(i).map(String::as_str).unwrap_or_default();
        let followed = matches!(
            op.as_str(),
            "Identity"
                | "Dropout"
                | "Transpose"
                | "Reshape"
                | "Squeeze"
                | "Unsqueeze"
                | "Slice"
                | "Concat"
        );
        if !followed || producer.output != 0 {
            return Err(Failure::NotFromY(format!(
                "the output of {op} node '{}'",
                node.name.as_deref().unwrap_or_default()
            )));
        }
        if op == "Concat" && node.input.len() > MAX_JOINED {
            self.steps
                .push((index, format!("Concat of {} tensors", node.input.len())));
            return Err(Failure::Unread(format!(
                "more than {MAX_JOINED} tensors joined"
            )));
        }
        let inputs: Vec<&str> = if op == "Concat" {
            node.input.iter().map(String::as_str).collect()
        } else {
            vec![input(0)]
        };
        let mut layouts = Vec::with_capacity(inputs.len());
        for name in inputs {
            layouts.push(self.layout(name, depth + 1)?);
        }
        // Known before a Reshape's target is read (it may be computed from its shape).
        for (name, layout) in node.input.iter().zip(&layouts) {
            if let Some(dims) = self.scale.dims(layout) {
                self.shapes.know(name, dims);
            }
        }
        let (step, out) = self.apply(node, &op, layouts);
        self.steps.push((index, step));
        let out = self.scale.canonical(out.map_err(Failure::Unread)?);
        self.read.insert(name.to_string(), out.clone());
        Ok(out)
    }

    /// `node` (of type `op`) applied to its inputs' layouts: its description and the
    /// layout of its output.
    fn apply(
        &self,
        node: &NodeProto,
        op: &str,
        mut inputs: Vec<Layout>,
    ) -> (String, Result<Layout, String>) {
        // An input that is named must be a constant; only an absent one falls back to
        // the attribute of older opsets (or to the default).
        let ints =
            |i: usize, key: &str| -> Result<Option<Vec<i64>>, String> {
                match node.input.get(i).filter(|n| !n.is_empty()) {
                    Some(name) => self.shapes.index().ints(name).map(Some).ok_or_else(|| {
                        format!("its input '{name}' is computed when the graph runs")
                    }),
                    None => Ok(attr(node, key).map(|a| a.ints.clone())),
                }
            };
        let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
        let Some(first) = inputs.first().cloned() else {
            return (op.to_string(), Err("no input".into()));
        };
        let rank = first.axes.len();
        match op {
            "Identity" => (op.to_string(), Ok(first)),
            // An identity at inference, unless told to train (opset 12's input).
            "Dropout" => {
                let training = node.input.get(2).filter(|n| !n.is_empty());
                let out = match training {
                    Some(name) if !self.shapes.index().is_false(name) => Err(format!(
                        "its training_mode '{name}' is not a constant false: it drops values"
                    )),
                    _ => Ok(first),
                };
                (op.to_string(), out)
            }
            "Transpose" => {
                let perm = attr(node, "perm")
                    .map(|a| a.ints.clone())
                    .unwrap_or_else(|| (0..rank as i64).rev().collect());
                let step = format!("Transpose (perm {})", list(&perm));
                (step, transpose(first, &perm))
            }
            "Squeeze" => match ints(1, "axes") {
                Ok(axes) => {
                    let step = match &axes {
                        Some(axes) => format!("Squeeze on axes [{}]", list(axes)),
                        None => "Squeeze of every axis of size 1".into(),
                    };
                    (step, squeeze(first, axes.as_deref()))
                }
                Err(why) => ("Squeeze".into(), Err(why)),
            },
            "Unsqueeze" => match ints(1, "axes") {
                Ok(Some(axes)) => (
                    format!("Unsqueeze on axes [{}]", list(&axes)),
                    unsqueeze(first, &axes),
                ),
                Ok(None) => ("Unsqueeze".into(), Err("no axes".into())),
                Err(why) => ("Unsqueeze".into(), Err(why)),
            },
            "Slice" => {
                let read = (|| {
                    let starts = ints(1, "starts")?.ok_or("no starts")?;
                    let ends = ints(2, "ends")?.ok_or("no ends")?;
                    Ok::<_, String>((starts, ends, ints(3, "axes")?, ints(4, "steps")?))
                })();
                match read {
                    Ok((starts, ends, axes, steps)) => {
                        let step = format!(
                            "Slice ({}[{}]..[{}])",
                            axes.as_ref()
                                .map(|a| format!("axes [{}] ", list(a)))
                                .unwrap_or_default(),
                            list(&starts),
                            list(&ends)
                        );
                        let out = self.scale.slice(
                            first,
                            &starts,
                            &ends,
                            axes.as_deref(),
                            steps.as_deref(),
                        );
                        (step, out)
                    }
                    Err(why) => ("Slice".into(), Err(why)),
                }
            }
            "Concat" => {
                let axis = attr(node, "axis").and_then(|a| a.i).unwrap_or(0);
                let step = format!("Concat on axis {axis}");
                (step, self.scale.concat(std::mem::take(&mut inputs), axis))
            }
            "Reshape" => {
                let target = node
                    .input
                    .get(1)
                    .and_then(|s| self.shapes.values(s))
                    .map(|v| {
                        v.into_iter()
                            .map(|d| d.with_sizes(self.scale.sizes))
                            .collect::<Vec<_>>()
                    });
                let allowzero = attr(node, "allowzero").and_then(|a| a.i) == Some(1);
                let Some(target) = target else {
                    return (
                        "Reshape to a shape that cannot be read without running the graph".into(),
                        Err("its target is not read".into()),
                    );
                };
                let mut step = format!(
                    "Reshape to [{}]",
                    target
                        .iter()
                        .map(Dim::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                if allowzero {
                    step += " with allowzero=1";
                }
                (step, self.scale.reshape(first, &target, allowzero))
            }
            _ => (op.to_string(), Err("not read".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::build::{declared, int64s, ints_attr, node};
    use crate::import::onnx_proto::{GraphProto, TensorProto};

    /// The check on `graph` (of the current IR version).
    fn check(graph: &GraphProto, link: &Link) -> Result<(), (String, String)> {
        super::check(&GraphIndex::new(graph, None), link)
    }

    /// Int-list attributes (or `axis`, an int) by name.
    type Attrs<'a> = &'a [(&'a str, &'a [i64])];

    /// One node: op, inputs, output, attributes.
    type TestNode<'a> = (&'a str, &'a [&'a str], &'a str, Attrs<'a>);

    /// A graph from `y` to `x` built of `nodes`; `consts`: INT64 initializers.
    fn graph(nodes: &[TestNode], consts: &[(&str, &[i64])]) -> GraphProto {
        GraphProto {
            node: nodes
                .iter()
                .map(|(op, inputs, output, attrs)| NodeProto {
                    attribute: attrs
                        .iter()
                        .map(|(name, ints)| ints_attr(name, ints))
                        .collect(),
                    ..node(op, inputs, output)
                })
                .collect(),
            initializer: consts
                .iter()
                .map(|(name, values)| int64s(name, values))
                .collect(),
            ..Default::default()
        }
    }

    fn link(directions: usize, batch_first: bool) -> Link<'static> {
        Link {
            lower: "lo",
            lower_x: "x0",
            input_size: 3,
            bottom_x: "x0",
            bottom_input_size: 3,
            y: "y",
            x: "x",
            directions,
            hidden: 4,
            batch_first,
        }
    }

    const PT: &[(&str, &[i64])] = &[("perm", &[0, 2, 1, 3])];

    /// Transpose (0, 2, 1, 3) then Reshape to `target` on a sequence-major `Y`.
    fn folds_to(target: &[i64], directions: usize) -> Result<(), (String, String)> {
        let g = graph(
            &[
                ("Transpose", &["y"], "t", PT),
                ("Reshape", &["t", "shape"], "x", &[]),
            ],
            &[("shape", target)],
        );
        check(&g, &link(directions, false))
    }

    #[test]
    fn reshape_targets_fold_when_their_axes_fall_on_the_factors() {
        for (target, directions, folds) in [
            (&[0, 0, -1][..], 2, true),
            (&[0, 0, 8], 2, true),
            (&[0, 0, 4], 1, true),
            (&[0, -1, 8], 2, true),
            (&[-1, 0, 8], 2, true),
            (&[0, 0, 4], 2, false),
            (&[-1, 8], 2, false),
            (&[0, -1, -1], 2, false),
            (&[0, 0, 2, 4], 2, false),
            (&[0, 0, 0, 0, 0], 2, false),
        ] {
            assert_eq!(
                folds_to(target, directions).is_ok(),
                folds,
                "{target:?}, {directions} directions: {:?}",
                folds_to(target, directions)
            );
        }
    }

    #[test]
    fn layouts_follow_squeezes_transposes_slices_and_joins() {
        type Nodes<'a> = Vec<TestNode<'a>>;
        let consts: &[(&str, &[i64])] = &[
            ("one", &[1]),
            ("zero", &[0]),
            ("two", &[2]),
            ("flat", &[0, 0, -1]),
        ];
        let back: &[(&str, &[i64])] = &[("perm", &[1, 0, 2])];
        let cat: &[(&str, &[i64])] = &[("axis", &[2])];
        let cat_last: &[(&str, &[i64])] = &[("axis", &[-1])];
        let directions = |order: [&'static str; 2],
                          join: &'static [(&'static str, &'static [i64])]|
         -> Nodes<'static> {
            vec![
                ("Slice", &["y", "zero", "one", "one"], "s0", &[]),
                ("Squeeze", &["s0", "one"], "d0", &[]),
                ("Slice", &["y", "one", "two", "one"], "s1", &[]),
                ("Squeeze", &["s1", "one"], "d1", &[]),
                (
                    "Concat",
                    if order == ["d0", "d1"] {
                        &["d0", "d1"]
                    } else {
                        &["d1", "d0"]
                    },
                    "x",
                    join,
                ),
            ]
        };
        // (nodes, directions, batch_first, folds)
        let cases: Vec<(Nodes, usize, bool, bool)> = vec![
            (vec![("Squeeze", &["y", "one"], "x", &[])], 1, false, true),
            (
                vec![
                    ("Squeeze", &["y", "one"], "a", &[]),
                    ("Transpose", &["a"], "b", back),
                    ("Identity", &["b"], "c", &[]),
                    ("Transpose", &["c"], "x", back),
                ],
                1,
                false,
                true,
            ),
            (directions(["d0", "d1"], cat), 2, false, true),
            (directions(["d0", "d1"], cat_last), 2, false, true),
            (
                vec![
                    ("Unsqueeze", &["y", "zero"], "u", &[]),
                    ("Squeeze", &["u", "zero"], "v", &[]),
                    ("Transpose", &["v"], "t", PT),
                    ("Reshape", &["t", "flat"], "x", &[]),
                ],
                2,
                false,
                true,
            ),
            (vec![("Reshape", &["y", "flat"], "x", &[])], 2, true, true),
            (vec![("Squeeze", &["y", "two"], "x", &[])], 1, true, true),
            // The sequence axis removed, rows and steps swapped, directions reversed,
            // a direction dropped, the batch axis cut.
            (vec![("Squeeze", &["y", "zero"], "x", &[])], 1, false, false),
            (
                vec![
                    ("Squeeze", &["y", "one"], "a", &[]),
                    ("Transpose", &["a"], "x", back),
                ],
                1,
                false,
                false,
            ),
            (directions(["d1", "d0"], cat), 2, false, false),
            (
                vec![
                    ("Slice", &["y", "zero", "one", "one"], "s0", &[]),
                    ("Squeeze", &["s0", "one"], "x", &[]),
                ],
                2,
                false,
                false,
            ),
            (
                vec![
                    ("Slice", &["y", "zero", "one", "two"], "s", &[]),
                    ("Transpose", &["s"], "t", PT),
                    ("Reshape", &["t", "flat"], "x", &[]),
                ],
                2,
                false,
                false,
            ),
            (vec![("Squeeze", &["y", "one"], "x", &[])], 2, false, false),
            (vec![("Relu", &["y"], "x", &[])], 1, false, false),
            (vec![], 1, false, false),
        ];
        for (nodes, directions, batch_first, folds) in cases {
            let g = graph(&nodes, consts);
            let result = check(&g, &link(directions, batch_first));
            assert_eq!(result.is_ok(), folds, "{nodes:?}: {result:?}");
        }
    }

    #[test]
    fn static_sizes_are_those_the_graph_declares() {
        for (target, folds) in [([6, 3, 8], true), ([3, 6, 8], false), ([6, -1, 8], true)] {
            let mut g = graph(
                &[
                    ("Transpose", &["y"], "t", PT),
                    ("Reshape", &["t", "shape"], "x", &[]),
                ],
                &[("shape", &target)],
            );
            g.input = vec![declared("x0", &[6, 3, 3])];
            let result = check(&g, &link(2, false));
            assert_eq!(result.is_ok(), folds, "{target:?}: {result:?}");
            // Without declared sizes, static ones cannot be checked.
            g.input.clear();
            assert!(check(&g, &link(2, false)).is_err(), "{target:?}");
        }
        // A batch of one declared: the batch factor may sit in any axis.
        let mut g = graph(
            &[
                ("Transpose", &["y"], "t", PT),
                ("Reshape", &["t", "shape"], "x", &[]),
            ],
            &[("shape", &[6, 1, 8])],
        );
        g.input = vec![declared("x0", &[6, 1, 3])];
        assert!(check(&g, &link(2, false)).is_ok());
    }

    #[test]
    fn refusals_name_the_nodes_and_the_layout() {
        let (expected, actual) = folds_to(&[0, 0, 4], 2).unwrap_err();
        assert_eq!(
            expected,
            "the output Y of 'lo' with its direction axis folded into the features, [seq, batch, dirs·hidden] (as PyTorch exports a stack: Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1])"
        );
        assert_eq!(
            actual,
            "Y through Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, 4]: a target whose axes do not fall on whole factors"
        );
        let g = graph(
            &[("Reshape", &["y", "shape"], "x", &[])],
            &[("shape", &[0, 0, -1])],
        );
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert_eq!(
            actual,
            "Y through Reshape to [0, 0, -1], which gives [seq, dirs, batch·hidden]"
        );
        let g = graph(&[("Relu", &["y"], "x", &[])], &[]);
        let (_, actual) = check(&g, &link(1, false)).unwrap_err();
        assert_eq!(actual, "the output of Relu node ''");
        let g = graph(&[], &[]);
        let (_, actual) = check(&g, &link(1, false)).unwrap_err();
        assert_eq!(actual, "'x', which does not come from it");
    }

    /// `depth` levels of `t_k = Concat(f(t_{k-1}), g(t_{k-1}))`: each tensor used twice
    /// by the next, so a reader that walked every path would take 2^depth steps.
    fn doubling(
        depth: usize,
        level: impl Fn(&str, &str) -> Vec<(String, Vec<String>, String)>,
    ) -> GraphProto {
        let mut nodes = Vec::new();
        let mut previous = "y".to_string();
        for k in 0..depth {
            let next = if k + 1 == depth {
                "x".to_string()
            } else {
                format!("t{k}")
            };
            for (op, inputs, output) in level(&previous, &next) {
                nodes.push(NodeProto {
                    input: inputs,
                    output: vec![output],
                    op_type: Some(op),
                    attribute: vec![ints_attr("axis", &[1])],
                    ..Default::default()
                });
            }
            previous = next;
        }
        let mut g = graph(&[], &[("zero", &[0]), ("one", &[1]), ("two", &[2])]);
        g.node = nodes;
        g
    }

    #[test]
    fn a_graph_that_reuses_tensors_is_read_in_linear_time() {
        // Y's directions sliced and joined again, 30 times over: Y's own layout.
        let g = doubling(30, |t, next| {
            vec![
                (
                    "Slice".into(),
                    vec![t.into(), "zero".into(), "one".into(), "one".into()],
                    format!("{next}_a"),
                ),
                (
                    "Slice".into(),
                    vec![t.into(), "one".into(), "two".into(), "one".into()],
                    format!("{next}_b"),
                ),
                (
                    "Concat".into(),
                    vec![format!("{next}_a"), format!("{next}_b")],
                    next.into(),
                ),
            ]
        });
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert!(
            actual.ends_with("which gives [seq, dirs, batch, hidden]"),
            "{actual}"
        );
        // A Reshape target whose shape vector doubles 40 times.
        let mut g = doubling(40, |t, next| {
            let (t, next) = (format!("{t}_shape"), format!("{next}_shape"));
            vec![("Concat".into(), vec![t.clone(), t], next)]
        });
        g.node.insert(
            0,
            NodeProto {
                input: vec!["y".into()],
                output: vec!["y_shape".into()],
                op_type: Some("Shape".into()),
                ..Default::default()
            },
        );
        g.node.push(NodeProto {
            input: vec!["y".into(), "x_shape".into()],
            output: vec!["x".into()],
            op_type: Some("Reshape".into()),
            ..Default::default()
        });
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert!(
            actual.contains("Reshape to a shape that cannot be read"),
            "{actual}"
        );
    }

    #[test]
    fn only_what_a_runtime_holds_the_graph_to_is_trusted() {
        let consts: &[(&str, &[i64])] = &[
            ("flat", &[0, 0, -1]),
            ("zero", &[0]),
            ("big", &[i64::MAX]),
            ("static", &[6, 3, 8]),
        ];
        let fold: Vec<TestNode> = vec![
            ("Transpose", &["y"], "t", PT),
            ("Reshape", &["t", "flat"], "r", &[]),
        ];
        let with = |extra: Vec<TestNode<'static>>| -> GraphProto {
            let mut nodes = fold.clone();
            nodes.extend(extra);
            graph(&nodes, consts)
        };
        // A Slice whose steps are computed (every other step at run time) is not read
        // as one of step 1; constant steps of 1 are.
        let mut g = with(vec![
            ("Identity", &["two"], "computed_steps", &[]),
            (
                "Slice",
                &["r", "zero", "big", "zero", "computed_steps"],
                "x",
                &[],
            ),
        ]);
        g.input.push(declared("two", &[1]));
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert!(
            actual.contains("its input 'computed_steps' is computed"),
            "{actual}"
        );
        let g = with(vec![("Slice", &["r", "zero", "big", "zero"], "x", &[])]);
        assert_eq!(check(&g, &link(2, false)), Ok(()));
        // Dropout: an identity unless in training mode.
        for (training, folds) in [(None, true), (Some(false), true), (Some(true), false)] {
            let mut g = with(vec![("Dropout", &["r", "", "mode"], "x", &[])]);
            if training.is_none() {
                g.node.last_mut().unwrap().input.truncate(1);
            }
            g.initializer.push(TensorProto {
                name: Some("mode".into()),
                data_type: Some(9),
                dims: vec![],
                raw_data: Some(vec![u8::from(training == Some(true))]),
                ..Default::default()
            });
            assert_eq!(check(&g, &link(2, false)).is_ok(), folds, "{training:?}");
        }
        // Static sizes: from the graph's inputs, not from value_info (a hint), nor from
        // an input with a default a caller may replace.
        let static_fold = |g: &mut GraphProto| {
            g.node[1].input[1] = "static".into();
            g.node[1].output[0] = "x".into();
        };
        let mut g = with(vec![]);
        static_fold(&mut g);
        g.value_info.push(declared("y", &[6, 2, 3, 4]));
        assert!(check(&g, &link(2, false)).is_err());
        g.input.push(declared("x0", &[6, 3, 3]));
        g.initializer.push(int64s("x0", &[0]));
        assert!(check(&g, &link(2, false)).is_err());
        g.initializer.pop();
        assert_eq!(check(&g, &link(2, false)), Ok(()));
        // A batch-first graph input reaches the first node through a Transpose.
        let mut g = with(vec![(
            "Transpose",
            &["input"],
            "x0",
            &[("perm", &[1, 0, 2])],
        )]);
        static_fold(&mut g);
        g.input.push(declared("input", &[3, 6, 3]));
        assert_eq!(check(&g, &link(2, false)), Ok(()));
        // An embedding's Gather makes the first X from a declared token input.
        let mut g = with(vec![("Gather", &["table", "tokens"], "x0", &[])]);
        static_fold(&mut g);
        g.input.push(declared("tokens", &[6, 3]));
        g.initializer.push(TensorProto {
            name: Some("table".into()),
            data_type: Some(1),
            dims: vec![50, 3],
            ..Default::default()
        });
        assert_eq!(check(&g, &link(2, false)), Ok(()));
        // Operators of other domains are not ONNX's.
        let mut g = with(vec![("Identity", &["r"], "x", &[])]);
        g.node[2].domain = Some("com.example".into());
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert_eq!(actual, "the output of com.example.Identity node ''");
        // A Concat of many tensors is refused before they are read.
        let many: Vec<&str> = vec!["r"; MAX_JOINED + 1];
        let mut g = with(vec![]);
        g.node.push(NodeProto {
            attribute: vec![ints_attr("axis", &[2])],
            ..node("Concat", &many, "x")
        });
        let (_, actual) = check(&g, &link(2, false)).unwrap_err();
        assert!(actual.ends_with("more than 16 tensors joined"), "{actual}");
    }
}
