//! The GRU golden check: one PyTorch `nn.GRU` case (`tests/fixtures/golden-gru`, and
//! every GRU case in `$LSTM_GOLDEN_DIR`) through one backend, inference and autodiff
//! paths, every output and gradient. The loss of the reference is
//! `sum(y*dy) + sum(h_n*dh_n)` (a GRU has no cell state).

use super::golden_check::layer_parameter_grad;
use super::{ErrorReport, GoldenCase, assert_all, gru_golden_paths, to_f64};
use burn::tensor::backend::AutodiffBackend;
use burn_lstm::{GruState, RnnBackend, RnnKernel};

fn check_case<B>(
    case: &GoldenCase,
    backend: &str,
    expected_kernel: RnnKernel,
    dtype: &str,
    tol: f64,
) -> Result<(), String>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let device = Default::default();
    let lengths = case.config.lengths.clone();
    let (batch, seq_len) = (case.config.batch, case.config.seq_len);
    let mut report = ErrorReport::new(
        format!(
            "golden-gru case={} backend={backend} kernel={expected_kernel} dtype={dtype} isa={}",
            case.name,
            lstm_cpu::instruction_set()
        ),
        tol,
    );

    // Inference path of the plain backend.
    let model = case
        .gru_config()
        .load_pytorch_safetensors::<B::InnerBackend>(&case.path, &device)
        .expect("golden parameters load")
        .with_kernel(Some(expected_kernel));
    assert_eq!(
        model.kernel(&device, batch, seq_len).kernel,
        expected_kernel,
        "{}",
        model.kernel(&device, batch, seq_len)
    );
    let x = case.tensor::<B::InnerBackend, 3>("x", &device);
    let state = case
        .has("h0")
        .then(|| GruState::new(case.tensor::<B::InnerBackend, 3>("h0", &device)));
    let (y, state) = model
        .try_forward(x, state, lengths.as_deref())
        .expect("valid golden input");
    report.check("y", &to_f64(y), case.values("y"));
    report.check("h_n", &to_f64(state.hidden), case.values("h_n"));

    // Training path through the autodiff op.
    let model = case
        .gru_config()
        .load_pytorch_safetensors::<B>(&case.path, &device)
        .expect("golden parameters load")
        .with_kernel(Some(expected_kernel));
    let x = case.tensor::<B, 3>("x", &device).require_grad();
    let h0 = case
        .has("h0")
        .then(|| case.tensor::<B, 3>("h0", &device).require_grad());
    let (y, final_state) = model
        .try_forward(x.clone(), h0.clone().map(GruState::new), lengths.as_deref())
        .expect("valid golden input");
    report.check("train.y", &to_f64(y.clone()), case.values("y"));
    let loss = (y * case.tensor::<B, 3>("dy", &device)).sum()
        + (final_state.hidden * case.tensor::<B, 3>("dh_n", &device)).sum();
    let grads = loss.backward();
    report.check(
        "grad.x",
        &to_f64(x.grad(&grads).unwrap()),
        case.values("grad.x"),
    );
    if let Some(h0) = h0 {
        report.check(
            "grad.h0",
            &to_f64(h0.grad(&grads).unwrap()),
            case.values("grad.h0"),
        );
    }
    for name in case.parameter_names() {
        let grad = layer_parameter_grad(&model.layers, &name, &grads);
        report.check(
            &format!("grad.{name}"),
            &grad,
            case.values(&format!("grad.{name}")),
        );
    }
    report.finish()
}

/// Every GRU golden case on `B` (`backend` names it in each printed line), checking
/// that the module reports `kernel` as the one that runs.
pub fn run_all_gru<B>(backend: &str, kernel: RnnKernel, dtype: &str, tol: f64)
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let results = gru_golden_paths()
        .iter()
        .map(|path| check_case::<B>(&GoldenCase::load(path), backend, kernel, dtype, tol))
        .collect();
    assert_all(results);
}
