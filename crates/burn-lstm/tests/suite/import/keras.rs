//! Keras: golden outputs of Keras 3 (torch backend) and Keras 2 (tf-keras) on the
//! fixtures of `tests/fixtures/keras/` (`make_fixtures.py`), the settings refused, and
//! damaged files.

use std::path::PathBuf;

use burn::backend::{Flex, NdArray};
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{
    CellKind, CudnnCompatibleGru, CudnnCompatibleLstm, KerasModel, KerasRecurrentLayer,
    RecurrentSelection, RnnBackend, RnnError, keras_mask_lengths,
};

use super::io::{Loaded, cases, check, fixture};
use super::{F32_TOL, F64_TOL};
use crate::common::to_f64;

fn path(name: &str) -> PathBuf {
    fixture("keras", name)
}

/// Every fixture with outputs, as a user opens it: `(model file, architecture JSON,
/// the layers' names when the file alone does not name them)`. tf-keras's
/// `.weights.h5` names no layer: without the architecture its groups' names stand in.
type Golden = (
    &'static str,
    Option<&'static str>,
    Option<&'static [&'static str]>,
);
const GOLDEN: &[Golden] = &[
    ("k3_lstm_stack.keras", None, None),
    ("k3_bilstm_masked.keras", None, None),
    ("k3_bigru_functional.keras", None, None),
    ("k3_gru_masked.h5", None, None),
    ("k3_no_bias.weights.h5", Some("k3_no_bias.json"), None),
    ("k3_no_bias.weights.h5", None, None),
    ("k2_lstm_gru.h5", None, None),
    ("k2_cudnn.h5", None, None),
    ("k2_bigru_weights.h5", Some("k2_bigru.json"), None),
    ("k2_bigru_weights.h5", None, None),
    ("k2_bigru.weights.h5", Some("k2_bigru.json"), None),
    ("k2_bigru.weights.h5", None, Some(&["bidirectional"])),
    ("k3_nested.keras", None, None),
    ("k3_nested.h5", None, None),
    ("k3_nested.weights.h5", Some("k3_nested.json"), None),
    ("k2_nested.h5", None, None),
    ("k2_nested_weights.h5", None, None),
    ("k2_nested_weights.h5", Some("k2_nested.json"), None),
    ("k2_nested.weights.h5", Some("k2_nested.json"), None),
    ("k3_rnn_cells.keras", None, None),
    ("k3_rnn_cells.h5", None, None),
    ("k2_rnn_cells.h5", None, None),
    ("k2_slots_weights.h5", None, None),
    ("k3_subclassed.keras", None, None),
    ("k3_subclassed.weights.h5", None, None),
    ("k3_subclassed.h5", None, None),
    ("k2_13_stack.keras", None, None),
    ("k2_13_stack.weights.h5", Some("k2_13_stack.json"), None),
];

fn open(file: &str, architecture: Option<&str>) -> KerasModel {
    match architecture {
        Some(json) => KerasModel::open_with_architecture(path(file), path(json)),
        None => KerasModel::open(path(file)),
    }
    .unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Every golden case of every fixture on `B`, against `suffix`'s reference.
fn golden<B: RnnBackend>(label: &str, device: &B::Device, suffix: &str, tol: f64) {
    let mut worst = 0.0f64;
    for &(file, architecture, rename) in GOLDEN {
        let model = open(file, architecture);
        for mut case in cases(&path(file)) {
            if let Some(names) = rename {
                case.select = names.iter().map(|n| n.to_string()).collect();
            }
            let module = Loaded::<B>::keras(&model, &case, device);
            let ours = super::io::run(&module, &case, device);
            let what = format!(
                "{label} {file}{}",
                if architecture.is_some() { "+json" } else { "" }
            );
            worst = worst.max(check(&what, &case, &ours, suffix, true, tol));
        }
    }
    println!("{label}: largest error against Keras {worst:.2e}");
}

#[test]
fn keras_golden_f32_flex() {
    golden::<Flex>("flex f32", &Default::default(), "", F32_TOL);
}

#[test]
fn keras_golden_f32_ndarray() {
    golden::<NdArray<f32>>("ndarray f32", &Default::default(), "", F32_TOL);
}

#[test]
fn keras_golden_f64() {
    if lstm_cpu::reran_in_child(
        module_path!(),
        "keras_golden_f64",
        &[("BURN_LSTM_IMPORT_F64", "1")],
    ) {
        return;
    }
    golden::<NdArray<f64>>("ndarray f64", &Default::default(), "_f64", F64_TOL);
    golden::<Flex>("flex f64", &crate::common::flex_f64(), "_f64", F64_TOL);
}

#[test]
fn layers_describe_the_model_and_configs_follow() {
    let model = KerasModel::open(path("k3_bilstm_masked.keras")).unwrap();
    let layers = model.layers();
    let names: Vec<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["bi_1", "bi_2"]);
    let first = layers[0];
    assert_eq!(first.class_name, "Bidirectional(LSTM)");
    assert_eq!(
        (first.cell, first.input_size, first.units),
        (CellKind::Lstm, 4, 5)
    );
    assert!(first.bidirectional && first.bias && first.return_sequences && first.settings_known);
    assert_eq!(first.mask_source.as_deref(), Some("masking"));
    assert_eq!(first.mask_value, Some(0.0));
    assert_eq!(layers[1].input_size, 10);
    let (lstm, config) = model
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
        .unwrap();
    assert_eq!(
        (config.input_size, config.hidden_size, config.num_layers),
        (4, 5, 2)
    );
    assert!(config.bidirectional && config.batch_first && config.bias);
    assert_eq!(config.dropout, 0.0);
    assert_eq!(lstm.layers.len(), 2);

    let cudnn = KerasModel::open(path("k2_cudnn.h5")).unwrap();
    let classes: Vec<&str> = cudnn
        .layers()
        .iter()
        .map(|l| l.class_name.as_str())
        .collect();
    assert_eq!(classes, ["CuDNNLSTM", "CuDNNGRU"]);
    // A weights-only file without its architecture: read from the weights alone.
    let bare = KerasModel::open(path("k2_bigru_weights.h5")).unwrap();
    let layer = bare.layer("bigru").expect("the layer");
    assert!(!layer.settings_known);
    assert_eq!(
        (layer.cell, layer.units, layer.bidirectional),
        (CellKind::Gru, 4, true)
    );
    // An index counts among the recurrent layers; the Dense head is not one.
    let functional = KerasModel::open(path("k3_bigru_functional.keras")).unwrap();
    let (_, config) = functional
        .gru::<NdArray<f32>>(1, &Default::default())
        .unwrap();
    assert_eq!((config.input_size, config.num_layers), (10, 1));
    // The modules' own shorthands.
    let (_, config) = CudnnCompatibleLstm::<NdArray<f32>>::from_keras_file(
        path("k3_lstm_stack.keras"),
        "lstm_b",
        &Default::default(),
    )
    .unwrap();
    assert_eq!((config.input_size, config.hidden_size), (6, 6));
    let (_, config) = CudnnCompatibleGru::<NdArray<f32>>::from_keras_file(
        path("k2_lstm_gru.h5"),
        "gru",
        &Default::default(),
    )
    .unwrap();
    assert_eq!((config.input_size, config.hidden_size), (5, 5));
}

