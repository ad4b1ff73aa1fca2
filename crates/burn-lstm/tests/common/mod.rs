//! Shared test helpers: golden cases from PyTorch and error measures.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub mod dropout_check;
pub mod empty_rows_check;
pub mod eval_between_steps_check;
pub mod golden_check;
pub mod gru_golden_check;
pub mod half_check;

use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_lstm::{CudnnCompatibleGruConfig, CudnnCompatibleLstmConfig};
use safetensors::{Dtype, SafeTensors};

/// The config block of a golden file (see fixtures/golden/README.md).
#[derive(Debug, Clone, serde::Deserialize)]
pub struct GoldenConfig {
    pub input_size: usize,
    pub hidden_size: usize,
    pub batch: usize,
    pub seq_len: usize,
    pub num_layers: usize,
    pub bidirectional: bool,
    pub batch_first: bool,
    pub initial_state: bool,
    pub lengths: Option<Vec<usize>>,
    pub proj_size: usize,
    pub bias: bool,
    /// `"gru"` for a GRU case (`../golden-gru`); absent (or `"lstm"`) for an LSTM case.
    #[serde(default)]
    pub cell: Option<String>,
}

impl GoldenConfig {
    /// The cell of the case: `"lstm"` or `"gru"`.
    pub fn cell(&self) -> &str {
        self.cell.as_deref().unwrap_or("lstm")
    }
}

/// A safetensors tensor's values (f64, f32 or i64, little-endian) as f64; `name` goes
/// into the panic for another dtype.
pub fn values_f64(name: &str, view: &safetensors::tensor::TensorView) -> Vec<f64> {
    let data = view.data();
    match view.dtype() {
        Dtype::F64 => data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        Dtype::F32 => data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        Dtype::I64 => data
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as f64)
            .collect(),
        other => panic!("{name}: unsupported dtype {other:?}"),
    }
}

/// One golden case: its config and every tensor as f64 with its shape.
pub struct GoldenCase {
    pub name: String,
    pub path: PathBuf,
    pub config: GoldenConfig,
    pub tensors: HashMap<String, (Vec<usize>, Vec<f64>)>,
}

impl GoldenCase {
    pub fn load(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let config = golden_config(path, &bytes);
        let file = SafeTensors::deserialize(&bytes).expect("safetensors body");
        let mut tensors = HashMap::new();
        for (name, view) in file.tensors() {
            let values = values_f64(&name, &view);
            tensors.insert(name, (view.shape().to_vec(), values));
        }
        Self {
            name: path.file_stem().unwrap().to_string_lossy().into_owned(),
            path: path.to_path_buf(),
            config,
            tensors,
        }
    }

    /// The GRU config of a GRU case.
    pub fn gru_config(&self) -> CudnnCompatibleGruConfig {
        let c = &self.config;
        assert_eq!(c.cell(), "gru", "{}: not a GRU case", self.name);
        CudnnCompatibleGruConfig::new(c.input_size, c.hidden_size)
            .with_num_layers(c.num_layers)
            .with_bidirectional(c.bidirectional)
            .with_bias(c.bias)
            .with_batch_first(c.batch_first)
    }

    pub fn module_config(&self) -> CudnnCompatibleLstmConfig {
        let c = &self.config;
        CudnnCompatibleLstmConfig::new(c.input_size, c.hidden_size)
            .with_num_layers(c.num_layers)
            .with_bidirectional(c.bidirectional)
            .with_bias(c.bias)
            .with_batch_first(c.batch_first)
            .with_proj_size(c.proj_size)
    }

    pub fn has(&self, name: &str) -> bool {
        self.tensors.contains_key(name)
    }

    pub fn values(&self, name: &str) -> &[f64] {
        &self
            .tensors
            .get(name)
            .unwrap_or_else(|| panic!("{}: no tensor `{name}`", self.name))
            .1
    }

