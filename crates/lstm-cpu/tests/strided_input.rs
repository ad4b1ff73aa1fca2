//! An input given through [`InputStrides`] (batch-first, or rows with gaps between them)
//! gives the outputs of the same values given sequence-major: inference reads it in
//! place (its products group the rows otherwise, so values may round differently, within
//! a few units in the last place), training copies it into the tape (the very same
//! numbers, gradients included). The gaps hold NaN: a read outside the rows would show.
//! Layouts and shapes cover every grouping of a chunk's rows (one group; a batch row's
//! steps; a step's rows, when they are closer or a chunk's steps too few for a tile),
//! one step per chunk, both team
//! splits, a GRU, a projection and two bidirectional layers.

mod common;

use common::uniform;
use lstm_cpu::{CellKind, InputStrides, OutputGrads, RnnArch, RnnCall, RnnOutputs};

fn arch(
    cell: CellKind,
    input: usize,
    hidden: usize,
    proj: usize,
    layers: usize,
    bidir: bool,
) -> RnnArch {
    RnnArch {
        cell,
        input_size: input,
        hidden_size: hidden,
        proj_size: proj,
        num_layers: layers,
        bidirectional: bidir,
        bias: true,
    }
}

/// `seq_major` (`[T, B, I]`) stored at `strides`, NaN everywhere else.
fn stored_at(seq_major: &[f32], t: usize, b: usize, i: usize, strides: InputStrides) -> Vec<f32> {
    let span = (t - 1) * strides.step + (b - 1) * strides.row + i;
    let mut stored = vec![f32::NAN; span];
    for (at, row) in seq_major.chunks_exact(i).enumerate() {
        let start = (at / b) * strides.step + (at % b) * strides.row;
        stored[start..start + i].copy_from_slice(row);
    }
    stored
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (at, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
            "{what}: value {at}: {g} against {w}"
        );
    }
}

fn check(arch: &RnnArch, batch: usize, seq: usize, threads: usize) {
    let i = arch.input_size;
    let out = arch.output_size();
    let input = uniform(seq * batch * i, 1.0, 1);
    let weights = uniform(
        arch.weight_count(),
        1.0 / (arch.hidden_size as f32).sqrt(),
        2,
    );
    let h0 = uniform(arch.cells() * batch * out, 0.5, 3);
    let c0 = uniform(arch.cells() * batch * arch.cell_state_size(), 0.5, 4);
    let call = RnnCall {
        arch,
        seq_len: seq,
        batch,
        lengths: None,
        input: &input,
        input_strides: None,
        weights: &weights,
        h0: &h0,
        c0: &c0,
        dropout_masks: &[],
        threads,
    };
    let want = lstm_cpu::forward(&call).expect("valid call");
    let (trained, tape) = lstm_cpu::forward_train(&call).expect("valid call");
    let dy = uniform(trained.y.len(), 1.0, 5);
    let dh = uniform(trained.h_n.len(), 1.0, 6);
    let dc = uniform(trained.c_n.len(), 1.0, 7);
    let grads = OutputGrads {
        dy: &dy,
        dh_n: &dh,
        dc_n: &dc,
        input_wanted: true,
    };
    let want_grads = lstm_cpu::backward(&call, tape, grads).expect("valid backward");
    let packed = lstm_cpu::PackedWeights::new(arch, &weights).expect("valid weights");

    let layouts = [
        ("batch-first", InputStrides::batch_first(seq, i)),
        // Gaps between steps and between batch rows.
        (
            "gapped",
            InputStrides {
                step: i + 3,
                row: seq * (i + 3) + 5,
            },
        ),
        // Sequence-major rows with a gap after each and more between steps: a
        // step's rows are the closer, so they make the groups.
        (
            "steps apart",
            InputStrides {
                step: batch * (i + 2) + 7,
                row: i + 2,
            },
        ),
        // Sequence-major rows with a gap after each: one group, steps being `batch`
        // rows apart.
        (
            "seq-major with gaps",
            InputStrides {
                step: batch * (i + 2),
                row: i + 2,
            },
        ),
    ];
    for (name, strides) in layouts {
        let what = format!("{name} {batch}x{seq} {arch:?} threads {threads}");
        let stored = stored_at(&input, seq, batch, i, strides);
        let strided = RnnCall {
            input: &stored,
            input_strides: Some(strides),
            ..call
        };
        let got = lstm_cpu::forward(&strided).expect("valid strided call");
        let from_packed = lstm_cpu::forward_packed(
            &RnnCall {
                weights: &[],
                ..strided
            },
            &packed,
        )
        .expect("valid strided call");
        for (outputs, how) in [(&got, "forward"), (&from_packed, "packed")] {
            let RnnOutputs { y, h_n, c_n } = outputs;
            assert_close(y, &want.y, &format!("{what} {how} y"));
            assert_close(h_n, &want.h_n, &format!("{what} {how} h_n"));
            assert_close(c_n, &want.c_n, &format!("{what} {how} c_n"));
        }
        // Training copies the input sequence-major: the same numbers exactly.
        let (outputs, tape) = lstm_cpu::forward_train(&strided).expect("valid strided call");
        assert_eq!(outputs, trained, "{what}: training forward");
        let got_grads = lstm_cpu::backward(&strided, tape, grads).expect("valid backward");
        assert_eq!(got_grads, want_grads, "{what}: gradients");
    }
}

