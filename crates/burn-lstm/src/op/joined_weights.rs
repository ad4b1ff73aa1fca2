//! The flat buffer of *tracked* parameters on `Autodiff<B>` for backends with
//! [`FlatJoinOps`]: one autodiff op joins up to [`FAN_IN`] parameters with the
//! backend's `join`, and its backward cuts the buffer's gradient back with the backend's
//! `split`, one call each way instead of Burn's `cat` (a `reshape` per parameter) and
//! its backward (a `slice` and a `reshape` per parameter).

use burn::tensor::{Shape, TensorMetadata, ops::FloatTensor};
use burn_autodiff::{
    Autodiff,
    checkpoint::{base::Checkpointer, strategy::CheckpointStrategy},
    grads::Gradients,
    ops::{Backward, Ops, OpsKind},
};

use crate::op::contract::RnnBackend;
use crate::op::flat_weights::FlatJoinOps;

/// Most parents of one autodiff op (an autodiff op has a fixed number of parents): a
/// stack of up to four bidirectional LSTM layers with biases (32 parameters) is joined
/// by one op; each further op takes the buffer so far and up to `FAN_IN - 1` more.
const FAN_IN: usize = 32;

/// Autodiff op: `[part, ...]` (up to [`FAN_IN`], then untracked padding) `->` the parts
/// flattened and joined.
#[derive(Debug)]
struct Join;

impl<B: RnnBackend> Backward<B, FAN_IN> for Join {
    /// The backend's ops and the joined parts' shapes, in order (the padding has none).
    type State = (FlatJoinOps<B>, Vec<Shape>);

    fn backward(
        self,
        ops: Ops<Self::State, FAN_IN>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let (join_ops, shapes) = ops.state;
        let grad = grads.consume::<B>(&ops.node);
        let part_grads = (join_ops.split)(grad, &shapes);
        // The padding's parents are `None` (untracked), as are frozen parameters'.
        for (parent, part_grad) in ops.parents.into_iter().zip(part_grads) {
            if let Some(parent) = parent {
                grads.register::<B>(parent.id, part_grad);
            }
        }
    }
}

/// The flat buffer of `parts` (at least one), joined by as few autodiff ops as
/// [`FAN_IN`] allows.
pub(crate) fn joined<B: RnnBackend, C: CheckpointStrategy>(
    parts: Vec<FloatTensor<Autodiff<B, C>>>,
    join_ops: FlatJoinOps<B>,
) -> FloatTensor<Autodiff<B, C>> {
    let mut parts = parts.into_iter();
    let mut buffer = join_group::<B, C>(parts.by_ref().take(FAN_IN).collect(), join_ops);
    loop {
        let more: Vec<_> = parts.by_ref().take(FAN_IN - 1).collect();
        if more.is_empty() {
            return buffer;
        }
        let group = core::iter::once(buffer).chain(more).collect();
        buffer = join_group::<B, C>(group, join_ops);
    }
}

