//! Load the recurrent layers of a Keras model (`.keras`, `.h5`) or the `LSTM` / `GRU`
//! nodes of an ONNX file, run them on the CPU, and compare with the file's stored
//! outputs or write them out (docs/keras-onnx.md).
//!
//! ```text
//! cargo run --example keras_lstm -- FILE [--architecture ARCH.json]
//!     # lists the layers; with FILE.io.safetensors beside FILE (the test fixtures),
//!     # runs every case in it and prints our outputs beside the stored ones
//! cargo run --example keras_lstm -- FILE --input IN.safetensors --output OUT.safetensors [--layer NAME]...
//!     # runs the named layer (several --layer: them, as one stack; none: every
//!     # recurrent layer or node, in order, as one stack) on IN's tensor `x`
//!     # (batch-first for Keras, as the layer's own layout for ONNX: sequence-major
//!     # by default), with `h0`/`c0` as the initial state and `lengths` (int) when IN
//!     # has them (else an ONNX graph's constant initial state: an error where the
//!     # graph takes its state from its caller or computes it), and
//!     # writes `y`, `h_n` (and `c_n`) in PyTorch's layout
//!     # (`[layers*dirs, batch, hidden]` states) as float32
//! ```
//!
//! For example, from the repository root:
//! `cargo run --example keras_lstm -- crates/burn-lstm/tests/fixtures/keras/k3_bilstm_masked.keras`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use burn::backend::Flex;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{
    CellKind, CudnnCompatibleGru, CudnnCompatibleLstm, GruState, KerasModel, LstmState, OnnxModel,
    RecurrentSelection,
};
use clap::Parser;
use lstm_examples::say;
use safetensors::{Dtype, SafeTensors, tensor::TensorView};

/// Runs a Keras model's recurrent layers, or an ONNX file's recurrent nodes, on the CPU.
#[derive(Parser, Debug)]
#[command(name = "keras_lstm")]
struct Args {
    /// A Keras model (`.keras`, `.h5`, `.weights.h5`) or an ONNX model (`.onnx`).
    file: PathBuf,
    /// The architecture JSON (`model.to_json()`) of a weights-only Keras file.
    #[arg(long)]
    architecture: Option<PathBuf>,
    /// A layer (Keras) or node (ONNX) to run; repeat for a stack; none: all, in order.
    #[arg(long)]
    layer: Vec<String>,
    /// Safetensors file with the input `x` (and optionally `h0`, `c0`, `lengths`).
    #[arg(long, requires = "output")]
    input: Option<PathBuf>,
    /// Where to write `y`, `h_n` (and `c_n`).
    #[arg(long, requires = "input")]
    output: Option<PathBuf>,
    /// Expected outputs (default: `FILE.io.safetensors` when it exists).
    #[arg(long)]
    expected: Option<PathBuf>,
}

/// The opened file, Keras or ONNX.
enum Model {
    Keras(KerasModel),
    Onnx(OnnxModel),
}

/// A loaded module of either cell, with the initial state its file holds, used when the
/// input gives none.
enum Module {
    Lstm(CudnnCompatibleLstm<Flex>, FileState<LstmState<Flex>>),
    Gru(CudnnCompatibleGru<Flex>, FileState<GruState<Flex>>),
}

/// The initial state of a file's layers: an ONNX graph's constants (`None`: zeros, as
/// Keras's), or why the file holds none (the graph takes it from its caller, or the
/// constant is not one the module can take).
type FileState<S> = Result<Option<S>, String>;

type Tensors = HashMap<String, (Vec<usize>, Vec<f32>)>;

impl Model {
    fn open(args: &Args) -> Result<Self, String> {
        let onnx = args.file.extension().is_some_and(|e| e == "onnx");
        let model = if onnx {
            Model::Onnx(OnnxModel::open(&args.file).map_err(|e| e.to_string())?)
        } else if let Some(json) = &args.architecture {
            Model::Keras(
                KerasModel::open_with_architecture(&args.file, json).map_err(|e| e.to_string())?,
            )
        } else {
            Model::Keras(KerasModel::open(&args.file).map_err(|e| e.to_string())?)
        };
        Ok(model)
    }

