//! Static sizes of a tensor that follow from what a runtime holds the graph to: the
//! shapes the graph's inputs declare and the constants' own shapes, carried through the
//! front ends exporters put before a recurrent stack (an embedding's `Gather`, a
//! `MatMul` or `Gemm` with weights, element-wise operators, `Transpose`, `Reshape`).
//! A static export of `Embedding` then `LSTM` declares its token input `[seq, batch]`,
//! which gives the first node's `X` its sizes.

use std::cell::Cell;

use crate::import::onnx_axes::{axis, permutation};
use crate::import::onnx_graph::{Constant, GraphIndex};
use crate::import::onnx_proto::attr;

/// A shape: each dimension's size where it is known.
pub(crate) type StaticDims = Vec<Option<i64>>;

/// Most nodes one inference walks through, deep and in all.
const MAX_DEPTH: usize = 64;
const MAX_VISITS: usize = 4096;
/// Highest rank followed.
const MAX_RANK: usize = 16;

/// Operators whose output has their first input's shape.
const SAME_SHAPE: &[&str] = &[
    "Identity",
    "Cast",
    "CastLike",
    "Dropout",
    "Relu",
    "LeakyRelu",
    "Elu",
    "Selu",
    "Gelu",
    "Tanh",
    "Sigmoid",
    "HardSigmoid",
    "Softplus",
    "Softsign",
    "Neg",
    "Abs",
    "Exp",
    "Log",
    "Sqrt",
    "Erf",
    "Clip",
    "Softmax",
    "LogSoftmax",
    "LayerNormalization",
];

/// Element-wise operators with broadcasting of two inputs.
const BROADCAST: &[&str] = &["Add", "Sub", "Mul", "Div", "Pow"];

/// The static dimensions of the tensor `name`, where its rank is known.
pub(crate) fn static_dims(index: &GraphIndex, name: &str) -> Option<StaticDims> {
    infer(index, name, &Cell::new(0), 0).filter(|d| d.len() <= MAX_RANK)
}

fn infer(index: &GraphIndex, name: &str, visits: &Cell<usize>, depth: usize) -> Option<StaticDims> {
    visits.set(visits.get() + 1);
    if depth > MAX_DEPTH || visits.get() > MAX_VISITS {
        return None;
    }
    if let Some(dims) = index.input_shape(name) {
        return Some(dims.to_vec());
    }
    if let Some(constant) = index.constant(name) {
        return Some(match constant {
            Constant::Tensor(t) => t.dims.iter().map(|&d| (d >= 0).then_some(d)).collect(),
            Constant::Ints(v) => vec![i64::try_from(v.len()).ok()],
            Constant::Floats(v) => vec![i64::try_from(v.len()).ok()],
            Constant::Int(_) | Constant::Float(_) => Vec::new(),
        });
    }
    let producer = index.producer(name)?;
    if producer.output != 0 {
        return None;
    }
    let node = producer.node;
    let input = |i: usize| -> Option<StaticDims> {
        let name = node.input.get(i).filter(|n| !n.is_empty())?;
        infer(index, name, visits, depth + 1).filter(|d| d.len() <= MAX_RANK)
    };
    let attr_axis = |rank: usize, default: i64| {
        axis(
            attr(node, "axis").and_then(|a| a.i).unwrap_or(default),
            rank,
        )
    };
    let op = producer.op.as_str();
    if SAME_SHAPE.contains(&op) {
        return input(0);
    }
    if BROADCAST.contains(&op) {
        return broadcast(&input(0)?, &input(1)?);
    }
    match op {
        "Gather" => {
            let (data, indices) = (input(0)?, input(1)?);
            let a = attr_axis(data.len(), 0)?;
            Some([&data[..a], &indices[..], &data[a + 1..]].concat())
        }
        "MatMul" => {
            let (a, b) = (input(0)?, input(1)?);
            match (a.as_slice(), b.as_slice()) {
                ([rows @ .., _], [_, columns]) if !rows.is_empty() => {
                    Some([rows, &[*columns]].concat())
                }
                _ => None,
            }
        }
        "Gemm" => {
            let (a, b) = (input(0)?, input(1)?);
            let flag = |key: &str| attr(node, key).and_then(|a| a.i).unwrap_or(0) != 0;
            match (a.as_slice(), b.as_slice()) {
                ([a0, a1], [b0, b1]) => Some(vec![
                    if flag("transA") { *a1 } else { *a0 },
                    if flag("transB") { *b0 } else { *b1 },
                ]),
                _ => None,
            }
        }
        "Transpose" => {
            let data = input(0)?;
            let perm: Vec<i64> = attr(node, "perm")
                .map(|a| a.ints.clone())
                .unwrap_or_else(|| (0..data.len() as i64).rev().collect());
            let perm = permutation(&perm, data.len())?;
            Some(perm.iter().map(|&p| data[p]).collect())
        }
        "Unsqueeze" | "Squeeze" => {
            let data = input(0)?;
            let axes = match node.input.get(1).filter(|n| !n.is_empty()) {
                Some(name) => index.ints(name)?,
                None => attr(node, "axes")?.ints.clone(),
            };
            let rank = if op == "Unsqueeze" {
                data.len() + axes.len()
            } else {
                data.len()
            };
            let mut at: Vec<usize> = axes.iter().map(|&a| axis(a, rank)).collect::<Option<_>>()?;
            at.sort_unstable();
            at.dedup();
            if op == "Unsqueeze" {
                let mut out = data;
                for a in at {
                    if a > out.len() {
                        return None;
                    }
                    out.insert(a, Some(1));
                }
                Some(out)
            } else {
                if at.iter().any(|&a| data[a] != Some(1)) {
                    return None;
                }
                Some(
                    data.into_iter()
                        .enumerate()
                        .filter(|(a, _)| !at.contains(a))
                        .map(|(_, d)| d)
                        .collect(),
                )
            }
        }
        "Reshape" => {
            let data = input(0)?;
            let target = index.ints(node.input.get(1)?)?;
            let allowzero = attr(node, "allowzero").and_then(|a| a.i) == Some(1);
            let mut out: StaticDims = target
                .iter()
                .enumerate()
                .map(|(i, &t)| match t {
                    0 if !allowzero => data.get(i).copied().flatten(),
                    -1 => None,
                    t if t > 0 => Some(t),
                    _ => None,
                })
                .collect();
            if let Some(i) = target.iter().position(|&t| t == -1) {
                let total = data.iter().try_fold(1i64, |n, d| n.checked_mul((*d)?))?;
                let known = out
                    .iter()
                    .enumerate()
                    .filter(|(k, _)| *k != i)
                    .try_fold(1i64, |n, (_, d)| n.checked_mul((*d)?))?;
                out[i] = (known > 0 && total % known == 0).then(|| total / known);
            }
            Some(out)
        }
        _ => None,
    }
}

