//! Half-precision models (f16, bf16) on the CPU: Flex computes in either when its
//! device is set to it, and runs the portable kernel then (in f32 inside, see
//! `kernels/portable/precision.rs`).
//!
//! - Every golden case in f16 and in bf16, forward and every gradient, against
//!   PyTorch's float64 reference, within the bounds of docs/numerics.md.
//! - A model trained in half precision (`Autodiff<Flex>` on a half device), saved with
//!   Burn's recorder, serves in f32 on Flex and NdArray: its parameters arrive unchanged
//!   (f16 and bf16 values are exact in f32) and its outputs stay within a bound of the
//!   half model's own.
//!
//! Burn 0.21 keeps one float type per device for the whole process, and Flex has one
//! device, so each test runs its body in a child process of this binary whose Flex
//! device is set to the half type (`common::child_process`).

use crate::backends::{config, load, outputs, temp_path, tensor};
use crate::common::{
    GoldenCase, child_process::rerun_with_env, golden_check::parameter_grad, golden_paths, rel_err,
    to_f64,
};

use burn::backend::flex::FlexDevice;
use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::{AutodiffModule, Module, Param};
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{
    DType, ElementConversion, FloatDType, IntDType, Tensor, TensorData, get_device_settings,
    set_default_dtypes,
};
use burn_lstm::{CudnnCompatibleLstm, LstmBackend, LstmKernel, LstmState};

/// Set in the child process: the float type of its Flex device (`f16` or `bf16`).
const FLOAT_VAR: &str = "BURN_LSTM_TEST_FLEX_FLOAT";
/// Set in the child process of a checkpoint test: where it leaves its files.
const OUT_VAR: &str = "BURN_LSTM_TEST_OUT";

fn float_dtype(name: &str) -> FloatDType {
    match name {
        "f16" => FloatDType::F16,
        "bf16" => FloatDType::BF16,
        other => panic!("{FLOAT_VAR}={other}: expected f16 or bf16"),
    }
}

/// In the test's own process: `None`. In the child that `rerun_with_env` started (with
/// `FLOAT_VAR` set): Flex's device, its float type set to that half type.
fn half_flex_device() -> Option<FlexDevice> {
    let name = std::env::var(FLOAT_VAR).ok()?;
    let dtype = float_dtype(&name);
    let device = FlexDevice;
    // Refused once a tensor exists on the device: the child runs only this test.
    let _ = set_default_dtypes::<Flex>(&device, DType::from(dtype), IntDType::I64);
    assert_eq!(get_device_settings::<Flex>(&device).float_dtype, dtype);
    Some(device)
}

/// Unit roundoff of the half type: 2^-11 (f16), 2^-8 (bf16).
fn unit_roundoff(dtype: FloatDType) -> f64 {
    match dtype {
        FloatDType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    }
}

/// `value` rounded to the half type (to nearest, ties to even, as Burn converts).
fn round_to(dtype: FloatDType, value: f64) -> f64 {
    match dtype {
        FloatDType::F16 => half::f16::from_f64(value).to_f64(),
        _ => half::bf16::from_f64(value).to_f64(),
    }
}

