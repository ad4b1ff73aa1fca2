//! A trained forecaster on disk: `model.mpk` (a Burn record, full precision) and
//! `config.json` next to it; loading checks every parameter against the config.

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
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let record: ForecasterRecord<B> =
        recorder
            .load(model_path.clone(), device)
            .map_err(|e| ExampleError::Corrupt {
                what: "checkpoint",
                path: model_path.clone(),
                message: e.to_string(),
            })?;
    let model = config.init::<B>(device).load_record(record);
    let mismatch = |message: String| ExampleError::ConfigMismatch {
        path: model_path.clone(),
        message,
    };
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
