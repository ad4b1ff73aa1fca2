//! Shapes computed inside an ONNX graph, read without running it: each dimension of a
//! recurrent node's output `Y` is the symbol `seq`, `batch` or a size, and the small
//! `Shape` → `Slice` / `Gather` → `Mul` → `Concat` computations that exporters write
//! for a `Reshape`'s target are evaluated on those symbols. PyTorch's default exporter
//! (`dynamo`) folds a stack's link with such a computed target when the model has
//! dynamic axes, and with the static sizes otherwise; the shapes the graph's inputs
//! declare give `seq` and `batch` their sizes where they state them.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fmt;

use crate::import::onnx_axes::clamp;
use crate::import::onnx_graph::{GraphIndex, MAX_LIST};
use crate::import::onnx_proto::attr;
use crate::import::onnx_static::static_dims;

/// One dimension: `factor · seq^seq · batch^batch` (a size when both powers are 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dim {
    factor: i64,
    seq: u8,
    batch: u8,
}

/// Highest power of a symbol kept; a product beyond it is not a shape an exporter
/// writes, and is read as unknown.
const MAX_POWER: u8 = 4;

impl Dim {
    /// A size.
    pub(crate) const fn size(value: i64) -> Self {
        Self {
            factor: value,
            seq: 0,
            batch: 0,
        }
    }

    /// The sequence length.
    pub(crate) const SEQ: Self = Self {
        factor: 1,
        seq: 1,
        batch: 0,
    };

    /// The batch size.
    pub(crate) const BATCH: Self = Self {
        factor: 1,
        seq: 0,
        batch: 1,
    };

    /// The product of two dimensions; `None` past `i64` or [`MAX_POWER`].
    pub(crate) fn times(self, other: Self) -> Option<Self> {
        let power = |a: u8, b: u8| Some(a + b).filter(|p| *p <= MAX_POWER);
        Some(Self {
            factor: self.factor.checked_mul(other.factor)?,
            seq: power(self.seq, other.seq)?,
            batch: power(self.batch, other.batch)?,
        })
    }

    /// The dimension `d` with `d · other == self`, where there is one.
    pub(crate) fn divided_by(self, other: Self) -> Option<Self> {
        if self.factor.checked_rem(other.factor)? != 0 {
            return None;
        }
        Some(Self {
            factor: self.factor.checked_div(other.factor)?,
            seq: self.seq.checked_sub(other.seq)?,
            batch: self.batch.checked_sub(other.batch)?,
        })
    }

    /// This dimension with `seq` and `batch` replaced by their sizes where known (kept
    /// as it is where the product would pass `i64`).
    pub(crate) fn with_sizes(self, sizes: Sizes) -> Self {
        let substitute = || {
            let mut out = Self::size(self.factor);
            for (symbol, power, size) in [
                (Self::SEQ, self.seq, sizes.seq),
                (Self::BATCH, self.batch, sizes.batch),
            ] {
                let factor = size.map_or(symbol, Self::size);
                for _ in 0..power {
                    out = out.times(factor)?;
                }
            }
            Some(out)
        };
        substitute().unwrap_or(self)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.factor != 1 || (self.seq == 0 && self.batch == 0) {
            parts.push(self.factor.to_string());
        }
        for (name, power) in [("seq", self.seq), ("batch", self.batch)] {
            parts.extend(std::iter::repeat_n(name.to_string(), power.into()));
        }
        write!(f, "{}", parts.join("·"))
    }
}

/// The sizes of `seq` and `batch` that the graph declares, where it does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub seq: Option<i64>,
    pub batch: Option<i64>,
}

/// Most nodes evaluations walk through, deep and in all: a shape computation is a
/// handful of nodes, and each tensor's values are read once.
const MAX_DEPTH: usize = 64;
const MAX_VISITS: usize = 4096;

/// Evaluates 1-D integer tensors of a graph on the symbolic dimensions of the tensors
/// it is told of.
pub(crate) struct ShapeReader<'a, 'g> {
    index: &'a GraphIndex<'g>,
    known: HashMap<String, Vec<Dim>>,
    /// Values read so far (cleared when a tensor's dimensions become known).
    read: RefCell<HashMap<String, Option<Vec<Dim>>>>,
    /// Nodes walked through so far.
    visits: Cell<usize>,
}

