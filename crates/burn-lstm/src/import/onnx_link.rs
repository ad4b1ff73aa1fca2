//! How one ONNX recurrent node feeds the next in an exported stack: the lower node's
//! output `Y` (`[seq, dirs, batch, hidden]`; `[batch, seq, dirs, hidden]` with
//! `layout` 1) with its direction axis folded into the features, which is what the
//! module feeds its next layer (`[seq, batch, dirs·hidden]`, each row's directions
//! side by side).
//!
//! Only the foldings that give exactly that are accepted: a `Reshape` alone on a
//! sequence-major `Y` (or a `Transpose` with another permutation) also gives a tensor
//! of the right size, with directions and batch rows mixed.

use std::collections::HashMap;
use std::fmt;

use crate::import::onnx_proto::{GraphProto, NodeProto, TensorProto, attr};

/// A reshaping node between two recurrent nodes.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// `Transpose` with its `perm`.
    Transpose(Vec<i64>),
    /// `Reshape` with its constant target shape (`None`: computed when the graph runs)
    /// and `allowzero`.
    Reshape {
        shape: Option<Vec<i64>>,
        allowzero: bool,
    },
    /// `Squeeze` with its constant axes (`None`: absent, all unit axes, or computed).
    Squeeze(Option<Vec<i64>>),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
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
            Step::Reshape { shape: None, .. } => write!(f, "Reshape to a computed shape"),
            Step::Squeeze(Some(axes)) => write!(f, "Squeeze on axes [{}]", list(axes)),
            Step::Squeeze(None) => write!(f, "Squeeze without constant axes"),
        }
    }
}

/// Checks that the tensor `x` is the tensor `y` (the `Y` of the recurrent node named
/// `lower`) with its direction axis folded into the features, through nothing but the
/// foldings PyTorch exports (and `Identity` / `Dropout`, identities at inference).
/// `Err((expected, actual))` otherwise, in words.
pub(crate) fn check(
    graph: &GraphProto,
    lower: &str,
    y: &str,
    x: &str,
    directions: usize,
    hidden: usize,
    batch_first: bool,
) -> Result<(), (String, String)> {
    let expected = format!(
        "the output Y of '{lower}' with its direction axis folded into the features: {}, as PyTorch exports a stack",
        foldings(directions, hidden, batch_first)
    );
    let steps = steps_between(graph, y, x).map_err(|actual| (expected.clone(), actual))?;
    if folds(&steps, directions, hidden, batch_first) {
        return Ok(());
    }
    let actual = if steps.is_empty() {
        format!("Y unchanged ('{x}')")
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
        (format!("Reshape to [0, 0, -1] (or [0, 0, {width}])"), 2)
    } else {
        (
            format!("Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1] (or [0, 0, {width}])"),
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

/// Whether `steps` turn `Y` into the module's layer input.
fn folds(steps: &[Step], directions: usize, hidden: usize, batch_first: bool) -> bool {
    let width = i64::try_from(directions * hidden).unwrap_or(-1);
    let reshape_folds = |shape: &Option<Vec<i64>>, allowzero: bool| {
        !allowzero
            && shape
                .as_deref()
                .is_some_and(|s| s == [0, 0, -1] || s == [0, 0, width])
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

/// The reshaping nodes from `y` to `x`, in graph order (`Identity` and `Dropout`
/// skipped); `Err` (in words) where `x` does not come from `y` through such nodes.
fn steps_between(graph: &GraphProto, y: &str, x: &str) -> Result<Vec<Step>, String> {
    let producers: HashMap<&str, &NodeProto> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let mut steps = Vec::new();
    let mut tensor = x;
    for _ in 0..=graph.node.len() {
        if tensor == y && !y.is_empty() {
            steps.reverse();
            return Ok(steps);
        }
        let Some(node) = producers.get(tensor) else {
            break;
        };
        let op = node.op_type.as_deref().unwrap_or_default();
        match op {
            "Identity" | "Dropout" => {}
            "Transpose" => steps.push(Step::Transpose(
                attr(node, "perm")
                    .map(|a| a.ints.clone())
                    .unwrap_or_default(),
            )),
            "Reshape" => steps.push(Step::Reshape {
                shape: node.input.get(1).and_then(|s| constant_ints(graph, s)),
                allowzero: attr(node, "allowzero").and_then(|a| a.i) == Some(1),
            }),
            // Opset 13 made the axes an input; before, an attribute.
            "Squeeze" => steps.push(Step::Squeeze(
                node.input
                    .get(1)
                    .filter(|s| !s.is_empty())
                    .and_then(|s| constant_ints(graph, s))
                    .or_else(|| attr(node, "axes").map(|a| a.ints.clone())),
            )),
            _ => {
                return Err(format!(
                    "the output of {op} node '{}'",
                    node.name.as_deref().unwrap_or_default()
                ));
            }
        }
        tensor = node.input.first().map(String::as_str).unwrap_or_default();
    }
    Err(format!("'{x}', which does not come from it"))
}

/// The values of a constant INT64 tensor of the graph (an initializer or a `Constant`
/// node's `value` or `value_ints`); `None` for anything else.
fn constant_ints(graph: &GraphProto, name: &str) -> Option<Vec<i64>> {
    if let Some(t) = graph
        .initializer
        .iter()
        .find(|t| t.name.as_deref() == Some(name))
    {
        return tensor_ints(t);
    }
    let node = graph.node.iter().find(|n| {
        n.op_type.as_deref() == Some("Constant")
            && n.output.first().map(String::as_str) == Some(name)
    })?;
    if let Some(t) = attr(node, "value").and_then(|a| a.t.as_ref()) {
        return tensor_ints(t);
    }
    attr(node, "value_ints").map(|a| a.ints.clone())
}

/// An INT64 tensor's values (`int64_data` or little-endian `raw_data`).
fn tensor_ints(t: &TensorProto) -> Option<Vec<i64>> {
    const INT64: i32 = 7;
    if t.data_type != Some(INT64) || t.data_location == Some(1) {
        return None;
    }
    match &t.raw_data {
        Some(raw) if raw.len() % 8 == 0 => Some(
            raw.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        Some(_) => None,
        None => Some(t.int64_data.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transpose(perm: &[i64]) -> Step {
        Step::Transpose(perm.to_vec())
    }

    fn reshape(shape: &[i64]) -> Step {
        Step::Reshape {
            shape: Some(shape.to_vec()),
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
            (vec![tr.clone(), reshape(&[0, -1, 8])], 2, false, false),
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
                        shape: Some(vec![0, 0, -1]),
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
                folds(&steps, directions, 4, batch_first),
                want,
                "{steps:?}, {directions} directions, batch_first {batch_first}"
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
        assert_eq!(squeeze(&[1]).to_string(), "Squeeze on axes [1]");
        assert_eq!(
            foldings(1, 4, false),
            "Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1] (or [0, 0, 4]), or Squeeze on axis 1"
        );
        assert_eq!(foldings(2, 4, true), "Reshape to [0, 0, -1] (or [0, 0, 8])");
    }
}
