//! Parity with PyTorch `nn.LSTM`: every golden case (the shipped fixtures and every case
//! in `$LSTM_GOLDEN_DIR`) through the portable kernel on NdArray, f64 and f32: outputs,
//! final states, and through `Autodiff<NdArray>` the gradients of the input, the initial
//! state and every parameter.
//!
//! Tolerances (∞-norm relative error, see `common::rel_err`): f64 1e-9 — the reference is
//! float64 too, so only summation order differs; f32 1e-4 — float32 rounding (~6e-8 per
//! operation) accumulated over up to 20 steps, 2 layers and saturated gates (the golden
//! weights are N(0, 0.4²), larger than a trained network's).

mod common;

use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::tensor::{Tensor, backend::AutodiffBackend};
use burn_lstm::{CudnnCompatibleLstm, LstmBackend, LstmState};
use common::{ErrorReport, GoldenCase, assert_all, golden_paths, to_f64};

fn lengths(case: &GoldenCase) -> Option<Vec<usize>> {
    case.config.lengths.clone()
}

fn forward<B: LstmBackend>(
    model: &CudnnCompatibleLstm<B>,
    x: Tensor<B, 3>,
    state: Option<LstmState<B>>,
    case: &GoldenCase,
) -> (Tensor<B, 3>, LstmState<B>) {
    model
        .try_forward(x, state, lengths(case).as_deref())
        .expect("valid golden input")
}

fn initial_state<B: LstmBackend>(
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

/// The parameter of `model` that PyTorch calls `name`.
fn parameter_grad<B: AutodiffBackend>(
    model: &CudnnCompatibleLstm<B>,
    name: &str,
    grads: &B::Gradients,
) -> Vec<f64> {
    let (stem, reverse) = match name.strip_suffix("_reverse") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let (param, layer) = stem.rsplit_once("_l").expect("PyTorch parameter name");
    let layer = &model.layers[layer.parse::<usize>().unwrap()];
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

fn check_case<B>(case: &GoldenCase, dtype: &str, tol: f64) -> Result<(), String>
where
    B: AutodiffBackend + LstmBackend,
    B::InnerBackend: LstmBackend,
{
    let device = Default::default();
    let mut report = ErrorReport::new(format!("golden case={} dtype={dtype}", case.name), tol);

    // Inference path of the plain backend.
    let model = case
        .module_config()
        .load_pytorch_safetensors::<B::InnerBackend>(&case.path, &device)
        .expect("golden parameters load");
    let x = case.tensor::<B::InnerBackend, 3>("x", &device);
    let (y, state) = forward(&model, x, initial_state(case, &device, false), case);
    report.check("y", &to_f64(y), case.values("y"));
    report.check("h_n", &to_f64(state.hidden), case.values("h_n"));
    report.check("c_n", &to_f64(state.cell), case.values("c_n"));

    // Training path through the autodiff op.
    let model = case
        .module_config()
        .load_pytorch_safetensors::<B>(&case.path, &device)
        .expect("golden parameters load");
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

#[test]
fn golden_cases_f64_portable() {
    let results = golden_paths()
        .iter()
        .map(|path| check_case::<Autodiff<NdArray<f64>>>(&GoldenCase::load(path), "f64", 1e-9))
        .collect();
    assert_all(results);
}

#[test]
fn golden_cases_f32_portable() {
    let results = golden_paths()
        .iter()
        .map(|path| check_case::<Autodiff<NdArray<f32>>>(&GoldenCase::load(path), "f32", 1e-4))
        .collect();
    assert_all(results);
}
