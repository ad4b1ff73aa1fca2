//! ONNX: PyTorch-exported `LSTM` / `GRU` nodes against ONNX Runtime (fixtures of
//! `tests/fixtures/onnx/`, `make_fixtures.py`; constant initial states, `make_states.py`),
//! lengths included, the attributes refused, and damaged files.

use std::path::PathBuf;

use burn::backend::{Flex, NdArray};
use burn_lstm::{
    CellKind, CudnnCompatibleLstm, OnnxModel, RecurrentSelection, RnnBackend, RnnError,
};

use super::io::{Loaded, cases, check, fixture};
use super::{F32_TOL, F64_TOL};
use crate::common::to_f64;

fn path(name: &str) -> PathBuf {
    fixture("onnx", name)
}

const GOLDEN: &[&str] = &[
    "lstm_bi2.onnx",
    "gru2.onnx",
    "lstm_lens.onnx",
    "gru_lens.onnx",
    // PyTorch's default exporter: links folded to static or computed sizes, weights in
    // external data, the default state as a constant.
    "lstm_bi2_dynamo.onnx",
    "gru2_dynamo.onnx",
    "lstm_bi2_dynamo_dynamic.onnx",
    // Keras layers converted by tf2onnx: links by Squeeze and Transposes, or by
    // directions sliced and joined.
    "lstm2_tf2onnx.onnx",
    "bilstm2_tf2onnx.onnx",
    // Weights as graph inputs with defaults (keep_initializers_as_inputs=True).
    "gru2_input_defaults.onnx",
    // Non-zero constant initial states (make_states.py): initializers, a Constant
    // node, a graph input's default, an upper node without `initial_c`.
    "lstm_states.onnx",
    "gru_states.onnx",
    // A Keras LSTM's learned initial state, folded into constants by tf2onnx.
    "lstm_state_tf2onnx.onnx",
];