    pub fn tensor<B: Backend, const D: usize>(
        &self,
        name: &str,
        device: &B::Device,
    ) -> Tensor<B, D> {
        let (shape, values) = self
            .tensors
            .get(name)
            .unwrap_or_else(|| panic!("{}: no tensor `{name}`", self.name));
        Tensor::from_data(TensorData::new(values.clone(), shape.clone()), device)
    }

    /// Names of the PyTorch parameters (`weight_ih_l0`, ...).
    pub fn parameter_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .tensors
            .keys()
            .filter(|k| ["weight_", "bias_"].iter().any(|p| k.starts_with(p)))
            .cloned()
            .collect();
        names.sort();
        names
    }
}

/// Makes f64 the float type of Flex's one device for this process and returns the
/// device. Flex picks its float type at run time, and Burn 0.21 keeps one default per
/// device, set before the first tensor is made on it (docs/numerics.md). Every test of
/// a process that uses Flex in f64 calls this first.
pub fn flex_f64() -> burn::backend::flex::FlexDevice {
    use burn::tensor::{DType, IntDType, get_device_settings, set_default_dtypes};
    let device = burn::backend::flex::FlexDevice;
    // Refused after the first call (or after a tensor was made): checked below.
    let _ = set_default_dtypes::<burn::backend::Flex>(&device, DType::F64, IntDType::I64);
    let float = get_device_settings::<burn::backend::Flex>(&device).float_dtype;
    assert_eq!(
        float,
        burn::tensor::FloatDType::F64,
        "Flex's device was used in another float type first"
    );
    device
}

/// The LSTM fixtures shipped with the crate, plus every LSTM case in `$LSTM_GOLDEN_DIR`
/// when set.
pub fn golden_paths() -> Vec<PathBuf> {
    golden_paths_of("lstm", "golden")
}

/// The GRU fixtures shipped with the crate (`tests/fixtures/golden-gru`), plus every
/// GRU case (`"cell": "gru"`) in `$LSTM_GOLDEN_DIR` when set.
pub fn gru_golden_paths() -> Vec<PathBuf> {
    golden_paths_of("gru", "golden-gru")
}

/// The `config` metadata of the golden file `bytes` (read from `path`).
fn golden_config(path: &Path, bytes: &[u8]) -> GoldenConfig {
    let (_, metadata) = SafeTensors::read_metadata(bytes).expect("safetensors header");
    let config = metadata
        .metadata()
        .as_ref()
        .and_then(|m| m.get("config"))
        .unwrap_or_else(|| panic!("{}: no `config` metadata", path.display()));
    serde_json::from_str(config).expect("golden config JSON")
}

/// The cell named in the `config` metadata of the golden file at `path`.
fn cell_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    golden_config(path, &bytes).cell().to_string()
}

fn golden_paths_of(cell: &str, fixtures: &str) -> Vec<PathBuf> {
    let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixtures);
    let extra = std::env::var("LSTM_GOLDEN_DIR").ok().map(PathBuf::from);
    let mut dirs = Vec::new();
    // A test binary copied to another machine (the GPU machine) cannot see the fixtures it
    // was built next to: there `LSTM_GOLDEN_DIR` names the copied cases instead.
    if extra.is_none() || shipped.is_dir() {
        dirs.push(shipped);
    } else {
        println!(
            "{} is not here; using LSTM_GOLDEN_DIR only",
            shipped.display()
        );
    }
    dirs.extend(extra);
    let mut paths = Vec::new();
    for dir in dirs {
        let mut found: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("golden directory {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
            .collect();
        found.sort();
        assert!(!found.is_empty(), "no golden case in {}", dir.display());
        // `$LSTM_GOLDEN_DIR` may hold cases of both cells, told apart by their config.
        let total = found.len();
        found.retain(|path| cell_of(path) == cell);
        println!(
            "{}: {} of {total} cases are {cell} cases",
            dir.display(),
            found.len()
        );
        paths.extend(found);
    }
    // A run over no case would pass whatever the kernels compute.
    assert!(!paths.is_empty(), "no {cell} golden case found");
    paths
}

