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
use burn_lstm::{LstmState, RnnBackend};

/// Bound of the portable kernel's own error, in units of roundoff of the half type (∞-norm
/// relative, as everywhere in the golden tests): each result is rounded once from an
/// f32 computation whose own error (2^-24 per operation, times the case's sensitivity)
/// is far below the half type's. Measured: at most 0.9u in f16 and in bf16. Both sides
/// get the values already rounded to the half type: Burn 0.21 converts f64 data to bf16
/// through f32 (two roundings), which moves a few of `medium`'s 200,000 parameters by
/// one unit and, through that case's sensitivity, its outputs by another 0.6u.
pub const PORTABLE_KERNEL_ULPS: f64 = 1.0;
/// Bound of the format's own error on a case (the exact answer on half-rounded inputs
/// against PyTorch's float64 reference), in units of roundoff: the golden cases' weights
/// are N(0, 0.4²), far larger than a trained network's, and saturate the gates; in the
/// most sensitive case (`medium`, 2 layers of 128 units over 20 steps) rounding the
/// inputs moves the exact answer by about 50u (docs/numerics.md). A check of the case
/// and the reference, not of a kernel.
pub const FORMAT_ULPS: f64 = 64.0;

/// Floor of [`KernelBound::HalfStates`], in units of roundoff: a well-conditioned case
/// (format error about 1u) still rounds every state it carries once per step.
pub const HALF_STATES_FLOOR_ULPS: f64 = 8.0;

/// Factor of [`KernelBound::HalfStates`] on the case's format error.
pub const HALF_STATES_FACTOR: f64 = 2.0;

/// How a kernel's own error (against the exact answer on the same half-rounded inputs)
/// is bounded.
#[derive(Clone, Copy, Debug)]
pub enum KernelBound {
    /// A fixed number of units of roundoff: a kernel that computes in f32 and rounds
    /// only its results (the portable kernel, [`PORTABLE_KERNEL_ULPS`]).
    Ulps(f64),
    /// A kernel that carries its states in the half type (cuDNN with half data): every
    /// step's `h_t` (and each layer's output) is rounded to the half type before the next
    /// step or layer reads it. Each such rounding is a relative perturbation of at most
    /// one unit of a value the recurrence propagates exactly as it propagates the
    /// rounded inputs, so the error it adds is of the size of the case's format error:
    /// the bound is [`HALF_STATES_FACTOR`] times the case's format error (in units of
    /// roundoff), at least [`HALF_STATES_FLOOR_ULPS`]. On saturated gates (`medium`:
    /// format error about 50u) that allows about 100u; PyTorch's own cuDNN LSTM in half
    /// is further off on the same case (docs/numerics.md). A swapped gate block, a real
    /// error, lands at hundreds of units or more (`suite/half.rs` checks it).
    HalfStates,
}

