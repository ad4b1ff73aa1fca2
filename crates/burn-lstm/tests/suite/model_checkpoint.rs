//! Loading checkpoints of whole models: `load_file_checked` for a model that holds the
//! LSTM and the GRU among other layers (the values, and every way a record can differ
//! from the model), and PyTorch state dicts of a parent module
//! (`load_pytorch_safetensors_with_prefix`, and the hint of a missing tensor).

use std::path::{Path, PathBuf};

use burn::backend::{Flex, NdArray};
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::record::{
    BinFileRecorder, FileRecorder, FullPrecisionSettings, NamedMpkFileRecorder,
    NamedMpkGzFileRecorder,
};
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleGruConfig, CudnnCompatibleLstm, CudnnCompatibleLstmConfig,
    RnnBackend, RnnError, load_file_checked,
};

use crate::common::to_f64;

type B = NdArray<f32>;

/// A model that holds both layers among others, as a user's would.
#[derive(Module, Debug)]
struct Tagger<B: Backend> {
    lstm: CudnnCompatibleLstm<B>,
    gru: CudnnCompatibleGru<B>,
    head: Linear<B>,
}

#[derive(Clone, Copy)]
struct TaggerConfig {
    hidden: usize,
    layers: usize,
    bias: bool,
    gru_hidden: usize,
}

const BASE: TaggerConfig = TaggerConfig {
    hidden: 6,
    layers: 2,
    bias: true,
    gru_hidden: 5,
};

impl TaggerConfig {
    fn init<B: Backend>(self, device: &B::Device) -> Tagger<B> {
        Tagger {
            lstm: CudnnCompatibleLstmConfig::new(3, self.hidden)
                .with_num_layers(self.layers)
                .with_bidirectional(true)
                .with_bias(self.bias)
                .init(device),
            gru: CudnnCompatibleGruConfig::new(2 * self.hidden, self.gru_hidden).init(device),
            head: LinearConfig::new(self.gru_hidden, 2).init(device),
        }
    }
}

impl<B: RnnBackend> Tagger<B> {
    fn forward(&self, x: Tensor<B, 3>) -> Tensor<B, 3> {
        let (y, _) = self.lstm.forward(x, None);
        let (y, _) = self.gru.forward(y, None);
        self.head.forward(y)
    }
}

/// A test's scratch directory, removed when the test ends.
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("burn-lstm-model-checkpoint-{name}-"))
        .tempdir()
        .unwrap()
}

fn input<Bk: Backend>(device: &Bk::Device) -> Tensor<Bk, 3> {
    let values: Vec<f32> = (0..2 * 7 * 3)
        .map(|i| ((i * 37 % 23) as f32 - 11.0) / 7.0)
        .collect();
    Tensor::from_data(TensorData::new(values, [2, 7, 3]), device)
}

fn saved(dir: &Path) -> (Tagger<B>, PathBuf) {
    let model = BASE.init::<B>(&Default::default());
    // Burn initialises parameters lazily, and a clone of an uninitialised one draws its
    // own values: a forward call fixes them before the model is cloned and saved.
    let _ = model.forward(input::<B>(&Default::default()));
    let stem = dir.join("model");
    model
        .clone()
        .save_file(&stem, &NamedMpkFileRecorder::<FullPrecisionSettings>::new())
        .unwrap();
    (model, stem.with_extension("mpk"))
}

#[test]
fn a_model_holding_both_layers_loads_with_its_values_on_another_backend() {
    let dir = scratch("values");
    let (model, file) = saved(dir.path());
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let expected = to_f64(model.forward(input::<B>(&Default::default())));
    let flex = Default::default();
    for path in [file.clone(), file.with_extension("")] {
        let loaded = load_file_checked(BASE.init::<Flex>(&flex), &path, &recorder, &flex)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let actual = to_f64(loaded.forward(input::<Flex>(&flex)));
        assert_eq!(actual, expected, "{}", path.display());
    }
    // The values are the file's, not the fresh model's.
    let fresh = to_f64(
        BASE.init::<B>(&Default::default())
            .forward(input::<B>(&Default::default())),
    );
    assert_ne!(fresh, expected);
}

