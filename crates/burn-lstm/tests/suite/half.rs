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
//! device is set to the half type (`lstm_cpu::rerun_test_with_env`).

use crate::backends::{config, load, outputs, scratch, train_with};
use crate::common::{
    GoldenCase, golden_paths,
    half_check::{KernelBound, PORTABLE_KERNEL_ULPS, case_errors, float_dtype, run_all_half},
    rel_err,
};
use lstm_cpu::rerun_test_with_env as rerun_with_env;

use burn::backend::flex::FlexDevice;
use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::{AutodiffModule, Module};
use burn::optim::SgdConfig;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::{DType, IntDType, backend::Backend, get_device_settings, set_default_dtypes};
use burn_lstm::{CudnnCompatibleLstm, RnnBackend, RnnKernel};

/// Set in the child process: the float type of its Flex device (`f16` or `bf16`).
const FLOAT_VAR: &str = "BURN_LSTM_TEST_FLEX_FLOAT";
/// Set in the child process of a checkpoint test: where it leaves its files.
const OUT_VAR: &str = "BURN_LSTM_TEST_OUT";

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

/// Every golden case through the portable kernel on Flex in `name`
/// (`common::half_check`).
fn golden_cases(name: &str, test: &str) {
    if half_flex_device().is_none() {
        return rerun_with_env(module_path!(), test, &[(FLOAT_VAR, name)]);
    }
    let device = FlexDevice;
    let model = config().init::<Flex>(&device);
    let choice = model.kernel(&device, 3, 5);
    assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
    let reason = choice.fallback_reason.expect("the fused kernel's reason");
    assert!(
        reason.contains("F16") || reason.contains("BF16"),
        "{reason}"
    );
    run_all_half::<Autodiff<Flex>>(
        &device,
        float_dtype(name),
        (name, "flex", "portable"),
        KernelBound::Ulps(PORTABLE_KERNEL_ULPS),
    );
    // A real error (gates i and f of a recurrent matrix swapped) stays caught by the
    // looser bound of a kernel that carries its states in the half type (cuDNN's), on
    // every case whose first layer has a recurrent matrix to swap.
    for path in golden_paths() {
        let case = GoldenCase::load(&path);
        let planted =
            case_errors::<Autodiff<Flex>>(&case, &device, float_dtype(name), Some("weight_hh_l0"));
        let limit = KernelBound::HalfStates.limit_ulps(planted.format_ulps);
        println!(
            "planted error case={} dtype={name}: kernel error {:.1}u against the half-states bound {limit:.1}u",
            case.name, planted.kernel_ulps
        );
        assert!(
            planted.kernel_ulps > limit,
            "{}: a swapped gate block gave {:.1}u, within the half-states bound {limit:.1}u",
            case.name,
            planted.kernel_ulps
        );
    }
}

#[test]
fn golden_cases_f16_portable_flex() {
    golden_cases("f16", "golden_cases_f16_portable_flex");
}

#[test]
fn golden_cases_bf16_portable_flex() {
    golden_cases("bf16", "golden_cases_bf16_portable_flex");
}

/// The outputs of `model` on the fixed input, flattened: `y`, then `h_n`, then `c_n`.
fn all_outputs<B: RnnBackend>(model: &CudnnCompatibleLstm<B>, device: &B::Device) -> Vec<f64> {
    outputs(model, device).concat()
}

/// The seed of the half model's initialization (`Backend::seed`): any draw trains, this
/// one lowers the bf16 loss by six of its places in `TRAIN_STEPS` steps.
const INIT_SEED: u64 = 16;
/// Steps of the half model's training: 30 seeds tried, every loss lower after these.
const TRAIN_STEPS: usize = 6;

/// The child trains in `dtype` and leaves a Burn record, PyTorch safetensors and its
/// own outputs; the parent serves both files in f32 on Flex and NdArray.
fn half_checkpoint_serves_in_f32(dtype: &str, test: &str, tol: f64) {
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    if let Some(device) = half_flex_device() {
        let dir = std::path::PathBuf::from(std::env::var(OUT_VAR).expect("the output folder"));
        // A seeded initialization: the loss, itself rounded to the half type, moves by
        // one or two of bf16's places (2e-3 near 0.3) a step, and an unseeded draw once
        // left it on one value for three steps (CI, stop 37).
        <Flex as Backend>::seed(&device, INIT_SEED);
        // Plain gradient descent: Adam's second moment underflows in f16 and its steps
        // blow up (mixed-precision training keeps f32 master weights, which is the
        // optimizer's business, not the layer's).
        let (trained, losses) =
            train_with::<Autodiff<Flex>, _>(&device, TRAIN_STEPS, SgdConfig::new().init(), 0.5);
        assert!(
            losses[TRAIN_STEPS - 1] < losses[0],
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
    let root = scratch();
    let dir = root.path().join(format!("half-{dtype}"));
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
        RnnKernel::FusedCpu
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
