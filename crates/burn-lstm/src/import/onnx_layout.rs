//! The layouts of the tensors between two linked recurrent nodes: each axis the
//! row-major product of the factors `seq`, `batch`, directions and `hidden`, and the
//! ONNX operators that reshape such tensors (`Transpose`, `Reshape`, `Squeeze`,
//! `Unsqueeze`, `Slice`, `Concat`) read as operations on layouts. `onnx_link` walks a
//! graph with them.

use crate::import::onnx_axes::{self, clamp};
use crate::import::onnx_shape::{Dim, Sizes};

/// One factor of an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Factor {
    Seq,
    Batch,
    /// Directions `first..first + count` of `Y`.
    Dirs {
        first: usize,
        count: usize,
    },
    Hidden,
}

/// What a tensor between `Y` and `X` holds: per axis, the factors it merges in
/// row-major order (none: an axis of size 1), and the one direction of `Y` it holds
/// when a slice took one (a direction factor of count 1 is kept here instead).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Layout {
    pub axes: Vec<Vec<Factor>>,
    pub direction: Option<usize>,
}

/// The sizes a link's factors have, and the operators on layouts that need them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub directions: usize,
    pub hidden: usize,
    pub sizes: Sizes,
}

impl Scale {
    pub(crate) fn size(&self, factor: Factor) -> Dim {
        match factor {
            Factor::Seq => Dim::SEQ.with_sizes(self.sizes),
            Factor::Batch => Dim::BATCH.with_sizes(self.sizes),
            Factor::Dirs { count, .. } => size(count),
            Factor::Hidden => size(self.hidden),
        }
    }

    /// The size of an axis made of `factors`.
    pub(crate) fn axis_size(&self, factors: &[Factor]) -> Option<Dim> {
        factors
            .iter()
            .try_fold(Dim::size(1), |d, &f| d.times(self.size(f)))
    }

    fn describe(&self, factor: Factor) -> String {
        match factor {
            Factor::Seq => "seq".into(),
            Factor::Batch => "batch".into(),
            Factor::Dirs { first: 0, count } if count == self.directions => "dirs".into(),
            Factor::Dirs { first, count } => format!("dirs {first}..{}", first + count),
            Factor::Hidden => "hidden".into(),
        }
    }

    pub(crate) fn describe_layout(&self, layout: &Layout) -> String {
        let axes: Vec<String> = layout
            .axes
            .iter()
            .map(|axis| match axis.as_slice() {
                [] => "1".into(),
                factors => factors
                    .iter()
                    .map(|&f| self.describe(f))
                    .collect::<Vec<_>>()
                    .join("·"),
            })
            .collect();
        let mut out = format!("[{}]", axes.join(", "));
        if let (Some(d), true) = (layout.direction, self.directions > 1) {
            out += &format!(" of direction {d} only");
        }
        out
    }

    /// `layout` without its factors of size 1, which do not change where any value
    /// sits, and with a direction factor of count 1 kept as the layout's direction.
    pub(crate) fn canonical(&self, layout: Layout) -> Layout {
        let mut direction = layout.direction;
        let axes = layout
            .axes
            .into_iter()
            .map(|axis| {
                axis.into_iter()
                    .filter(|&f| {
                        if let Factor::Dirs { first, count: 1 } = f {
                            direction = Some(first);
                        }
                        self.size(f) != Dim::size(1)
                    })
                    .collect()
            })
            .collect();
        Layout { axes, direction }
    }

    /// Each axis's size.
    pub(crate) fn dims(&self, layout: &Layout) -> Option<Vec<Dim>> {
        layout
            .axes
            .iter()
            .map(|axis| self.axis_size(axis))
            .collect()
    }