/// The training path of `case` on `B`, every tensor the case gives (input, states,
/// parameters, upstream gradients) passed through `round` first: `y`, `h_n`, `c_n` and
/// every gradient, by name.
fn evaluate<B>(
    case: &GoldenCase,
    device: &B::Device,
    round: impl Fn(f64) -> f64,
) -> Vec<(String, Vec<f64>)>
where
    B: AutodiffBackend + LstmBackend,
    B::InnerBackend: LstmBackend,
{
    let tensor = |name: &str| {
        let (shape, values) = &case.tensors[name];
        let values: Vec<f64> = values.iter().map(|v| round(*v)).collect();
        TensorData::new(values, shape.clone())
    };
    let mut model = case.module_config().init::<B>(device);
    for name in case.parameter_names() {
        let (stem, reverse) = match name.strip_suffix("_reverse") {
            Some(stem) => (stem, true),
            None => (name.as_str(), false),
        };
        let (param, layer) = stem.rsplit_once("_l").expect("PyTorch parameter name");
        let layer = &mut model.layers[layer.parse::<usize>().unwrap()];
        let cell = if reverse {
            layer.reverse.as_mut().unwrap()
        } else {
            &mut layer.forward
        };
        let matrix = || Param::from_tensor(Tensor::<B, 2>::from_data(tensor(&name), device));
        let vector = || {
            Some(Param::from_tensor(Tensor::<B, 1>::from_data(
                tensor(&name),
                device,
            )))
        };
        match param {
            "weight_ih" => cell.weight_ih = matrix(),
            "weight_hh" => cell.weight_hh = matrix(),
            "weight_hr" => cell.weight_hr = Some(matrix()),
            "bias_ih" => cell.bias_ih = vector(),
            "bias_hh" => cell.bias_hh = vector(),
            other => panic!("unknown parameter {other}"),
        }
    }
    let t3 = |name: &str| Tensor::<B, 3>::from_data(tensor(name), device);
    let x = t3("x").require_grad();
    let state = case
        .has("h0")
        .then(|| LstmState::new(t3("h0").require_grad(), t3("c0").require_grad()));
    let (y, last) = model
        .try_forward(x.clone(), state.clone(), case.config.lengths.as_deref())
        .expect("valid golden input");
    let loss = (y.clone() * t3("dy")).sum()
        + (last.hidden.clone() * t3("dh_n")).sum()
        + (last.cell.clone() * t3("dc_n")).sum();
    let grads = loss.backward();
    let mut results = vec![
        ("y".to_string(), to_f64(y)),
        ("h_n".to_string(), to_f64(last.hidden)),
        ("c_n".to_string(), to_f64(last.cell)),
        ("grad.x".to_string(), to_f64(x.grad(&grads).unwrap())),
    ];
    if let Some(state) = state {
        results.push(("grad.h0".into(), to_f64(state.hidden.grad(&grads).unwrap())));
        results.push(("grad.c0".into(), to_f64(state.cell.grad(&grads).unwrap())));
    }
    for name in case.parameter_names() {
        let grad = parameter_grad(&model, &name, &grads);
        results.push((format!("grad.{name}"), grad));
    }
    results
}

