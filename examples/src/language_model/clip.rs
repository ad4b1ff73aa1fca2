//! Gradient clipping by the total L2 norm over all parameters, as
//! `torch.nn.utils.clip_grad_norm_`: every gradient is scaled by
//! `min(1, max_norm / (total_norm + 1e-6))`. Burn's own `GradientClipping::Norm` clips
//! each parameter by its own norm, which is another method (it changes the direction of
//! the whole update). The norm stays on the device: nothing is read back.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::Tensor;
use burn::tensor::backend::AutodiffBackend;

/// PyTorch's `eps` in the clipping coefficient.
const EPS: f64 = 1e-6;

/// Scales the gradients of `module`'s parameters in `grads` so that their total L2 norm is
/// at most `max_norm`, and returns that norm before clipping (a `[1]` tensor on the
/// device). `None` when no parameter has a gradient.
pub fn clip_grad_norm<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> Option<Tensor<B::InnerBackend, 1>> {
    let mut squares = SumOfSquares::<B> { grads, total: None };
    module.visit(&mut squares);
    let norm = squares.total?.sqrt();
    let coef = norm
        .clone()
        .add_scalar(EPS)
        .recip()
        .mul_scalar(max_norm)
        .clamp_max(1.0);
    module.visit(&mut Scale::<B> { grads, coef });
    Some(norm)
}

/// Adds up the squares of every gradient.
struct SumOfSquares<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    total: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SumOfSquares<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(grad) = self.grads.get::<B::InnerBackend, D>(param.id) {
            let sum = grad.square().sum();
            self.total = Some(match self.total.take() {
                Some(total) => total + sum,
                None => sum,
            });
        }
    }
}

/// Multiplies every gradient by the clipping coefficient.
struct Scale<'a, B: AutodiffBackend> {
    grads: &'a mut GradientsParams,
    coef: Tensor<B::InnerBackend, 1>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for Scale<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        if let Some(grad) = self.grads.remove::<B::InnerBackend, D>(param.id) {
            let coef = self.coef.clone().reshape([1; D]);
            self.grads.register(param.id, grad * coef);
        }
    }
}
