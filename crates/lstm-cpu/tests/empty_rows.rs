//! Rows of length 0 (an empty sequence in a padded batch): the kernel must give the
//! non-empty rows exactly what it gives them in a batch of their own, zeros as the empty
//! rows' outputs, their initial state as their final state, and in the backward
//! `dh_n` / `dc_n` passed straight to `dh0` / `dc0` with nothing to the parameters.

use lstm_cpu::{OutputGrads, RnnArch, RnnCall, RnnGradients, RnnOutputs};

fn uniform(len: usize, scale: f64, seed: u64) -> Vec<f64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Rows `rows` of a `[lead, batch, width]` tensor.
fn rows(values: &[f64], lead: usize, batch: usize, keep: &[usize]) -> Vec<f64> {
    let width = values.len() / (lead * batch);
    let mut out = Vec::new();
    for l in 0..lead {
        for &b in keep {
            let at = (l * batch + b) * width;
            out.extend_from_slice(&values[at..at + width]);
        }
    }
    out
}

struct Run {
    out: RnnOutputs<f64>,
    grads: RnnGradients<f64>,
    h0: Vec<f64>,
    c0: Vec<f64>,
    dh_n: Vec<f64>,
    dc_n: Vec<f64>,
}

/// One training call and its backward; inputs are drawn for the full batch and the rows
/// `keep` of them taken, so a compact call sees the very same rows.
fn run(arch: &RnnArch, seq: usize, lengths: &[usize], keep: &[usize]) -> Run {
    let full = lengths.len();
    let (cells, out, h) = (arch.cells(), arch.output_size(), arch.hidden_size);
    let state = arch.cell_state_size();
    let pick = |v: Vec<f64>, lead| rows(&v, lead, full, keep);
    let input = pick(uniform(seq * full * arch.input_size, 1.0, 1), seq);
    let weights = uniform(arch.weight_count(), 1.0 / (h as f64).sqrt(), 2);
    let h0 = pick(uniform(cells * full * out, 0.5, 3), cells);
    let c0 = pick(uniform(cells * full * state, 0.5, 4), cells);
    let dy = pick(uniform(seq * full * arch.dirs() * out, 1.0, 5), seq);
    let dh_n = pick(uniform(cells * full * out, 1.0, 6), cells);
    let dc_n = pick(uniform(cells * full * state, 1.0, 7), cells);
    let lengths: Vec<usize> = keep.iter().map(|&b| lengths[b]).collect();
    let call = RnnCall {
        arch,
        seq_len: seq,
        batch: keep.len(),
        lengths: Some(&lengths),
        input: &input,
        input_strides: None,
        weights: &weights,
        h0: &h0,
        c0: &c0,
        dropout_masks: &[],
        threads: 2,
    };
    let (outputs, tape) = lstm_cpu::forward_train(&call).expect("valid call");
    assert_eq!(
        lstm_cpu::forward(&call).expect("valid call"),
        outputs,
        "inference and training forward agree"
    );
    let grads = lstm_cpu::backward(
        &call,
        tape,
        OutputGrads {
            dy: &dy,
            dh_n: &dh_n,
            dc_n: &dc_n,
            input_wanted: true,
        },
    )
    .expect("valid backward");
    Run {
        out: outputs,
        grads,
        h0,
        c0,
        dh_n,
        dc_n,
    }
}

fn max_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

fn archs() -> Vec<RnnArch> {
    vec![
        RnnArch {
            cell: lstm_cpu::CellKind::Lstm,
            input_size: 5,
            hidden_size: 8,
            proj_size: 0,
            num_layers: 2,
            bidirectional: true,
            bias: true,
        },
        RnnArch {
            cell: lstm_cpu::CellKind::Lstm,
            input_size: 3,
            hidden_size: 6,
            proj_size: 4,
            num_layers: 2,
            bidirectional: true,
            bias: false,
        },
        RnnArch {
            cell: lstm_cpu::CellKind::Lstm,
            input_size: 4,
            hidden_size: 5,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
        },
        RnnArch {
            cell: lstm_cpu::CellKind::Gru,
            input_size: 5,
            hidden_size: 7,
            proj_size: 0,
            num_layers: 2,
            bidirectional: true,
            bias: true,
        },
    ]
}