/// Every golden case through the portable kernel on Flex in `dtype`, against two
/// references (docs/numerics.md):
///
/// - **exact on the rounded inputs**: the float64 kernel given the same half-rounded
///   input, states, parameters and upstream gradients. What separates the half model
///   from it is the kernel's own error (f32 inside, results rounded once): at most
///   `KERNEL_ULPS` units of roundoff.
/// - **PyTorch's float64 reference** on the unrounded values. The distance from the
///   exact answer on rounded inputs to it is the format's own error (how much rounding
///   the inputs moves the answer), which no kernel can remove; it is printed, and the
///   half model must stay within `FORMAT_ULPS` units of roundoff of it.
fn golden_cases(name: &str, test: &str) {
    if half_flex_device().is_none() {
        return rerun_with_env(module_path!(), test, &[(FLOAT_VAR, name)]);
    }
    let dtype = float_dtype(name);
    let device = FlexDevice;
    // The float64 reference runs on NdArray, whose device this child process has not
    // used yet (Burn keeps one float type per device).
    let exact_device = NdArrayDevice::Cpu;
    let _ = set_default_dtypes::<NdArray<f64>>(&exact_device, DType::F64, IntDType::I64);
    let model = config().init::<Flex>(&device);
    let choice = model.kernel(&device, 3, 5);
    assert_eq!(choice.kernel, LstmKernel::Portable, "{choice}");
    let reason = choice.fallback_reason.expect("the fused kernel's reason");
    assert!(
        reason.contains("F16") || reason.contains("BF16"),
        "{reason}"
    );

    let u = unit_roundoff(dtype);
    let mut failures = Vec::new();
    for path in golden_paths() {
        let case = GoldenCase::load(&path);
        let actual = evaluate::<Autodiff<Flex>>(&case, &device, |v| round_to(dtype, v));
        let exact =
            evaluate::<Autodiff<NdArray<f64>>>(&case, &exact_device, |v| round_to(dtype, v));
        let mut kernel_line = Vec::new();
        let mut format_line = Vec::new();
        let (mut worst_kernel, mut worst_total) = (0f64, 0f64);
        for ((which, actual), (_, exact)) in actual.iter().zip(&exact) {
            let reference = case.values(which);
            let kernel = rel_err(actual, exact);
            let format = rel_err(exact, reference);
            worst_kernel = worst_kernel.max(kernel);
            worst_total = worst_total.max(rel_err(actual, reference));
            kernel_line.push(format!("{which}={kernel:.1e}"));
            format_line.push(format!("{which}={format:.1e}"));
        }
        println!(
            "golden case={} backend=flex kernel=portable dtype={name} isa={} \
             kernel_error(vs exact on rounded inputs, max {:.1}u): {} | \
             format_error(exact on rounded inputs vs PyTorch, total max {:.1}u): {}",
            case.name,
            lstm_cpu::instruction_set(),
            worst_kernel / u,
            kernel_line.join(" "),
            worst_total / u,
            format_line.join(" "),
        );
        if worst_kernel > KERNEL_ULPS * u || worst_total > FORMAT_ULPS * u {
            failures.push(format!(
                "{} in {name}: kernel error {:.1}u (bound {KERNEL_ULPS}u), total {:.1}u \
                 (bound {FORMAT_ULPS}u)",
                case.name,
                worst_kernel / u,
                worst_total / u
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Bound of the half kernel's own error, in units of roundoff of the half type (∞-norm
/// relative, as everywhere in the golden tests): each result is rounded once from an
/// f32 computation whose own error (2^-24 per operation, times the case's sensitivity)
/// is far below the half type's. Measured: at most 0.9u in f16 and in bf16. Both sides
/// get the values already rounded to the half type: Burn 0.21 converts f64 data to bf16
/// through f32 (two roundings), which moves a few of `medium`'s 200,000 parameters by
/// one unit and, through that case's sensitivity, its outputs by another 0.6u.
const KERNEL_ULPS: f64 = 1.0;
/// Bound of the half model's distance to PyTorch's reference, in units of roundoff:
/// the golden cases' weights are N(0, 0.4²), far larger than a trained network's, and
/// saturate the gates; in the most sensitive case (`medium`, 2 layers of 128 units over
/// 20 steps) rounding the inputs moves the exact answer by about 50u (docs/numerics.md).
const FORMAT_ULPS: f64 = 64.0;

#[test]
fn golden_cases_f16_portable_flex() {
    golden_cases("f16", "golden_cases_f16_portable_flex");
}

#[test]
fn golden_cases_bf16_portable_flex() {
    golden_cases("bf16", "golden_cases_bf16_portable_flex");
}

/// A few steps of plain gradient descent towards a fixed target (Adam's second moment
/// underflows in f16 and its steps blow up: mixed-precision training keeps f32 master
/// weights, which is the optimizer's business, not the layer's).
fn train_sgd<B: AutodiffBackend + LstmBackend>(
    device: &B::Device,
    steps: usize,
) -> (CudnnCompatibleLstm<B>, Vec<f32>)
where
    B::InnerBackend: LstmBackend,
{
    let mut model = config().init::<B>(device);
    let mut optim = SgdConfig::new().init();
    let (x, target) = (
        tensor::<B>([3, 5, 4], 1, device),
        tensor::<B>([3, 5, 6], 2, device),
    );
    let mut losses = Vec::new();
    for _ in 0..steps {
        let (y, _) = model.forward(x.clone(), None);
        let loss = (y - target.clone()).powi_scalar(2).mean();
        losses.push(loss.clone().into_scalar().elem::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(0.5, model, grads);
    }
    (model, losses)
}

/// The outputs of `model` on the fixed input, flattened: `y`, then `h_n`, then `c_n`.
fn all_outputs<B: LstmBackend>(model: &CudnnCompatibleLstm<B>, device: &B::Device) -> Vec<f64> {
    outputs(model, device).concat()
}

/// The child trains in `dtype` and leaves a Burn record, PyTorch safetensors and its
/// own outputs; the parent serves both files in f32 on Flex and NdArray.
fn half_checkpoint_serves_in_f32(dtype: &str, test: &str, tol: f64) {
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    if let Some(device) = half_flex_device() {
        let dir = std::path::PathBuf::from(std::env::var(OUT_VAR).expect("the output folder"));
        let (trained, losses) = train_sgd::<Autodiff<Flex>>(&device, 3);
        assert!(
            losses[2] < losses[0],
            "training lowers the loss: {losses:?}"
        );
        let trained = trained.valid();
        let weight = trained.layers[0].forward.weight_ih.val();
        assert_eq!(weight.dtype(), DType::from(float_dtype(dtype)));
        trained
            .clone()
            .save_file(dir.join("model"), &recorder)
            .unwrap();
        trained
            .save_pytorch_safetensors(dir.join("model.safetensors"))
            .unwrap();
        let reference = all_outputs(&trained, &device);
        std::fs::write(
            dir.join("outputs.json"),
            serde_json::to_string(&reference).unwrap(),
        )
        .unwrap();
        return;
    }
    let dir = temp_path(&format!("half-{dtype}"));
    std::fs::create_dir_all(&dir).unwrap();
    rerun_with_env(
        module_path!(),
        test,
        &[(FLOAT_VAR, dtype), (OUT_VAR, dir.to_str().unwrap())],
    );
    let reference: Vec<f64> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("outputs.json")).unwrap()).unwrap();

    let record = dir.join("model.mpk");
    let on_flex = load::<Flex>(&record, &Default::default());
    let on_ndarray = load::<NdArray>(&record, &Default::default());
    let from_pytorch = config()
        .load_pytorch_safetensors::<NdArray>(dir.join("model.safetensors"), &Default::default())
        .expect("the half safetensors load in f32");
    for weight in [
        on_flex.layers[0].forward.weight_ih.val().dtype(),
        on_ndarray.layers[0].forward.weight_ih.val().dtype(),
        from_pytorch.layers[0].forward.weight_ih.val().dtype(),
    ] {
        assert_eq!(weight, DType::F32);
    }
    assert_eq!(
        on_flex.kernel(&Default::default(), 3, 5).kernel,
        LstmKernel::FusedCpu
    );
    let flex = all_outputs(&on_flex, &Default::default());
    let ndarray = all_outputs(&on_ndarray, &Default::default());
    let pytorch = all_outputs(&from_pytorch, &Default::default());
    // Both files hold the half values exactly (f16 and bf16 are subsets of f32), so the
    // three f32 models have the same parameters and, on one kernel, the same outputs.
    assert_eq!(
        flex, ndarray,
        "Flex and NdArray serve the record differently"
    );
    assert_eq!(ndarray, pytorch, "the record and the safetensors differ");
    let err = rel_err(&flex, &reference);
    println!(
        "half checkpoint dtype={dtype} served in f32: outputs within {err:.2e} of the {dtype} model"
    );
    assert!(
        err <= tol,
        "{dtype} model served in f32: {err:e} from its own outputs (bound {tol:e})"
    );
}

/// Outputs of the f32 model against the half model's own (∞-norm relative): the half
/// model rounds its input and its results (docs/numerics.md).
const SERVE_TOL_F16: f64 = 4e-3;
const SERVE_TOL_BF16: f64 = 3e-2;

#[test]
fn a_checkpoint_trained_in_f16_serves_in_f32_on_flex_and_ndarray() {
    half_checkpoint_serves_in_f32(
        "f16",
        "a_checkpoint_trained_in_f16_serves_in_f32_on_flex_and_ndarray",
        SERVE_TOL_F16,
    );
}

#[test]
fn a_checkpoint_trained_in_bf16_serves_in_f32_on_flex_and_ndarray() {
    half_checkpoint_serves_in_f32(
        "bf16",
        "a_checkpoint_trained_in_bf16_serves_in_f32_on_flex_and_ndarray",
        SERVE_TOL_BF16,
    );
}
