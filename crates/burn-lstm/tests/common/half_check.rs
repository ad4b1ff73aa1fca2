//! Golden cases in half precision (f16, bf16), shared by the CPU test (`suite/half.rs`,
//! Flex) and the GPU test (`cudnn.rs`, Cuda): every case against two references
//! (docs/numerics.md):
//!
//! - **exact on the rounded inputs**: the float64 kernel (NdArray) given the same
//!   half-rounded input, states, parameters and upstream gradients. What separates the
//!   half model from it is the kernel's own error, bounded per kernel by the caller.
//! - **PyTorch's float64 reference** on the unrounded values. The distance from the
//!   exact answer on rounded inputs to it is the format's own error (how much rounding
//!   the inputs moves the answer), which no kernel can remove; it is printed, and the
//!   half model must stay within [`FORMAT_ULPS`] units of roundoff of it.
//!
//! Both runs get the values already rounded to the half type: Burn 0.21 converts f64
//! data to bf16 through f32 (two roundings), which moves a few of `medium`'s 200,000
//! parameters by one unit and, through that case's sensitivity, its outputs by another
//! 0.6u.

use super::{
    GoldenCase,
    golden_check::{parameter_grad, split_parameter_name},
    golden_paths, rel_err, to_f64,
};
use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{DType, FloatDType, IntDType, Tensor, TensorData, set_default_dtypes};
use burn_lstm::{LstmBackend, LstmState};

/// Bound of the portable kernel's own error, in units of roundoff of the half type (∞-norm
/// relative, as everywhere in the golden tests): each result is rounded once from an
/// f32 computation whose own error (2^-24 per operation, times the case's sensitivity)
/// is far below the half type's. Measured: at most 0.9u in f16 and in bf16. Both sides
/// get the values already rounded to the half type: Burn 0.21 converts f64 data to bf16
/// through f32 (two roundings), which moves a few of `medium`'s 200,000 parameters by
/// one unit and, through that case's sensitivity, its outputs by another 0.6u.
pub const PORTABLE_KERNEL_ULPS: f64 = 1.0;
/// Bound of the half model's distance to PyTorch's reference, in units of roundoff:
/// the golden cases' weights are N(0, 0.4²), far larger than a trained network's, and
/// saturate the gates; in the most sensitive case (`medium`, 2 layers of 128 units over
/// 20 steps) rounding the inputs moves the exact answer by about 50u (docs/numerics.md).
pub const FORMAT_ULPS: f64 = 64.0;

/// The half type a test names `f16` or `bf16`.
pub fn float_dtype(name: &str) -> FloatDType {
    match name {
        "f16" => FloatDType::F16,
        "bf16" => FloatDType::BF16,
        other => panic!("{other}: expected f16 or bf16"),
    }
}

/// Unit roundoff of the half type: 2^-11 (f16), 2^-8 (bf16).
pub fn unit_roundoff(dtype: FloatDType) -> f64 {
    match dtype {
        FloatDType::F16 => 2f64.powi(-11),
        _ => 2f64.powi(-8),
    }
}

/// `value` rounded to the half type (to nearest, ties to even, as Burn converts).
pub fn round_to(dtype: FloatDType, value: f64) -> f64 {
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
        let (param, layer, reverse) = split_parameter_name(&name);
        let layer = &mut model.layers[layer];
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

/// Every golden case through `B` on `device`, whose float type is `dtype` (`name`
/// prints it; `backend` and `kernel` name the backend and kernel in every line), with
/// the kernel's own error bounded by `kernel_ulps` units of roundoff. Panics listing
/// every case past a bound, after all ran.
pub fn run_all_half<B>(
    device: &B::Device,
    dtype: FloatDType,
    (name, backend, kernel): (&str, &str, &str),
    kernel_ulps: f64,
) where
    B: AutodiffBackend + LstmBackend,
    B::InnerBackend: LstmBackend,
{
    // The float64 reference runs on NdArray, whose device the calling process must not
    // have used in another float type (Burn keeps one per device).
    let exact_device = NdArrayDevice::Cpu;
    let _ = set_default_dtypes::<NdArray<f64>>(&exact_device, DType::F64, IntDType::I64);
    let u = unit_roundoff(dtype);
    let mut failures = Vec::new();
    for path in golden_paths() {
        let case = GoldenCase::load(&path);
        let actual = evaluate::<B>(&case, device, |v| round_to(dtype, v));
        let exact =
            evaluate::<Autodiff<NdArray<f64>>>(&case, &exact_device, |v| round_to(dtype, v));
        let mut kernel_line = Vec::new();
        let mut format_line = Vec::new();
        let (mut worst_kernel, mut worst_total) = (0f64, 0f64);
        for ((which, actual), (_, exact)) in actual.iter().zip(&exact) {
            let reference = case.values(which);
            let kernel_err = rel_err(actual, exact);
            let format_err = rel_err(exact, reference);
            worst_kernel = worst_kernel.max(kernel_err);
            worst_total = worst_total.max(rel_err(actual, reference));
            kernel_line.push(format!("{which}={kernel_err:.1e}"));
            format_line.push(format!("{which}={format_err:.1e}"));
        }
        println!(
            "golden case={} backend={backend} kernel={kernel} dtype={name} isa={} \
             kernel_error(vs exact on rounded inputs, max {:.1}u): {} | \
             format_error(exact on rounded inputs vs PyTorch, total max {:.1}u): {}",
            case.name,
            lstm_cpu::instruction_set(),
            worst_kernel / u,
            kernel_line.join(" "),
            worst_total / u,
            format_line.join(" "),
        );
        if worst_kernel > kernel_ulps * u || worst_total > FORMAT_ULPS * u {
            failures.push(format!(
                "{} in {name}: kernel error {:.1}u (bound {kernel_ulps}u), total {:.1}u \
                 (bound {FORMAT_ULPS}u)",
                case.name,
                worst_kernel / u,
                worst_total / u
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