fn golden<B: RnnBackend>(label: &str, device: &B::Device, suffix: &str, tol: f64) {
    let mut worst = 0.0f64;
    for file in GOLDEN {
        let model = OnnxModel::open(path(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        for case in cases(&path(file)) {
            let module = Loaded::<B>::onnx(&model, &case, device);
            let ours = super::io::run(&module, &case, device);
            worst = worst.max(check(
                &format!("{label} {file}"),
                &case,
                &ours,
                suffix,
                false,
                tol,
            ));
        }
    }
    println!("{label}: largest error against the reference {worst:.2e}");
}

#[test]
fn onnx_golden_f32_flex() {
    golden::<Flex>("flex f32", &Default::default(), "", F32_TOL);
}

#[test]
fn onnx_golden_f32_ndarray() {
    golden::<NdArray<f32>>("ndarray f32", &Default::default(), "", F32_TOL);
}

#[test]
fn onnx_golden_f64() {
    if lstm_cpu::reran_in_child(
        module_path!(),
        "onnx_golden_f64",
        &[("BURN_LSTM_IMPORT_F64", "1")],
    ) {
        return;
    }
    golden::<NdArray<f64>>("ndarray f64", &Default::default(), "_f64", F64_TOL);
    golden::<Flex>("flex f64", &crate::common::flex_f64(), "_f64", F64_TOL);
}

#[test]
fn nodes_describe_the_graph() {
    let model = OnnxModel::open(path("lstm_lens.onnx")).unwrap();
    let nodes = model.nodes();
    assert_eq!(nodes.len(), 1);
    let node = nodes[0];
    assert_eq!(
        (node.cell, node.input_size, node.hidden_size),
        (CellKind::Lstm, 3, 4)
    );
    assert!(node.bidirectional && node.bias && !node.batch_first && node.refusal.is_none());
    assert_eq!(node.sequence_lens.as_deref(), Some("sequence_lens"));
    assert!(node.initial_h.is_some() && node.initial_c.is_some());
    let (_, config) = CudnnCompatibleLstm::<NdArray<f32>>::from_onnx_file(
        path("lstm_bi2.onnx"),
        RecurrentSelection::All,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(
        (config.input_size, config.hidden_size, config.num_layers),
        (4, 5, 2)
    );
    assert!(config.bidirectional && !config.batch_first);
    // One node of the two alone, by index.
    let (_, config) = OnnxModel::open(path("lstm_bi2.onnx"))
        .unwrap()
        .lstm::<NdArray<f32>>(1, &Default::default())
        .unwrap();
    assert_eq!((config.input_size, config.num_layers), (10, 1));
}

#[test]
fn zero_initial_states_are_the_default_state() {
    // PyTorch's default exporter writes the default state as a constant of zeros
    // (static sizes) or expands and slices one (dynamic axes); a state given as a graph
    // input is sliced per layer.
    let initial = |file: &str| -> Vec<(Option<String>, Option<String>)> {
        let model = OnnxModel::open(path(file)).unwrap();
        model
            .nodes()
            .iter()
            .map(|n| (n.initial_h.clone(), n.initial_c.clone()))
            .collect()
    };
    assert_eq!(initial("lstm_bi2_dynamo.onnx"), vec![(None, None); 2]);
    assert_eq!(
        initial("lstm_bi2_dynamo_dynamic.onnx"),
        vec![(None, None); 2]
    );
    let given = initial("gru2_dynamo.onnx");
    assert_eq!(given.len(), 2);
    assert!(
        given.iter().all(|(h, c)| h.is_some() && c.is_none()),
        "{given:?}"
    );
    let given = initial("lstm_bi2.onnx");
    assert!(
        given.iter().all(|(h, c)| h.is_some() && c.is_some()),
        "{given:?}"
    );
}

#[test]
fn constant_initial_states_are_read_and_given_ones_named() {
    let device = Default::default();
    // Zeros (PyTorch's default exporter): no state, the module's default.
    let zeros = OnnxModel::open(path("lstm_bi2_dynamo.onnx")).unwrap();
    let state = zeros.lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device);
    assert!(state.unwrap().is_none());
    // A state the graph takes from its caller (sliced per layer): named, not read.
    let given = OnnxModel::open(path("lstm_bi2.onnx")).unwrap();
    let error = given
        .lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("input initial_h")
            && error.contains("from the graph input 'h0' (through Slice)")
            && error.contains("pass its values as the module's state"),
        "{error}"
    );
    // Constants: the bottom node's initializers, the upper one's Constant node and its
    // missing initial_c as zeros, stacked bottom first.
    let constants = OnnxModel::open(path("lstm_states.onnx")).unwrap();
    let nodes = constants.nodes();
    assert_eq!(
        nodes
            .iter()
            .map(|n| (n.initial_h.as_deref(), n.initial_c.as_deref()))
            .collect::<Vec<_>>(),
        vec![(Some("l0_h0"), Some("l0_c0")), (Some("l1_h0"), None)]
    );
    let state = constants
        .lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap()
        .unwrap();
    assert_eq!(state.hidden.dims(), [4, 3, 4]);
    let cell = state.cell.into_data().to_vec::<f32>().unwrap();
    assert!(cell[..24].iter().all(|v| *v != 0.0) && cell[24..].iter().all(|v| *v == 0.0));
    // tf2onnx's learned state for any batch: tiled when the graph runs, named with its
    // constant and what to do.
    let dynamic = OnnxModel::open(path("lstm_state_dyn_tf2onnx.onnx")).unwrap();
    let error = dynamic
        .lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("from the constant") && error.contains("export with a fixed batch size"),
        "{error}"
    );
}

#[test]
fn attributes_cudnn_cannot_run_are_refused() {
    let model = OnnxModel::open(path("refused.onnx")).unwrap();
    let device = Default::default();
    model
        .lstm::<NdArray<f32>>("fine", &device)
        .expect("a standard LSTM node loads");
    model
        .gru::<NdArray<f32>>("gru_fine", &device)
        .expect("a GRU with linear_before_reset=1 loads");
    for name in ["lower_case", "empty_list", "zero_peepholes"] {
        model
            .lstm::<NdArray<f32>>(name, &device)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let cases: &[(&str, &[&str])] = &[
        (
            "peephole",
            &["'peephole' input P", "peephole", "got 'peephole_P'"],
        ),
        ("clip", &["'clip' clip", "got 3"]),
        ("input_forget", &["input_forget", "got 1"]),
        (
            "relu",
            &["activations", "\"Sigmoid\", \"Tanh\", \"Tanh\"", "\"Relu\""],
        ),
        (
            "reverse",
            &["direction", "\"bidirectional\"", "got \"reverse\""],
        ),
        (
            "linear_before_reset_0",
            &["linear_before_reset", "1 (", "got 0"],
        ),
    ];
    for (name, parts) in cases {
        let node = model.node(name).expect("the node");
        let listed = node.refusal.clone().expect("a refusal");
        let e = match node.cell {
            CellKind::Lstm => model.lstm::<NdArray<f32>>(*name, &device).err(),
            CellKind::Gru => model.gru::<NdArray<f32>>(*name, &device).err(),
        }
        .expect("refused");
        assert_eq!(e, listed);
        let e = e.to_string();
        assert!(e.contains("refused.onnx"), "{e}");
        for part in *parts {
            assert!(e.contains(part), "{name}: {e:?} lacks {part:?}");
        }
    }
    // Nodes side by side on one input are no stack.
    let e = model
        .lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(vec!["fine".into(), "fine".into()]),
            &device,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "ONNX node 'fine' input size (stacked on 'fine')`: expected 2 (the output of 'fine'), got 3"
        ),
        "{e}"
    );
    let e = model
        .gru::<NdArray<f32>>("fine", &device)
        .unwrap_err()
        .to_string();
    assert!(e.contains("OnnxModel::lstm"), "{e}");
}

