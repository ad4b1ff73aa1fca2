//! A trained forecaster on disk: `model.mpk` (a Burn record, full precision) and
//! `config.json` next to it; loading checks every parameter against the config
//! (`burn_lstm::load_file_checked`).

use std::path::Path;

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn_lstm::{RnnBackend, RnnError};

use super::error::ExampleError;
use super::model::{ForecastConfig, Forecaster};

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
pub fn load_forecaster<B: RnnBackend>(
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
    // Every tensor of the record is checked against the model built from the config
    // (shapes, names, none missing or extra) before any is loaded, and a damaged file
    // is an error, never a panic: `burn_lstm::load_file_checked`.
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let model =
        burn_lstm::load_file_checked(config.init::<B>(device), &model_path, &recorder, device)
            .map_err(|e| match e {
                RnnError::Io { message, .. } => ExampleError::Corrupt {
                    what: "checkpoint",
                    path: model_path.clone(),
                    message,
                },
                other => ExampleError::ConfigMismatch {
                    path: model_path.clone(),
                    message: other.to_string(),
                },
            })?;
    Ok((model, config))
}
