//! The fixtures' io files (`FILE.io.safetensors`: per case the input, lengths, initial
//! state and the expected outputs; metadata `cases`), and running a loaded module on a
//! case.

use std::collections::HashMap;
use std::path::PathBuf;

use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleLstm, GruState, KerasModel, LstmState, OnnxModel,
    RecurrentSelection, RnnBackend,
};
use safetensors::SafeTensors;

/// Tensors by name: shape and values.
type Tensors = HashMap<String, (Vec<usize>, Vec<f64>)>;

/// A fixture file under `tests/fixtures/{dir}/`.
pub fn fixture(dir: &str, name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir)
        .join(name)
}

/// One case of an io file.
pub struct Case {
    pub name: String,
    /// The layers or nodes loaded as one module, bottom first.
    pub select: Vec<String>,
    /// `lstm` or `gru`.
    pub cell: String,
    tensors: Tensors,
}

impl Case {
    pub fn has(&self, key: &str) -> bool {
        self.tensors.contains_key(key)
    }

    pub fn values(&self, key: &str) -> &[f64] {
        &self.get(key).1
    }

    pub fn get(&self, key: &str) -> &(Vec<usize>, Vec<f64>) {
        self.tensors
            .get(key)
            .unwrap_or_else(|| panic!("case {}: no tensor {key}", self.name))
    }

    pub fn tensor<B: Backend>(&self, key: &str, device: &B::Device) -> Tensor<B, 3> {
        let (shape, values) = self.get(key);
        Tensor::from_data(
            TensorData::new(values.clone(), [shape[0], shape[1], shape[2]]),
            device,
        )
    }

    pub fn lengths(&self) -> Option<Vec<usize>> {
        self.has("lengths")
            .then(|| self.values("lengths").iter().map(|&v| v as usize).collect())
    }

    pub fn selection(&self) -> RecurrentSelection {
        RecurrentSelection::Stack(self.select.clone())
    }
}

/// The cases of `FILE.io.safetensors`.
pub fn cases(model: &std::path::Path) -> Vec<Case> {
    let path = PathBuf::from(format!("{}.io.safetensors", model.display()));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (_, metadata) = SafeTensors::read_metadata(&bytes).expect("safetensors header");
    let meta = metadata.metadata().clone().expect("metadata");
    let list: serde_json::Value = serde_json::from_str(&meta["cases"]).expect("cases JSON");
    let file = SafeTensors::deserialize(&bytes).expect("safetensors body");
    let mut all: HashMap<String, Tensors> = HashMap::new();
    for (name, view) in file.tensors() {
        let values = crate::common::values_f64(&name, &view);
        let (case, key) = name.split_once('/').expect("case/key");
        all.entry(case.to_string())
            .or_default()
            .insert(key.to_string(), (view.shape().to_vec(), values));
    }
    list.as_array()
        .expect("a list of cases")
        .iter()
        .map(|c| {
            let name = c["case"].as_str().unwrap().to_string();
            Case {
                select: c["select"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_string())
                    .collect(),
                cell: c["cell"].as_str().unwrap().to_string(),
                tensors: all.remove(&name).unwrap_or_default(),
                name,
            }
        })
        .collect()
}

/// A loaded module of either cell, with the initial state its file gives (ONNX
/// constants; `None`: zeros).
pub enum Loaded<B: Backend> {
    Lstm(CudnnCompatibleLstm<B>, Option<LstmState<B>>),
    Gru(CudnnCompatibleGru<B>, Option<GruState<B>>),
}

impl<B: Backend> Loaded<B> {
    pub fn keras(model: &KerasModel, case: &Case, device: &B::Device) -> Self {
        let what = format!("{} case {}", model.source(), case.name);
        match case.cell.as_str() {
            "lstm" => Self::Lstm(
                model
                    .lstm(case.selection(), device)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .0,
                None,
            ),
            _ => Self::Gru(
                model
                    .gru(case.selection(), device)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .0,
                None,
            ),
        }
    }