#[test]
fn damaged_files_are_errors_never_panics() {
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-import-onnx-")
        .tempdir()
        .unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let e = OnnxModel::open(write("text.onnx", b"\xff\xff\xff\xff not protobuf")).unwrap_err();
    assert!(
        matches!(e, RnnError::Io { .. }) && e.to_string().contains("not an ONNX model"),
        "{e}"
    );
    let bytes = std::fs::read(path("lstm_bi2.onnx")).unwrap();
    // The stack's parameters in the canonical order, or why it does not load.
    let weights = |model: &OnnxModel| {
        model
            .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
            .map(|(m, _)| to_f64(m.flat_weights()))
    };
    let intact = weights(&OnnxModel::open(path("lstm_bi2.onnx")).unwrap()).unwrap();
    let mut refused = 0;
    for k in 1..24 {
        let cut = bytes.len() * k / 24;
        let copy = write(&format!("cut-{cut}.onnx"), &bytes[..cut]);
        // Either the file or the stack is refused, or the stack has the whole file's
        // weights.
        match OnnxModel::open(&copy).and_then(|model| weights(&model)) {
            Err(_) => refused += 1,
            Ok(loaded) => assert_eq!(loaded, intact, "cut at {cut}"),
        }
    }
    assert!(refused > 0, "no cut refused");
}

#[test]
fn stacks_link_only_through_the_folding_pytorch_exports() {
    // links.onnx: `{case}_lo` feeds `{case}_up` through a folding of its `Y`.
    let model = OnnxModel::open(path("links.onnx")).unwrap();
    let device = Default::default();
    let stack = |case: &str| {
        model.lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(vec![format!("{case}_lo"), format!("{case}_up")]),
            &device,
        )
    };
    for case in [
        "transpose_reshape",
        "transpose_identity_reshape",
        "squeeze",
        "layout1_reshape",
        "inferred_batch",
        "static_sizes",
        "layout1_static_sizes",
        "computed_slices",
        "computed_gathers",
        "tf2onnx_squeeze",
        "tf2onnx_concat",
    ] {
        let (_, config) = stack(case).unwrap_or_else(|e| panic!("{case}: {e}"));
        assert_eq!(config.num_layers, 2, "{case}");
    }
    // Each of the right size, with directions and batch rows mixed (or the sequence
    // axis removed): refused, naming the nodes and the layout they give.
    for (case, expected, actual) in [
        (
            "reshape_only",
            "folded into the features, [seq, batch, dirs·hidden] (as PyTorch exports a stack: Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1])",
            "got Y through Reshape to [0, 0, -1], which gives [seq, dirs, batch·hidden]",
        ),
        (
            "flattened",
            "[seq, batch, dirs·hidden]",
            "got Y through Transpose (perm 0, 2, 1, 3) then Reshape to [-1, 4], which gives [seq·batch, dirs·hidden]",
        ),
        (
            "squeeze_seq",
            "[seq, batch, dirs·hidden]",
            "got Y through Squeeze on axes [0]: axis 0, which is not of size 1",
        ),
        (
            "layout1_transpose",
            "[batch, seq, dirs·hidden] (as PyTorch exports a stack: Reshape to [0, 0, -1])",
            "got Y through Transpose (perm 0, 2, 1, 3) then Reshape to [0, 0, -1], which gives [batch, dirs, seq·hidden]",
        ),
        // Sizes of batch rows taken as steps: the graph declares seq 5 and batch 2.
        (
            "static_swapped",
            "[seq, batch, dirs·hidden]",
            "got Y through Transpose (perm 0, 2, 1, 3) then Reshape to [2, 5, 4]: a target whose axes do not fall on whole factors",
        ),
        (
            "computed_swapped",
            "[seq, batch, dirs·hidden]",
            "got Y through Transpose (perm 0, 2, 1, 3) then Reshape to [2, 5, 4]: a target whose axes do not fall on whole factors",
        ),
        (
            "squeeze_transposed",
            "[seq, batch, dirs·hidden]",
            "got Y through Squeeze on axes [1] then Transpose (perm 1, 0, 2), which gives [batch, seq, hidden]",
        ),
        (
            "directions_reversed",
            "[seq, batch, dirs·hidden]",
            ": directions joined out of order",
        ),
    ] {
        let e = stack(case).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "ONNX node '{case}_up' input X (stacked on '{case}_lo')"
            )),
            "{case}: {e}"
        );
        assert!(e.contains(expected), "{case}: {e}");
        assert!(e.contains(actual), "{case}: {e}");
    }
}