#[test]
fn every_difference_from_the_config_is_an_error_naming_file_tensor_and_shapes() {
    let dir = scratch("differences");
    let (_, file) = saved(dir.path());
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let device = Default::default();
    let load = |config: TaggerConfig| {
        load_file_checked(config.init::<B>(&device), &file, &recorder, &device).unwrap_err()
    };
    let source = file.display().to_string();

    let err = load(TaggerConfig { hidden: 8, ..BASE });
    assert_eq!(
        err,
        RnnError::CheckpointShape {
            source_name: source.clone(),
            name: "lstm.layers.0.forward.weight_ih".into(),
            expected: vec![32, 3],
            actual: vec![24, 3],
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint {source}: tensor `lstm.layers.0.forward.weight_ih` has shape [24, 3], but the config needs [32, 3]"
        )
    );

    let err = load(TaggerConfig {
        gru_hidden: 4,
        ..BASE
    });
    assert!(
        matches!(&err, RnnError::CheckpointShape { name, expected, actual, .. }
            if name == "gru.layers.0.forward.weight_ih" && *expected == vec![12, 12] && *actual == vec![15, 12]),
        "{err}"
    );

    // Burn's `load_record` panics here (a Vec of another length).
    let err = load(TaggerConfig { layers: 3, ..BASE });
    assert_eq!(
        err,
        RnnError::CheckpointTensor {
            source_name: source.clone(),
            problem: "missing",
            name: "lstm.layers.2.forward.weight_ih".into(),
            hint: Some(
                "and 7 more missing tensors: was the model built from the config the file was saved with?"
                    .into()
            ),
        }
    );
    let err = load(TaggerConfig { layers: 1, ..BASE });
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "unexpected", name, .. }
            if name == "lstm.layers.1.forward.weight_ih"),
        "{err}"
    );
    // Burn's `load_record` silently drops these (an `Option` of the module is `None`).
    let err = load(TaggerConfig {
        bias: false,
        ..BASE
    });
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "unexpected", name, .. }
            if name == "lstm.layers.0.forward.bias_ih"),
        "{err}"
    );
    assert!(err.to_string().contains(&source), "{err}");

    let without_bias = dir.path().join("no-bias");
    TaggerConfig {
        bias: false,
        ..BASE
    }
    .init::<B>(&device)
    .save_file(&without_bias, &recorder)
    .unwrap();
    let err =
        load_file_checked(BASE.init::<B>(&device), &without_bias, &recorder, &device).unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "missing", name, .. }
            if name == "lstm.layers.0.forward.bias_ih"),
        "{err}"
    );

    let absent = dir.path().join("absent.mpk");
    let err = load_file_checked(BASE.init::<B>(&device), &absent, &recorder, &device).unwrap_err();
    assert_eq!(
        err,
        RnnError::Io {
            path: absent.display().to_string(),
            message: "no such file".into()
        }
    );
}

/// Truncated and bit-flipped copies in three of Burn's formats: an error naming the
/// file (or, for a flip inside a value, a model), never a panic or an abort.
#[test]
fn damaged_records_are_named_errors_in_every_format() {
    fn check<R: FileRecorder<B>>(recorder: R, name: &str) {
        let dir = scratch(name);
        let device = Default::default();
        let stem = dir.path().join("model");
        BASE.init::<B>(&device).save_file(&stem, &recorder).unwrap();
        let file = stem.with_extension(<R as FileRecorder<B>>::file_extension());
        let bytes = std::fs::read(&file).unwrap();
        let load = |damaged: &[u8]| {
            std::fs::write(&file, damaged).unwrap();
            load_file_checked(BASE.init::<B>(&device), &file, &recorder, &device)
        };
        assert!(load(&bytes).is_ok());
        let mut errors = 0;
        for cut in (0..bytes.len()).step_by(bytes.len() / 40 + 1) {
            if let Err(e) = load(&bytes[..cut]) {
                assert!(
                    matches!(&e, RnnError::Io { path, .. } if *path == file.display().to_string()),
                    "{name}, cut at {cut}: {e}"
                );
                errors += 1;
            }
        }
        assert!(errors >= 30, "{name}: {errors} truncations refused");
        for (i, at) in (0..bytes.len()).step_by(bytes.len() / 60 + 1).enumerate() {
            let mut flipped = bytes.clone();
            flipped[at] ^= 1 << (i % 8);
            if let Err(e) = load(&flipped) {
                assert!(
                    matches!(
                        e,
                        RnnError::Io { .. }
                            | RnnError::CheckpointShape { .. }
                            | RnnError::CheckpointTensor { .. }
                    ),
                    "{name}, flip at {at}: {e}"
                );
            }
        }
    }
    check(NamedMpkFileRecorder::<FullPrecisionSettings>::new(), "mpk");
    check(
        NamedMpkGzFileRecorder::<FullPrecisionSettings>::new(),
        "mpk-gz",
    );
    check(BinFileRecorder::<FullPrecisionSettings>::new(), "bin");
}