    /// `Slice` of `layout`: a range of directions on an axis of directions alone, or a
    /// whole axis.
    pub(crate) fn slice(
        &self,
        mut layout: Layout,
        starts: &[i64],
        ends: &[i64],
        axes: Option<&[i64]>,
        steps: Option<&[i64]>,
    ) -> Result<Layout, String> {
        let rank = layout.axes.len();
        let default_axes: Vec<i64> = (0..starts.len() as i64).collect();
        let axes = axes.unwrap_or(&default_axes);
        if starts.len() != ends.len() || axes.len() != starts.len() {
            return Err("starts, ends and axes of different lengths".into());
        }
        if steps.is_some_and(|s| s.iter().any(|&s| s != 1)) {
            return Err("a step other than 1".into());
        }
        for ((&start, &end), &axis) in starts.iter().zip(ends).zip(axes) {
            let axis = onnx_axes::axis(axis, rank).ok_or("an axis out of range")?;
            let factors = &layout.axes[axis];
            let size = self.axis_size(factors);
            let whole = start == 0
                && (end >= i64::from(i32::MAX) || size.is_some_and(|s| s == Dim::size(end)));
            if whole {
                continue;
            }
            match factors.as_slice() {
                [Factor::Dirs { first, count }] => {
                    let (s, e) = (clamp(start, *count), clamp(end, *count));
                    if s >= e {
                        return Err("an empty slice".into());
                    }
                    layout.axes[axis] = vec![Factor::Dirs {
                        first: first + s,
                        count: e - s,
                    }];
                }
                _ => {
                    return Err(format!(
                        "part of axis {axis}, which is not the direction axis"
                    ));
                }
            }
        }
        Ok(layout)
    }

    /// `Concat` of `inputs` on `axis`: consecutive directions, each alone, joined in
    /// front of that axis's factors.
    pub(crate) fn concat(&self, inputs: Vec<Layout>, axis: i64) -> Result<Layout, String> {
        let rank = inputs[0].axes.len();
        let axis = onnx_axes::axis(axis, rank).ok_or("an axis out of range")?;
        if inputs.len() == 1 {
            return Ok(inputs.into_iter().next().expect("one input"));
        }
        let mut next = None;
        let mut rest = None;
        for layout in &inputs {
            if layout.axes.len() != rank {
                return Err("inputs of different ranks".into());
            }
            // The directions this input holds, and the factors of the joined axis after them.
            let (first, count, after) = match (layout.direction, layout.axes[axis].as_slice()) {
                (Some(d), factors) => (d, 1, factors.to_vec()),
                (None, [Factor::Dirs { first, count }, after @ ..]) => {
                    (*first, *count, after.to_vec())
                }
                _ => return Err("inputs that are not each one range of directions".into()),
            };
            if next.is_some_and(|n| n != first) {
                return Err("directions joined out of order".into());
            }
            next = Some(first + count);
            let mut others = layout.axes.clone();
            others[axis] = after;
            if rest.as_ref().is_some_and(|r| r != &others) {
                return Err("inputs whose other axes differ".into());
            }
            rest = Some(others);
        }
        let first = match (inputs[0].direction, inputs[0].axes[axis].first()) {
            (Some(d), _) => d,
            (None, Some(Factor::Dirs { first, .. })) => *first,
            _ => unreachable!("checked above"),
        };
        let mut axes = rest.expect("two inputs or more");
        let count = next.expect("two inputs or more") - first;
        axes[axis].insert(0, Factor::Dirs { first, count });
        Ok(Layout {
            axes,
            direction: None,
        })
    }