#[test]
fn external_data_is_read_from_the_models_folder_only() {
    let weights = |file: &str| {
        OnnxModel::open(path(file)).and_then(|model| {
            model
                .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
                .map(|(m, _)| to_f64(m.flat_weights()))
        })
    };
    let inline = weights("lstm_bi2.onnx").unwrap();
    assert_eq!(weights("external.onnx").unwrap(), inline);
    for (file, part) in [
        (
            "external_escape.onnx",
            "external data location '../external.onnx.data' outside the model's folder",
        ),
        (
            "external_short.onnx",
            "length 1000000 for 320 bytes of values",
        ),
    ] {
        let e = weights(file).unwrap_err().to_string();
        assert!(e.contains(part), "{file}: {e}");
    }
}

#[test]
fn float16_and_bfloat16_weights_load_exactly() {
    use burn::tensor::{bf16, f16};
    let device = Default::default();
    let lstm = |file: &str| {
        OnnxModel::open(path(file))
            .unwrap()
            .lstm::<NdArray<f64>>(RecurrentSelection::All, &device)
            .map(|(m, _)| to_f64(m.flat_weights()))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    let gru = |file: &str| {
        OnnxModel::open(path(file))
            .unwrap()
            .gru::<NdArray<f64>>(RecurrentSelection::All, &device)
            .map(|(m, _)| to_f64(m.flat_weights()))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    // The float32 weights rounded to the half type (to nearest, ties to even, as numpy
    // and onnx.helper round), then read exactly.
    let f16_of =
        |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| f16::from_f64(x).to_f64()).collect() };
    let bf16_of =
        |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| bf16::from_f64(x).to_f64()).collect() };
    assert_eq!(lstm("lstm_bi2_f16.onnx"), f16_of(lstm("lstm_bi2.onnx")));
    assert_eq!(gru("gru2_bf16.onnx"), bf16_of(gru("gru2.onnx")));
}

#[test]
fn changed_bytes_are_errors_or_other_models_never_panics() {
    // Every file the importer follows a graph of, each byte of a spread of positions
    // changed (the external data beside the dynamo file unchanged): opening, loading
    // every stack and node and reading their initial states give a value or an error.
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-import-onnx-mutated-")
        .tempdir()
        .unwrap();
    let device = Default::default();
    let data = "lstm_bi2_dynamo_dynamic.onnx.data";
    std::fs::copy(path(data), dir.path().join(data)).unwrap();
    let mut opened = 0;
    for file in [
        "lstm_bi2_dynamo_dynamic.onnx",
        "bilstm2_tf2onnx.onnx",
        "links.onnx",
        "gru2_input_defaults.onnx",
        "lstm_states.onnx",
        "gru_states.onnx",
        "lstm_state_dyn_tf2onnx.onnx",
    ] {
        let bytes = std::fs::read(path(file)).unwrap();
        let step = (bytes.len() / 400).max(1);
        for (k, at) in (0..bytes.len()).step_by(step).enumerate() {
            let mut changed = bytes.clone();
            changed[at] = [0x00, 0xff, changed[at] ^ 0x01, 0x80][k % 4];
            let copy = dir.path().join(format!("m-{at}-{file}"));
            std::fs::write(&copy, &changed).unwrap();
            let Ok(model) = OnnxModel::open(&copy) else {
                continue;
            };
            opened += 1;
            let count = model.nodes().len();
            let _ = model.lstm::<NdArray<f32>>(RecurrentSelection::All, &device);
            let _ = model.gru::<NdArray<f32>>(RecurrentSelection::All, &device);
            let _ = model.lstm_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device);
            let _ = model.gru_initial_state::<NdArray<f32>>(RecurrentSelection::All, &device);
            for i in 0..count {
                let _ = model.lstm::<NdArray<f32>>(i, &device);
                let _ = model.lstm_initial_state::<NdArray<f32>>(i, &device);
            }
            std::fs::remove_file(&copy).unwrap();
        }
    }
    assert!(opened > 100, "{opened} changed files opened");
}
