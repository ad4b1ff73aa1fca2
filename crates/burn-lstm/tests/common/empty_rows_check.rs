//! Rows of length 0 checked against PyTorch: each golden case's batch (PyTorch's
//! float64 results for its rows) gets three empty rows inserted (first, middle, last)
//! whose input is garbage (a NaN, a huge value) and whose initial state is random. The
//! non-empty rows must still give the golden outputs and gradients (an empty row
//! changes nothing for the others, nor any parameter's gradient); the empty rows must
//! give zeros as output, their initial state as final state, zero input gradient and
//! `dh0` / `dc0` equal to the `dh_n` / `dc_n` given them.

use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{LstmState, RnnBackend, RnnKernel};

use super::golden_check::parameter_grad;
use super::{ErrorReport, GoldenCase, assert_all, golden_paths, to_f64};

/// Row `slot` of the widened batch: `Some(row)` of the golden batch, `None` an empty row.
fn slots(batch: usize) -> Vec<Option<usize>> {
    let mut slots: Vec<Option<usize>> = (0..batch).map(Some).collect();
    slots.insert(batch / 2, None);
    slots.insert(0, None);
    slots.push(None);
    slots
}

/// `values` of `shape` widened along `axis` to `slots`: golden rows copied, empty rows
/// filled by `fill(element index)`.
fn widen(
    values: &[f64],
    shape: &[usize],
    axis: usize,
    slots: &[Option<usize>],
    fill: impl Fn(usize) -> f64,
) -> (Vec<f64>, Vec<usize>) {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::with_capacity(outer * slots.len() * inner);
    for o in 0..outer {
        for slot in slots {
            match slot {
                Some(row) => {
                    let at = (o * shape[axis] + row) * inner;
                    out.extend_from_slice(&values[at..at + inner]);
                }
                None => {
                    let at = out.len();
                    out.extend((0..inner).map(|i| fill(at + i)));
                }
            }
        }
    }
    let mut shape = shape.to_vec();
    shape[axis] = slots.len();
    (out, shape)
}

/// The rows of `values` (`shape` with `axis` of `slots.len()`) that `keep` selects, in order.
fn pick(
    values: &[f64],
    shape: &[usize],
    axis: usize,
    slots: &[Option<usize>],
    keep: impl Fn(Option<usize>) -> bool,
) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for (s, slot) in slots.iter().enumerate() {
            if keep(*slot) {
                let at = (o * slots.len() + s) * inner;
                out.extend_from_slice(&values[at..at + inner]);
            }
        }
    }
    out
}

fn garbage(i: usize) -> f64 {
    match i % 7 {
        0 => f64::NAN,
        1 => 1e30,
        _ => ((i * 2654435761) % 1000) as f64 / 250.0 - 2.0,
    }
}

fn noise(i: usize) -> f64 {
    ((i * 40503 + 17) % 997) as f64 / 498.5 - 1.0
}

fn tensor<B: burn::tensor::backend::Backend, const D: usize>(
    (values, shape): (Vec<f64>, Vec<usize>),
    device: &B::Device,
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values, shape), device)
}

