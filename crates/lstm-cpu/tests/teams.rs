//! Any thread count gives the numbers of one thread, and no team shape hangs: a team
//! splits the hidden units and, with a projection, the projected state; the projected
//! state can have fewer panels than the team has members (seen hanging on a 16-core
//! machine, and with 2 threads when the projection is one panel wide). The forward's
//! team splits the batch rows instead where each member gets at least 4 rows and `W_hh`
//! is small (batch 25 here: with 6 threads its rows split into only 5 parts); batch 6
//! keeps the split by units. Where the split is by rows, a bidirectional layer on 2 or 3
//! threads runs its two directions at once, one thread each (batch 25). Weights packed
//! before the call serve every team split.

use std::sync::mpsc;
use std::time::Duration;

mod common;

use common::uniform;
use lstm_cpu::{OutputGrads, PackedWeights, RnnArch, RnnCall};

/// y, h_n, c_n, and the gradients of the input and the weights of one training call.
fn run(arch: &RnnArch, batch: usize, seq: usize, threads: usize) -> Vec<Vec<f32>> {
    let out = if arch.proj_size > 0 {
        arch.proj_size
    } else {
        arch.hidden_size
    };
    let cells = arch.num_layers * if arch.bidirectional { 2 } else { 1 };
    let input = uniform(seq * batch * arch.input_size, 1.0, 1);
    let weights = uniform(
        arch.weight_count(),
        1.0 / (arch.hidden_size as f32).sqrt(),
        2,
    );
    let h0 = uniform(cells * batch * out, 0.5, 3);
    let c0 = uniform(cells * batch * arch.cell_state_size(), 0.5, 4);
    let lengths: Vec<usize> = (0..batch).map(|b| 1 + (b * 5) % seq).collect();
    let call = RnnCall {
        arch,
        seq_len: seq,
        batch,
        lengths: Some(&lengths),
        input: &input,
        input_strides: None,
        weights: &weights,
        h0: &h0,
        c0: &c0,
        dropout_masks: &[],
        threads,
    };
    let (outputs, tape) = lstm_cpu::forward_train(&call).expect("valid call");
    let inference = lstm_cpu::forward(&call).expect("valid call");
    assert_eq!(
        inference.y, outputs.y,
        "inference and training forward agree"
    );
    // Weights packed beforehand (for every team split) give the very same numbers.
    let packed = PackedWeights::new(arch, &weights).expect("valid weights");
    let from_packed = lstm_cpu::forward_packed(
        &RnnCall {
            weights: &[],
            ..call
        },
        &packed,
    )
    .expect("valid call");
    assert_eq!(
        (&from_packed.y, &from_packed.h_n, &from_packed.c_n),
        (&inference.y, &inference.h_n, &inference.c_n),
        "{threads} threads: packed beforehand and packed by the call agree"
    );
    let dy = uniform(outputs.y.len(), 1.0, 5);
    let dh = uniform(outputs.h_n.len(), 1.0, 6);
    let dc = uniform(outputs.c_n.len(), 1.0, 7);
    let grads = OutputGrads {
        dy: &dy,
        dh_n: &dh,
        dc_n: &dc,
        input_wanted: true,
    };
    let gradients = lstm_cpu::backward(&call, tape, grads).expect("valid call");
    // Without the input's gradient: nothing of it, the very same others.
    let (_, tape) = lstm_cpu::forward_train(&call).expect("valid call");
    let without = OutputGrads {
        input_wanted: false,
        ..grads
    };
    let partial = lstm_cpu::backward(&call, tape, without).expect("valid call");
    assert!(partial.input.is_empty(), "no input gradient was asked for");
    assert_eq!(
        (&partial.weights, &partial.h0, &partial.c0),
        (&gradients.weights, &gradients.h0, &gradients.c0),
        "{threads} threads: the other gradients do not depend on the input's"
    );
    vec![
        outputs.y,
        outputs.h_n,
        outputs.c_n,
        gradients.input,
        gradients.weights,
        gradients.h0,
        gradients.c0,
    ]
}

/// `run` on another thread, failing instead of hanging the test run.
fn run_within(arch: RnnArch, batch: usize, seq: usize, threads: usize) -> Vec<Vec<f32>> {
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = send.send(run(&arch, batch, seq, threads));
    });
    receive
        .recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("{threads} threads: the call did not finish in 120 s"))
}

