//! Generated configurations (proptest, seeded and bounded so CI stays in seconds):
//!
//! - valid ones (random input, hidden and projection sizes, layers, directions, bias,
//!   batch-first, lengths with zeros, initial state or none): the fused CPU kernel and
//!   the portable kernel agree in f64 on every output and every gradient;
//! - arbitrary ones, valid or not (sizes of 0, a projection not below the hidden size,
//!   dropout outside `[0, 1)` or NaN, an input of another shape, lengths of another
//!   count or past the sequence, states of another shape): a call is `Ok` exactly when
//!   everything is valid, an invalid one is an `RnnError`, and nothing panics.
//!
//! `PROPTEST_CASES` raises the case counts for a longer local run; the seed is fixed, so
//! a failure repeats.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::backend::{Autodiff, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, LstmState, RnnKernel};
use common::to_f64;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

type B = Autodiff<NdArray<f64>>;

const SEED: [u8; 32] = *b"burn-lstm generated configs 0019";

fn runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &SEED))
}

/// A valid configuration and call.
#[derive(Clone, Debug)]
struct Valid {
    input: usize,
    hidden: usize,
    proj: usize,
    layers: usize,
    bidirectional: bool,
    bias: bool,
    batch_first: bool,
    batch: usize,
    seq: usize,
    lengths: Option<Vec<usize>>,
    initial_state: bool,
    seed: u64,
}

fn valid() -> impl Strategy<Value = Valid> {
    (1usize..6, 1usize..7, 1usize..3, 1usize..4, 1usize..5)
        .prop_flat_map(|(input, hidden, layers, batch, seq)| {
            (
                Just((input, hidden, layers, batch, seq)),
                0..hidden,
                any::<[bool; 4]>(),
                proptest::option::of(proptest::collection::vec(0..=seq, batch)),
                any::<u64>(),
            )
        })
        .prop_map(
            |((input, hidden, layers, batch, seq), proj, flags, lengths, seed)| Valid {
                input,
                hidden,
                proj,
                layers,
                bidirectional: flags[0],
                bias: flags[1],
                batch_first: flags[2],
                batch,
                seq,
                lengths,
                initial_state: flags[3],
                seed,
            },
        )
}

fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        })
        .collect()
}

fn tensor<const D: usize>(shape: [usize; D], seed: u64) -> Tensor<B, D> {
    let data = TensorData::new(values(shape.iter().product(), seed), shape);
    Tensor::from_data(data, &Default::default())
}

