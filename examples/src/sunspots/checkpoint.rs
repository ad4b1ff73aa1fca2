//! A trained forecaster on disk: `model.mpk` (a Burn record, full precision) and
//! `config.json` next to it; loading checks every parameter against the config.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn_lstm::{LstmBackend, LstmError};

use super::error::ExampleError;
use super::model::{ForecastConfig, Forecaster, ForecasterRecord};

/// File names inside a checkpoint directory.
pub const MODEL_FILE: &str = "model.mpk";
/// The config saved next to the model.
pub const CONFIG_FILE: &str = "config.json";

/// Saves `model` as `model.mpk` and `config` as `config.json` in `out_dir`.
pub fn save_forecaster<B: burn::tensor::backend::Backend>(
    model: Forecaster<B>,
    config: &ForecastConfig,
    out_dir: &Path,
) -> Result<(), ExampleError> {
    std::fs::create_dir_all(out_dir).map_err(|e| ExampleError::Corrupt {
        what: "output directory",
        path: out_dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    model
        .save_file(out_dir.join("model"), &recorder)
        .map_err(|e| ExampleError::Corrupt {
            what: "checkpoint",
            path: out_dir.join(MODEL_FILE),
            message: e.to_string(),
        })?;
    config
        .save(out_dir.join(CONFIG_FILE))
        .map_err(|e| ExampleError::Corrupt {
            what: "config",
            path: out_dir.join(CONFIG_FILE),
            message: e.to_string(),
        })
}

/// Loads `model.mpk` from `checkpoint` (a directory, or the `.mpk` file in one) with the
/// `config.json` next to it (or `config`), checking every parameter's shape.
pub fn load_forecaster<B: LstmBackend>(
    checkpoint: &Path,
    config: Option<&Path>,
    device: &B::Device,
) -> Result<(Forecaster<B>, ForecastConfig), ExampleError> {
    let dir = if checkpoint.is_dir() {
        checkpoint.to_path_buf()
    } else {
        checkpoint
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    };
    let model_path = if checkpoint.is_dir() {
        dir.join(MODEL_FILE)
    } else {
        checkpoint.to_path_buf()
    };
    if !model_path.is_file() {
        return Err(ExampleError::Missing {
            what: "checkpoint",
            path: model_path,
        });
    }
    let config_path = config
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.join(CONFIG_FILE));
    if !config_path.is_file() {
        return Err(ExampleError::Missing {
            what: "config",
            path: config_path,
        });
    }
    let config = ForecastConfig::load(&config_path).map_err(|e| ExampleError::Corrupt {
        what: "config",
        path: config_path.clone(),
        message: e.to_string(),
    })?;
    config.validate().map_err(|message| ExampleError::Corrupt {
        what: "config",
        path: config_path.clone(),
        message,
    })?;
    let corrupt = |message: String| ExampleError::Corrupt {
        what: "checkpoint",
        path: model_path.clone(),
        message,
    };
    // Burn's decoder returns errors for most damage but panics on some (a tensor whose
    // shape does not match its bytes, an unknown id): a damaged file is user input, so
    // the panic becomes a named error. Sound: nothing shared outlives the closure
    // half-built (the recorder is only read; a failed record is dropped).
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let record: ForecasterRecord<B> = match catch_unwind(AssertUnwindSafe(|| {
        recorder.load::<ForecasterRecord<B>>(model_path.clone(), device)
    })) {
        Ok(Ok(record)) => record,
        Ok(Err(e)) => return Err(corrupt(e.to_string())),
        Err(panic) => {
            return Err(corrupt(format!(
                "Burn's loader failed: {}",
                message(&panic)
            )));
        }
    };
    let mismatch = |message: String| ExampleError::ConfigMismatch {
        path: model_path.clone(),
        message,
    };
    // Burn's `load_record` panics on a layer count it does not expect.
    let layers = record.lstm.layers.len();
    if layers != config.layers {
        return Err(mismatch(format!(
            "lstm.layers: the config needs {}, the checkpoint has {layers}",
            config.layers
        )));
    }
    let model = catch_unwind(AssertUnwindSafe(|| {
        config.init::<B>(device).load_record(record)
    }))
    .map_err(|panic| mismatch(message(&panic)))?;
    model
        .lstm
        .validate()
        .map_err(|e: LstmError| mismatch(e.to_string()))?;
    let head = model.head.weight.dims();
    if head != [config.hidden, 1] {
        return Err(mismatch(format!(
            "head.weight: expected shape [{}, 1], got {head:?}",
            config.hidden
        )));
    }
    Ok((model, config))
}

/// The text of a caught panic.
fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}
