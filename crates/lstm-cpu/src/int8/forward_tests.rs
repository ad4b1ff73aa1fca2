//! The int8 forward against the f32 kernel: close on every architecture, exact where
//! the semantics leave nothing to round (rows past their length, rows of length 0), and
//! clear errors.

use crate::int8::{QuantLevels, QuantizedRnn};
use crate::{CallError, CellKind, InputStrides, RnnArch, RnnCall, RnnOutputs, forward};

/// `n` values in `[-scale, scale)` from the crate's test generator.
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    crate::test_values::values(n, seed)
        .into_iter()
        .map(|v| (2.0 * v) as f32 * scale)
        .collect()
}

struct Case {
    arch: RnnArch,
    seq: usize,
    batch: usize,
    lengths: Option<Vec<usize>>,
    weights: Vec<f32>,
    input: Vec<f32>,
    h0: Vec<f32>,
    c0: Vec<f32>,
}

impl Case {
    fn new(
        cell: CellKind,
        proj: usize,
        layers: usize,
        bi: bool,
        lengths: Option<Vec<usize>>,
    ) -> Self {
        let arch = RnnArch {
            cell,
            input_size: 11,
            hidden_size: 24,
            proj_size: proj,
            num_layers: layers,
            bidirectional: bi,
            bias: true,
        };
        let (seq, batch) = (7, 3);
        let bound = 1.0 / (arch.hidden_size as f32).sqrt();
        Self {
            weights: values(arch.weight_count(), 1, bound),
            input: values(seq * batch * arch.input_size, 2, 1.0),
            h0: values(arch.cells() * batch * arch.output_size(), 3, 0.5),
            c0: values(arch.cells() * batch * arch.cell_state_size(), 4, 0.5),
            arch,
            seq,
            batch,
            lengths,
        }
    }

    /// A bidirectional case large enough to run on a team: `batch` rows of lengths up
    /// to 20 (one of 0), 64 inputs, `hidden` units, its values drawn from `seed` on.
    fn team_sized(
        cell: CellKind,
        proj: usize,
        layers: usize,
        batch: usize,
        hidden: usize,
        seed: u64,
    ) -> Self {
        let lengths = (0..batch)
            .map(|b| [20, 13, 0, 20, 7, 1, 20, 19][b % 8])
            .collect();
        let mut case = Case::new(cell, proj, layers, true, Some(lengths));
        case.arch.input_size = 64;
        case.arch.hidden_size = hidden;
        case.seq = 20;
        case.batch = batch;
        let arch = &case.arch;
        let bound = 1.0 / (arch.hidden_size as f32).sqrt();
        case.weights = values(arch.weight_count(), seed, bound);
        case.input = values(case.seq * batch * arch.input_size, seed + 1, 1.0);
        case.h0 = values(arch.cells() * batch * arch.output_size(), seed + 2, 0.5);
        case.c0 = values(arch.cells() * batch * arch.cell_state_size(), seed + 3, 0.5);
        case
    }

    fn call(&self) -> RnnCall<'_, f32> {
        RnnCall {
            arch: &self.arch,
            seq_len: self.seq,
            batch: self.batch,
            lengths: self.lengths.as_deref(),
            input: &self.input,
            input_strides: None,
            weights: &self.weights,
            h0: &self.h0,
            c0: &self.c0,
            dropout_masks: &[],
            threads: 1,
        }
    }
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).fold(0.0, |m, (x, y)| m.max((x - y).abs()))
}

fn diffs(a: &RnnOutputs<f32>, b: &RnnOutputs<f32>) -> [f32; 3] {
    [
        max_diff(&a.y, &b.y),
        max_diff(&a.h_n, &b.h_n),
        max_diff(&a.c_n, &b.c_n),
    ]
}

#[test]
fn the_int8_forward_is_close_to_the_f32_kernel_on_every_architecture() {
    let cases = [
        ("lstm", Case::new(CellKind::Lstm, 0, 1, false, None)),
        (
            "lstm, 2 layers, bi, lengths",
            Case::new(CellKind::Lstm, 0, 2, true, Some(vec![7, 4, 1])),
        ),
        (
            "lstmp, bi",
            Case::new(CellKind::Lstm, 10, 2, true, Some(vec![3, 7, 6])),
        ),
        ("gru", Case::new(CellKind::Gru, 0, 1, false, None)),
        (
            "gru, 2 layers, bi, lengths",
            Case::new(CellKind::Gru, 0, 2, true, Some(vec![2, 7, 5])),
        ),
    ];
    for (name, case) in &cases {
        let expected = forward(&case.call()).unwrap();
        for levels in [QuantLevels::Full, QuantLevels::Reduced] {
            let model = QuantizedRnn::quantize(&case.arch, &case.weights, levels).unwrap();
            let got = model.forward(&case.call()).unwrap();
            let [dy, dh, dc] = diffs(&got, &expected);
            eprintln!("int8 {name} {levels:?}: max |diff| y {dy:.2e}, h_n {dh:.2e}, c_n {dc:.2e}");
            // Measured on these cases (2026-11-26): at most 3.1e-3 (Full) and 4.9e-3
            // (Reduced, half the levels); the bounds leave 3-4x of that. The bound derived
            // from the roundings, step by step, is still to come.
            let bound = match levels {
                QuantLevels::Full => 0.01,
                QuantLevels::Reduced => 0.02,
            };
            assert!(
                dy.max(dh).max(dc) < bound,
                "{name} {levels:?}: {dy} {dh} {dc}"
            );
            assert!(
                dy > 0.0,
                "{name}: int8 changed nothing: the f32 kernel ran?"
            );
            // Past a row's length: zeros, exactly, as the f32 kernel writes them.
            if let Some(lengths) = &case.lengths {
                let width = case.arch.dirs() * case.arch.output_size();
                for (b, &len) in lengths.iter().enumerate() {
                    for t in len..case.seq {
                        let row = &got.y[(t * case.batch + b) * width..][..width];
                        assert!(row.iter().all(|&v| v == 0.0), "{name}: row {b} step {t}");
                    }
                }
            }
        }
    }
}