fn check_case<B>(
    case: &GoldenCase,
    backend: &str,
    kernel: RnnKernel,
    tol: f64,
) -> Result<(), String>
where
    B: AutodiffBackend + RnnBackend,
{
    let device = Default::default();
    let c = &case.config;
    let mut report = ErrorReport::new(
        format!(
            "empty-rows case={} backend={backend} kernel={kernel}",
            case.name
        ),
        tol,
    );
    let slots = slots(c.batch);
    let real = |s: Option<usize>| s.is_some();
    let empty = |s: Option<usize>| s.is_none();
    let batch_axis = if c.batch_first { 0 } else { 1 };
    let shape_of = |name: &str| case.tensors[name].0.clone();

    let lengths: Vec<usize> = slots
        .iter()
        .map(|s| s.map_or(0, |row| c.lengths.as_ref().map_or(c.seq_len, |l| l[row])))
        .collect();
    let x = widen(
        case.values("x"),
        &shape_of("x"),
        batch_axis,
        &slots,
        garbage,
    );
    let state_shape = |width: usize| {
        vec![
            c.num_layers * if c.bidirectional { 2 } else { 1 },
            c.batch,
            width,
        ]
    };
    let out = if c.proj_size > 0 {
        c.proj_size
    } else {
        c.hidden_size
    };
    let golden_or_zeros = |name: &str, width: usize| {
        if case.has(name) {
            case.values(name).to_vec()
        } else {
            vec![0.0; state_shape(width).iter().product()]
        }
    };
    let h0 = widen(
        &golden_or_zeros("h0", out),
        &state_shape(out),
        1,
        &slots,
        noise,
    );
    let c0 = widen(
        &golden_or_zeros("c0", c.hidden_size),
        &state_shape(c.hidden_size),
        1,
        &slots,
        |i| noise(i + 5),
    );
    let dy = widen(
        case.values("dy"),
        &shape_of("dy"),
        batch_axis,
        &slots,
        |i| noise(i + 7),
    );
    let dh_n = widen(case.values("dh_n"), &shape_of("dh_n"), 1, &slots, |i| {
        noise(i + 11)
    });
    let dc_n = widen(case.values("dc_n"), &shape_of("dc_n"), 1, &slots, |i| {
        noise(i + 13)
    });

    let model = case
        .module_config()
        .load_pytorch_safetensors::<B>(&case.path, &device)
        .expect("golden parameters load")
        .with_kernel(Some(kernel));
    let choice = model.kernel_with_lengths(&device, slots.len(), c.seq_len, Some(&lengths));
    assert_eq!(choice.kernel, kernel, "{}: {choice}", report.label);
    let x_t = tensor::<B, 3>(x.clone(), &device).require_grad();
    let h0_t = tensor::<B, 3>(h0.clone(), &device).require_grad();
    let c0_t = tensor::<B, 3>(c0.clone(), &device).require_grad();
    let (y, state) = model
        .try_forward(
            x_t.clone(),
            Some(LstmState::new(h0_t.clone(), c0_t.clone())),
            Some(&lengths),
        )
        .map_err(|e| format!("{}: {e}", report.label))?;
    let (dh_n_t, dc_n_t) = (
        tensor::<B, 3>(dh_n.clone(), &device),
        tensor::<B, 3>(dc_n.clone(), &device),
    );
    let loss = (y.clone() * tensor::<B, 3>(dy, &device)).sum()
        + (state.hidden.clone() * dh_n_t.clone()).sum()
        + (state.cell.clone() * dc_n_t.clone()).sum();
    let grads = loss.backward();

    let (y_shape, s_shape) = (y.dims().to_vec(), state.hidden.dims().to_vec());
    let c_shape = state.cell.dims().to_vec();
    let (y, h_n, c_n) = (to_f64(y), to_f64(state.hidden), to_f64(state.cell));
    report.check(
        "y",
        &pick(&y, &y_shape, batch_axis, &slots, real),
        case.values("y"),
    );
    report.check(
        "h_n",
        &pick(&h_n, &s_shape, 1, &slots, real),
        case.values("h_n"),
    );
    report.check(
        "c_n",
        &pick(&c_n, &c_shape, 1, &slots, real),
        case.values("c_n"),
    );
    let dx = to_f64(x_t.grad(&grads).expect("input gradient"));
    report.check(
        "grad.x",
        &pick(&dx, &x.1, batch_axis, &slots, real),
        case.values("grad.x"),
    );
    let dh0 = to_f64(h0_t.grad(&grads).expect("h0 gradient"));
    let dc0 = to_f64(c0_t.grad(&grads).expect("c0 gradient"));
    if case.has("grad.h0") {
        report.check(
            "grad.h0",
            &pick(&dh0, &h0.1, 1, &slots, real),
            case.values("grad.h0"),
        );
        report.check(
            "grad.c0",
            &pick(&dc0, &c0.1, 1, &slots, real),
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
    // The empty rows, exactly: a passed-through state or gradient is compared with the
    // value as the backend holds it (rounded once to its float type), read back.
    let held = |t: &Tensor<B, 3>| to_f64(t.clone());
    let exact = |what: &str, actual: Vec<f64>, expected: Vec<f64>| {
        (actual != expected).then(|| {
            format!(
                "{}: empty rows' {what} {actual:?} != {expected:?}",
                report.label
            )
        })
    };
    let zeros = |v: &Vec<f64>| vec![0.0; v.len()];
    let empty_y = pick(&y, &y_shape, batch_axis, &slots, empty);
    let empty_dx = pick(&dx, &x.1, batch_axis, &slots, empty);
    let failures: Vec<String> = [
        exact("y", empty_y.clone(), zeros(&empty_y)),
        exact(
            "h_n",
            pick(&h_n, &s_shape, 1, &slots, empty),
            pick(&held(&h0_t), &h0.1, 1, &slots, empty),
        ),
        exact(
            "c_n",
            pick(&c_n, &c_shape, 1, &slots, empty),
            pick(&held(&c0_t), &c0.1, 1, &slots, empty),
        ),
        exact("grad.x", empty_dx.clone(), zeros(&empty_dx)),
        exact(
            "grad.h0",
            pick(&dh0, &h0.1, 1, &slots, empty),
            pick(&held(&dh_n_t), &dh_n.1, 1, &slots, empty),
        ),
        exact(
            "grad.c0",
            pick(&dc0, &c0.1, 1, &slots, empty),
            pick(&held(&dc_n_t), &dc_n.1, 1, &slots, empty),
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let label = report.label.clone();
    report.finish()?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{label}: {}", failures.join("; ")))
    }
}

/// Every golden case with empty rows inserted, through `kernel` on `B`.
pub fn run_all<B>(backend: &str, kernel: RnnKernel, tol: f64)
where
    B: AutodiffBackend + RnnBackend,
{
    let results = golden_paths()
        .iter()
        .map(|path| check_case::<B>(&GoldenCase::load(path), backend, kernel, tol))
        .collect();
    assert_all(results);
}

/// A batch of only empty rows: zeros out, the initial state as final state, no gradient
/// to the parameters or the input, and `dh_n` / `dc_n` passed to `dh0` / `dc0`.
pub fn only_empty_rows<B>(kernel: RnnKernel)
where
    B: AutodiffBackend + RnnBackend,
{
    let device = Default::default();
    let config = burn_lstm::CudnnCompatibleLstmConfig::new(3, 5)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(2);
    let model = config.init::<B>(&device).with_kernel(Some(kernel));
    let (batch, seq, cells) = (3, 4, 4);
    let choice = model.kernel_with_lengths(&device, batch, seq, Some(&[0, 0, 0]));
    assert_eq!(choice.kernel, kernel, "{choice}");
    let make = |shape: [usize; 3], f: fn(usize) -> f64| {
        let values: Vec<f64> = (0..shape.iter().product()).map(f).collect();
        Tensor::<B, 3>::from_data(TensorData::new(values, shape), &device)
    };
    let x = make([batch, seq, 3], garbage).require_grad();
    let h0 = make([cells, batch, 2], noise).require_grad();
    let c0 = make([cells, batch, 5], |i| noise(i + 3)).require_grad();
    let dh_n = make([cells, batch, 2], |i| noise(i + 5));
    let dc_n = make([cells, batch, 5], |i| noise(i + 9));
    let (y, state) = model
        .try_forward(
            x.clone(),
            Some(LstmState::new(h0.clone(), c0.clone())),
            Some(&[0, 0, 0]),
        )
        .expect("a batch of empty rows is valid");
    assert!(to_f64(y.clone()).iter().all(|&v| v == 0.0), "{kernel}: y");
    assert_eq!(
        to_f64(state.hidden.clone()),
        to_f64(h0.clone()),
        "{kernel}: h_n"
    );
    assert_eq!(
        to_f64(state.cell.clone()),
        to_f64(c0.clone()),
        "{kernel}: c_n"
    );
    let loss = y.sum() + (state.hidden * dh_n.clone()).sum() + (state.cell * dc_n.clone()).sum();
    let grads = loss.backward();
    assert!(
        to_f64(x.grad(&grads).unwrap()).iter().all(|&v| v == 0.0),
        "{kernel}: dx"
    );
    assert_eq!(
        to_f64(h0.grad(&grads).unwrap()),
        to_f64(dh_n),
        "{kernel}: dh0"
    );
    assert_eq!(
        to_f64(c0.grad(&grads).unwrap()),
        to_f64(dc_n),
        "{kernel}: dc0"
    );
    for cell in model.directions() {
        let matrices = [
            Some(&cell.weight_ih),
            Some(&cell.weight_hh),
            cell.weight_hr.as_ref(),
        ];
        let biases = [cell.bias_ih.as_ref(), cell.bias_hh.as_ref()];
        let gradients = matrices
            .into_iter()
            .flatten()
            .map(|w| w.grad(&grads).map(to_f64))
            .chain(
                biases
                    .into_iter()
                    .flatten()
                    .map(|b| b.grad(&grads).map(to_f64)),
            );
        for (k, g) in gradients.enumerate() {
            let g = g.unwrap_or_else(|| panic!("{kernel}: no gradient of parameter {k}"));
            assert!(
                g.iter().all(|&v| v == 0.0),
                "{kernel}: parameter {k}'s gradient"
            );
        }
    }
}