#[test]
fn every_thread_count_matches_one_thread() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "every_thread_count_matches_one_thread",
    );
    for (proj_size, bidirectional) in [(16, false), (24, true), (0, true), (200, false)] {
        let arch = RnnArch {
            cell: lstm_cpu::CellKind::Lstm,
            input_size: 48,
            hidden_size: 256,
            proj_size,
            num_layers: 2,
            bidirectional,
            bias: true,
        };
        check_teams(&arch, &[2, 3, 5, 6, 8, 16]);
    }
    // Hidden sizes that are no multiple of a panel's width (16 or 32 units): the last
    // block's gate columns share panels (`gemm/packing.rs`'s gathered panels), 8 units of each
    // gate at H = 72, 20 (AVX-512) or 4 (AVX2) at H = 52, where a panel spans gates.
    for (hidden_size, proj_size, bidirectional) in [(72, 0, true), (52, 24, false)] {
        let arch = RnnArch {
            cell: lstm_cpu::CellKind::Lstm,
            input_size: 48,
            hidden_size,
            proj_size,
            num_layers: 2,
            bidirectional,
            bias: true,
        };
        check_teams(&arch, &[2, 3, 5]);
    }
}

/// The GRU's teams: its recurrent product goes to a buffer of its own and its backward
/// multiplies the `n` rows of `W_hh` apart, under both splits and with gathered panels
/// (three gates per block: H = 72 leaves 8 units of each, H = 52 a panel that spans
/// gates).
#[test]
fn every_thread_count_matches_one_thread_for_a_gru() {
    lstm_cpu::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "every_thread_count_matches_one_thread_for_a_gru",
    );
    for (hidden_size, bidirectional, counts) in [
        (256, true, &[2, 3, 6, 16][..]),
        (72, false, &[2, 3, 5]),
        (52, true, &[2, 5]),
    ] {
        let arch = RnnArch {
            cell: lstm_cpu::CellKind::Gru,
            input_size: 48,
            hidden_size,
            proj_size: 0,
            num_layers: 2,
            bidirectional,
            bias: true,
        };
        check_teams(&arch, counts);
    }
}

/// Every thread count of `counts` gives one thread's numbers, split by rows (batch 25)
/// and by units (batch 6).
fn check_teams(arch: &RnnArch, counts: &[usize]) {
    let RnnArch {
        hidden_size,
        proj_size,
        bidirectional,
        ..
    } = *arch;
    for (batch, seq) in [(25, 6), (6, 6)] {
        let reference = run_within(arch.clone(), batch, seq, 1);
        for &threads in counts {
            let got = run_within(arch.clone(), batch, seq, threads);
            for (k, (a, b)) in got.iter().zip(&reference).enumerate() {
                let worst = a
                    .iter()
                    .zip(b)
                    .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
                assert!(
                    worst <= 1e-5,
                    "batch {batch}, hidden {hidden_size}, proj {proj_size}, bidirectional {bidirectional}, {threads} threads: output {k} differs by {worst}"
                );
            }
        }
    }
}

#[test]
fn packed_weights_of_another_architecture_are_an_error() {
    let arch = RnnArch {
        cell: lstm_cpu::CellKind::Lstm,
        input_size: 4,
        hidden_size: 8,
        proj_size: 0,
        num_layers: 1,
        bidirectional: false,
        bias: true,
    };
    let other = RnnArch {
        cell: lstm_cpu::CellKind::Lstm,
        hidden_size: 16,
        ..arch.clone()
    };
    let packed = PackedWeights::new(&other, &uniform(other.weight_count(), 0.1, 1)).unwrap();
    let zeros = vec![0.0f32; 8];
    let input = uniform(4 * 2, 1.0, 2);
    let call = RnnCall {
        arch: &arch,
        seq_len: 2,
        batch: 1,
        lengths: None,
        input: &input,
        input_strides: None,
        weights: &[],
        h0: &zeros,
        c0: &zeros,
        dropout_masks: &[],
        threads: 1,
    };
    let err = lstm_cpu::forward_packed(&call, &packed).unwrap_err();
    assert_eq!(err.argument, "packed");
    assert!(err.actual.contains("hidden_size: 16"), "{err}");
    let short = PackedWeights::new(&arch, &[0.0f32; 3]).unwrap_err();
    assert_eq!(short.argument, "weights");
}