/// A state dict of `tensors` renamed by `rename`, plus `extra` (other modules' tensors).
fn renamed_state_dict(
    from: &Path,
    to: &Path,
    rename: impl Fn(&str) -> Vec<String>,
    extra: &[(&str, Vec<usize>)],
) {
    let bytes = std::fs::read(from).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut tensors: Vec<(String, safetensors::Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in file.tensors() {
        for new_name in rename(&name) {
            tensors.push((
                new_name,
                view.dtype(),
                view.shape().to_vec(),
                view.data().to_vec(),
            ));
        }
    }
    for (name, shape) in extra {
        // 0, 1, 2, ... in f32, row-major.
        let values: Vec<u8> = (0..shape.iter().product::<usize>())
            .flat_map(|i| (i as f32).to_le_bytes())
            .collect();
        tensors.push((
            name.to_string(),
            safetensors::Dtype::F32,
            shape.clone(),
            values,
        ));
    }
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(name, dtype, shape, data)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    std::fs::write(to, safetensors::serialize(views, None).unwrap()).unwrap();
}

/// A PyTorch module `self.encoder = nn.LSTM(4, 8, 2, bidirectional=True)`,
/// `self.head = nn.Linear(16, 3)`, in Burn.
#[derive(Module, Debug)]
struct PyTagger<B: Backend> {
    encoder: CudnnCompatibleLstm<B>,
    head: Linear<B>,
}

#[derive(serde::Deserialize)]
struct Stored {
    shape: Vec<usize>,
    values: Vec<f32>,
}

#[derive(serde::Deserialize)]
struct PytorchIo {
    x: Stored,
    y: Stored,
}

/// PyTorch's own weights and outputs (`examples/pytorch/make_weights.py`: a 2-layer
/// bidirectional `nn.LSTM(4, 8)`), renamed as the state dict of a module whose LSTM is
/// `self.encoder`, beside a `head` of its own.
#[test]
fn an_lstm_inside_a_pytorch_module_loads_by_its_prefix_with_pytorchs_outputs() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/data");
    let io: PytorchIo =
        serde_json::from_str(&std::fs::read_to_string(data.join("pytorch_lstm_io.json")).unwrap())
            .unwrap();
    let dir = scratch("prefix");
    let parent = dir.path().join("parent.safetensors");
    renamed_state_dict(
        &data.join("pytorch_lstm.safetensors"),
        &parent,
        |n| vec![format!("encoder.{n}")],
        &[("head.weight", vec![3, 16]), ("head.bias", vec![3])],
    );
    let config = CudnnCompatibleLstmConfig::new(4, 8)
        .with_num_layers(2)
        .with_bidirectional(true);
    let device = Default::default();

    let encoder = config
        .load_pytorch_safetensors_with_prefix::<Flex>(&parent, "encoder.", &device)
        .unwrap();
    let shape: [usize; 3] = io.x.shape.clone().try_into().unwrap();
    let x = Tensor::<Flex, 3>::from_data(TensorData::new(io.x.values.clone(), shape), &device);
    let (y, _) = encoder.forward(x, None);
    assert_eq!(y.dims().to_vec(), io.y.shape);
    let y = to_f64(y);
    let worst = y
        .iter()
        .zip(&io.y.values)
        .map(|(a, b)| (a - *b as f64).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1e-5, "largest difference from PyTorch {worst:e}");

    // The rest of the parent module through burn-store, as docs/pytorch.md shows:
    // PyTorch's `head.weight` is `[out, in]`, Burn's Linear `[in, out]`.
    let mut tagger = PyTagger {
        encoder: encoder.clone(),
        head: LinearConfig::new(16, 3).init::<Flex>(&device),
    };
    let mut store = burn::store::SafetensorsStore::from_file(&parent)
        .with_from_adapter(burn::store::PyTorchToBurnAdapter)
        .with_regex(r"^head\.")
        .allow_partial(true);
    let result = burn::store::ModuleSnapshot::load_from(&mut tagger, &mut store).unwrap();
    assert!(result.errors.is_empty(), "{result:?}");
    let mut applied = result.applied.clone();
    applied.sort();
    assert_eq!(applied, ["head.bias", "head.weight"]);
    assert_eq!(tagger.head.weight.dims(), [16, 3]);
    let weight = to_f64(tagger.head.weight.val());
    assert_eq!(weight[..3], [0.0, 16.0, 32.0]); // column 0 of PyTorch's [3, 16]
    assert_eq!(
        to_f64(tagger.head.bias.as_ref().unwrap().val()),
        [0.0, 1.0, 2.0]
    );
    assert_eq!(
        to_f64(tagger.encoder.layers[0].forward.weight_ih.val()),
        to_f64(encoder.layers[0].forward.weight_ih.val())
    );

    // Without the prefix: the missing tensor, and where the file has it.
    let err = config
        .load_pytorch_safetensors::<Flex>(&parent, &device)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "checkpoint {}: missing tensor `weight_ih_l0` (the file has it as `encoder.weight_ih_l0`: \
             load it with `load_pytorch_safetensors_with_prefix(path, \"encoder.\", device)`)",
            parent.display()
        )
    );
    // A wrong prefix names the right one.
    let err = config
        .load_pytorch_safetensors_with_prefix::<Flex>(&parent, "decoder.", &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "missing", name, hint: Some(hint), .. }
            if name == "decoder.weight_ih_l0" && hint.contains("\"encoder.\"")),
        "{err}"
    );
    // Under the prefix, the config's architecture is checked as for a bare LSTM.
    let err = config
        .clone()
        .with_num_layers(1)
        .load_pytorch_safetensors_with_prefix::<Flex>(&parent, "encoder.", &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "unexpected", name, .. }
            if name.starts_with("encoder.") && name.contains("_l1")),
        "{err}"
    );
    let err = config
        .clone()
        .with_num_layers(3)
        .load_pytorch_safetensors_with_prefix::<Flex>(&parent, "encoder.", &device)
        .unwrap_err();
    assert_eq!(
        err,
        RnnError::CheckpointTensor {
            source_name: parent.display().to_string(),
            problem: "missing",
            name: "encoder.weight_ih_l2".into(),
            hint: None,
        }
    );

    // Two LSTMs in one state dict: each loads by its own prefix; no prefix lists both.
    let both = dir.path().join("both.safetensors");
    renamed_state_dict(
        &data.join("pytorch_lstm.safetensors"),
        &both,
        |n| vec![format!("encoder.rnn.{n}"), format!("decoder.rnn.{n}")],
        &[],
    );
    for prefix in ["encoder.rnn.", "decoder.rnn."] {
        let model = config
            .load_pytorch_safetensors_with_prefix::<Flex>(&both, prefix, &device)
            .unwrap();
        assert_eq!(
            to_f64(model.layers[1].reverse.as_ref().unwrap().weight_hh.val()),
            to_f64(encoder.layers[1].reverse.as_ref().unwrap().weight_hh.val())
        );
    }
    let err = config
        .load_pytorch_safetensors::<Flex>(&both, &device)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("under 2 prefixes (\"encoder.rnn.\", \"decoder.rnn.\")")
            || err
                .to_string()
                .contains("under 2 prefixes (\"decoder.rnn.\", \"encoder.rnn.\")"),
        "{err}"
    );
}