    /// One line per recurrent layer or node.
    fn describe(&self) {
        match self {
            Model::Keras(m) => {
                for (i, l) in m.layers().iter().enumerate() {
                    let mask = l
                        .mask_source
                        .as_deref()
                        .map(|m| format!(", masked by '{m}'"))
                        .unwrap_or_default();
                    let input = match l.input_size {
                        0 => "?".to_string(),
                        n => n.to_string(),
                    };
                    say!(
                        "  #{i} '{}' {}: input {input}, units {}{}{}{}",
                        l.name,
                        l.class_name,
                        l.units,
                        if l.return_sequences {
                            ", returns sequences"
                        } else {
                            ""
                        },
                        mask,
                        l.refusal
                            .as_ref()
                            .map(|e| format!("\n      cannot load: {e}"))
                            .unwrap_or_default()
                    );
                }
            }
            Model::Onnx(m) => {
                for (i, n) in m.nodes().iter().enumerate() {
                    let state: String = [("initial_h", &n.initial_h), ("initial_c", &n.initial_c)]
                        .iter()
                        .filter_map(|(label, name)| {
                            name.as_deref().map(|name| format!(", {label} '{name}'"))
                        })
                        .collect();
                    say!(
                        "  #{i} '{}' {}: input {}, hidden {}{}{}{state}{}",
                        n.name,
                        n.op_type,
                        n.input_size,
                        n.hidden_size,
                        if n.bidirectional {
                            ", bidirectional"
                        } else {
                            ""
                        },
                        n.sequence_lens
                            .as_deref()
                            .map(|s| format!(", sequence_lens '{s}'"))
                            .unwrap_or_default(),
                        n.refusal
                            .as_ref()
                            .map(|e| format!("\n      cannot load: {e}"))
                            .unwrap_or_default()
                    );
                }
            }
        }
    }

    /// The cell of the first selected layer or node.
    fn cell(&self, selection: &RecurrentSelection) -> Result<CellKind, String> {
        let cells: Vec<(String, CellKind)> = match self {
            Model::Keras(m) => m
                .layers()
                .iter()
                .map(|l| (l.name.clone(), l.cell))
                .collect(),
            Model::Onnx(m) => m.nodes().iter().map(|n| (n.name.clone(), n.cell)).collect(),
        };
        let first = match selection {
            RecurrentSelection::Name(n) => cells.iter().find(|c| &c.0 == n),
            RecurrentSelection::Stack(s) => cells.iter().find(|c| Some(&c.0) == s.first()),
            RecurrentSelection::Index(i) => cells.get(*i),
            RecurrentSelection::All => cells.first(),
        };
        first
            .map(|c| c.1)
            .ok_or_else(|| format!("no recurrent layer or node {selection}"))
    }

    fn load(&self, selection: RecurrentSelection) -> Result<Module, String> {
        let device = Default::default();
        let cell = self.cell(&selection)?;
        let module = match (self, cell) {
            (Model::Keras(m), CellKind::Lstm) => Module::Lstm(
                m.lstm(selection, &device).map_err(|e| e.to_string())?.0,
                Ok(None),
            ),
            (Model::Keras(m), CellKind::Gru) => Module::Gru(
                m.gru(selection, &device).map_err(|e| e.to_string())?.0,
                Ok(None),
            ),
            (Model::Onnx(m), CellKind::Lstm) => Module::Lstm(
                m.lstm(selection.clone(), &device)
                    .map_err(|e| e.to_string())?
                    .0,
                m.lstm_initial_state(selection, &device)
                    .map_err(|e| e.to_string()),
            ),
            (Model::Onnx(m), CellKind::Gru) => Module::Gru(
                m.gru(selection.clone(), &device)
                    .map_err(|e| e.to_string())?
                    .0,
                m.gru_initial_state(selection, &device)
                    .map_err(|e| e.to_string()),
            ),
        };
        Ok(module)
    }
}

