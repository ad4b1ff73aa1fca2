//! The inter-layer dropout masks of a kernel, checked through the numbers they produce.
//!
//! The masks cannot be compared with a reference (cuDNN draws its own; the CPU kernels
//! draw from Burn's generator), so the second layer is built to show them: its
//! input-to-hidden weights pass each unit's input straight to that unit's cell gate (an
//! identity block in the `g` rows, zeros elsewhere), its recurrent weights are zero and
//! its forget gate is shut (bias −30, `σ(−30) ≈ 1e-13`). Each of its outputs is then a
//! function of one dropped-out input alone:
//!
//! `y = ½·tanh(½·tanh(x₂))`, `x₂ = m·h₁/(1−p)`, `h₁` the first layer's output, `m ∈ {0, 1}`.
//!
//! From `y` and `h₁` (the first layer run on its own) every element's mask is read off,
//! and the check asserts:
//! - every element is either dropped (`y = 0`) or kept and scaled by exactly `1/(1−p)`;
//! - the fraction dropped is `p` within five binomial standard deviations, and the masks
//!   differ between batch rows and between time steps;
//! - the backward uses the forward's masks: the gradient of the second layer's `g` rows is
//!   `Σ dz_g ⊗ x₂` with those masks, and the input gradient equals that of the first
//!   layer alone under the loss `Σ h₁·(m/(1−p)·dz_g)`;
//! - a second training call draws other masks.

use burn::module::{AutodiffModule, Param};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnBackend, RnnKernel};

use super::to_f64;

const INPUT: usize = 6;
const HIDDEN: usize = 16;
const BATCH: usize = 8;
const SEQ: usize = 32;
const P: f64 = 0.5;