#[test]
fn a_row_of_length_0_keeps_its_initial_state_exactly() {
    let case = Case::new(CellKind::Lstm, 0, 2, true, Some(vec![4, 0, 7]));
    let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
    let got = model.forward(&case.call()).unwrap();
    let (p, h) = (case.arch.output_size(), case.arch.hidden_size);
    for cell in 0..case.arch.cells() {
        let at = |size: usize| (cell * case.batch + 1) * size;
        assert_eq!(
            got.h_n[at(p)..][..p],
            case.h0[at(p)..][..p],
            "h_n of cell {cell}"
        );
        assert_eq!(
            got.c_n[at(h)..][..h],
            case.c0[at(h)..][..h],
            "c_n of cell {cell}"
        );
    }
}

#[test]
fn a_batch_first_input_gives_the_sequence_major_results() {
    let case = Case::new(CellKind::Gru, 0, 1, true, None);
    let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
    let expected = model.forward(&case.call()).unwrap();
    let i = case.arch.input_size;
    let mut batch_first = vec![0.0; case.input.len()];
    for t in 0..case.seq {
        for b in 0..case.batch {
            batch_first[(b * case.seq + t) * i..][..i]
                .copy_from_slice(&case.input[(t * case.batch + b) * i..][..i]);
        }
    }
    let call = RnnCall {
        input: &batch_first,
        input_strides: Some(InputStrides::batch_first(case.seq, i)),
        ..case.call()
    };
    assert_eq!(model.forward(&call).unwrap(), expected);
}

#[test]
fn int8_weights_take_a_quarter_of_the_f32_bytes() {
    let arch = RnnArch {
        cell: CellKind::Lstm,
        input_size: 256,
        hidden_size: 256,
        proj_size: 0,
        num_layers: 2,
        bidirectional: false,
        bias: true,
    };
    let weights = values(arch.weight_count(), 5, 0.06);
    let model = QuantizedRnn::quantize(&arch, &weights, QuantLevels::Full).unwrap();
    let ratio = model.weight_bytes() as f64 / (4 * arch.weight_count()) as f64;
    // int8 values, plus a scale per row and the biases in f32.
    assert!((0.25..0.26).contains(&ratio), "{ratio}");
}

#[test]
fn bad_calls_and_weights_are_named_errors() {
    let case = Case::new(CellKind::Lstm, 0, 1, false, None);
    let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
    let other = RnnArch {
        hidden_size: 12,
        ..case.arch.clone()
    };
    let err: CallError = model
        .forward(&RnnCall {
            arch: &other,
            ..case.call()
        })
        .unwrap_err();
    assert_eq!(err.argument, "arch");
    let mask = [1.0f32; 3];
    let masks = [&mask[..]];
    let err = model
        .forward(&RnnCall {
            dropout_masks: &masks,
            ..case.call()
        })
        .unwrap_err();
    assert_eq!(
        (err.argument, err.actual.as_str()),
        ("dropout_masks", "1 masks")
    );
    let err = model
        .forward(&RnnCall {
            input: &case.input[1..],
            ..case.call()
        })
        .unwrap_err();
    assert_eq!(err.argument, "input");
    // Values that are not finite, in the input and in each part of the state.
    let (mut input, mut h0, mut c0) = (case.input.clone(), case.h0.clone(), case.c0.clone());
    (input[4], h0[2], c0[3]) = (f32::NAN, f32::INFINITY, f32::NAN);
    let bad_call = |input: &[f32], h0: &[f32], c0: &[f32]| {
        let call = RnnCall {
            input,
            h0,
            c0,
            ..case.call()
        };
        model.forward(&call).unwrap_err()
    };
    let err = bad_call(&input, &case.h0, &case.c0);
    let i = case.arch.input_size;
    let (t, b) = (4 / i / case.batch, 4 / i % case.batch);
    assert_eq!(
        (err.argument, err.actual),
        (
            "input",
            format!("NaN at index 4 (step {t}, row {b}, feature {})", 4 % i)
        )
    );
    let err = bad_call(&case.input, &h0, &case.c0);
    assert_eq!(
        (err.argument, err.actual.as_str()),
        ("h0", "inf at index 2")
    );
    let err = bad_call(&case.input, &case.h0, &c0);
    assert_eq!(
        (err.argument, err.actual.as_str()),
        ("c0", "NaN at index 3")
    );
    let err =
        QuantizedRnn::quantize(&case.arch, &case.weights[1..], QuantLevels::Full).unwrap_err();
    assert_eq!(err.argument, "weights");
    let mut bad = case.weights.clone();
    bad[5] = f32::INFINITY;
    let err = QuantizedRnn::quantize(&case.arch, &bad, QuantLevels::Full).unwrap_err();
    assert_eq!(err.argument, "weights");
    assert!(err.actual.contains("inf at index 5"), "{err}");
}