impl<'a, 'g> ShapeReader<'a, 'g> {
    /// A reader of the indexed graph's shape computations; no tensor's dimensions known
    /// yet.
    pub(crate) fn new(index: &'a GraphIndex<'g>) -> Self {
        Self {
            index,
            known: HashMap::new(),
            read: RefCell::new(HashMap::new()),
            visits: Cell::new(0),
        }
    }

    /// The graph's index.
    pub(crate) fn index(&self) -> &'a GraphIndex<'g> {
        self.index
    }

    /// States the dimensions of the tensor `name`.
    pub(crate) fn know(&mut self, name: &str, dims: Vec<Dim>) {
        if self.known.get(name) != Some(&dims) {
            self.known.insert(name.to_string(), dims);
            self.read.get_mut().clear();
        }
    }

    /// The sizes of `seq` and `batch` that the known tensors have statically (from the
    /// graph's declared inputs, `onnx_static`); a symbol given two different sizes
    /// stays unknown.
    pub(crate) fn declared_sizes(&self) -> Sizes {
        let (mut seq, mut batch) = (Vec::new(), Vec::new());
        for (name, dims) in &self.known {
            let Some(sizes) = static_dims(self.index, name) else {
                continue;
            };
            if sizes.len() != dims.len() {
                continue;
            }
            for (dim, size) in dims.iter().zip(sizes) {
                match (*dim, size) {
                    (Dim::SEQ, Some(size)) => seq.push(size),
                    (Dim::BATCH, Some(size)) => batch.push(size),
                    _ => {}
                }
            }
        }
        let agreed = |sizes: Vec<i64>| {
            let first = *sizes.first()?;
            sizes.iter().all(|s| *s == first).then_some(first)
        };
        Sizes {
            seq: agreed(seq),
            batch: agreed(batch),
        }
    }

    /// The values of the 1-D (or scalar) integer tensor `name`, where they are
    /// constants or computed from known dimensions by the operators exporters use for
    /// shapes; `None` otherwise.
    pub(crate) fn values(&self, name: &str) -> Option<Vec<Dim>> {
        self.values_at(name, 0)
    }

    fn values_at(&self, name: &str, depth: usize) -> Option<Vec<Dim>> {
        if let Some(values) = self.read.borrow().get(name) {
            return values.clone();
        }
        self.visits.set(self.visits.get() + 1);
        if depth > MAX_DEPTH || self.visits.get() > MAX_VISITS {
            return None;
        }
        let values = self.compute(name, depth).filter(|v| v.len() <= MAX_LIST);
        self.read
            .borrow_mut()
            .insert(name.to_string(), values.clone());
        values
    }

