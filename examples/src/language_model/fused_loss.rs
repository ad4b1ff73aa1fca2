//! The training loss as one autodiff op: log-softmax and the targets' negative
//! log-likelihood, mean over the rows, with the backward `(softmax - one_hot) * g / N`
//! written directly.
//!
//! Burn 0.21 has no fused cross-entropy: `CrossEntropyLoss` is built from tensor ops
//! (max, subtract, exp, sum, log, subtract, gather, mean), and autodiff records each of
//! them, so its backward walks back through every one: about fifteen passes over the
//! `[words, vocabulary]` logits, each a fresh tensor of their size (51 MB for WikiText-2's
//! defaults). This op's forward is Burn's softmax (one fused kernel on Flex) and a max
//! over the rows ([`nll_and_softmax`]); it keeps the softmax for the backward, which
//! scales it in place by `g / N` and subtracts `g / N` at the targets. Same value and
//! gradient as `CrossEntropyLoss` (the tests check both); it is what PyTorch's fused
//! `log_softmax` + `nll_loss` backward computes.

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::backend::Backend;
use burn::tensor::ops::{FloatTensor, IntTensor};
use burn::tensor::{IndexingUpdateOp, Int, Tensor, TensorPrimitive};

use super::loss::nll_and_softmax;

/// Mean negative log-likelihood of `targets [n]` under `logits [n, vocab]`, as one
/// autodiff node (see the module's documentation).
pub fn fused_nll_loss<B: Backend, C: CheckpointStrategy>(
    logits: Tensor<Autodiff<B, C>, 2>,
    targets: Tensor<Autodiff<B, C>, 1, Int>,
) -> Tensor<Autodiff<B, C>, 1> {
    let [rows, _] = logits.dims();
    let [target_rows] = targets.dims();
    assert_eq!(
        rows, target_rows,
        "fused_nll_loss: one target per row of the logits"
    );
    let targets = targets.inner().reshape([rows, 1]);
    let logits = logits.into_primitive().tensor();
    let node = logits.node.clone();
    let logits = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(logits.primitive));
    let output = match CrossEntropyBackward
        .prepare::<C>([node])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (loss, probabilities) = nll_and_softmax(logits, targets.clone());
            let state = (
                probabilities.into_primitive().tensor(),
                targets.into_primitive(),
            );
            prep.finish(state, loss.into_primitive().tensor())
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(nll_and_softmax(logits, targets).0.into_primitive().tensor())
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// The backward of [`fused_nll_loss`].
#[derive(Debug)]
struct CrossEntropyBackward;

impl<B: Backend> Backward<B, 1> for CrossEntropyBackward {
    /// `softmax(logits) [n, vocab]` and the targets `[n, 1]`.
    type State = (FloatTensor<B>, IntTensor<B>);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let grad =
            Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(grads.consume::<B>(&ops.node)));
        let [parent] = ops.parents;
        let Some(parent) = parent else { return };
        let (probabilities, targets) = ops.state;
        let probabilities = Tensor::<B, 2>::from_primitive(TensorPrimitive::Float(probabilities));
        let targets = Tensor::<B, 2, Int>::from_primitive(targets);
        let [rows, _] = probabilities.dims();
        // d loss / d logits = (softmax - one_hot(target)) * g / rows; the softmax is
        // this node's alone by now, so the product reuses its memory.
        let scale = grad.div_scalar(rows as f64).reshape([1, 1]);
        let softmax_scaled = probabilities * scale.clone();
        let at_targets = scale.neg().expand([rows, 1]);
        let dlogits = softmax_scaled.scatter(1, targets, at_targets, IndexingUpdateOp::Add);
        grads.register::<B>(parent.id, dlogits.into_primitive().tensor());
    }
}