impl KernelBound {
    /// The bound in units of roundoff on a case whose format error is `format_ulps`.
    pub fn limit_ulps(self, format_ulps: f64) -> f64 {
        match self {
            Self::Ulps(ulps) => ulps,
            Self::HalfStates => HALF_STATES_FLOOR_ULPS.max(HALF_STATES_FACTOR * format_ulps),
        }
    }
}

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
    swapped: Option<&str>,
) -> Vec<(String, Vec<f64>)>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let tensor = |name: &str| {
        let (shape, values) = &case.tensors[name];
        let mut values: Vec<f64> = values.iter().map(|v| round(*v)).collect();
        if swapped == Some(name) {
            swap_first_gate_blocks(&mut values, shape[0] / 4);
        }
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

/// Rows `[0, block)` and `[block, 2 * block)` of a `[gates * block, ·]` matrix
/// swapped: the input and forget gates of an LSTM's `weight_ih` / `weight_hh` trade
/// places, the error a wrong gate order would make.
fn swap_first_gate_blocks(values: &mut [f64], block: usize) {
    let row = values.len() / (4 * block);
    let (first, rest) = values.split_at_mut(block * row);
    first.swap_with_slice(&mut rest[..block * row]);
}

/// One case's errors in the half type, in units of roundoff, and the per-result lines.
pub struct HalfErrors {
    /// The kernel's own error: against the exact answer on the same rounded inputs.
    pub kernel_ulps: f64,
    /// The format's error: the exact answer on rounded inputs against PyTorch's.
    pub format_ulps: f64,
    /// The kernel's result against PyTorch's float64 reference.
    pub total_ulps: f64,
    kernel_line: Vec<String>,
    format_line: Vec<String>,
}

/// The errors of `case` through `B` on `device` in `dtype`; `swapped` names a
/// parameter whose first two gate blocks are swapped in the kernel's run only (a planted
/// error, for checking that a bound catches it).
pub fn case_errors<B>(
    case: &GoldenCase,
    device: &B::Device,
    dtype: FloatDType,
    swapped: Option<&str>,
) -> HalfErrors
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    // The float64 reference runs on NdArray, whose device the calling process must not
    // have used in another float type (Burn keeps one per device).
    let exact_device = NdArrayDevice::Cpu;
    let _ = set_default_dtypes::<NdArray<f64>>(&exact_device, DType::F64, IntDType::I64);
    let u = unit_roundoff(dtype);
    let actual = evaluate::<B>(case, device, |v| round_to(dtype, v), swapped);
    let exact =
        evaluate::<Autodiff<NdArray<f64>>>(case, &exact_device, |v| round_to(dtype, v), None);
    let mut errors = HalfErrors {
        kernel_ulps: 0.0,
        format_ulps: 0.0,
        total_ulps: 0.0,
        kernel_line: Vec::new(),
        format_line: Vec::new(),
    };
    for ((which, actual), (_, exact)) in actual.iter().zip(&exact) {
        let reference = case.values(which);
        let kernel_err = rel_err(actual, exact);
        let format_err = rel_err(exact, reference);
        errors.kernel_ulps = errors.kernel_ulps.max(kernel_err / u);
        errors.format_ulps = errors.format_ulps.max(format_err / u);
        errors.total_ulps = errors.total_ulps.max(rel_err(actual, reference) / u);
        errors.kernel_line.push(format!("{which}={kernel_err:.1e}"));
        errors.format_line.push(format!("{which}={format_err:.1e}"));
    }
    errors
}

/// Every golden case through `B` on `device`, whose float type is `dtype` (`name`
/// prints it; `backend` and `kernel` name the backend and kernel in every line), with
/// the kernel's own error bounded by `bound`. Panics listing every case past a bound,
/// after all ran.
pub fn run_all_half<B>(
    device: &B::Device,
    dtype: FloatDType,
    (name, backend, kernel): (&str, &str, &str),
    bound: KernelBound,
) where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let mut failures = Vec::new();
    for path in golden_paths() {
        let case = GoldenCase::load(&path);
        let errors = case_errors::<B>(&case, device, dtype, None);
        let limit = bound.limit_ulps(errors.format_ulps);
        println!(
            "golden case={} backend={backend} kernel={kernel} dtype={name} isa={} \
             kernel_error(vs exact on rounded inputs, max {:.1}u, bound {limit:.1}u): {} | \
             format_error(exact on rounded inputs vs PyTorch, max {:.1}u; total {:.1}u): {}",
            case.name,
            lstm_cpu::instruction_set(),
            errors.kernel_ulps,
            errors.kernel_line.join(" "),
            errors.format_ulps,
            errors.total_ulps,
            errors.format_line.join(" "),
        );
        if errors.kernel_ulps > limit || errors.format_ulps > FORMAT_ULPS {
            failures.push(format!(
                "{} in {name}: kernel error {:.1}u (bound {limit:.1}u), format error {:.1}u \
                 (bound {FORMAT_ULPS}u)",
                case.name, errors.kernel_ulps, errors.format_ulps
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