    fn compute(&self, name: &str, depth: usize) -> Option<Vec<Dim>> {
        if let Some(ints) = self.index.ints(name) {
            return Some(ints.into_iter().map(Dim::size).collect());
        }
        let producer = self.index.producer(name)?;
        let node = producer.node;
        if producer.output != 0 {
            return None;
        }
        let input = |i: usize| -> Option<Vec<Dim>> {
            let name = node.input.get(i).filter(|n| !n.is_empty())?;
            self.values_at(name, depth + 1)
        };
        let constant = |i: usize| -> Option<Vec<i64>> {
            let name = node.input.get(i).filter(|n| !n.is_empty())?;
            self.index.ints(name)
        };
        match producer.op.as_str() {
            "Identity" | "Squeeze" => input(0),
            // To an integer type wide enough for any size.
            "Cast" => match attr(node, "to").and_then(|a| a.i) {
                Some(6 | 7) => input(0),
                _ => None,
            },
            // A scalar made a one-value vector (a longer vector would become a matrix).
            "Unsqueeze" => input(0).filter(|v| v.len() == 1),
            "Shape" => {
                let dims = self
                    .dims(node.input.first()?)
                    .filter(|d| d.len() <= MAX_LIST)?;
                let start = attr(node, "start").and_then(|a| a.i).unwrap_or(0);
                let end = attr(node, "end").and_then(|a| a.i);
                let (start, end) = (clamp(start, dims.len()), end.map(|e| clamp(e, dims.len())));
                dims.get(start..end.unwrap_or(dims.len()).max(start))
                    .map(<[Dim]>::to_vec)
            }
            "Slice" => {
                // Opset 10 made starts, ends, axes and steps inputs; before, attributes.
                let (starts, ends, axes, steps) = if node.input.len() > 1 {
                    let optional = |i: usize, default: i64| match node.input.get(i) {
                        Some(n) if !n.is_empty() => constant(i),
                        _ => Some(vec![default]),
                    };
                    (constant(1)?, constant(2)?, optional(3, 0)?, optional(4, 1)?)
                } else {
                    let list = |key: &str| attr(node, key).map(|a| a.ints.clone());
                    (
                        list("starts")?,
                        list("ends")?,
                        list("axes").unwrap_or(vec![0]),
                        vec![1],
                    )
                };
                match (&starts[..], &ends[..], &axes[..], &steps[..]) {
                    ([start], [end], [0 | -1], [1]) => {
                        let data = input(0)?;
                        let (start, end) = (clamp(*start, data.len()), clamp(*end, data.len()));
                        data.get(start..end.max(start)).map(<[Dim]>::to_vec)
                    }
                    _ => None,
                }
            }
            "Gather" => {
                if attr(node, "axis").and_then(|a| a.i).unwrap_or(0) != 0 {
                    return None;
                }
                let data = input(0)?;
                constant(1)?
                    .into_iter()
                    .map(|i| {
                        let i = if i < 0 { i + data.len() as i64 } else { i };
                        usize::try_from(i).ok().and_then(|i| data.get(i).copied())
                    })
                    .collect()
            }
            "Concat" => {
                if !matches!(attr(node, "axis").and_then(|a| a.i), Some(0 | -1))
                    || node.input.len() > MAX_LIST
                {
                    return None;
                }
                let mut out = Vec::new();
                for i in 0..node.input.len() {
                    out.extend(input(i)?);
                    if out.len() > MAX_LIST {
                        return None;
                    }
                }
                Some(out)
            }
            "Mul" => {
                let (a, b) = (input(0)?, input(1)?);
                let n = a.len().max(b.len());
                let at = |v: &[Dim], i: usize| if v.len() == 1 { v[0] } else { v[i] };
                if !(a.len() == n || a.len() == 1) || !(b.len() == n || b.len() == 1) {
                    return None;
                }
                (0..n).map(|i| at(&a, i).times(at(&b, i))).collect()
            }
            // A vector reshaped to a vector of its length: `[-1]` or `[n]`.
            "Reshape" => {
                let data = input(0)?;
                match constant(1)?.as_slice() {
                    [-1] => Some(data),
                    [n] if usize::try_from(*n).ok() == Some(data.len()) => Some(data),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The dimensions of the tensor `name`: stated with [`Self::know`], else its static
    /// sizes when all of them are known.
    fn dims(&self, name: &str) -> Option<Vec<Dim>> {
        if let Some(dims) = self.known.get(name) {
            return Some(dims.clone());
        }
        static_dims(self.index, name)?
            .iter()
            .map(|size| size.map(Dim::size))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::build::{declared, int64s as constant, ints_attr};
    use crate::import::onnx_proto::{GraphProto, NodeProto};

    fn node(op: &str, inputs: &[&str], output: &str, ints: &[(&str, i64)]) -> NodeProto {
        let mut node = crate::import::onnx_proto::build::node(op, inputs, output);
        node.attribute = ints
            .iter()
            .map(|(name, i)| ints_attr(name, &[*i]))
            .collect();
        node
    }

    #[test]
    fn dimensions_multiply_and_take_declared_sizes() {
        let d = Dim::SEQ
            .times(Dim::BATCH)
            .unwrap()
            .times(Dim::size(3))
            .unwrap();
        assert_eq!(d.to_string(), "3·seq·batch");
        assert_eq!(Dim::size(-1).to_string(), "-1");
        let sizes = Sizes {
            seq: Some(6),
            batch: None,
        };
        assert_eq!(d.with_sizes(sizes).to_string(), "18·batch");
        assert_eq!(Dim::size(i64::MAX).times(Dim::size(2)), None);
        // A product past i64 keeps its symbols.
        let big = Dim::SEQ.times(Dim::size(i64::MAX)).unwrap();
        assert_eq!(big.with_sizes(sizes), big);
        let mut power = Dim::SEQ;
        for _ in 1..MAX_POWER {
            power = power.times(Dim::SEQ).unwrap();
        }
        assert_eq!(power.times(Dim::SEQ), None);
    }

    #[test]
    fn shape_computations_read_on_symbols() {
        let graph = GraphProto {
            node: vec![
                node("Shape", &["t"], "all", &[]),
                node("Shape", &["t"], "middle", &[("start", 1), ("end", -1)]),
                node("Gather", &["all", "last"], "g", &[]),
                node("Slice", &["all", "zero", "two"], "head", &[]),
                node(
                    "Slice",
                    &["all", "zero", "two", "zero", "two"],
                    "strided",
                    &[],
                ),
                node("Mul", &["head", "g"], "scaled", &[]),
                node("Concat", &["head", "g"], "joined", &[("axis", 0)]),
                node("Concat", &["head", "g"], "sideways", &[("axis", 1)]),
                node("Reshape", &["g", "minus_one"], "flat", &[]),
                node("Unsqueeze", &["head", "zero"], "matrix", &[]),
                node("Shape", &["unknown"], "nothing", &[]),
                node("Add", &["head", "g"], "sum", &[]),
                node("Cast", &["head"], "wide", &[("to", 7)]),
                node("Cast", &["head"], "narrow", &[("to", 2)]),
                NodeProto {
                    domain: Some("com.example".into()),
                    ..node("Identity", &["head"], "foreign", &[])
                },
            ],
            initializer: vec![
                constant("last", &[-1]),
                constant("zero", &[0]),
                constant("two", &[2]),
                constant("minus_one", &[-1]),
            ],
            ..Default::default()
        };
        let index = GraphIndex::new(&graph, None);
        let mut shapes = ShapeReader::new(&index);
        shapes.know("t", vec![Dim::SEQ, Dim::BATCH, Dim::size(5)]);
        let text = |name: &str| {
            shapes
                .values(name)
                .map(|v| v.iter().map(Dim::to_string).collect::<Vec<_>>().join(", "))
        };
        assert_eq!(text("all").as_deref(), Some("seq, batch, 5"));
        assert_eq!(text("middle").as_deref(), Some("batch"));
        assert_eq!(text("g").as_deref(), Some("5"));
        assert_eq!(text("head").as_deref(), Some("seq, batch"));
        assert_eq!(text("scaled").as_deref(), Some("5·seq, 5·batch"));
        assert_eq!(text("joined").as_deref(), Some("seq, batch, 5"));
        assert_eq!(text("flat").as_deref(), Some("5"));
        assert_eq!(text("two").as_deref(), Some("2"));
        assert_eq!(text("wide").as_deref(), Some("seq, batch"));
        // Steps, other axes, vectors made matrices, unknown tensors and operators.
        // Casts to a type too narrow for a size (uint8), other domains' operators.
        for name in [
            "strided", "sideways", "matrix", "nothing", "sum", "absent", "narrow", "foreign",
        ] {
            assert_eq!(text(name), None, "{name}");
        }
    }

    #[test]
    fn declared_sizes_are_those_of_graph_inputs_and_must_agree() {
        let mut graph = GraphProto {
            input: vec![
                declared("x", &[6, 3, 4]),
                declared("z", &[7, 3, 4]),
                declared("w", &[9, 9, 4]),
            ],
            value_info: vec![declared("y", &[5, 2, 4, 5])],
            // `w` has a default: a caller may give it another shape.
            initializer: vec![constant("w", &[0])],
            ..Default::default()
        };
        graph.node.push(node("Identity", &["x"], "unused", &[]));
        let index = GraphIndex::new(&graph, None);
        let mut shapes = ShapeReader::new(&index);
        shapes.know("x", vec![Dim::SEQ, Dim::BATCH, Dim::size(4)]);
        // value_info is a hint runtimes do not check: not read.
        shapes.know("y", vec![Dim::SEQ, Dim::size(2), Dim::BATCH, Dim::size(5)]);
        shapes.know("w", vec![Dim::SEQ, Dim::BATCH, Dim::size(4)]);
        assert_eq!(
            shapes.declared_sizes(),
            Sizes {
                seq: Some(6),
                batch: Some(3)
            }
        );
        shapes.know("z", vec![Dim::SEQ, Dim::BATCH, Dim::size(4)]);
        assert_eq!(
            shapes.declared_sizes(),
            Sizes {
                seq: None,
                batch: Some(3)
            }
        );
    }
}
