//! Gradients of the op against central finite differences, in f64 on NdArray and on
//! Flex (its device set to f64), on small random shapes covering every feature: layers,
//! directions, projection, padding, no bias and inter-layer dropout (fixed seed, so
//! every evaluation draws the same masks); LSTM and GRU cells (a GRU has no `c0` and
//! no `c_n`: the op takes and returns `None`).

use crate::common;

use std::sync::Arc;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{CellKind, RnnArch, RnnBackend, RnnKernel, RnnSpec, rnn};

type B = NdArray<f64>;

/// Deterministic values in (-1, 1) (a host LCG: the backend's generator is global and
/// shared by tests running in parallel).
fn random(shape: Vec<usize>, seed_offset: u64) -> Vec<f64> {
    let mut state = 0x2545_F491_4F6C_DD1D_u64.wrapping_mul(seed_offset + 1);
    (0..shape.iter().product::<usize>())
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        })
        .collect()
}

/// `L = Σ y·p_y + Σ h_n·p_h + Σ c_n·p_c` for fixed random probes.
fn loss<Bk: RnnBackend>(
    spec: &RnnSpec,
    inputs: &[(Vec<usize>, Vec<f64>); 4],
    probes: &[(Vec<usize>, Vec<f64>); 3],
    grad: bool,
) -> (Tensor<Bk, 1>, Vec<Tensor<Bk, 1>>) {
    loss_of::<Bk>(spec, inputs, probes, grad, [true; 3])
}

/// [`loss`] with only the terms of the results in `reach` (`y`, `h_n`, `c_n`): the others
/// do not take part in the graph at all.
fn loss_of<Bk: RnnBackend>(
    spec: &RnnSpec,
    inputs: &[(Vec<usize>, Vec<f64>); 4],
    probes: &[(Vec<usize>, Vec<f64>); 3],
    grad: bool,
    reach: [bool; 3],
) -> (Tensor<Bk, 1>, Vec<Tensor<Bk, 1>>) {
    let device = Default::default();
    let make = |(shape, values): &(Vec<usize>, Vec<f64>)| {
        let flat =
            Tensor::<Bk, 1>::from_data(TensorData::new(values.clone(), [values.len()]), &device);
        let flat = if grad { flat.require_grad() } else { flat };
        (flat.clone(), shape.clone())
    };
    let leaves: Vec<(Tensor<Bk, 1>, Vec<usize>)> = inputs.iter().map(make).collect();
    let shaped = |i: usize| {
        let (t, s) = &leaves[i];
        t.clone().reshape([s[0], s[1], s[2]])
    };
    let c0 = (spec.arch.cell_state_size() > 0).then(|| shaped(3));
    let (y, h_n, c_n) = rnn(shaped(0), leaves[1].0.clone(), shaped(2), c0, spec);
    assert_eq!(
        c_n.is_some(),
        spec.arch.cell_state_size() > 0,
        "c_n only for an LSTM"
    );
    let probe = |i: usize| {
        let (s, v) = &probes[i];
        Tensor::<Bk, 1>::from_data(TensorData::new(v.clone(), [v.len()]), &device)
            .reshape([s[0], s[1], s[2]])
    };
    let terms = [
        reach[0].then(|| (y * probe(0)).sum()),
        reach[1].then(|| (h_n * probe(1)).sum()),
        c_n.filter(|_| reach[2]).map(|c_n| (c_n * probe(2)).sum()),
    ];
    let total = terms
        .into_iter()
        .flatten()
        .reduce(|a, b| a + b)
        .expect("at least one result in the loss");
    (total, leaves.into_iter().map(|(t, _)| t).collect())
}

/// The gradient of the loss for each leaf (`input`, `weights`, `h0`, `c0`).
fn backward<Bk: RnnBackend>(
    (total, leaves): (Tensor<Autodiff<Bk>, 1>, Vec<Tensor<Autodiff<Bk>, 1>>),
) -> Vec<Vec<f64>> {
    let grads = total.backward();
    leaves
        .iter()
        .map(|leaf| {
            if leaf.dims()[0] == 0 {
                return Vec::new(); // an empty `c0`: nothing to differentiate
            }
            let grad = leaf.grad(&grads).expect("gradient");
            grad.into_data().convert::<f64>().to_vec::<f64>().unwrap()
        })
        .collect()
}