#[test]
fn mask_lengths_are_keras_masks() {
    let device = Default::default();
    for file in ["k3_bilstm_masked.keras", "k3_gru_masked.h5"] {
        for case in cases(&path(file)).iter().filter(|c| c.has("lengths")) {
            let x = case.tensor::<NdArray<f32>>("x", &device);
            assert_eq!(
                keras_mask_lengths(&x, 0.0).unwrap(),
                case.lengths().unwrap(),
                "{file}"
            );
        }
    }
    // `Masking(0.1)` on float32 input masks the steps equal to 0.1f32 (Keras compares
    // in the input's type), though 0.1f32 is not 0.1.
    let mut values = vec![1.0f32; 2 * 4 * 3];
    values[(4 + 2) * 3..].fill(0.1);
    let x = Tensor::<NdArray<f32>, 3>::from_data(TensorData::new(values, [2, 4, 3]), &device);
    assert_eq!(keras_mask_lengths(&x, 0.1).unwrap(), [4, 2]);
    // A masked step before a valid one: Keras would skip it, lengths cannot say so.
    let mut values = vec![1.0f32; 2 * 4 * 3];
    values[(4 + 1) * 3..(4 + 2) * 3].fill(0.0);
    let x = Tensor::<NdArray<f32>, 3>::from_data(TensorData::new(values, [2, 4, 3]), &device);
    let e = keras_mask_lengths(&x, 0.0).unwrap_err().to_string();
    assert!(
        e.contains("input row 1") && e.contains("step 2 is valid after masked step 1"),
        "{e}"
    );
}

fn refusal(model: &KerasModel, name: &str, cell: CellKind) -> String {
    let device = Default::default();
    let listed = model
        .layer(name)
        .map(|l| l.refusal.clone().expect("a refusal"));
    let error = match cell {
        CellKind::Lstm => model.lstm::<NdArray<f32>>(name, &device).err(),
        CellKind::Gru => model.gru::<NdArray<f32>>(name, &device).err(),
    }
    .unwrap_or_else(|| panic!("{name} loaded"));
    if let Some(listed) = listed {
        assert_eq!(listed, error);
    }
    error.to_string()
}

#[test]
fn settings_cudnn_cannot_run_are_refused() {
    let model = KerasModel::open(path("k3_refused.keras")).unwrap();
    model
        .lstm::<NdArray<f32>>("fine", &Default::default())
        .expect("a standard LSTM loads");
    let cases: &[(&str, CellKind, &[&str])] = &[
        (
            "relu_activation",
            CellKind::Lstm,
            &["'relu_activation' activation", "\"tanh\"", "got \"relu\""],
        ),
        (
            "hard_sigmoid",
            CellKind::Lstm,
            &[
                "recurrent_activation",
                "\"sigmoid\"",
                "got \"hard_sigmoid\"",
            ],
        ),
        (
            "go_backwards",
            CellKind::Lstm,
            &["go_backwards", "Bidirectional", "got true"],
        ),
        ("unroll", CellKind::Lstm, &["'unroll' unroll", "got true"]),
        (
            "stateful",
            CellKind::Lstm,
            &["'stateful' stateful", "got true"],
        ),
        (
            "reset_before",
            CellKind::Gru,
            &["reset_after", "true", "got false"],
        ),
        (
            "merge_sum",
            CellKind::Lstm,
            &["merge_mode", "\"concat\"", "got \"sum\""],
        ),
        (
            "simple_rnn",
            CellKind::Lstm,
            &["'simple_rnn' class", "got SimpleRNN"],
        ),
    ];
    for (name, cell, parts) in cases {
        let e = refusal(&model, name, *cell);
        assert!(e.contains("k3_refused.keras"), "{e}");
        for part in *parts {
            assert!(e.contains(part), "{name}: {e:?} lacks {part:?}");
        }
    }
    // Keras 2's old defaults.
    let model = KerasModel::open(path("k2_refused.h5")).unwrap();
    model
        .lstm::<NdArray<f32>>("fine", &Default::default())
        .unwrap();
    assert!(refusal(&model, "hard_sigmoid", CellKind::Lstm).contains("got \"hard_sigmoid\""));
    assert!(refusal(&model, "reset_before", CellKind::Gru).contains("reset_after"));
}