/// The file's initial state, for an input without `h0`: an ONNX graph's constant
/// state, `None` for zeros, or an error where the graph takes the state from its caller
/// (as ONNX Runtime, which needs that input fed).
fn file_state<S: Clone>(state: &FileState<S>) -> Result<Option<S>, String> {
    state
        .clone()
        .map_err(|why| format!("the input has no `h0`: {why}"))
}

fn tensor3(tensors: &Tensors, key: &str) -> Result<Option<Tensor<Flex, 3>>, String> {
    let Some((shape, values)) = tensors.get(key) else {
        return Ok(None);
    };
    let shape: [usize; 3] = shape
        .clone()
        .try_into()
        .map_err(|_| format!("`{key}` is not 3-D: {shape:?}"))?;
    Ok(Some(Tensor::from_data(
        TensorData::new(values.clone(), shape),
        &Default::default(),
    )))
}

/// Runs `module` on `x` (with `h0`, `c0`, `lengths` from `tensors` when present).
fn run_module(module: &Module, tensors: &Tensors, prefix: &str) -> Result<Tensors, String> {
    let key = |k: &str| format!("{prefix}{k}");
    let x = tensor3(tensors, &key("x"))?.ok_or_else(|| format!("no tensor `{}`", key("x")))?;
    let lengths: Option<Vec<usize>> = tensors
        .get(&key("lengths"))
        .map(|(_, v)| v.iter().map(|&l| l as usize).collect());
    let host = |t: Tensor<Flex, 3>| {
        (
            t.dims().to_vec(),
            t.into_data().convert::<f32>().to_vec::<f32>().expect("f32"),
        )
    };
    let mut out = Tensors::new();
    match module {
        Module::Lstm(lstm, graph) => {
            let state = match (tensor3(tensors, &key("h0"))?, tensor3(tensors, &key("c0"))?) {
                (Some(h), Some(c)) => Some(LstmState::new(h, c)),
                (None, None) => file_state(graph)?,
                _ => return Err("an LSTM's initial state needs both `h0` and `c0`".into()),
            };
            let (y, state) = lstm
                .try_forward(x, state, lengths.as_deref())
                .map_err(|e| e.to_string())?;
            out.insert("y".into(), host(y));
            out.insert("h_n".into(), host(state.hidden));
            out.insert("c_n".into(), host(state.cell));
        }
        Module::Gru(gru, graph) => {
            let state = match tensor3(tensors, &key("h0"))? {
                Some(h) => Some(GruState::new(h)),
                None => file_state(graph)?,
            };
            let (y, state) = gru
                .try_forward(x, state, lengths.as_deref())
                .map_err(|e| e.to_string())?;
            out.insert("y".into(), host(y));
            out.insert("h_n".into(), host(state.hidden));
        }
    }
    Ok(out)
}

/// Every tensor of a safetensors file as f32 (integers too: lengths), and its metadata.
fn read(path: &Path) -> Result<(Tensors, HashMap<String, String>), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (_, metadata) =
        SafeTensors::read_metadata(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let file = SafeTensors::deserialize(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Tensors::new();
    for (name, view) in file.tensors() {
        let d = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            Dtype::F64 => d
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            Dtype::I64 => d
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            Dtype::I32 => d
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as f32)
                .collect(),
            other => {
                return Err(format!(
                    "{}: tensor `{name}` of dtype {other:?}",
                    path.display()
                ));
            }
        };
        out.insert(name, (view.shape().to_vec(), values));
    }
    Ok((out, metadata.metadata().clone().unwrap_or_default()))
}