#[test]
fn strided_inputs_give_the_outputs_of_sequence_major_ones() {
    // On every instruction set the CPU has: the chunks of a grouped input are whole calls
    // of the kernel's rows (16 steps → 18 on AVX2).
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "strided_inputs_give_the_outputs_of_sequence_major_ones",
    );
    let lstm = CellKind::Lstm;
    for threads in [1, 2, 3] {
        // Chunks of 16 steps of 16 rows: grouped by batch row (the row split's team).
        check(&arch(lstm, 24, 16, 0, 1, false), 16, 50, threads);
        // Chunks of 8 steps of 32 rows.
        check(&arch(lstm, 20, 40, 0, 1, false), 32, 12, threads);
        // Chunks of 4 steps of 64 rows: too few steps to fill a tile, grouped by step.
        check(&arch(lstm, 12, 16, 0, 1, false), 64, 6, threads);
        // A projection, two bidirectional layers (the second reads the first's output).
        check(&arch(lstm, 9, 40, 7, 2, true), 5, 13, threads);
        check(&arch(CellKind::Gru, 33, 20, 0, 2, false), 3, 9, threads);
        // One batch row, and one step.
        check(&arch(lstm, 10, 12, 0, 1, false), 1, 6, threads);
        check(&arch(lstm, 10, 12, 0, 1, false), 4, 1, threads);
    }
}

#[test]
fn a_strided_input_must_lie_in_its_slice_and_its_tape_keep_a_copy() {
    let arch = arch(CellKind::Lstm, 4, 3, 0, 1, false);
    let (seq, batch) = (5, 2);
    let input = uniform(seq * batch * 4, 1.0, 1);
    let weights = uniform(arch.weight_count(), 0.5, 2);
    let zeros = vec![0.0f32; batch * 3];
    let seq_major = RnnCall {
        arch: &arch,
        seq_len: seq,
        batch,
        lengths: None,
        input: &input,
        input_strides: None,
        weights: &weights,
        h0: &zeros,
        c0: &zeros,
        dropout_masks: &[],
        threads: 1,
    };
    // The last row (step 4 of batch row 1) starts at 4 * 5 + 20 = 40 and ends at 44,
    // past the 40 values.
    let strides = InputStrides { step: 5, row: 20 };
    let short = RnnCall {
        input_strides: Some(strides),
        ..seq_major
    };
    let err = lstm_cpu::forward(&short).unwrap_err();
    assert_eq!(err.argument, "input");
    assert!(err.expected.contains("at least 44 values"), "{err}");
    assert_eq!(err.actual, "40 values");
    assert!(err.to_string().contains("at least 44"), "{err}");
    let wider = stored_at(&input, seq, batch, 4, InputStrides::batch_first(seq, 4));
    let batch_first = RnnCall {
        input: &wider,
        input_strides: Some(InputStrides::batch_first(seq, 4)),
        ..seq_major
    };
    // Sequence-major strides given explicitly are the layout without strides.
    let explicit = RnnCall {
        input_strides: Some(InputStrides::seq_major(batch, 4)),
        ..seq_major
    };
    assert_eq!(
        lstm_cpu::forward(&explicit).unwrap(),
        lstm_cpu::forward(&seq_major).unwrap()
    );
    // A tape of a sequence-major call has no copy of the input: a strided backward
    // cannot use it.
    let (outputs, tape) = lstm_cpu::forward_train(&seq_major).unwrap();
    let dy = vec![1.0f32; outputs.y.len()];
    let grads = OutputGrads {
        dy: &dy,
        dh_n: &zeros,
        dc_n: &zeros,
        input_wanted: true,
    };
    let err = lstm_cpu::backward(&batch_first, tape, grads).unwrap_err();
    assert_eq!(err.argument, "tape", "{err}");
}