    /// The case's nodes, and their constant initial state where the case gives none.
    pub fn onnx(model: &OnnxModel, case: &Case, device: &B::Device) -> Self {
        let what = format!("{} case {}", model.source(), case.name);
        let constant = !case.has("h0");
        match case.cell.as_str() {
            "lstm" => Self::Lstm(
                model
                    .lstm(case.selection(), device)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .0,
                constant
                    .then(|| model.lstm_initial_state(case.selection(), device))
                    .transpose()
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .flatten(),
            ),
            _ => Self::Gru(
                model
                    .gru(case.selection(), device)
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .0,
                constant
                    .then(|| model.gru_initial_state(case.selection(), device))
                    .transpose()
                    .unwrap_or_else(|e| panic!("{what}: {e}"))
                    .flatten(),
            ),
        }
    }
}

/// Runs `module` on the case's input (lengths and initial state when it has them, else
/// the file's state);
/// returns `y`, `h_n` and `c_n` as host values.
pub fn run<B: RnnBackend>(
    module: &Loaded<B>,
    case: &Case,
    device: &B::Device,
) -> HashMap<&'static str, Vec<f64>> {
    let x = case.tensor::<B>("x", device);
    let lengths = case.lengths();
    let values =
        |t: Tensor<B, 3>| -> Vec<f64> { t.into_data().convert::<f64>().to_vec::<f64>().unwrap() };
    let mut out = HashMap::new();
    match module {
        Loaded::Lstm(lstm, initial) => {
            let state = if case.has("h0") {
                Some(LstmState::new(
                    case.tensor("h0", device),
                    case.tensor("c0", device),
                ))
            } else {
                initial.clone()
            };
            let (y, state) = lstm
                .try_forward(x, state, lengths.as_deref())
                .expect("forward");
            out.insert("y", values(y));
            out.insert("h_n", values(state.hidden));
            out.insert("c_n", values(state.cell));
        }
        Loaded::Gru(gru, initial) => {
            let state = if case.has("h0") {
                Some(GruState::new(case.tensor("h0", device)))
            } else {
                initial.clone()
            };
            let (y, state) = gru
                .try_forward(x, state, lengths.as_deref())
                .expect("forward");
            out.insert("y", values(y));
            out.insert("h_n", values(state.hidden));
        }
    }
    out
}

/// Largest absolute difference of our outputs from the case's (`suffix` `""` for the
/// float32 reference, `"_f64"` for the float64 one), comparing `y` on valid steps only
/// (Keras repeats a row's last output at its masked steps where our module, cuDNN and
/// ONNX give zeros); asserts that ours are zero there. Panics past `tol`.
pub fn check(
    label: &str,
    case: &Case,
    ours: &HashMap<&'static str, Vec<f64>>,
    suffix: &str,
    batch_first: bool,
    tol: f64,
) -> f64 {
    let mut worst = 0.0f64;
    let mut line = format!("{label} {}:", case.name);
    for key in ["y", "h_n", "c_n"] {
        let Some(mine) = ours.get(key) else { continue };
        let (shape, theirs) = case.get(&format!("{key}{suffix}"));
        assert_eq!(
            mine.len(),
            theirs.len(),
            "{label} {}: {key} has {} values, the reference {shape:?}",
            case.name,
            mine.len()
        );
        let valid = |i: usize| -> bool {
            if key != "y" {
                return true;
            }
            let Some(lengths) = case.lengths() else {
                return true;
            };
            let inner = shape[1];
            let flat = i / shape[2];
            let (b, t) = if batch_first {
                (flat / inner, flat % inner)
            } else {
                (flat % inner, flat / inner)
            };
            t < lengths[b]
        };
        let mut err = 0.0f64;
        for (i, (a, e)) in mine.iter().zip(theirs).enumerate() {
            if valid(i) {
                err = err.max((a - e).abs());
                if a.is_nan() {
                    err = f64::INFINITY;
                }
            } else {
                assert_eq!(
                    *a, 0.0,
                    "{label} {}: output at a padded step is {a}, not zero",
                    case.name
                );
            }
        }
        line += &format!(" {key} {err:.1e}");
        worst = worst.max(err);
    }
    println!("{line}");
    assert!(
        worst <= tol,
        "{label} {}: error {worst:e} above {tol:e}",
        case.name
    );
    worst
}