fn write(path: &Path, tensors: &Tensors) -> Result<(), String> {
    let bytes: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .iter()
        .map(|(k, (shape, v))| {
            (
                k.clone(),
                shape.clone(),
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        })
        .collect();
    let views = bytes
        .iter()
        .map(|(k, shape, b)| {
            Ok((
                k.clone(),
                TensorView::new(Dtype::F32, shape.clone(), b).map_err(|e| e.to_string())?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    safetensors::serialize_to_file(views, None, path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

fn selection(layers: &[String]) -> RecurrentSelection {
    match layers {
        [] => RecurrentSelection::All,
        [one] => RecurrentSelection::Name(one.clone()),
        many => RecurrentSelection::Stack(many.to_vec()),
    }
}

fn run(args: Args) -> Result<(), String> {
    let model = Model::open(&args)?;
    say!("{}:", args.file.display());
    model.describe();
    if let (Some(input), Some(output)) = (&args.input, &args.output) {
        let module = model.load(selection(&args.layer))?;
        let (tensors, _) = read(input)?;
        let out = run_module(&module, &tensors, "")?;
        write(output, &out)?;
        let shapes: Vec<String> = ["y", "h_n", "c_n"]
            .iter()
            .filter_map(|k| out.get(*k).map(|(s, _)| format!("{k} {s:?}")))
            .collect();
        say!("wrote {} ({})", output.display(), shapes.join(", "));
        return Ok(());
    }
    let expected = args
        .expected
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.io.safetensors", args.file.display())));
    if !expected.is_file() {
        say!(
            "(no stored outputs: {} does not exist; pass --input/--output to run)",
            expected.display()
        );
        return Ok(());
    }
    let (tensors, meta) = read(&expected)?;
    let cases: serde_json::Value =
        serde_json::from_str(meta.get("cases").ok_or("no `cases` metadata")?)
            .map_err(|e| e.to_string())?;
    let mut worst = 0.0f32;
    for case in cases.as_array().ok_or("`cases` is not a list")? {
        let name = case["case"].as_str().unwrap_or_default();
        let mut layers: Vec<String> = case["select"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect();
        if !args.layer.is_empty() {
            layers = args.layer.clone();
        }
        let module = model.load(selection(&layers))?;
        let ours = run_module(&module, &tensors, &format!("{name}/"))?;
        let lengths = tensors
            .get(&format!("{name}/lengths"))
            .map(|(_, v)| v.clone());
        say!(
            "case '{name}' (layers {layers:?}{}):",
            if lengths.is_some() {
                ", masked rows"
            } else {
                ""
            }
        );
        for key in ["y", "h_n", "c_n"] {
            let (Some((shape, mine)), Some((_, theirs))) =
                (ours.get(key), tensors.get(&format!("{name}/{key}")))
            else {
                continue;
            };
            // Padded steps of y: Keras repeats the last output where we (and cuDNN, ONNX) give zeros.
            let batch_first = matches!(model, Model::Keras(_));
            let valid = |i: usize| {
                let Some(lengths) = &lengths else { return true };
                if key != "y" {
                    return true;
                }
                let flat = i / shape[2];
                let (b, t) = if batch_first {
                    (flat / shape[1], flat % shape[1])
                } else {
                    (flat % shape[1], flat / shape[1])
                };
                (t as f32) < lengths[b]
            };
            let diff = mine
                .iter()
                .zip(theirs)
                .enumerate()
                .filter(|(i, _)| valid(*i))
                .map(|(_, (a, b))| (a - b).abs())
                .fold(0.0f32, f32::max);
            worst = worst.max(diff);
            let show = |v: &[f32]| {
                v.iter()
                    .take(4)
                    .map(|x| format!("{x:+.6}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            say!(
                "  {key:>3} {shape:?}  ours {}  file {}  largest difference {diff:.2e}",
                show(mine),
                show(theirs)
            );
        }
    }
    say!("largest difference from the file's outputs: {worst:.2e}");
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("keras_lstm: {message}");
            ExitCode::FAILURE
        }
    }
}