/// One autodiff op joining `group` (1 to [`FAN_IN`] tensors).
fn join_group<B: RnnBackend, C: CheckpointStrategy>(
    group: Vec<FloatTensor<Autodiff<B, C>>>,
    join_ops: FlatJoinOps<B>,
) -> FloatTensor<Autodiff<B, C>> {
    debug_assert!((1..=FAN_IN).contains(&group.len()));
    let shapes: Vec<Shape> = group.iter().map(|part| part.shape()).collect();
    // The slots after the group: a leaf that asks for no gradient is no parent.
    let padding = FloatTensor::<Autodiff<B, C>>::new(group[0].primitive.clone()).node;
    let nodes = core::array::from_fn(|slot| {
        group
            .get(slot)
            .map_or_else(|| padding.clone(), |part| part.node.clone())
    });
    let joined = (join_ops.join)(group.into_iter().map(|part| part.primitive).collect());
    match Join.prepare::<C>(nodes).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish((join_ops, shapes), joined),
        OpsKind::UnTracked(prep) => prep.finish(joined),
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::tensor::ops::FloatTensorOps;
    use burn::tensor::{Tensor, TensorData, TensorPrimitive};
    use burn_autodiff::checkpoint::strategy::{BalancedCheckpointing, NoCheckpointing};

    use super::*;
    use crate::op::flat_weights::{concatenate, split};

    /// Flex's Burn ops as the backend's join and split.
    fn burn_ops() -> FlatJoinOps<Flex> {
        FlatJoinOps {
            join: concatenate::<Flex>,
            split: split::<Flex>,
        }
    }

    /// A part's values (one-dimensional), the shape it is joined in, whether it is
    /// tracked.
    type Part<C> = (Tensor<Autodiff<Flex, C>, 1>, Shape, bool);

    /// `count` parts of one, two or three dimensions; every third one frozen (no
    /// gradient). Values are `1, 2, 3, ...` across the parts.
    fn parts<C: CheckpointStrategy>(count: usize) -> Vec<Part<C>> {
        let device = Default::default();
        let mut next = 0.0f32;
        (0..count)
            .map(|i| {
                let dims = match i % 3 {
                    0 => vec![i % 5 + 1],
                    1 => vec![2, i % 4 + 1],
                    _ => vec![1, 3, i % 2 + 2],
                };
                let len: usize = dims.iter().product();
                let values: Vec<f32> = (0..len)
                    .map(|_| {
                        next += 1.0;
                        next
                    })
                    .collect();
                let tracked = i % 3 != 2;
                let flat = Tensor::from_data(TensorData::new(values, [len]), &device);
                let flat = if tracked { flat.require_grad() } else { flat };
                (flat, Shape::from(dims), tracked)
            })
            .collect()
    }

    /// Joins `count` parts through [`joined`] with checkpointing strategy `C` and checks
    /// the buffer's values and every tracked part's gradient under a weighted sum (the
    /// weight of value `k` is `k + 1`, so each gradient says where its part was put).
    fn check<C: CheckpointStrategy>(count: usize) {
        let parts = parts::<C>(count);
        let primitives = parts
            .iter()
            .map(|(flat, shape, _)| {
                let primitive = flat.clone().into_primitive().tensor();
                Autodiff::<Flex, C>::float_reshape(primitive, shape.clone())
            })
            .collect();
        let flat = joined::<Flex, C>(primitives, burn_ops());
        let flat = Tensor::<Autodiff<Flex, C>, 1>::from_primitive(TensorPrimitive::Float(flat));
        let len = flat.dims()[0];
        let values: Vec<f32> = (1..=len).map(|k| k as f32).collect();
        let data = flat.to_data().to_vec::<f32>().unwrap();
        assert_eq!(data, values, "{count} parts");

        let weights: Vec<f32> = (1..=len).map(|k| k as f32 + 1.0).collect();
        let weights = Tensor::from_data(TensorData::new(weights, [len]), &flat.device());
        let grads = (flat * weights).sum().backward();
        let mut start = 0;
        for (i, (part, _, tracked)) in parts.iter().enumerate() {
            let part_len = part.dims()[0];
            let grad = part.grad(&grads);
            let context = format!("part {i} of {count}");
            assert_eq!(grad.is_some(), *tracked, "{context}: a gradient or none");
            if let Some(grad) = grad {
                let expected: Vec<f32> = (start + 1..=start + part_len)
                    .map(|k| k as f32 + 1.0)
                    .collect();
                assert_eq!(
                    grad.to_data().to_vec::<f32>().unwrap(),
                    expected,
                    "{context}"
                );
            }
            start += part_len;
        }
        assert_eq!(start, len);
    }

    #[test]
    fn one_op_joins_up_to_fan_in_parts() {
        for count in [1, 2, 7, FAN_IN] {
            check::<NoCheckpointing>(count);
        }
    }

    #[test]
    fn further_ops_take_the_buffer_so_far() {
        // FAN_IN + 1: a second op with one part; 3 * FAN_IN - 1: three ops, the last full.
        for count in [FAN_IN + 1, 2 * FAN_IN, 3 * FAN_IN - 1, 3 * FAN_IN + 5] {
            check::<NoCheckpointing>(count);
        }
    }

    #[test]
    fn the_join_under_balanced_checkpointing() {
        for count in [7, 2 * FAN_IN] {
            check::<BalancedCheckpointing>(count);
        }
    }
}