#[test]
fn stacks_must_be_one_module() {
    let device = Default::default();
    // Parallel branches are no stack.
    let refused = KerasModel::open(path("k3_refused.keras")).unwrap();
    let e = refused
        .lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(vec!["fine".into(), "fine".into()]),
            &device,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "Keras layer 'fine' input size (stacked on 'fine')`: expected 2 (the output of 'fine'), got 3"
        ),
        "{e}"
    );
    // An LSTM under a GRU: one module has one cell.
    let mixed = KerasModel::open(path("k2_lstm_gru.h5")).unwrap();
    let e = mixed
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap_err()
        .to_string();
    assert!(e.contains("'gru'") && e.contains("KerasModel::gru"), "{e}");
    let e = mixed
        .gru::<NdArray<f32>>("lstm", &device)
        .unwrap_err()
        .to_string();
    assert!(e.contains("load it with KerasModel::lstm"), "{e}");
    // Layers named upside down: the upper one reads the model's input, not the lower's
    // output.
    let masked = KerasModel::open(path("k3_gru_masked.h5")).unwrap();
    let e = masked
        .gru::<NdArray<f32>>(
            RecurrentSelection::Stack(vec!["gru_b".into(), "gru_a".into()]),
            &device,
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "Keras layer 'gru_a' input size (stacked on 'gru_b')`: expected 4 (the output of 'gru_b'), got 3"
        ),
        "{e}"
    );
    // Names and indices that are not there.
    let e = masked
        .gru::<NdArray<f32>>("nope", &device)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("'gru_a', 'gru_b'") && e.contains("'nope'"),
        "{e}"
    );
    let e = masked
        .gru::<NdArray<f32>>(7, &device)
        .unwrap_err()
        .to_string();
    assert!(e.contains("an index below 2") && e.contains("got 7"), "{e}");
}

