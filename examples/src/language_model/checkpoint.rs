//! A trained language model on disk: `model.mpk` (a Burn record, full precision),
//! `config.json` and `vocab.txt` (one word per line, line `i + 1` is word `i`) in one
//! directory. Loading checks the three against each other: the config's ranges, the
//! vocabulary's size against the config, then every tensor of the checkpoint against
//! the model the config builds (`burn_lstm::load_file_checked`).

use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::Backend;
use burn_lstm::{RnnBackend, RnnError};

use super::error::LmError;
use super::model::{LmConfig, WordLm};
use super::vocab::Dictionary;

/// The record's file name inside a model directory.
pub const MODEL_FILE: &str = "model.mpk";
/// The config's file name.
pub const CONFIG_FILE: &str = "config.json";
/// The vocabulary's file name.
pub const VOCAB_FILE: &str = "vocab.txt";

/// The recorder of the model: Burn's named MessagePack, full precision.
fn recorder() -> NamedMpkFileRecorder<FullPrecisionSettings> {
    NamedMpkFileRecorder::<FullPrecisionSettings>::new()
}

/// Saves `config.json` and `vocab.txt` in `dir` (created if needed): what a model
/// directory holds besides the model itself, written once before training.
pub fn save_config_and_vocab(
    config: &LmConfig,
    dictionary: &Dictionary,
    dir: &Path,
) -> Result<(), LmError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| LmError::corrupt("model directory", dir, format!("cannot be created: {e}")))?;
    config
        .save(dir.join(CONFIG_FILE))
        .map_err(|e| LmError::corrupt("config", dir.join(CONFIG_FILE), e.to_string()))?;
    dictionary.save(&dir.join(VOCAB_FILE))
}

/// Saves `model` as `dir/model.mpk` (replacing the previous best).
pub fn save_model<B: Backend>(model: &WordLm<B>, dir: &Path) -> Result<(), LmError> {
    model
        .clone()
        .save_file(dir.join("model"), &recorder())
        .map_err(|e| LmError::corrupt("checkpoint", dir.join(MODEL_FILE), e.to_string()))
}

/// A model directory's files, checked against each other and loaded on `device`.
pub struct SavedModel<B: Backend> {
    /// The model (its parameters as trained).
    pub model: WordLm<B>,
    /// Its architecture.
    pub config: LmConfig,
    /// Its vocabulary (`vocab_size` words).
    pub dictionary: Dictionary,
}

/// Loads `dir/{config.json, vocab.txt, model.mpk}`: every file missing, damaged or not
/// matching the others is an error naming it, what was expected and what was found.
pub fn load_model<B: RnnBackend>(dir: &Path, device: &B::Device) -> Result<SavedModel<B>, LmError> {
    let file = |name: &str| -> Result<PathBuf, LmError> {
        let path = dir.join(name);
        if path.is_file() {
            Ok(path)
        } else {
            Err(LmError::Missing {
                what: match name {
                    CONFIG_FILE => "config",
                    VOCAB_FILE => "vocabulary",
                    _ => "checkpoint",
                },
                path,
            })
        }
    };
    let (config_path, vocab_path, model_path) =
        (file(CONFIG_FILE)?, file(VOCAB_FILE)?, file(MODEL_FILE)?);

    let config = LmConfig::load(&config_path)
        .map_err(|e| LmError::corrupt("config", &config_path, e.to_string()))?;
    config
        .validate()
        .map_err(|message| LmError::corrupt("config", &config_path, message))?;

    let dictionary = Dictionary::load(&vocab_path)?;
    if dictionary.len() != config.vocab_size {
        return Err(LmError::Mismatch {
            path: vocab_path,
            message: format!(
                "expected {} words ({CONFIG_FILE}'s vocab_size), got {}",
                config.vocab_size,
                dictionary.len()
            ),
        });
    }

    // Burn's `load_file` with every tensor checked against the model the config builds
    // (names and shapes), damaged files as named errors, never a panic or an abort
    // (docs/robustness.md): the same loader a user's own model takes.
    let model = config.init::<B>(device);
    let model = burn_lstm::load_file_checked(model, &model_path, &recorder(), device)
        .map_err(|e| checkpoint_error(e, &model_path))?;
    model.rnn.validate().map_err(|e| LmError::Mismatch {
        path: model_path.clone(),
        message: format!("rnn: {e}"),
    })?;
    Ok(SavedModel {
        model,
        config,
        dictionary,
    })
}

/// `load_file_checked`'s error as the model directory's: damage names the checkpoint, a
/// tensor of another architecture says what the config expected.
fn checkpoint_error(e: RnnError, model_path: &Path) -> LmError {
    let mismatch = |message: String| LmError::Mismatch {
        path: model_path.to_path_buf(),
        message,
    };
    match e {
        RnnError::Io { message, .. } => LmError::corrupt("checkpoint", model_path, message),
        RnnError::CheckpointShape {
            name,
            expected,
            actual,
            ..
        } => mismatch(format!(
            "{name}: expected shape {expected:?} ({CONFIG_FILE}), got {actual:?}"
        )),
        RnnError::CheckpointTensor { problem, name, .. } => mismatch(match problem {
            "unexpected" => format!("{name}: expected none ({CONFIG_FILE}), got a tensor"),
            _ => format!("{name}: expected a tensor ({CONFIG_FILE}), got none"),
        }),
        other => mismatch(other.to_string()),
    }
}
