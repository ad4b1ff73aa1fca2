//! The loss and the perplexity: PyTorch's `log_softmax` + `NLLLoss` (mean over the
//! window's words) on logits, and the perplexity, `exp` of a mean negative
//! log-likelihood per word.
//!
//! [`nll_loss`] computes the loss through Burn's softmax, which Flex runs as one fused,
//! row-parallel kernel (its `log_softmax` is five separate passes, each a fresh tensor of
//! the logits' size). [`cross_entropy`] is Burn's `CrossEntropyLoss`, the reference the
//! tests compare with and the training loss of `--unfused-loss`.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor};

/// Mean negative log-likelihood (natural log) of `targets [n]` under `logits [n, vocab]`:
/// the value of Burn's `CrossEntropyLoss` (computed with the softmax by `nll_and_softmax`).
pub fn nll_loss<B: Backend>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>) -> Tensor<B, 1> {
    let [n] = targets.dims();
    nll_and_softmax(logits, targets.reshape([n, 1])).0
}

/// Burn's `CrossEntropyLoss` on logits (log-softmax, then the targets' mean negative
/// log-likelihood), without padding, weights or smoothing.
pub fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>) -> Tensor<B, 1> {
    CrossEntropyLossConfig::new()
        .init(&logits.device())
        .forward(logits, targets)
}

/// The mean negative log-likelihood of `targets [n, 1]` and `softmax(logits)`. The
/// log-sum-exp of a row is `max - ln p_max` (`p_max`, the softmax at the row's largest
/// logit, is at least `1 / vocab`: no underflow), so the loss of a row is
/// `max - logit[target] - ln p_max`, exact where `-ln p[target]` would overflow for a
/// target of probability below f32's smallest normal.
pub(crate) fn nll_and_softmax<B: Backend>(
    logits: Tensor<B, 2>,
    targets: Tensor<B, 2, Int>,
) -> (Tensor<B, 1>, Tensor<B, 2>) {
    let probabilities = softmax(logits.clone(), 1);
    let (max, argmax) = logits.clone().max_dim_with_indices(1);
    let p_max = probabilities.clone().gather(1, argmax);
    let picked = logits.gather(1, targets);
    ((max - picked - p_max.log()).mean(), probabilities)
}

/// The perplexity of a mean negative log-likelihood per word.
pub fn perplexity(mean_nll: f64) -> f64 {
    mean_nll.exp()
}