#[test]
fn missing_and_misshapen_weights_are_named() {
    let device = Default::default();
    let model = KerasModel::open(path("k2_missing_bias.h5")).unwrap();
    // The other layer still loads: the refusal is the GRU's alone.
    model.lstm::<NdArray<f32>>("lstm", &device).unwrap();
    let e = model.gru::<NdArray<f32>>("gru", &device).unwrap_err();
    assert!(
        matches!(
            e,
            RnnError::CheckpointTensor {
                problem: "missing",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("bias:0") && e.to_string().contains("'gru'"),
        "{e}"
    );

    let model = KerasModel::open(path("k2_bad_shape.h5")).unwrap();
    let e = model.gru::<NdArray<f32>>("gru", &device).unwrap_err();
    match &e {
        RnnError::ParameterShape {
            name,
            expected,
            actual,
        } => {
            assert!(name.contains("'gru' recurrent_kernel"), "{name}");
            assert_eq!(
                (expected.as_slice(), actual.as_slice()),
                (&[5, 15][..], &[5, 12][..])
            );
        }
        other => panic!("{other:?}"),
    }
}

/// `k2_huge_dataset.h5`: a 17 kB file whose GRU recurrent kernel claims 400,000 x
/// 40,000 values in chunks never written. Reading it is refused before anything of
/// that size is allocated; the file's other layer still loads.
#[test]
fn a_dataset_larger_than_its_file_can_hold_is_refused() {
    let device = Default::default();
    let model = KerasModel::open(path("k2_huge_dataset.h5")).unwrap();
    model.lstm::<NdArray<f32>>("lstm", &device).unwrap();
    let e = model
        .gru::<NdArray<f32>>("gru", &device)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("recurrent_kernel") && e.contains("64000000000 bytes"),
        "{e}"
    );
}

/// `k2_zero_extent.h5`: a weights-only file (units read from the recurrent kernel)
/// whose forward recurrent kernel is an empty dataset of 2^62 rows: a shape error, not
/// an overflow computing the gates' width.
#[test]
fn an_empty_kernel_of_any_extent_is_a_shape_error() {
    let model = KerasModel::open(path("k2_zero_extent.h5")).unwrap();
    let e = model
        .gru::<NdArray<f32>>("bigru", &Default::default())
        .unwrap_err();
    match &e {
        RnnError::ParameterShape { name, actual, .. } => {
            assert!(name.contains("'bigru' recurrent_kernel"), "{name}");
            assert_eq!(actual, &[1usize << 62, 0]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_bidirectional_whose_layers_differ_names_both() {
    let dir = scratch();
    let config = architecture("k3_bilstm_masked.keras");
    // The backward layer without a bias, or with another size: the error shows both
    // layers' settings, which differ in what was edited.
    for (key, value, got) in [
        (
            "use_bias",
            serde_json::Value::from(false),
            "LSTM with 5 units, use_bias false",
        ),
        ("units", 7.into(), "LSTM with 7 units, use_bias true"),
    ] {
        let mut edited = config.clone();
        let bi = layer_mut(&mut edited, "bi_1");
        bi["config"]["backward_layer"]["config"][key] = value;
        let architecture = damaged(
            &dir,
            &format!("bilstm_backward_{key}.json"),
            edited.to_string().as_bytes(),
        );
        let e = edited_refusal("k3_bilstm_masked.keras", architecture, "bi_1");
        assert!(
            e.ends_with(&format!(
                "Keras layer 'bi_1' backward_layer`: expected the forward layer's class, size and bias (LSTM with 5 units, use_bias true), got {got}"
            )),
            "{key}: {e}"
        );
    }
}

/// Models nested in models: `k2_nested*` (tf-keras: a Sequential `enc` of two LSTMs
/// whose input size equals their units, so that the nested pair has the shapes of one
/// bidirectional LSTM) and `k3_nested*` (Keras 3: Masking, a Functional `encoder` of
/// two bidirectional LSTMs, then one more). Each nested layer is its own layer, named
/// `model/layer`, masked and stacked across the nested model's edges as Keras runs it.
#[test]
fn a_nested_models_layers_are_its_own() {
    let device = Default::default();
    let names = |model: &KerasModel| -> Vec<String> {
        model.layers().iter().map(|l| l.name.clone()).collect()
    };
    for file in ["k2_nested.h5", "k2_nested_weights.h5"] {
        let model = KerasModel::open(path(file)).unwrap();
        assert_eq!(names(&model), ["enc/lstm", "enc/lstm_1"], "{file}");
        for layer in model.layers() {
            assert!(!layer.bidirectional, "{file}: {layer:?}");
            assert_eq!((layer.input_size, layer.units), (4, 4), "{file}");
        }
        assert!(model.layer("enc").is_none(), "{file}");
        // Named in order, they stack.
        let stack = RecurrentSelection::Stack(vec!["enc/lstm".into(), "enc/lstm_1".into()]);
        let (_, config) = model.lstm::<NdArray<f32>>(stack, &device).unwrap();
        assert_eq!((config.num_layers, config.bidirectional), (2, false));
    }
    // The full model's architecture says which feeds which; a weights-only file's
    // nested group does not (it shows no layer without weights between them).
    let full = KerasModel::open(path("k2_nested.h5")).unwrap();
    full.lstm::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap();
    let e = KerasModel::open(path("k2_nested_weights.h5"))
        .unwrap()
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a nested model's layers in a weights-only Keras 2 file"),
        "{e}"
    );

    // A Keras 3 weights file keeps no order between its groups: its layers load one
    // by one; a stack needs the architecture.
    let model = KerasModel::open(path("k2_nested.weights.h5")).unwrap();
    assert_eq!(names(&model), ["sequential/lstm", "sequential/lstm_1"]);
    model
        .lstm::<NdArray<f32>>("sequential/lstm_1", &device)
        .unwrap();
    let e = model
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &device)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("position (stacked on 'sequential/lstm')")
            && e.contains("open_with_architecture"),
        "{e}"
    );
    // Named in order, they stack: the caller says which feeds which.
    let (_, config) = model
        .lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(vec!["sequential/lstm".into(), "sequential/lstm_1".into()]),
            &device,
        )
        .unwrap();
    assert_eq!(config.num_layers, 2);

    let model = KerasModel::open(path("k3_nested.keras")).unwrap();
    assert_eq!(names(&model), ["encoder/bi", "encoder/top", "after"]);
    for layer in model.layers() {
        assert_eq!(layer.mask_source.as_deref(), Some("masking"), "{layer:?}");
    }
    // `after` takes the encoder's output, which is `encoder/top`'s.
    let stack = |names: &[&str]| {
        model.lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(names.iter().map(|n| n.to_string()).collect()),
            &device,
        )
    };
    let (_, config) = stack(&["encoder/top", "after"]).unwrap();
    assert_eq!((config.input_size, config.num_layers), (8, 2));
    let e = stack(&["encoder/bi", "after"]).unwrap_err().to_string();
    assert!(
        e.contains("Keras layer 'after' input (stacked on 'encoder/bi')")
            && e.ends_with("got Bidirectional layer 'encoder/top'"),
        "{e}"
    );
}