/// Every output and gradient of one training call, named.
fn run(case: &Valid, kernel: RnnKernel) -> Vec<(String, Vec<f64>)> {
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(case.input, case.hidden)
        .with_proj_size(case.proj)
        .with_num_layers(case.layers)
        .with_bidirectional(case.bidirectional)
        .with_bias(case.bias)
        .with_batch_first(case.batch_first);
    let model: CudnnCompatibleLstm<B> = config.init(&device);
    // The same parameters for both kernels: set from the case's seed.
    let model = seeded(model, case.seed).with_kernel(Some(kernel));
    assert_eq!(model.kernel(&device, case.batch, case.seq).kernel, kernel);
    let x_shape = if case.batch_first {
        [case.batch, case.seq, case.input]
    } else {
        [case.seq, case.batch, case.input]
    };
    let x = tensor(x_shape, case.seed ^ 1).require_grad();
    let cells = case.layers * if case.bidirectional { 2 } else { 1 };
    let out = if case.proj > 0 {
        case.proj
    } else {
        case.hidden
    };
    let state = case.initial_state.then(|| {
        LstmState::new(
            tensor([cells, case.batch, out], case.seed ^ 2).require_grad(),
            tensor([cells, case.batch, case.hidden], case.seed ^ 3).require_grad(),
        )
    });
    let (y, last) = model
        .try_forward(x.clone(), state.clone(), case.lengths.as_deref())
        .expect("a valid call");
    let loss = (y.clone() * tensor(y.dims(), case.seed ^ 4)).sum()
        + (last.hidden.clone() * tensor(last.hidden.dims(), case.seed ^ 5)).sum()
        + (last.cell.clone() * tensor(last.cell.dims(), case.seed ^ 6)).sum();
    let grads = loss.backward();
    let mut results = vec![
        ("y".to_string(), to_f64(y)),
        ("h_n".to_string(), to_f64(last.hidden)),
        ("c_n".to_string(), to_f64(last.cell)),
        ("grad.x".to_string(), to_f64(x.grad(&grads).expect("dx"))),
    ];
    if let Some(state) = state {
        results.push(("grad.h0".into(), to_f64(state.hidden.grad(&grads).unwrap())));
        results.push(("grad.c0".into(), to_f64(state.cell.grad(&grads).unwrap())));
    }
    for (i, cell) in model.directions().enumerate() {
        let mut push = |name: &str, g: Option<Vec<f64>>| {
            results.push((format!("grad.{name}.{i}"), g.expect("a parameter gradient")));
        };
        push("weight_ih", cell.weight_ih.grad(&grads).map(to_f64));
        push("weight_hh", cell.weight_hh.grad(&grads).map(to_f64));
        if let Some(b) = &cell.bias_ih {
            push("bias_ih", b.grad(&grads).map(to_f64));
        }
        if let Some(b) = &cell.bias_hh {
            push("bias_hh", b.grad(&grads).map(to_f64));
        }
        if let Some(w) = &cell.weight_hr {
            push("weight_hr", w.grad(&grads).map(to_f64));
        }
    }
    results
}

/// `model` with every parameter drawn from `seed` (Burn's initialiser draws from its
/// global generator, which other tests of the process advance).
fn seeded(mut model: CudnnCompatibleLstm<B>, seed: u64) -> CudnnCompatibleLstm<B> {
    use burn::module::Param;
    let mut next = seed;
    let mut draw = |shape: Vec<usize>| {
        next = next.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let n = shape.iter().product();
        TensorData::new(values(n, next).iter().map(|v| v * 0.6).collect(), shape)
    };
    let device = Default::default();
    for layer in &mut model.layers {
        for cell in core::iter::once(&mut layer.forward).chain(layer.reverse.as_mut()) {
            let m = |d: TensorData| Param::from_tensor(Tensor::<B, 2>::from_data(d, &device));
            let v = |d: TensorData| Param::from_tensor(Tensor::<B, 1>::from_data(d, &device));
            cell.weight_ih = m(draw(cell.weight_ih.dims().to_vec()));
            cell.weight_hh = m(draw(cell.weight_hh.dims().to_vec()));
            cell.bias_ih = cell.bias_ih.as_ref().map(|b| v(draw(b.dims().to_vec())));
            cell.bias_hh = cell.bias_hh.as_ref().map(|b| v(draw(b.dims().to_vec())));
            cell.weight_hr = cell.weight_hr.as_ref().map(|w| m(draw(w.dims().to_vec())));
        }
    }
    model
}

#[test]
fn fused_cpu_and_portable_agree_on_generated_configurations() {
    runner(256)
        .run(&valid(), |case| {
            let fused = run(&case, RnnKernel::FusedCpu);
            let portable = run(&case, RnnKernel::Portable);
            for ((name, a), (_, b)) in fused.iter().zip(&portable) {
                prop_assert_eq!(a.len(), b.len(), "{}", name);
                let scale = b.iter().fold(1.0f64, |m, v| m.max(v.abs()));
                let worst = a
                    .iter()
                    .zip(b)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0f64, f64::max);
                prop_assert!(worst <= 1e-11 * scale, "{}: off by {:e}", name, worst);
            }
            Ok(())
        })
        .unwrap();
}