#[test]
fn any_number_of_threads_gives_the_same_results() {
    // Large enough that the steps run on a team: at 6, 8 and 32 rows split by rows
    // (each member the whole recurrence of its rows), at 5 rows and at one row of 256
    // units on one team sharing each step's products (the LSTMP's products woken per
    // step, its rows finished after the projection).
    for (cell, proj, batch, hidden) in [
        (CellKind::Lstm, 0, 1, 256),
        (CellKind::Gru, 0, 1, 256),
        (CellKind::Lstm, 0, 5, 128),
        (CellKind::Lstm, 48, 5, 128),
        (CellKind::Gru, 0, 5, 128),
        (CellKind::Lstm, 0, 6, 128),
        (CellKind::Lstm, 0, 8, 128),
        (CellKind::Lstm, 0, 32, 128),
        (CellKind::Lstm, 48, 32, 128),
        (CellKind::Gru, 0, 32, 128),
    ] {
        let case = Case::team_sized(cell, proj, 2, batch, hidden, 6);
        let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
        let one = model.forward(&case.call()).unwrap();
        for threads in [2, 3] {
            let call = RnnCall {
                threads,
                ..case.call()
            };
            let what = format!("{cell:?}, proj {proj}, batch {batch}, {threads} threads");
            assert_eq!(model.forward(&call).unwrap(), one, "{what}");
        }
        let expected = forward(&case.call()).unwrap();
        let [dy, dh, dc] = diffs(&one, &expected);
        assert!(dy.max(dh).max(dc) < 0.01, "{cell:?} {proj}: {dy} {dh} {dc}");
    }
}

#[test]
fn rows_that_change_hands_between_chunks_give_the_same_results() {
    use crate::int8::direction::test_skew::{MOVES, SKEWED};
    use std::sync::atomic::Ordering;
    // 32 rows take chunks of 8 steps: 20 steps are 3 chunks, and with the timings
    // skewed the rows go between the two members at both chunk starts between.
    SKEWED.store(true, Ordering::Relaxed);
    let moves_before = MOVES.load(Ordering::Relaxed);
    for (cell, proj) in [
        (CellKind::Lstm, 0),
        (CellKind::Lstm, 48),
        (CellKind::Gru, 0),
    ] {
        let case = Case::team_sized(cell, proj, 1, 32, 128, 16);
        let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
        let one = model.forward(&case.call()).unwrap();
        let two = RnnCall {
            threads: 2,
            ..case.call()
        };
        assert_eq!(model.forward(&two).unwrap(), one, "{cell:?}, proj {proj}");
    }
    SKEWED.store(false, Ordering::Relaxed);
    // Each call moved rows at both chunk starts of both directions.
    assert!(MOVES.load(Ordering::Relaxed) >= moves_before + 3 * 2 * 2);
}

#[test]
fn a_recycled_activation_buffer_gives_the_results_of_a_fresh_one() {
    // A layer input of 40 · 16 rows of 64 values (40 KiB quantized) goes through the
    // crate's buffer cache, which hands the next call the bytes this one left.
    let mut case = Case::new(CellKind::Lstm, 0, 2, true, None);
    case.arch.input_size = 64;
    (case.seq, case.batch) = (40, 16);
    let arch = &case.arch;
    case.weights = values(arch.weight_count(), 11, 0.2);
    case.h0 = values(arch.cells() * case.batch * arch.output_size(), 12, 0.5);
    case.c0 = values(arch.cells() * case.batch * arch.cell_state_size(), 13, 0.5);
    let model = QuantizedRnn::quantize(&case.arch, &case.weights, QuantLevels::Full).unwrap();
    let inputs = [14, 15].map(|seed| values(case.seq * case.batch * 64, seed, 1.0));
    let run = |input: &[f32]| {
        let call = RnnCall {
            input,
            ..case.call()
        };
        model.forward(&call).unwrap()
    };
    crate::release_cached_buffers();
    let fresh = run(&inputs[1]);
    run(&inputs[0]);
    assert_eq!(run(&inputs[1]), fresh);
}