#[test]
fn a_gru_inside_a_pytorch_module_loads_by_its_prefix() {
    let device = Default::default();
    let config = CudnnCompatibleGruConfig::new(3, 4).with_num_layers(2);
    let gru = config.init::<B>(&device);
    let dir = scratch("gru-prefix");
    let bare = dir.path().join("bare.safetensors");
    gru.save_pytorch_safetensors(&bare).unwrap();
    let parent = dir.path().join("parent.safetensors");
    renamed_state_dict(
        &bare,
        &parent,
        |n| vec![format!("rnn.{n}")],
        &[("fc.weight", vec![1, 4])],
    );

    let loaded = config
        .load_pytorch_safetensors_with_prefix::<B>(&parent, "rnn.", &device)
        .unwrap();
    let x = Tensor::<B, 3>::random([2, 5, 3], Distribution::Normal(0.0, 1.0), &device);
    assert_eq!(
        to_f64(loaded.forward(x.clone(), None).0),
        to_f64(gru.forward(x, None).0)
    );
    let err = config
        .load_pytorch_safetensors::<B>(&parent, &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "missing", name, hint: Some(hint), .. }
            if name == "weight_ih_l0" && hint.contains("`rnn.weight_ih_l0`")),
        "{err}"
    );
}

/// A record of another module (a bare layer's file given to the model's loader, a
/// model's file given to the layer's) is an error naming a tensor that differs and
/// where one module sits in the other, in the formats that name their fields (named
/// MessagePack, JSON); bincode, which does not, names the file.
#[test]
fn a_record_of_another_module_names_a_tensor_and_where_the_modules_nest() {
    use burn::record::PrettyJsonFileRecorder;

    fn check<R: FileRecorder<B>>(recorder: R, name: &str) {
        let dir = scratch(name);
        let device = Default::default();
        let tagger = BASE.init::<B>(&device);
        let (model_stem, layer_stem) = (dir.path().join("model"), dir.path().join("layer"));
        tagger.clone().save_file(&model_stem, &recorder).unwrap();
        tagger
            .lstm
            .clone()
            .save_file(&layer_stem, &recorder)
            .unwrap();
        let hint_of = |error: &RnnError| match error {
            RnnError::CheckpointTensor {
                problem: "missing",
                hint: Some(hint),
                ..
            } => hint.clone(),
            other => panic!("{name}: a missing tensor with a hint, not {other:?}"),
        };

        let layer_file =
            load_file_checked(BASE.init::<B>(&device), &layer_stem, &recorder, &device)
                .unwrap_err();
        assert!(
            matches!(&layer_file, RnnError::CheckpointTensor { name, .. } if name == "lstm.layers.0.forward.weight_ih"),
            "{name}: {layer_file}"
        );
        let hint = hint_of(&layer_file);
        assert!(
            hint.contains("this module's `lstm` alone"),
            "{name}: {hint}"
        );

        let lstm_config = CudnnCompatibleLstmConfig::new(3, BASE.hidden)
            .with_num_layers(BASE.layers)
            .with_bidirectional(true);
        let model_file = lstm_config
            .load_checkpoint::<B, _>(&model_stem, &recorder, &device)
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&model_file, RnnError::CheckpointTensor { name, .. } if name == "layers.0.forward.weight_ih"),
            "{name}: {model_file}"
        );
        let hint = hint_of(&model_file);
        assert!(hint.contains("holds this one as `lstm`"), "{name}: {hint}");
        assert!(
            model_file.to_string().contains("load_file_checked"),
            "{model_file}"
        );

        // The model's LSTM has two layers: a one-layer LSTM is no part of it to load.
        let one_layer = lstm_config
            .clone()
            .with_num_layers(1)
            .load_checkpoint::<B, _>(&model_stem, &recorder, &device)
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&one_layer, RnnError::CheckpointTensor { hint, .. } if !hint.as_deref().unwrap_or("").contains("holds this one")),
            "{name}: {one_layer}"
        );

        // A record without tensors (here a dropout's) lists none: the decoder's
        // message, naming the file.
        let empty_stem = dir.path().join("dropout");
        burn::nn::DropoutConfig::new(0.5)
            .init()
            .save_file(&empty_stem, &recorder)
            .unwrap();
        let empty = load_file_checked(BASE.init::<B>(&device), &empty_stem, &recorder, &device)
            .unwrap_err();
        assert!(matches!(&empty, RnnError::Io { .. }), "{name}: {empty}");

        // A GRU's file for the LSTM: it decodes (the same record types), and its
        // layer count is the error.
        let gru_stem = dir.path().join("gru");
        tagger.gru.clone().save_file(&gru_stem, &recorder).unwrap();
        let other = lstm_config
            .load_checkpoint::<B, _>(&gru_stem, &recorder, &device)
            .map(|_| ())
            .unwrap_err();
        assert!(
            matches!(&other, RnnError::ParameterShape { .. }),
            "{name}: {other}"
        );
    }
    check(NamedMpkFileRecorder::<FullPrecisionSettings>::new(), "mpk");
    check(
        NamedMpkGzFileRecorder::<FullPrecisionSettings>::new(),
        "mpk-gz",
    );
    check(
        PrettyJsonFileRecorder::<FullPrecisionSettings>::new(),
        "json",
    );

    // Bincode: the file is named, and the message is the decoder's own.
    let dir = scratch("bin-other");
    let device = Default::default();
    let recorder = BinFileRecorder::<FullPrecisionSettings>::new();
    let stem = dir.path().join("layer");
    BASE.init::<B>(&device)
        .lstm
        .save_file(&stem, &recorder)
        .unwrap();
    let error = load_file_checked(BASE.init::<B>(&device), &stem, &recorder, &device).unwrap_err();
    assert!(
        matches!(&error, RnnError::Io { path, message } if path.ends_with("layer.bin") && !message.starts_with("Unknown(")),
        "{error:?}"
    );
}