/// `RNN` layers of one `LSTMCell` or `GRUCell` run Keras's LSTM and GRU, and an `RNN`
/// of a `StackedRNNCells` of them a stack of layers, one per cell (`k3_rnn_cells`,
/// `k2_rnn_cells`: outputs in `keras_golden_*`); the cells' settings are checked as the
/// layers'; a stack of other cells is named, not loaded.
#[test]
fn rnn_layers_of_cells_are_loaded_and_checked() {
    let model = KerasModel::open(path("k3_rnn_cells.keras")).unwrap();
    let classes: Vec<(&str, &str)> = model
        .layers()
        .iter()
        .map(|l| (l.name.as_str(), l.class_name.as_str()))
        .collect();
    assert_eq!(
        classes,
        [
            ("rnn_lstm", "RNN(LSTMCell)"),
            ("bi_rnn_gru", "Bidirectional(RNN(GRUCell))"),
            ("stacked/lstm_cell_1", "RNN(LSTMCell)"),
            ("stacked/lstm_cell_2", "RNN(LSTMCell)"),
        ]
    );
    let cells = model.layers();
    assert!(cells[2].return_sequences && cells[3].return_sequences);
    assert_eq!(cells[3].mask_source.as_deref(), Some("masking"));
    let (_, config) = model
        .lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(vec![
                "stacked/lstm_cell_1".into(),
                "stacked/lstm_cell_2".into(),
            ]),
            &Default::default(),
        )
        .unwrap();
    assert_eq!((config.input_size, config.num_layers), (6, 2));
    let dir = scratch();
    // A stack with another cell: the layer is named, its cells not listed.
    let mut config = architecture("k3_rnn_cells.keras");
    layer_mut(&mut config, "stacked")["config"]["cell"]["config"]["cells"][1]["class_name"] =
        "SimpleRNNCell".into();
    let edited = damaged(&dir, "rnn_simple.json", config.to_string().as_bytes());
    let names: Vec<String> =
        KerasModel::open_with_architecture(path("k3_rnn_cells.keras"), edited.clone())
            .unwrap()
            .layers()
            .iter()
            .map(|l| l.name.clone())
            .collect();
    assert_eq!(names, ["rnn_lstm", "bi_rnn_gru"]);
    let e = edited_refusal("k3_rnn_cells.keras", edited, "stacked");
    assert!(
        e.contains("Keras layer 'stacked' class") && e.ends_with("got RNN(StackedRNNCells)"),
        "{e}"
    );
    let mut config = architecture("k3_rnn_cells.keras");
    layer_mut(&mut config, "rnn_lstm")["config"]["cell"]["config"]["activation"] = "relu".into();
    let edited = damaged(&dir, "rnn_relu.json", config.to_string().as_bytes());
    let e = edited_refusal("k3_rnn_cells.keras", edited, "rnn_lstm");
    assert!(
        e.contains("Keras layer 'rnn_lstm' activation`: expected \"tanh\"")
            && e.ends_with("got \"relu\""),
        "{e}"
    );
    let mut config = architecture("k3_rnn_cells.keras");
    layer_mut(&mut config, "rnn_lstm")["config"]["go_backwards"] = true.into();
    let edited = damaged(&dir, "rnn_backwards.json", config.to_string().as_bytes());
    let e = edited_refusal("k3_rnn_cells.keras", edited, "rnn_lstm");
    assert!(e.contains("Keras layer 'rnn_lstm' go_backwards"), "{e}");
}

/// A weights-only Keras 2 file without its architecture (`k2_slots_weights.h5`: three
/// bidirectional LSTMs, a `dropout` between the first two, an `activation` between the
/// last two): layers stack across a layer named as Keras names a dropout, not across
/// others (`keras_golden_*` runs the first two as a stack).
#[test]
fn without_an_architecture_layers_stack_only_where_the_file_shows_them_next() {
    let model = KerasModel::open(path("k2_slots_weights.h5")).unwrap();
    let stack = |names: &[&str]| {
        model.lstm::<NdArray<f32>>(
            RecurrentSelection::Stack(names.iter().map(|n| n.to_string()).collect()),
            &Default::default(),
        )
    };
    let (_, config) = stack(&["bidirectional", "bidirectional_1"]).unwrap();
    assert_eq!((config.num_layers, config.bidirectional), (2, true));
    for names in [
        ["bidirectional_1", "bidirectional_2"],
        ["bidirectional", "bidirectional_2"],
    ] {
        let e = stack(&names).unwrap_err().to_string();
        assert!(
            e.contains(&format!(
                "'{}' position (stacked on '{}')",
                names[1], names[0]
            )) && e.contains("got a layer between them in the file"),
            "{e}"
        );
    }
}

/// A subclassed Keras 3 model (`k3_subclassed.*`: `self.encoder`, `self.upper`, LSTMs,
/// then a Dense): its config lists no layers, so its files are read as weights alone.
/// Its `.keras` and `.weights.h5` keep `encoder` under its attribute's name and
/// `upper` in the model's layer list (as `lstm_1`, by its name): both are found, and
/// they stack when named in order (`keras_golden_*` runs them), not as `All`; so do
/// those of its legacy `.h5`, whose order is the order they were created.
#[test]
fn a_subclassed_models_layers_are_its_attributes() {
    for file in ["k3_subclassed.keras", "k3_subclassed.weights.h5"] {
        let model = KerasModel::open(path(file)).unwrap();
        let names: Vec<&str> = model.layers().iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["lstm_1", "encoder"], "{file}");
        assert!(model.layers().iter().all(|l| !l.settings_known), "{file}");
        let e = model
            .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("RecurrentSelection::Stack"), "{file}: {e}");
    }
    // Its legacy `.h5` lists the layers under Keras's names, in the order they were
    // created (not necessarily the order they run): they too stack when named.
    let model = KerasModel::open(path("k3_subclassed.h5")).unwrap();
    let names: Vec<&str> = model.layers().iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["lstm", "lstm_1"]);
    let e = model
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("RecurrentSelection::Stack"), "{e}");
    // An architecture that lists no layers is refused, saying why.
    let dir = scratch();
    let json = damaged(
        &dir,
        "tagger.json",
        br#"{"class_name": "Tagger", "config": {}}"#,
    );
    let e = KerasModel::open_with_architecture(path("k3_subclassed.keras"), json)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no 'config.layers' (Tagger model"), "{e}");
}

