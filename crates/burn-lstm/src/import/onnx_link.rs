//! How one ONNX recurrent node feeds the next in an exported stack: the lower node's
//! output `Y` (`[seq, dirs, batch, hidden]`; `[batch, seq, dirs, hidden]` with
//! `layout` 1) with its direction axis folded into the features, which is what the
//! module feeds its next layer (`[seq, batch, dirs·hidden]`, each row's directions
//! side by side).
//!
//! Only the foldings that give exactly that are accepted: a `Reshape` alone on a
//! sequence-major `Y` (or a `Transpose` with another permutation, or a target that
//! swaps `seq` and `batch`) also gives a tensor of the right size, with directions and
//! batch rows mixed. A `Reshape`'s target may be constant (`[0, 0, -1]` from PyTorch's
//! TorchScript exporter, the static sizes from its `dynamo` exporter) or computed from
//! `Y`'s shape (the `dynamo` exporter with dynamic axes): `onnx_shape` reads it.

use std::collections::HashMap;
use std::fmt;

use crate::import::onnx_proto::{GraphProto, NodeProto, attr};
use crate::import::onnx_shape::{Dim, ShapeReader, Sizes, constant_ints};

/// A reshaping node between two recurrent nodes.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `Transpose` with its `perm`.
    Transpose(Vec<i64>),
    /// `Reshape` with its target shape (`None`: not readable without running the
    /// graph), `seq` and `batch` replaced by their sizes where the graph declares them,
    /// and `allowzero`.
    Reshape {
        shape: Option<Vec<Dim>>,
        allowzero: bool,
    },
    /// `Squeeze` with its constant axes (`None`: absent, all unit axes, or computed).
    Squeeze(Option<Vec<i64>>),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: ToString>(v: &[T]) -> String {
            v.iter().map(T::to_string).collect::<Vec<_>>().join(", ")
        }
        match self {
            Step::Transpose(perm) => write!(f, "Transpose (perm {})", list(perm)),
            Step::Reshape {
                shape: Some(shape),
                allowzero,
            } => {
                write!(f, "Reshape to [{}]", list(shape))?;
                if *allowzero {
                    write!(f, " with allowzero=1")?;
                }
                Ok(())
            }
            Step::Reshape { shape: None, .. } => {
                write!(
                    f,
                    "Reshape to a shape that cannot be read without running the graph"
                )
            }
            Step::Squeeze(Some(axes)) => write!(f, "Squeeze on axes [{}]", list(axes)),
            Step::Squeeze(None) => write!(f, "Squeeze without constant axes"),
        }
    }
}

/// The two recurrent nodes of a link, as the check needs them.
pub(crate) struct Link<'a> {
    /// The lower node's name.
    pub lower: &'a str,
    /// The lower node's input `X` and its feature count.
    pub lower_x: &'a str,
    pub input_size: usize,
    /// The lower node's output `Y`.
    pub y: &'a str,
    /// The upper node's input `X`.
    pub x: &'a str,
    pub directions: usize,
    pub hidden: usize,
    pub batch_first: bool,
}

/// Checks that the tensor `link.x` is the tensor `link.y` with its direction axis
/// folded into the features, through nothing but the foldings PyTorch exports (and
/// `Identity` / `Dropout`, identities at inference). `Err((expected, actual))`
/// otherwise, in words.
pub(crate) fn check(graph: &GraphProto, link: &Link) -> Result<(), (String, String)> {
    let expected = format!(
        "the output Y of '{}' with its direction axis folded into the features: {}, as PyTorch exports a stack",
        link.lower,
        foldings(link.directions, link.hidden, link.batch_first)
    );
    let nodes =
        nodes_between(graph, link.y, link.x).map_err(|actual| (expected.clone(), actual))?;
    let (steps, sizes) = read_steps(graph, link, &nodes);
    if folds(
        &steps,
        link.directions,
        link.hidden,
        link.batch_first,
        sizes,
    ) {
        return Ok(());
    }
    let actual = if steps.is_empty() {
        format!("Y unchanged ('{}')", link.x)
    } else {
        format!(
            "Y through {}",
            steps
                .iter()
                .map(Step::to_string)
                .collect::<Vec<_>>()
                .join(" then ")
        )
    };
    Err((expected, actual))
}