/// Runs the check on `B` with `kernel` (which must be the one that runs); `tol` bounds the
/// absolute error of `y` and the relative error of the gradients (the dtype's and
/// kernel's precision). Panics on a failed assertion; prints one summary line.
pub fn check_dropout_masks<B>(kernel: RnnKernel, device: &B::Device, tol: f64)
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let config = CudnnCompatibleLstmConfig::new(INPUT, HIDDEN)
        .with_num_layers(2)
        .with_batch_first(true)
        .with_dropout(P);
    let mut model = config.init::<B>(device).with_kernel(Some(kernel));
    let choice = model.kernel(device, BATCH, SEQ);
    assert_eq!(choice.kernel, kernel, "{choice}");
    let h = HIDDEN;
    let mut weight_ih = vec![0.0f32; 4 * h * h];
    for j in 0..h {
        weight_ih[(2 * h + j) * h + j] = 1.0;
    }
    let mut bias_ih = vec![0.0f32; 4 * h];
    bias_ih[h..2 * h].iter_mut().for_each(|b| *b = -30.0);
    let second = &mut model.layers[1].forward;
    second.weight_ih = param(weight_ih, [4 * h, h], device);
    second.weight_hh = param(vec![0.0; 4 * h * h], [4 * h, h], device);
    second.bias_ih = Some(param(bias_ih, [4 * h], device));
    second.bias_hh = Some(param(vec![0.0; 4 * h], [4 * h], device));
    // The first layer alone, same parameters. Burn initialises parameters lazily and a
    // clone of an unread one would draw its own values: read them all first.
    let _ = model.flat_weights();
    let first = CudnnCompatibleLstm {
        layers: vec![model.layers[0].clone()],
        ..model.clone()
    };

    let shape = [BATCH, SEQ, INPUT];
    let x: Tensor<B, 3> = Tensor::random(shape, Distribution::Normal(0.0, 1.0), device);
    let probe: Tensor<B, 3> =
        Tensor::random([BATCH, SEQ, HIDDEN], Distribution::Normal(0.0, 1.0), device);
    let x_leaf = x.clone().detach().require_grad();
    let (y, _) = model.forward(x_leaf.clone(), None);
    let grads = (y.clone() * probe.clone()).sum().backward();
    let dx = to_f64(x_leaf.grad(&grads).expect("input gradient"));
    let d_weight_ih = to_f64(
        model.layers[1]
            .forward
            .weight_ih
            .grad(&grads)
            .expect("gradient of the second layer's W_ih"),
    );
    let y = to_f64(y);
    let h1 = to_f64(first.valid().forward(x.clone().inner(), None).0);
    let r = to_f64(probe.clone());

    // Each element's mask, read off y: the nearer of "dropped" (0) and "kept".
    let scale = 1.0 / (1.0 - P);
    let kept_y = |h1: f64| 0.5 * (0.5 * (h1 * scale).tanh()).tanh();
    let kept: Vec<bool> = y
        .iter()
        .zip(&h1)
        .map(|(&y, &h1)| (y - kept_y(h1)).abs() < y.abs())
        .collect();
    let worst_y = y
        .iter()
        .zip(&h1)
        .zip(&kept)
        .map(|((&y, &h1), &k)| (y - if k { kept_y(h1) } else { 0.0 }).abs())
        .fold(0.0f64, f64::max);
    assert!(
        worst_y <= tol,
        "y is neither 0 nor the kept value (scale 1/(1-p) = {scale}): off by {worst_y:e}"
    );
    let n = kept.len() as f64;
    let dropped = kept.iter().filter(|k| !**k).count() as f64 / n;
    let sd = (P * (1.0 - P) / n).sqrt();
    assert!(
        (dropped - P).abs() <= 5.0 * sd,
        "dropped fraction {dropped:.4}, expected p = {P} ± {:.4}",
        5.0 * sd
    );
    let row = |b: usize| &kept[b * SEQ * h..(b + 1) * SEQ * h];
    let step = |b: usize, t: usize| &kept[(b * SEQ + t) * h..(b * SEQ + t + 1) * h];
    assert!(
        (1..BATCH).any(|b| row(b) != row(0)),
        "every batch row has the same mask"
    );
    assert!(
        (1..SEQ).any(|t| step(0, t) != step(0, 0)),
        "every time step has the same mask"
    );

    // The backward, with the masks read off above. The second layer's i = o = ½, f ≈ 0:
    // c = ½·tanh(x₂), y = ½·tanh(c), so dz_g = r·½(1 − tanh²c)·½(1 − tanh²x₂).
    let x2: Vec<f64> = h1
        .iter()
        .zip(&kept)
        .map(|(&h1, &k)| if k { h1 * scale } else { 0.0 })
        .collect();
    let dz_g: Vec<f64> = x2
        .iter()
        .zip(&r)
        .map(|(&x2, &r)| {
            let g = x2.tanh();
            let c = 0.5 * g;
            r * 0.5 * (1.0 - c.tanh().powi(2)) * 0.5 * (1.0 - g * g)
        })
        .collect();
    let mut expected_g_rows = vec![0.0f64; h * h];
    for e in 0..BATCH * SEQ {
        for j in 0..h {
            for k in 0..h {
                expected_g_rows[j * h + k] += dz_g[e * h + j] * x2[e * h + k];
            }
        }
    }
    let g_rows = &d_weight_ih[2 * h * h..3 * h * h];
    let grad_err = relative_to_largest(g_rows, &expected_g_rows);
    assert!(
        grad_err <= tol,
        "gradient of the second layer's g rows: {grad_err:e} from the forward's masks"
    );

    // The first layer alone, under the gradient the masks pass down to its output.
    let d_h1: Vec<f32> = dz_g
        .iter()
        .zip(&kept)
        .map(|(&dz, &k)| if k { (dz * scale) as f32 } else { 0.0 })
        .collect();
    let d_h1 = Tensor::<B, 3>::from_data(
        TensorData::new(d_h1, [BATCH, SEQ, HIDDEN]).convert::<B::FloatElem>(),
        device,
    );
    let x_first = x.detach().require_grad();
    let (h1_tracked, _) = first.forward(x_first.clone(), None);
    let grads = (h1_tracked * d_h1).sum().backward();
    let dx_first = to_f64(x_first.grad(&grads).expect("input gradient"));
    let dx_err = relative_to_largest(&dx, &dx_first);
    assert!(
        dx_err <= tol,
        "input gradient: {dx_err:e} from the first layer's under the forward's masks"
    );

    // A second training call draws other masks.
    let (y_again, _) = model.forward(x_leaf, None);
    assert_ne!(
        to_f64(y_again),
        y,
        "a second training call drew the same masks"
    );
    println!(
        "dropout kernel={kernel:?} p={P}: dropped {dropped:.4} of {n}, y within {worst_y:.1e}, \
         g-row gradient {grad_err:.1e}, input gradient {dx_err:.1e}"
    );
}

fn param<B: AutodiffBackend, const D: usize>(
    values: Vec<f32>,
    shape: [usize; D],
    device: &B::Device,
) -> Param<Tensor<B, D>> {
    // In the backend's float type: data of another dtype would make a tensor of that dtype.
    let data = TensorData::new(values, shape).convert::<B::FloatElem>();
    Param::from_tensor(Tensor::from_data(data, device))
}

/// Largest absolute difference over the largest expected magnitude.
fn relative_to_largest(actual: &[f64], expected: &[f64]) -> f64 {
    assert_eq!(actual.len(), expected.len());
    let largest = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    assert!(largest > 0.0, "expected all zeros");
    let diff = actual
        .iter()
        .zip(expected)
        .fold(0.0f64, |m, (a, e)| m.max((a - e).abs()));
    diff / largest
}