/// `k3_nested_cycle.weights.h5`: `k3_nested.weights.h5` with a hard link that makes the
/// nested model its own layer (h5py). The walk down nested models stops at 16 models
/// with an error, rather than following the cycle. `k3_nested_fanout.weights.h5`: 26
/// links to each of a chain of groups, 26^16 paths without a cycle: the walk stops
/// after 16,384 groups.
#[test]
fn nested_models_that_nest_forever_are_refused() {
    let e = KerasModel::open(path("k3_nested_cycle.weights.h5"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("groups nested more than 16 deep"), "{e}");
    let e = KerasModel::open(path("k3_nested_fanout.weights.h5"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than 16384 layer groups"), "{e}");
}

/// A `Bidirectional` named `backward_enc` (`k2_bigru_weights.h5` renamed with h5py):
/// each of its weight names has a `backward_` part; the forward weights are still the
/// first half, as Keras reads them.
#[test]
fn a_bidirectional_named_backward_keeps_its_directions() {
    let weights = |file: &str, layer: &str| {
        let (gru, config) = KerasModel::open(path(file))
            .unwrap()
            .gru::<NdArray<f32>>(layer, &Default::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(config.bidirectional, "{file}");
        to_f64(gru.flat_weights())
    };
    let original = weights("k2_bigru_weights.h5", "bigru");
    assert_eq!(
        weights("k2_bigru_backward_name.h5", "backward_enc"),
        original
    );
}

/// A layer that returns only its last step cannot feed another: `k3_lstm_stack.keras`
/// with its architecture edited so that the lower LSTM returns its last step only.
#[test]
fn a_layer_without_return_sequences_feeds_no_other() {
    let dir = scratch();
    let config = architecture("k3_lstm_stack.keras");
    let mut edited = config.clone();
    let lower = layer_mut(&mut edited, "lstm_a");
    lower["config"]["return_sequences"] = false.into();
    let architecture = damaged(
        &dir,
        "lstm_stack_last_step_only.json",
        edited.to_string().as_bytes(),
    );
    let model = KerasModel::open_with_architecture(path("k3_lstm_stack.keras"), architecture)
        .expect("the edited architecture describes the file");
    let e = model
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with("Keras layer 'lstm_a' return_sequences`: expected true (it feeds 'lstm_b' in the stack), got false"),
        "{e}"
    );
    // A size past any layer (from a damaged file) is refused by name, never
    // multiplied into a wrapped shape.
    let mut huge = config.clone();
    let upper = layer_mut(&mut huge, "lstm_b");
    upper["config"]["units"] = (1u64 << 62).into();
    let architecture = damaged(&dir, "lstm_stack_huge.json", huge.to_string().as_bytes());
    let e = edited_refusal("k3_lstm_stack.keras", architecture, "lstm_b");
    assert!(
        e.contains("'lstm_b' units")
            && e.contains("1..=1048576")
            && e.contains("4611686018427387904"),
        "{e}"
    );
    // The same file with its own architecture loads.
    let intact = damaged(&dir, "lstm_stack.json", config.to_string().as_bytes());
    KerasModel::open_with_architecture(path("k3_lstm_stack.keras"), intact)
        .unwrap()
        .lstm::<NdArray<f32>>(RecurrentSelection::All, &Default::default())
        .expect("the stack as saved");
}

/// Layers whose inputs form a cycle (a hand-edited or damaged architecture) are refused
/// by name, not walked forever: `k3_bigru_functional.keras` with a Dropout layer that
/// reads itself put under its upper GRU.
#[test]
fn an_architecture_whose_inputs_form_a_cycle_is_refused() {
    let dir = scratch();
    let file = path("k3_bigru_functional.keras");
    let mut config = architecture("k3_bigru_functional.keras");
    let reads = |name: &str| {
        serde_json::json!([{"args": [{"class_name": "__keras_tensor__", "config": {
            "shape": [null, 7, 10], "dtype": "float32", "keras_history": [name, 0, 0]}}],
            "kwargs": {}}])
    };
    let upper = layer_mut(&mut config, "bigru_2");
    upper["inbound_nodes"] = reads("drop");
    config["config"]["layers"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
        "module": "keras.layers", "class_name": "Dropout",
        "config": {"name": "drop", "rate": 0.1}, "inbound_nodes": reads("drop")}));
    let architecture = damaged(&dir, "cycle.json", config.to_string().as_bytes());
    let model = KerasModel::open_with_architecture(&file, architecture)
        .expect("the edited architecture opens");
    let e = model
        .gru::<NdArray<f32>>(
            RecurrentSelection::Stack(vec!["bigru_1".into(), "bigru_2".into()]),
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("layers whose inputs form a cycle"), "{e}");
}

/// Settings whose value Keras would read otherwise than as their default: a flag that
/// is not a boolean, a null activation (Keras's linear one), a GRU without
/// `reset_after` (saved before Keras had the setting: the reset gate before the
/// product). Each refused, naming the setting and the value.
#[test]
fn settings_of_another_type_or_absent_are_not_defaults() {
    let dir = scratch();
    let config = architecture("k3_lstm_stack.keras");
    for (key, value, got) in [
        (
            "return_sequences",
            serde_json::json!("true"),
            "expected true or false, got \"true\"",
        ),
        (
            "stateful",
            serde_json::json!(1),
            "expected true or false, got 1",
        ),
        (
            "activation",
            serde_json::Value::Null,
            "expected \"tanh\" (cuDNN's LSTM), got null",
        ),
        (
            "recurrent_activation",
            serde_json::Value::Null,
            "expected \"sigmoid\" (cuDNN's LSTM), got null",
        ),
    ] {
        let mut edited = config.clone();
        layer_mut(&mut edited, "lstm_a")["config"][key] = value;
        let architecture = damaged(&dir, &format!("{key}.json"), edited.to_string().as_bytes());
        let e = edited_refusal("k3_lstm_stack.keras", architecture, "lstm_a");
        assert!(
            e.contains(&format!("Keras layer 'lstm_a' {key}`: {got}")),
            "{key}: {e}"
        );
    }
    let mut edited = architecture("k3_bigru_functional.keras");
    let bi = &mut layer_mut(&mut edited, "bigru_1")["config"];
    for side in ["layer", "backward_layer"] {
        bi[side]["config"]
            .as_object_mut()
            .unwrap()
            .remove("reset_after");
    }
    let architecture = damaged(&dir, "no_reset_after.json", edited.to_string().as_bytes());
    let e = KerasModel::open_with_architecture(path("k3_bigru_functional.keras"), architecture)
        .unwrap()
        .gru::<NdArray<f32>>("bigru_1", &Default::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("reset_after`: expected true") && e.ends_with("got null"),
        "{e}"
    );
}

/// `k2_keras_2_2.h5`: a weights-only file labelled Keras 2.2.4, whose defaults cuDNN
/// does not run: without its architecture the layer is refused, with it (the
/// settings are then read) it loads.
#[test]
fn a_weights_only_file_of_keras_before_2_3_needs_its_architecture() {
    let device = Default::default();
    let model = KerasModel::open(path("k2_keras_2_2.h5")).unwrap();
    let e = model
        .gru::<NdArray<f32>>("bigru", &device)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "Keras layer 'bigru'`: expected its architecture (KerasModel::open_with_architecture)"
        ) && e.ends_with("got a weights-only file written by Keras 2.2.4"),
        "{e}"
    );
    KerasModel::open_with_architecture(path("k2_keras_2_2.h5"), path("k2_bigru.json"))
        .unwrap()
        .gru::<NdArray<f32>>("bigru", &device)
        .expect("the settings read from the architecture");
}