pub fn to_f64<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f64> {
    t.into_data().convert::<f64>().to_vec::<f64>().unwrap()
}

/// Largest absolute difference divided by the largest magnitude of the reference
/// (an ∞-norm relative error: element-wise ratios explode near zero crossings).
pub fn rel_err(actual: &[f64], expected: &[f64]) -> f64 {
    assert_eq!(actual.len(), expected.len(), "length mismatch");
    let scale = expected
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(1e-12);
    let diff = actual.iter().zip(expected).fold(0.0f64, |m, (a, e)| {
        if a.is_nan() || e.is_nan() {
            f64::INFINITY
        } else {
            m.max((a - e).abs())
        }
    });
    diff / scale
}

/// Collects `name=err` pairs, prints one line for the case and fails past `tol`.
/// With this variable naming a file, every value an [`ErrorReport`] checks is also
/// appended to it as a line `label name digest`: the 64-bit FNV-1a hash of the values'
/// bits. `benchmarks/bit-identical.sh` compares two commits' files line by line.
pub const VALUES_DIGEST_ENV: &str = "LSTM_VALUES_DIGEST";

/// Appends `label`'s digest line for `values` to the file at `path` (one `write` of the
/// whole line, so lines of parallel tests and of child processes stay whole).
fn append_digest(path: &std::ffi::OsStr, label: &str, values: &[f64]) {
    use std::io::Write;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in values.iter().flat_map(|v| v.to_bits().to_le_bytes()) {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    let line = format!("{label} n={} {hash:016x}\n", values.len());
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the digest file opens for appending");
    file.write_all(line.as_bytes())
        .expect("the digest line is written");
}

pub struct ErrorReport {
    pub label: String,
    pub tol: f64,
    pub errors: Vec<(String, f64)>,
}

impl ErrorReport {
    pub fn new(label: impl Into<String>, tol: f64) -> Self {
        Self {
            label: label.into(),
            tol,
            errors: Vec::new(),
        }
    }

    pub fn check(&mut self, name: &str, actual: &[f64], expected: &[f64]) {
        self.errors
            .push((name.to_string(), rel_err(actual, expected)));
        if let Some(path) = std::env::var_os(VALUES_DIGEST_ENV) {
            append_digest(&path, &format!("{} {name}", self.label), actual);
        }
    }

    /// Prints the case's line; returns a failure description when an error exceeds `tol`.
    pub fn finish(self) -> Result<(), String> {
        let line: Vec<String> = self
            .errors
            .iter()
            .map(|(n, e)| format!("{n}={e:.2e}"))
            .collect();
        println!("{} {}", self.label, line.join(" "));
        let bad: Vec<&(String, f64)> = self
            .errors
            .iter()
            .filter(|(_, e)| e.is_nan() || *e > self.tol)
            .collect();
        if bad.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: errors above {:.0e}: {bad:?}",
                self.label, self.tol
            ))
        }
    }
}

/// Fails with every failing case's description, after all of them ran.
pub fn assert_all(results: Vec<Result<(), String>>) {
    let failures: Vec<String> = results.into_iter().filter_map(Result::err).collect();
    assert!(
        failures.is_empty(),
        "{} failing case(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Asserts that `result` is `RnnError::InvalidArgument` for `argument` whose expected and
/// actual values mention every one of `fragments`.
pub fn expect_invalid(
    result: Result<impl Sized, burn_lstm::RnnError>,
    argument: &str,
    fragments: &[&str],
) {
    match result {
        Err(burn_lstm::RnnError::InvalidArgument {
            argument: a,
            expected,
            actual,
        }) => {
            assert_eq!(a, argument);
            let text = format!("{expected} | {actual}");
            for f in fragments {
                assert!(text.contains(f), "`{text}` lacks `{f}`");
            }
        }
        Err(other) => panic!("expected InvalidArgument for {argument}, got {other}"),
        Ok(_) => panic!("expected an error for {argument}"),
    }
}