    /// `Reshape` of `layout` to `target` (sizes; 0 copies the input's dimension unless
    /// `allowzero`, -1 is inferred): the factors, in order, grouped into the target's
    /// axes, when each axis is a run of whole factors.
    pub(crate) fn reshape(
        &self,
        layout: Layout,
        target: &[Dim],
        allowzero: bool,
    ) -> Result<Layout, String> {
        let dims = self.dims(&layout).ok_or("an axis too large")?;
        let mut sizes = Vec::with_capacity(target.len());
        let mut inferred = None;
        for (i, &t) in target.iter().enumerate() {
            if t == Dim::size(-1) {
                if inferred.replace(i).is_some() {
                    return Err("two dimensions inferred".into());
                }
                sizes.push(Dim::size(1));
            } else if t == Dim::size(0) && !allowzero {
                sizes.push(*dims.get(i).ok_or("0 past the input's rank")?);
            } else {
                sizes.push(t);
            }
        }
        let total = dims
            .iter()
            .try_fold(Dim::size(1), |a, &d| a.times(d))
            .ok_or("a size too large")?;
        if let Some(i) = inferred {
            let known = sizes
                .iter()
                .try_fold(Dim::size(1), |a, &d| a.times(d))
                .ok_or("a size too large")?;
            sizes[i] = total
                .divided_by(known)
                .ok_or("a dimension that cannot be inferred")?;
        }
        let mut factors = layout.axes.into_iter().flatten().peekable();
        let mut axes = Vec::with_capacity(sizes.len());
        for want in sizes {
            let mut axis = Vec::new();
            let mut have = Dim::size(1);
            while have != want {
                let factor = factors
                    .next()
                    .ok_or("a target whose axes do not fall on whole factors")?;
                have = have.times(self.size(factor)).ok_or("a size too large")?;
                axis.push(factor);
            }
            axes.push(axis);
        }
        if factors.any(|f| self.size(f) != Dim::size(1)) {
            return Err("a target whose axes do not fall on whole factors".into());
        }
        Ok(Layout {
            axes,
            direction: layout.direction,
        })
    }
}

pub(crate) fn size(n: usize) -> Dim {
    Dim::size(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `Transpose` of `layout` by `perm`.
pub(crate) fn transpose(layout: Layout, perm: &[i64]) -> Result<Layout, String> {
    let rank = layout.axes.len();
    let mut seen = vec![false; rank];
    let mut axes = Vec::with_capacity(rank);
    for &p in perm {
        let p = onnx_axes::axis(p, rank)
            .filter(|&p| !std::mem::replace(&mut seen[p], true))
            .ok_or("a perm that is not a permutation of the axes")?;
        axes.push(layout.axes[p].clone());
    }
    if axes.len() != rank {
        return Err("a perm that is not a permutation of the axes".into());
    }
    Ok(Layout {
        axes,
        direction: layout.direction,
    })
}

/// `Squeeze` of `layout`'s `axes` (all axes of size 1 when `None`): each an axis of
/// size 1 (no factor left: the canonical layout has none of size 1).
pub(crate) fn squeeze(layout: Layout, axes: Option<&[i64]>) -> Result<Layout, String> {
    let rank = layout.axes.len();
    let remove: Vec<usize> = match axes {
        Some(axes) => axes
            .iter()
            .map(|&a| onnx_axes::axis(a, rank).ok_or("an axis out of range"))
            .collect::<Result<_, _>>()?,
        None => (0..rank).filter(|&a| layout.axes[a].is_empty()).collect(),
    };
    if let Some(&a) = remove.iter().find(|&&a| !layout.axes[a].is_empty()) {
        return Err(format!("axis {a}, which is not of size 1"));
    }
    let axes = layout
        .axes
        .into_iter()
        .enumerate()
        .filter(|(a, _)| !remove.contains(a))
        .map(|(_, axis)| axis)
        .collect();
    Ok(Layout {
        axes,
        direction: layout.direction,
    })
}

/// `Unsqueeze` of `layout`: axes of size 1 inserted at `axes` (of the output).
pub(crate) fn unsqueeze(layout: Layout, axes: &[i64]) -> Result<Layout, String> {
    let rank = layout.axes.len() + axes.len();
    let mut at: Vec<usize> = axes
        .iter()
        .map(|&a| onnx_axes::axis(a, rank).ok_or("an axis out of range"))
        .collect::<Result<_, _>>()?;
    at.sort_unstable();
    at.dedup();
    if at.len() != axes.len() {
        return Err("an axis given twice".into());
    }
    let mut out = layout.axes;
    for a in at {
        out.insert(a, Vec::new());
    }
    Ok(Layout {
        axes: out,
        direction: layout.direction,
    })
}