/// The accepted foldings, in words.
fn foldings(directions: usize, hidden: usize, batch_first: bool) -> String {
    let width = directions * hidden;
    let (reshape, squeeze_axis) = if batch_first {
        (
            format!("Reshape to [0, 0, -1] (or [0, 0, {width}], [batch, seq, {width}])"),
            2,
        )
    } else {
        (
            format!(
                "Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1] (or [0, 0, {width}], [seq, batch, {width}])"
            ),
            1,
        )
    };
    let squeeze = if directions == 1 {
        format!(", or Squeeze on axis {squeeze_axis}")
    } else {
        String::new()
    };
    format!("{reshape}{squeeze}")
}

/// The dimensions of `Y`.
fn y_dims(directions: usize, hidden: usize, batch_first: bool) -> Vec<Dim> {
    let (d, h) = (size(directions), size(hidden));
    if batch_first {
        vec![Dim::BATCH, Dim::SEQ, d, h]
    } else {
        vec![Dim::SEQ, d, Dim::BATCH, h]
    }
}

fn size(n: usize) -> Dim {
    Dim::size(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The steps `nodes` take `Y` through, each `Reshape`'s target read on the dimensions
/// of `Y`, of the tensors between and of the lower node's `X`; and the sizes of `seq`
/// and `batch` the graph declares for those tensors.
fn read_steps(graph: &GraphProto, link: &Link, nodes: &[&NodeProto]) -> (Vec<Step>, Sizes) {
    let mut shapes = ShapeReader::new(graph);
    let mut dims = y_dims(link.directions, link.hidden, link.batch_first);
    shapes.know(link.y, dims.clone());
    if !link.lower_x.is_empty() {
        let (outer, inner) = if link.batch_first {
            (Dim::BATCH, Dim::SEQ)
        } else {
            (Dim::SEQ, Dim::BATCH)
        };
        shapes.know(link.lower_x, vec![outer, inner, size(link.input_size)]);
    }
    // The tensors up to the first Reshape or Squeeze (after them, no fold is accepted).
    for node in nodes {
        let output = node.output.first().map(String::as_str).unwrap_or_default();
        match node.op_type.as_deref().unwrap_or_default() {
            "Identity" | "Dropout" => {}
            "Transpose" => {
                let perm = attr(node, "perm").map(|a| a.ints.as_slice()).unwrap_or(&[]);
                let permuted: Option<Vec<Dim>> = perm
                    .iter()
                    .map(|&p| usize::try_from(p).ok().and_then(|p| dims.get(p).copied()))
                    .collect();
                match permuted {
                    Some(p) if p.len() == dims.len() => dims = p,
                    _ => break,
                }
            }
            _ => break,
        }
        shapes.know(output, dims.clone());
    }
    let sizes = shapes.declared_sizes();
    let steps = nodes
        .iter()
        .filter_map(|node| match node.op_type.as_deref().unwrap_or_default() {
            "Transpose" => Some(Step::Transpose(
                attr(node, "perm")
                    .map(|a| a.ints.clone())
                    .unwrap_or_default(),
            )),
            "Reshape" => Some(Step::Reshape {
                shape: node
                    .input
                    .get(1)
                    .and_then(|s| shapes.values(s))
                    .map(|v| v.into_iter().map(|d| d.with_sizes(sizes)).collect()),
                allowzero: attr(node, "allowzero").and_then(|a| a.i) == Some(1),
            }),
            // Opset 13 made the axes an input; before, an attribute.
            "Squeeze" => Some(Step::Squeeze(
                node.input
                    .get(1)
                    .filter(|s| !s.is_empty())
                    .and_then(|s| constant_ints(graph, s))
                    .or_else(|| attr(node, "axes").map(|a| a.ints.clone())),
            )),
            _ => None,
        })
        .collect();
    (steps, sizes)
}

/// Whether `steps` turn `Y` into the module's layer input, given the sizes of `seq`
/// and `batch` the graph declares.
fn folds(
    steps: &[Step],
    directions: usize,
    hidden: usize,
    batch_first: bool,
    sizes: Sizes,
) -> bool {
    // The Reshape's input: Y, transposed to [seq, batch, dirs, hidden] when sequence-major.
    let input: Vec<Dim> = if batch_first {
        y_dims(directions, hidden, true)
    } else {
        vec![Dim::SEQ, Dim::BATCH, size(directions), size(hidden)]
    }
    .into_iter()
    .map(|d| d.with_sizes(sizes))
    .collect();
    let width = size(directions * hidden);
    let reshape_folds = |shape: &Option<Vec<Dim>>, allowzero: bool| {
        let Some(shape) = shape.as_deref().filter(|s| s.len() == 3) else {
            return false;
        };
        let expected = [input[0], input[1], width];
        let mut inferred = 0;
        for (i, (&target, want)) in shape.iter().zip(expected).enumerate() {
            let target = match target {
                t if t == Dim::size(-1) => {
                    inferred += 1;
                    continue;
                }
                // 0 copies the input's dimension, unless allowzero asks for a size 0.
                t if t == Dim::size(0) && !allowzero => input[i],
                t => t,
            };
            if target != want {
                return false;
            }
        }
        inferred <= 1
    };
    // The direction axis of a 4-D `Y`, counted from the front and from the back.
    let axis: [i64; 2] = if batch_first { [2, -2] } else { [1, -3] };
    let squeeze_folds = |axes: &Option<Vec<i64>>| {
        directions == 1
            && axes
                .as_deref()
                .is_some_and(|a| a.len() == 1 && axis.contains(&a[0]))
    };
    match steps {
        [Step::Transpose(perm), Step::Reshape { shape, allowzero }] => {
            !batch_first && perm == &[0, 2, 1, 3] && reshape_folds(shape, *allowzero)
        }
        [Step::Reshape { shape, allowzero }] => batch_first && reshape_folds(shape, *allowzero),
        [Step::Squeeze(axes)] => squeeze_folds(axes),
        _ => false,
    }
}

/// The nodes from `y` to `x`, in graph order (`Identity` and `Dropout` among them);
/// `Err` (in words) where `x` does not come from `y` through reshaping nodes.
fn nodes_between<'g>(
    graph: &'g GraphProto,
    y: &str,
    x: &str,
) -> Result<Vec<&'g NodeProto>, String> {
    let producers: HashMap<&str, &NodeProto> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let mut nodes = Vec::new();
    let mut tensor = x;
    for _ in 0..=graph.node.len() {
        if tensor == y && !y.is_empty() {
            nodes.reverse();
            return Ok(nodes);
        }
        let Some(&node) = producers.get(tensor) else {
            break;
        };
        let op = node.op_type.as_deref().unwrap_or_default();
        if !matches!(
            op,
            "Identity" | "Dropout" | "Transpose" | "Reshape" | "Squeeze"
        ) {
            return Err(format!(
                "the output of {op} node '{}'",
                node.name.as_deref().unwrap_or_default()
            ));
        }
        nodes.push(node);
        tensor = node.input.first().map(String::as_str).unwrap_or_default();
    }
    Err(format!("'{x}', which does not come from it"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transpose(perm: &[i64]) -> Step {
        Step::Transpose(perm.to_vec())
    }

    fn reshape(shape: &[i64]) -> Step {
        to(shape.iter().map(|&d| Dim::size(d)).collect())
    }

    /// A Reshape to `shape`.
    fn to(shape: Vec<Dim>) -> Step {
        Step::Reshape {
            shape: Some(shape),
            allowzero: false,
        }
    }

    fn squeeze(axes: &[i64]) -> Step {
        Step::Squeeze(Some(axes.to_vec()))
    }

    #[test]
    fn only_foldings_that_keep_rows_apart_pass() {
        let tr = transpose(&[0, 2, 1, 3]);
        // (steps, directions, batch_first, folds)
        let cases: Vec<(Vec<Step>, usize, bool, bool)> = vec![
            (vec![tr.clone(), reshape(&[0, 0, -1])], 2, false, true),
            (vec![tr.clone(), reshape(&[0, 0, 8])], 2, false, true),
            (vec![tr.clone(), reshape(&[0, 0, -1])], 1, false, true),
            (vec![squeeze(&[1])], 1, false, true),
            (vec![squeeze(&[-3])], 1, false, true),
            (vec![reshape(&[0, 0, -1])], 2, true, true),
            (vec![reshape(&[0, 0, 8])], 2, true, true),
            (vec![squeeze(&[2])], 1, true, true),
            (vec![squeeze(&[-2])], 1, true, true),
            // -1 infers the one dimension the two others leave: batch here.
            (vec![tr.clone(), reshape(&[0, -1, 8])], 2, false, true),
            (vec![tr.clone(), reshape(&[-1, 0, 8])], 2, false, true),
            // Directions and rows mixed, or the wrong axis removed.
            (vec![reshape(&[0, 0, -1])], 2, false, false),
            (vec![reshape(&[0, 0, -1])], 1, false, false),
            (vec![tr.clone(), reshape(&[0, 0, -1])], 2, true, false),
            (
                vec![transpose(&[0, 2, 3, 1]), reshape(&[0, 0, -1])],
                2,
                false,
                false,
            ),
            (vec![tr.clone(), reshape(&[0, 0, 4])], 2, false, false),
            (vec![tr.clone(), reshape(&[-1, 8])], 2, false, false),
            (vec![squeeze(&[1])], 2, false, false),
            (vec![squeeze(&[0])], 1, false, false),
            (vec![squeeze(&[1])], 1, true, false),
            (vec![squeeze(&[1, 2])], 1, false, false),
            (vec![Step::Squeeze(None)], 1, false, false),
            (
                vec![
                    tr.clone(),
                    Step::Reshape {
                        shape: Some([0, 0, -1].map(Dim::size).to_vec()),
                        allowzero: true,
                    },
                ],
                2,
                false,
                false,
            ),
            (
                vec![
                    tr.clone(),
                    Step::Reshape {
                        shape: None,
                        allowzero: false,
                    },
                ],
                2,
                false,
                false,
            ),
            (vec![], 1, false, false),
            (
                vec![tr.clone(), reshape(&[0, 0, -1]), squeeze(&[1])],
                1,
                false,
                false,
            ),
        ];
        for (steps, directions, batch_first, want) in cases {
            assert_eq!(
                folds(&steps, directions, 4, batch_first, Sizes::default()),
                want,
                "{steps:?}, {directions} directions, batch_first {batch_first}"
            );
        }
    }

    #[test]
    fn targets_in_seq_and_batch_fold_in_the_order_of_y() {
        let (seq, batch, w) = (Dim::SEQ, Dim::BATCH, Dim::size(8));
        let tr = transpose(&[0, 2, 1, 3]);
        let none = Sizes::default();
        let declared = Sizes {
            seq: Some(6),
            batch: Some(3),
        };
        let n = Dim::size;
        // (Reshape target, batch_first, sizes, folds)
        let cases: Vec<(Vec<Dim>, bool, Sizes, bool)> = vec![
            (vec![seq, batch, w], false, none, true),
            (vec![batch, seq, w], true, none, true),
            (vec![seq, n(-1), w], false, none, true),
            (vec![n(0), batch, n(-1)], false, none, true),
            (vec![n(6), n(3), w], false, declared, true),
            (vec![n(3), n(6), w], true, declared, true),
            (vec![n(6), n(-1), w], false, declared, true),
            // seq and batch swapped: rows mixed.
            (vec![batch, seq, w], false, none, false),
            (vec![seq, batch, w], true, none, false),
            (vec![n(3), n(6), w], false, declared, false),
            // Sizes the graph does not declare cannot be checked.
            (vec![n(6), n(3), w], false, none, false),
            (vec![seq, batch, n(4)], false, none, false),
            (vec![seq, n(-1), n(-1)], false, none, false),
            (vec![seq, batch, n(2), n(4)], false, none, false),
        ];
        for (target, batch_first, sizes, want) in cases {
            let steps = if batch_first {
                vec![to(target.clone())]
            } else {
                vec![tr.clone(), to(target.clone())]
            };
            assert_eq!(
                folds(&steps, 2, 4, batch_first, sizes),
                want,
                "{target:?}, batch_first {batch_first}, {sizes:?}"
            );
        }
    }

    #[test]
    fn steps_are_named_as_the_graph_has_them() {
        assert_eq!(
            transpose(&[0, 2, 1, 3]).to_string(),
            "Transpose (perm 0, 2, 1, 3)"
        );
        assert_eq!(reshape(&[0, 0, -1]).to_string(), "Reshape to [0, 0, -1]");
        assert_eq!(
            to(vec![Dim::SEQ, Dim::BATCH, Dim::size(8)]).to_string(),
            "Reshape to [seq, batch, 8]"
        );
        assert_eq!(squeeze(&[1]).to_string(), "Squeeze on axes [1]");
        assert_eq!(
            foldings(1, 4, false),
            "Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1] (or [0, 0, 4], [seq, batch, 4]), or Squeeze on axis 1"
        );
        assert_eq!(
            foldings(2, 4, true),
            "Reshape to [0, 0, -1] (or [0, 0, 8], [batch, seq, 8])"
        );
    }
}