/// Keras up to 2.2.2 wrote a Sequential model's `config` as its list of layers:
/// `k2_bigru.json` in that form gives the same layer as the file as written.
#[test]
fn a_sequential_config_written_as_a_list_of_layers_is_read() {
    let dir = scratch();
    let mut old = serde_json::from_str::<serde_json::Value>(
        &std::fs::read_to_string(path("k2_bigru.json")).unwrap(),
    )
    .unwrap();
    old["config"] = old["config"]["layers"].take();
    let architecture = damaged(&dir, "list.json", old.to_string().as_bytes());
    let load = |architecture: PathBuf| {
        let model =
            KerasModel::open_with_architecture(path("k2_bigru_weights.h5"), architecture).unwrap();
        let layer = model.layers()[0].clone();
        let (gru, _) = model
            .gru::<NdArray<f32>>("bigru", &Default::default())
            .unwrap();
        (layer, to_f64(gru.flat_weights()))
    };
    let (layer, weights) = load(architecture);
    assert!(
        layer.settings_known && layer.mask_source.is_some(),
        "{layer:?}"
    );
    assert_eq!((layer, weights), load(path("k2_bigru.json")));
}

/// The mask a layer receives: `k3_bilstm_masked.keras` (Masking, then two
/// Bidirectional LSTMs) with a layer put after the Masking. A Dense or a Dropout hands
/// the mask on; a Conv1D (no `supports_masking`) drops it, for both layers above it.
#[test]
fn a_mask_reaches_a_layer_only_through_layers_that_pass_it_on() {
    let dir = scratch();
    for (class, passes) in [("Dense", true), ("Dropout", true), ("Conv1D", false)] {
        let mut config = architecture("k3_bilstm_masked.keras");
        config["config"]["layers"].as_array_mut().unwrap().insert(
            2,
            serde_json::json!({"class_name": class, "config": {"name": "between"}}),
        );
        let architecture = damaged(
            &dir,
            &format!("{class}.json"),
            config.to_string().as_bytes(),
        );
        let model =
            KerasModel::open_with_architecture(path("k3_bilstm_masked.keras"), architecture)
                .unwrap();
        for layer in model.layers() {
            assert_eq!(
                layer.mask_source.as_deref(),
                passes.then_some("masking"),
                "{class}: {}",
                layer.name
            );
        }
    }
}

/// The architecture (`config.json`) inside the `.keras` fixture `file`.
fn architecture(file: &str) -> serde_json::Value {
    let archive = std::fs::File::open(path(file)).unwrap();
    let mut archive = zip::ZipArchive::new(archive).unwrap();
    serde_json::from_reader(archive.by_name("config.json").unwrap()).unwrap()
}

/// Why the fixture `file` with the edited `architecture` does not open, or why its
/// layer `layer` does not load (a test's edit must make one of them fail).
fn edited_refusal(file: &str, architecture: PathBuf, layer: &str) -> String {
    match KerasModel::open_with_architecture(path(file), architecture) {
        Err(e) => e.to_string(),
        Ok(model) => model
            .lstm::<NdArray<f32>>(layer, &Default::default())
            .expect_err("the edited architecture is refused")
            .to_string(),
    }
}

/// The layer `name` of an architecture (`config.json`), to edit.
fn layer_mut<'a>(architecture: &'a mut serde_json::Value, name: &str) -> &'a mut serde_json::Value {
    architecture["config"]["layers"]
        .as_array_mut()
        .expect("a functional or sequential architecture")
        .iter_mut()
        .find(|l| l["config"]["name"] == name)
        .unwrap_or_else(|| panic!("the architecture has the layer {name}"))
}

/// A test's scratch directory, removed when the test ends.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("burn-lstm-import-")
        .tempdir()
        .unwrap()
}

