//! The golden check shared by `golden_f64.rs` and `golden_f32.rs`: one case through one
//! kernel, inference and autodiff paths, every output and gradient.
//!
//! The two dtypes live in separate test binaries because Burn 0.21 keeps one float dtype
//! per device for the whole process: `NdArray<f32>` and `NdArray<f64>` share the CPU
//! device, and whichever touches it first decides the dtype `Tensor::from_data` gives
//! the other (see docs/numerics.md).

use super::{ErrorReport, GoldenCase, assert_all, golden_paths, to_f64};
use burn::module::Param;
use burn::tensor::{Tensor, backend::AutodiffBackend};
use burn_lstm::{CudnnCompatibleLstm, LstmState, RnnBackend, RnnKernel, RnnLayer};

fn lengths(case: &GoldenCase) -> Option<Vec<usize>> {
    case.config.lengths.clone()
}

fn forward<B: RnnBackend>(
    model: &CudnnCompatibleLstm<B>,
    x: Tensor<B, 3>,
    state: Option<LstmState<B>>,
    case: &GoldenCase,
) -> (Tensor<B, 3>, LstmState<B>) {
    model
        .try_forward(x, state, lengths(case).as_deref())
        .expect("valid golden input")
}

fn initial_state<B: RnnBackend>(
    case: &GoldenCase,
    device: &B::Device,
    grad: bool,
) -> Option<LstmState<B>> {
    case.has("h0").then(|| {
        let (h, c) = (
            case.tensor::<B, 3>("h0", device),
            case.tensor::<B, 3>("c0", device),
        );
        if grad {
            LstmState::new(h.require_grad(), c.require_grad())
        } else {
            LstmState::new(h, c)
        }
    })
}

/// A PyTorch parameter name split into the parameter, its layer and whether it is the
/// reverse direction's: `weight_ih_l1_reverse` → `("weight_ih", 1, true)`.
pub fn split_parameter_name(name: &str) -> (&str, usize, bool) {
    let (stem, reverse) = match name.strip_suffix("_reverse") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let (param, layer) = stem.rsplit_once("_l").expect("PyTorch parameter name");
    (param, layer.parse().expect("PyTorch layer index"), reverse)
}

/// The gradient of the parameter of `model` that PyTorch calls `name`.
pub fn parameter_grad<B: AutodiffBackend>(
    model: &CudnnCompatibleLstm<B>,
    name: &str,
    grads: &B::Gradients,
) -> Vec<f64> {
    layer_parameter_grad(&model.layers, name, grads)
}

/// The gradient of the parameter of `layers` (an LSTM's or a GRU's) that PyTorch calls
/// `name`.
pub fn layer_parameter_grad<B: AutodiffBackend>(
    layers: &[RnnLayer<B>],
    name: &str,
    grads: &B::Gradients,
) -> Vec<f64> {
    let (param, layer, reverse) = split_parameter_name(name);
    let layer = &layers[layer];
    let cell = if reverse {
        layer.reverse.as_ref().unwrap()
    } else {
        &layer.forward
    };
    fn g2<B: AutodiffBackend>(p: &Param<Tensor<B, 2>>, grads: &B::Gradients) -> Vec<f64> {
        to_f64(p.grad(grads).expect("parameter has a gradient"))
    }
    fn g1<B: AutodiffBackend>(p: &Param<Tensor<B, 1>>, grads: &B::Gradients) -> Vec<f64> {
        to_f64(p.grad(grads).expect("parameter has a gradient"))
    }
    match param {
        "weight_ih" => g2(&cell.weight_ih, grads),
        "weight_hh" => g2(&cell.weight_hh, grads),
        "weight_hr" => g2(cell.weight_hr.as_ref().unwrap(), grads),
        "bias_ih" => g1(cell.bias_ih.as_ref().unwrap(), grads),
        "bias_hh" => g1(cell.bias_hh.as_ref().unwrap(), grads),
        other => panic!("unknown parameter {other}"),
    }
}

fn check_case<B>(
    case: &GoldenCase,
    backend: &str,
    kernel: RnnKernel,
    dtype: &str,
    tol: f64,
) -> Result<(), String>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let device = Default::default();
    let mut report = ErrorReport::new(
        format!(
            "golden case={} backend={backend} kernel={kernel} dtype={dtype} isa={}",
            case.name,
            lstm_cpu::instruction_set()
        ),
        tol,
    );

    // Inference path of the plain backend.
    let model = case
        .module_config()
        .load_pytorch_safetensors::<B::InnerBackend>(&case.path, &device)
        .expect("golden parameters load")
        .with_kernel(Some(kernel));
    let batch = case.config.batch;
    assert_eq!(
        model.kernel(&device, batch, case.config.seq_len).kernel,
        kernel
    );
    let x = case.tensor::<B::InnerBackend, 3>("x", &device);
    let (y, state) = forward(&model, x, initial_state(case, &device, false), case);
    report.check("y", &to_f64(y), case.values("y"));
    report.check("h_n", &to_f64(state.hidden), case.values("h_n"));
    report.check("c_n", &to_f64(state.cell), case.values("c_n"));

    // Training path through the autodiff op.
    let model = case
        .module_config()
        .load_pytorch_safetensors::<B>(&case.path, &device)
        .expect("golden parameters load")
        .with_kernel(Some(kernel));
    let x = case.tensor::<B, 3>("x", &device).require_grad();
    let state = initial_state::<B>(case, &device, true);
    let (y, final_state) = forward(&model, x.clone(), state.clone(), case);
    report.check("train.y", &to_f64(y.clone()), case.values("y"));
    let loss = (y * case.tensor::<B, 3>("dy", &device)).sum()
        + (final_state.hidden * case.tensor::<B, 3>("dh_n", &device)).sum()
        + (final_state.cell * case.tensor::<B, 3>("dc_n", &device)).sum();
    let grads = loss.backward();
    report.check(
        "grad.x",
        &to_f64(x.grad(&grads).unwrap()),
        case.values("grad.x"),
    );
    if let Some(state) = state {
        report.check(
            "grad.h0",
            &to_f64(state.hidden.grad(&grads).unwrap()),
            case.values("grad.h0"),
        );
        report.check(
            "grad.c0",
            &to_f64(state.cell.grad(&grads).unwrap()),
            case.values("grad.c0"),
        );
    }
    for name in case.parameter_names() {
        let grad = parameter_grad(&model, &name, &grads);
        report.check(
            &format!("grad.{name}"),
            &grad,
            case.values(&format!("grad.{name}")),
        );
    }
    report.finish()
}

/// Every golden case through `kernel` on `B` (`backend` names it in each printed line).
pub fn run_all<B>(backend: &str, kernel: RnnKernel, dtype: &str, tol: f64)
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let results = golden_paths()
        .iter()
        .map(|path| check_case::<B>(&GoldenCase::load(path), backend, kernel, dtype, tol))
        .collect();
    assert_all(results);
}