/// Both CPU kernels on NdArray and on Flex, each checked against finite differences.
fn check(arch: RnnArch, batch: usize, seq_len: usize, lengths: Option<Vec<usize>>, dropout: f64) {
    common::flex_f64();
    check_on::<B>("ndarray", &arch, batch, seq_len, &lengths, dropout);
    check_on::<Flex>("flex", &arch, batch, seq_len, &lengths, dropout);
}

fn check_on<Bk: RnnBackend>(
    backend: &str,
    arch: &RnnArch,
    batch: usize,
    seq_len: usize,
    lengths: &Option<Vec<usize>>,
    dropout: f64,
) {
    for kernel in [RnnKernel::Portable, RnnKernel::FusedCpu] {
        let spec = RnnSpec {
            seq_len,
            batch,
            lengths: lengths.clone().map(Arc::from),
            dropout,
            training: dropout > 0.0,
            dropout_seed: Some(7),
            kernel: Some(kernel),
            arch: arch.clone(),
        };
        assert_eq!(Bk::rnn_kernel(&Default::default(), &spec).kernel, kernel);
        check_kernel::<Bk>(backend, &spec);
    }
}

/// The op's inputs and the loss probes of `spec`, random and fixed.
type Case = ([(Vec<usize>, Vec<f64>); 4], [(Vec<usize>, Vec<f64>); 3]);

fn case(spec: &RnnSpec) -> Case {
    let (arch, batch, seq_len) = (&spec.arch, spec.batch, spec.seq_len);
    let cells = arch.cells();
    let shapes = [
        vec![seq_len, batch, arch.input_size],
        vec![arch.weight_count()],
        vec![cells, batch, arch.output_size()],
        vec![cells, batch, arch.cell_state_size()],
    ];
    let inputs = core::array::from_fn(|i| (shapes[i].clone(), random(shapes[i].clone(), i as u64)));
    let out_shapes = [
        vec![seq_len, batch, arch.dirs() * arch.output_size()],
        vec![cells, batch, arch.output_size()],
        vec![cells, batch, arch.cell_state_size()],
    ];
    let probes = core::array::from_fn(|i| {
        (
            out_shapes[i].clone(),
            random(out_shapes[i].clone(), 10 + i as u64),
        )
    });
    (inputs, probes)
}

fn check_kernel<Bk: RnnBackend>(backend: &str, spec: &RnnSpec) {
    let (arch, dropout) = (&spec.arch, spec.dropout);
    let (inputs, probes) = case(spec);

    let names = ["input", "weights", "h0", "c0"];
    let eps = 1e-6;
    let gradients = backward::<Bk>(loss::<Autodiff<Bk>>(spec, &inputs, &probes, true));
    for (k, analytic) in gradients.iter().enumerate() {
        let mut worst = 0.0f64;
        for (i, analytic) in analytic.iter().enumerate() {
            let eval = |delta: f64| {
                let mut perturbed = inputs.clone();
                perturbed[k].1[i] += delta;
                let loss = loss::<Bk>(spec, &perturbed, &probes, false).0;
                loss.into_data().convert::<f64>().to_vec::<f64>().unwrap()[0]
            };
            let numeric = (eval(eps) - eval(-eps)) / (2.0 * eps);
            let err = (numeric - analytic).abs() / numeric.abs().max(1.0);
            worst = worst.max(err);
        }
        println!(
            "fd backend={backend} kernel={:?} isa={} {arch:?} lengths={:?} dropout={dropout} {}: worst {worst:.2e}",
            spec.kernel,
            lstm_cpu::instruction_set(),
            spec.lengths,
            names[k]
        );
        assert!(
            worst < 1e-6,
            "{}: finite-difference mismatch {worst:e}",
            names[k]
        );
    }
}

fn arch(
    input_size: usize,
    hidden_size: usize,
    proj_size: usize,
    num_layers: usize,
    bidirectional: bool,
    bias: bool,
) -> RnnArch {
    RnnArch {
        cell: CellKind::Lstm,
        input_size,
        hidden_size,
        proj_size,
        num_layers,
        bidirectional,
        bias,
    }
}