/// `bytes` (a damaged or edited copy of a file) written as `name` in `dir`.
fn damaged(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every place of an architecture JSON (a spread of its values: nested models'
/// layers, inbound nodes, inputs and outputs, cells, settings) changed to another kind
/// of value: opening with it and loading every layer and every stack give a model or
/// an error.
#[test]
fn changed_architectures_are_errors_or_other_models_never_panics() {
    use serde_json::{Value, json};
    fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
        out.push(at.clone());
        match value {
            Value::Array(items) => {
                for (k, v) in items.iter().enumerate() {
                    pointers(v, format!("{at}/{k}"), out);
                }
            }
            Value::Object(map) => {
                for (k, v) in map {
                    let key = k.replace('~', "~0").replace('/', "~1");
                    pointers(v, format!("{at}/{key}"), out);
                }
            }
            _ => {}
        }
    }
    let device = Default::default();
    let dir = scratch();
    let deep = (0..40).fold(json!("x"), |v, _| json!([v]));
    let replacements = [
        Value::Null,
        json!(0),
        json!("encoder"),
        json!([]),
        json!({}),
        json!(true),
        json!([["encoder", 0, 0], ["masking", 0, 0]]),
        deep,
    ];
    let mut opened = 0;
    for (weights, json) in [
        ("k3_nested.weights.h5", "k3_nested.json"),
        ("k2_nested_weights.h5", "k2_nested.json"),
    ] {
        let text = std::fs::read_to_string(path(json)).unwrap();
        let original: Value = serde_json::from_str(&text).unwrap();
        let mut places = Vec::new();
        pointers(&original, String::new(), &mut places);
        let step = (places.len() / 150).max(1);
        for (k, place) in places.iter().enumerate().step_by(step) {
            let mut changed = original.clone();
            *changed.pointer_mut(place).unwrap() = replacements[k % replacements.len()].clone();
            let copy = damaged(&dir, "changed.json", changed.to_string().as_bytes());
            let Ok(model) = KerasModel::open_with_architecture(path(weights), copy) else {
                continue;
            };
            opened += 1;
            let names: Vec<String> = model.layers().iter().map(|l| l.name.clone()).collect();
            let _ = model.lstm::<NdArray<f32>>(RecurrentSelection::All, &device);
            let _ = model.gru::<NdArray<f32>>(RecurrentSelection::All, &device);
            let _ = model.lstm::<NdArray<f32>>(RecurrentSelection::Stack(names.clone()), &device);
            for name in names {
                let _ = model.lstm::<NdArray<f32>>(name.as_str(), &device);
            }
        }
    }
    assert!(opened > 100, "{opened} changed architectures opened");
}

#[test]
fn damaged_files_are_errors_never_panics() {
    let device = Default::default();
    let dir = scratch();
    let e =
        KerasModel::open(damaged(&dir, "notes.h5", b"just some text, not a model")).unwrap_err();
    assert!(
        matches!(e, RnnError::Io { .. }) && e.to_string().contains("not a Keras file"),
        "{e}"
    );
    let e = KerasModel::open(damaged(&dir, "empty.keras", b"")).unwrap_err();
    assert!(e.to_string().contains("empty file"), "{e}");
    let e = KerasModel::open(path("does_not_exist.keras")).unwrap_err();
    assert!(matches!(e, RnnError::Io { .. }), "{e}");
    // A layer's parameters in the canonical order, or why it does not load.
    let weights = |model: &KerasModel, layer: &KerasRecurrentLayer| match layer.cell {
        CellKind::Lstm => model
            .lstm::<NdArray<f32>>(layer.name.as_str(), &device)
            .map(|(m, _)| to_f64(m.flat_weights())),
        CellKind::Gru => model
            .gru::<NdArray<f32>>(layer.name.as_str(), &device)
            .map(|(m, _)| to_f64(m.flat_weights())),
    };
    for file in ["k2_lstm_gru.h5", "k3_lstm_stack.keras", "k3_gru_masked.h5"] {
        let bytes = std::fs::read(path(file)).unwrap();
        let intact = KerasModel::open(path(file)).unwrap();
        let mut refused = 0;
        let mut cuts: Vec<usize> = vec![
            7,
            100,
            600,
            2048,
            bytes.len() / 2,
            bytes.len() - 200,
            bytes.len() - 1,
        ];
        cuts.extend((1..16).map(|k| bytes.len() * k / 16));
        for cut in cuts {
            let copy = damaged(&dir, &format!("cut-{cut}-{file}"), &bytes[..cut]);
            // Either the file is refused, or every layer says why it cannot load, or
            // loads the very weights of the whole file.
            let Ok(model) = KerasModel::open(&copy) else {
                refused += 1;
                continue;
            };
            for layer in model.layers() {
                let loaded = weights(&model, layer);
                assert_eq!(
                    loaded.is_err(),
                    layer.refusal.is_some(),
                    "{file} cut at {cut}"
                );
                let Ok(loaded) = loaded else {
                    continue;
                };
                let original = intact
                    .layers()
                    .into_iter()
                    .find(|l| l.name == layer.name)
                    .unwrap_or_else(|| panic!("{file} cut at {cut}: no layer {}", layer.name));
                assert_eq!(
                    Ok(loaded),
                    weights(&intact, original),
                    "{file} cut at {cut}: layer {}",
                    layer.name
                );
            }
        }
        assert!(refused > 0, "{file}: no cut refused");
    }
}