/// A configuration and a call, valid or not.
#[derive(Clone, Debug)]
struct Arbitrary {
    input: usize,
    hidden: usize,
    proj: usize,
    layers: usize,
    dropout: f64,
    bidirectional: bool,
    /// Dims of the input as given (batch-first).
    x: [usize; 3],
    lengths: Option<Vec<usize>>,
    /// Shapes of `h0` and `c0`, or no state.
    state: Option<([usize; 3], [usize; 3])>,
    kernel: RnnKernel,
}

fn arbitrary() -> impl Strategy<Value = Arbitrary> {
    let dim = || prop_oneof![3 => 1usize..4, 1 => Just(0usize)];
    (
        (dim(), dim(), 0usize..5, 0usize..3),
        prop_oneof![Just(0.0), Just(0.3), Just(-0.1), Just(1.0), Just(f64::NAN)],
        any::<bool>(),
        (0usize..4, 0usize..4, 0usize..5),
        proptest::option::of(proptest::collection::vec(0usize..5, 0..5)),
        proptest::option::of([
            0usize..5,
            0usize..4,
            0usize..5,
            0usize..5,
            0usize..4,
            0usize..5,
        ]),
        prop_oneof![Just(RnnKernel::FusedCpu), Just(RnnKernel::Portable)],
    )
        .prop_map(
            |((input, hidden, proj, layers), dropout, bidirectional, x, lengths, state, kernel)| {
                Arbitrary {
                    input,
                    hidden,
                    proj,
                    layers,
                    dropout,
                    bidirectional,
                    x: [x.0, x.1, x.2],
                    lengths,
                    state: state.map(|s| ([s[0], s[1], s[2]], [s[3], s[4], s[5]])),
                    kernel,
                }
            },
        )
}

/// Whether the configuration and the call are valid (the documented rules).
fn is_valid(a: &Arbitrary) -> bool {
    let config = a.input > 0
        && a.hidden > 0
        && a.layers > 0
        && a.proj < a.hidden
        && (0.0..1.0).contains(&a.dropout);
    let [batch, seq, features] = a.x;
    let call = batch > 0 && seq > 0 && features == a.input;
    let lengths = a
        .lengths
        .as_ref()
        .is_none_or(|l| l.len() == batch && l.iter().all(|&len| len <= seq));
    let cells = a.layers * if a.bidirectional { 2 } else { 1 };
    let out = if a.proj > 0 { a.proj } else { a.hidden };
    let state = a
        .state
        .is_none_or(|(h, c)| h == [cells, batch, out] && c == [cells, batch, a.hidden]);
    config && call && lengths && state
}

fn call_arbitrary<A: AutodiffBackend + burn_lstm::RnnBackend>(
    a: &Arbitrary,
) -> Result<(), burn_lstm::RnnError> {
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(a.input, a.hidden)
        .with_proj_size(a.proj)
        .with_num_layers(a.layers)
        .with_dropout(a.dropout)
        .with_bidirectional(a.bidirectional);
    let model = config.try_init::<A>(&device)?.with_kernel(Some(a.kernel));
    let zeros = |shape: [usize; 3]| Tensor::<A, 3>::zeros(shape, &device);
    let state = a.state.map(|(h, c)| LstmState::new(zeros(h), zeros(c)));
    let x = zeros(a.x).require_grad();
    let (y, _) = model.try_forward(x, state, a.lengths.as_deref())?;
    // A training call goes through the backward too.
    let _ = y.sum().backward();
    Ok(())
}

#[test]
fn every_invalid_configuration_is_an_error_and_nothing_panics() {
    runner(1024)
        .run(&arbitrary(), |a| {
            let result = catch_unwind(AssertUnwindSafe(|| call_arbitrary::<B>(&a)));
            let result = match result {
                Ok(result) => result,
                Err(_) => return Err(TestCaseError::fail(format!("panicked on {a:?}"))),
            };
            prop_assert_eq!(result.is_ok(), is_valid(&a), "{:?} gave {:?}", a, result);
            Ok(())
        })
        .unwrap();
}