/// A recorder of the user's own under Burn's MessagePack extension (one that migrates or
/// decrypts its files, say) still decodes its files itself: the checked loaders check
/// the file, then call its `load_item`, for a whole model and for the layer alone.
#[test]
fn a_recorder_of_ones_own_decodes_its_files_after_the_check() {
    use burn::record::{Recorder, RecorderError};
    use serde::{Serialize, de::DeserializeOwned};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static LOADS: AtomicUsize = AtomicUsize::new(0);

    #[derive(Clone, Debug, Default)]
    struct Counting(NamedMpkFileRecorder<FullPrecisionSettings>);

    impl Recorder<B> for Counting {
        type Settings = FullPrecisionSettings;
        type RecordArgs = PathBuf;
        type RecordOutput = ();
        type LoadArgs = PathBuf;

        fn save_item<I: Serialize>(&self, item: I, file: PathBuf) -> Result<(), RecorderError> {
            Recorder::<B>::save_item(&self.0, item, file)
        }

        fn load_item<I: DeserializeOwned>(&self, file: &mut PathBuf) -> Result<I, RecorderError> {
            LOADS.fetch_add(1, Ordering::SeqCst);
            Recorder::<B>::load_item(&self.0, file)
        }
    }

    impl FileRecorder<B> for Counting {
        fn file_extension() -> &'static str {
            "mpk"
        }
    }

    let dir = scratch("own-recorder");
    let device = Default::default();
    let model = BASE.init::<B>(&device);
    let expected = to_f64(model.forward(input::<B>(&device)));
    let (model_stem, layer_stem) = (dir.path().join("model"), dir.path().join("layer"));
    model
        .clone()
        .save_file(&model_stem, &Counting::default())
        .unwrap();
    model
        .lstm
        .clone()
        .save_file(&layer_stem, &Counting::default())
        .unwrap();

    let loaded = load_file_checked(
        BASE.init::<B>(&device),
        &model_stem,
        &Counting::default(),
        &device,
    )
    .unwrap();
    assert_eq!(to_f64(loaded.forward(input::<B>(&device))), expected);
    assert_eq!(
        LOADS.load(Ordering::SeqCst),
        1,
        "the model's file through load_item"
    );

    let lstm = CudnnCompatibleLstmConfig::new(3, BASE.hidden)
        .with_num_layers(BASE.layers)
        .with_bidirectional(true)
        .load_checkpoint::<B, _>(&layer_stem, &Counting::default(), &device)
        .unwrap();
    assert_eq!(
        lstm.flat_weights().into_data(),
        model.lstm.flat_weights().into_data()
    );
    assert_eq!(
        LOADS.load(Ordering::SeqCst),
        2,
        "the layer's file through load_item"
    );
}