/// A GRU stack of `num_layers` (no projection).
fn gru(input_size: usize, hidden_size: usize, num_layers: usize, bidirectional: bool) -> RnnArch {
    RnnArch {
        cell: CellKind::Gru,
        ..arch(input_size, hidden_size, 0, num_layers, bidirectional, true)
    }
}

#[test]
fn gru_stacked_bidirectional_padded_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_stacked_bidirectional_padded_matches_finite_differences",
    );
    check(gru(3, 4, 2, true), 3, 4, Some(vec![4, 2, 1]), 0.0);
}

/// An empty row, inter-layer dropout and three layers at once.
#[test]
fn gru_empty_row_and_dropout_match_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_empty_row_and_dropout_match_finite_differences",
    );
    check(gru(3, 4, 3, true), 3, 4, Some(vec![3, 0, 4]), 0.4);
}

#[test]
fn gru_without_bias_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "gru_without_bias_matches_finite_differences",
    );
    check(
        RnnArch {
            bias: false,
            ..gru(2, 3, 2, false)
        },
        2,
        3,
        None,
        0.0,
    );
}

#[test]
fn single_layer_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "single_layer_matches_finite_differences",
    );
    check(arch(3, 4, 0, 1, false, true), 2, 4, None, 0.0);
}

#[test]
fn stacked_bidirectional_padded_projected_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "stacked_bidirectional_padded_projected_matches_finite_differences",
    );
    check(arch(3, 4, 2, 2, true, true), 3, 4, Some(vec![4, 2, 1]), 0.0);
}

/// An empty row (length 0) between padded ones: its outputs are constant, its final
/// state is its initial state, and no parameter depends on it.
#[test]
fn empty_row_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "empty_row_matches_finite_differences",
    );
    check(arch(3, 4, 2, 2, true, true), 3, 4, Some(vec![3, 0, 4]), 0.0);
}

#[test]
fn no_bias_matches_finite_differences() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "no_bias_matches_finite_differences",
    );
    check(arch(2, 3, 0, 2, false, false), 2, 3, None, 0.0);
}

#[test]
fn dropout_backward_uses_the_forward_masks() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "dropout_backward_uses_the_forward_masks",
    );
    check(arch(3, 4, 0, 3, true, true), 2, 3, None, 0.4);
}

/// A loss that reaches only some of the results (the usual case: a model reads `y` or
/// `h_n`, rarely all three) gives the gradients of the full loss with zero probes on the
/// others: the results it does not reach count as zero gradients.
#[test]
fn results_outside_the_loss_count_as_zero_gradients() {
    for kernel in [RnnKernel::Portable, RnnKernel::FusedCpu] {
        let spec = RnnSpec {
            seq_len: 4,
            batch: 3,
            lengths: Some(Arc::from(vec![4, 2, 3])),
            dropout: 0.0,
            training: false,
            dropout_seed: None,
            kernel: Some(kernel),
            arch: arch(3, 4, 0, 2, true, true),
        };
        let (inputs, probes) = case(&spec);
        let grads_of = |probes: &[(Vec<usize>, Vec<f64>); 3], reach: [bool; 3]| {
            backward::<B>(loss_of::<Autodiff<B>>(&spec, &inputs, probes, true, reach))
        };
        for which in 0..3 {
            let reach: [bool; 3] = core::array::from_fn(|i| i == which);
            let mut zero_probes = probes.clone();
            for (i, (_, values)) in zero_probes.iter_mut().enumerate() {
                if i != which {
                    values.iter_mut().for_each(|v| *v = 0.0);
                }
            }
            let alone = grads_of(&probes, reach);
            let with_zeros = grads_of(&zero_probes, [true; 3]);
            for (k, (a, b)) in alone.iter().zip(&with_zeros).enumerate() {
                let largest = b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                let diff = a
                    .iter()
                    .zip(b)
                    .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
                assert!(
                    largest > 0.0,
                    "{kernel:?} result {which} input {k}: zero gradient"
                );
                assert!(
                    diff <= 1e-12 * largest,
                    "{kernel:?} result {which} input {k}: differs by {diff:e} of {largest:e}"
                );
            }
        }
    }
}