#[test]
fn empty_rows_leave_the_other_rows_unchanged_and_pass_their_state_through() {
    let seq = 6;
    let lengths = [0, 4, 6, 0, 1, 0];
    let full: Vec<usize> = (0..lengths.len()).collect();
    let kept: Vec<usize> = full.iter().copied().filter(|&b| lengths[b] > 0).collect();
    let empty: Vec<usize> = full.iter().copied().filter(|&b| lengths[b] == 0).collect();
    for arch in archs() {
        let with = run(&arch, seq, &lengths, &full);
        let alone = run(&arch, seq, &lengths, &kept);
        let (cells, b) = (arch.cells(), lengths.len());
        // The rows of `with` in the order of `kept` (resp. `empty`).
        let at = |v: &[f64], lead, keep: &[usize]| rows(v, lead, b, keep);
        let tol = 1e-13;
        let o = &with.out;
        assert!(
            max_diff(&at(&o.y, seq, &kept), &alone.out.y) < tol,
            "{arch:?}: y"
        );
        assert!(max_diff(&at(&o.h_n, cells, &kept), &alone.out.h_n) < tol);
        assert!(max_diff(&at(&o.c_n, cells, &kept), &alone.out.c_n) < tol);
        assert!(
            at(&o.y, seq, &empty).iter().all(|&v| v == 0.0),
            "empty rows emit zeros"
        );
        assert_eq!(at(&o.h_n, cells, &empty), at(&with.h0, cells, &empty));
        assert_eq!(at(&o.c_n, cells, &empty), at(&with.c0, cells, &empty));

        let g = &with.grads;
        assert!(
            max_diff(&g.weights, &alone.grads.weights) < tol,
            "{arch:?}: dW"
        );
        assert!(max_diff(&at(&g.input, seq, &kept), &alone.grads.input) < tol);
        assert!(max_diff(&at(&g.h0, cells, &kept), &alone.grads.h0) < tol);
        assert!(max_diff(&at(&g.c0, cells, &kept), &alone.grads.c0) < tol);
        assert!(at(&g.input, seq, &empty).iter().all(|&v| v == 0.0));
        assert_eq!(at(&g.h0, cells, &empty), at(&with.dh_n, cells, &empty));
        assert_eq!(at(&g.c0, cells, &empty), at(&with.dc_n, cells, &empty));
    }
}

#[test]
fn a_batch_of_only_empty_rows_is_its_initial_state() {
    let seq = 4;
    let lengths = [0, 0, 0];
    let all = [0, 1, 2];
    for arch in archs() {
        let r = run(&arch, seq, &lengths, &all);
        assert!(r.out.y.iter().all(|&v| v == 0.0));
        assert_eq!(r.out.h_n, r.h0);
        assert_eq!(r.out.c_n, r.c0);
        assert!(r.grads.weights.iter().all(|&v| v == 0.0), "{arch:?}: dW");
        assert!(r.grads.input.iter().all(|&v| v == 0.0));
        assert_eq!(r.grads.h0, r.dh_n);
        assert_eq!(r.grads.c0, r.dc_n);
    }
}

#[test]
fn a_length_past_the_sequence_is_still_an_error() {
    let arch = &archs()[2];
    let (seq, batch) = (3, 2);
    let input = vec![0.0f64; seq * batch * arch.input_size];
    let weights = vec![0.0f64; arch.weight_count()];
    let state = vec![0.0f64; batch * arch.hidden_size];
    let lengths = [0, 4];
    let call = RnnCall {
        arch,
        seq_len: seq,
        batch,
        lengths: Some(&lengths),
        input: &input,
        input_strides: None,
        weights: &weights,
        h0: &state,
        c0: &state,
        dropout_masks: &[],
        threads: 1,
    };
    let err = lstm_cpu::forward(&call).expect_err("length 4 > T = 3");
    assert_eq!(err.argument, "lengths");
    assert_eq!(err.expected, "every length in 0..=3");
    assert_eq!(err.actual, "4 at row 1");
}