/// The shape of an element-wise result of tensors of shapes `a` and `b` (numpy's
/// broadcasting); `None` where they cannot broadcast.
fn broadcast(a: &[Option<i64>], b: &[Option<i64>]) -> Option<StaticDims> {
    let rank = a.len().max(b.len());
    let at =
        |v: &[Option<i64>], i: usize| (i + v.len()).checked_sub(rank).map_or(Some(1), |k| v[k]);
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (Some(1), other) | (other, Some(1)) => Some(other),
            (Some(x), Some(y)) if x == y => Some(Some(x)),
            (Some(_), Some(_)) => None,
            (None, known) | (known, None) => Some(known),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::build::{declared, int64s, ints_attr, node};
    use crate::import::onnx_proto::{GraphProto, TensorProto};

    #[test]
    fn sizes_follow_from_inputs_through_front_ends() {
        let weights = |name: &str, dims: &[i64]| TensorProto {
            name: Some(name.into()),
            data_type: Some(1),
            dims: dims.to_vec(),
            ..Default::default()
        };
        let mut transposed = node("Transpose", &["embedded"], "batch_major");
        transposed.attribute.push(ints_attr("perm", &[1, 0, 2]));
        let graph = GraphProto {
            node: vec![
                node("Gather", &["table", "tokens"], "embedded"),
                node("Relu", &["embedded"], "active"),
                node("MatMul", &["active", "projection"], "projected"),
                node("Add", &["projected", "bias"], "shifted"),
                transposed,
                node("Reshape", &["shifted", "flat"], "flat_out"),
                node("Unsqueeze", &["shifted", "zero"], "unsqueezed"),
                node("Add", &["projected", "wrong"], "mismatched"),
                node("Conv", &["shifted"], "unknown"),
            ],
            initializer: vec![
                weights("table", &[100, 4]),
                weights("projection", &[4, 8]),
                weights("bias", &[8]),
                weights("wrong", &[7]),
                int64s("flat", &[0, -1]),
                int64s("zero", &[0]),
            ],
            input: vec![declared("tokens", &[6, 3])],
            ..Default::default()
        };
        let index = GraphIndex::new(&graph, None);
        let dims = |name: &str| static_dims(&index, name);
        let all = |d: &[i64]| Some(d.iter().map(|&d| Some(d)).collect::<Vec<_>>());
        assert_eq!(dims("embedded"), all(&[6, 3, 4]));
        assert_eq!(dims("active"), all(&[6, 3, 4]));
        assert_eq!(dims("shifted"), all(&[6, 3, 8]));
        assert_eq!(dims("batch_major"), all(&[3, 6, 4]));
        assert_eq!(dims("flat_out"), all(&[6, 24]));
        assert_eq!(dims("unsqueezed"), all(&[1, 6, 3, 8]));
        assert_eq!(dims("mismatched"), None);
        assert_eq!(dims("unknown"), None);
        assert_eq!(
            broadcast(&[None, Some(3)], &[Some(3)]),
            Some(vec![None, Some(3)])
        );
        assert_eq!(broadcast(&[None], &[Some(5)]), Some(vec![Some(5)]));
    }
}
