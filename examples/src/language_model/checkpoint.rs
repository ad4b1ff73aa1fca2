//! A trained language model on disk: `model.mpk` (a Burn record, full precision),
//! `config.json` and `vocab.txt` (one word per line, line `i + 1` is word `i`) in one
//! directory. Loading checks the three against each other before anything is built: the
//! config's ranges, the vocabulary's size against the checkpoint's embedding and decoder
//! shapes, every LSTM parameter against the config.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn::tensor::backend::Backend;
use burn_lstm::RnnBackend;

use super::error::LmError;
use super::model::{LmConfig, WordLm, WordLmRecord};
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

    let record = read_record::<B>(&model_path, device)?;
    check_record(&record, &config, dictionary.len(), &model_path, &vocab_path)?;
    let mismatch = |message: String| LmError::Mismatch {
        path: model_path.clone(),
        message,
    };
    let model = catch_unwind(AssertUnwindSafe(|| {
        config.init::<B>(device).load_record(record)
    }))
    .map_err(|panic| mismatch(format!("Burn's loader failed: {}", panic_message(&panic))))?;
    model
        .rnn
        .validate()
        .map_err(|e| mismatch(format!("rnn: {e}")))?;
    Ok(SavedModel {
        model,
        config,
        dictionary,
    })
}

/// Stack the checkpoint is decoded on: the decoder's 1,024 levels at up to 32 KiB each
/// (a debug build needs under 3 MiB).
const DECODER_STACK_BYTES: usize = 32 << 20;

/// The record in `path`. Burn's decoder returns errors for most damage but panics on
/// some (a tensor whose shape does not match its bytes): a damaged file is user input,
/// so the panic becomes a named error. Sound: nothing shared outlives the closure
/// half-built (the recorder is only read; a failed record is dropped). The decoder
/// recurses once per nesting level of the file, up to 1,024 levels, which a thread's
/// stack may not hold (a stack overflow aborts the process): it runs on a stack of
/// [`DECODER_STACK_BYTES`] that this thread switches to (`stacker`), as
/// `burn_lstm::load_file_checked` does.
fn read_record<B: Backend>(path: &Path, device: &B::Device) -> Result<WordLmRecord<B>, LmError> {
    let read = || {
        catch_unwind(AssertUnwindSafe(|| {
            recorder().load::<WordLmRecord<B>>(path.to_path_buf(), device)
        }))
    };
    match on_decoder_stack(read) {
        Ok(Ok(record)) => Ok(record),
        Ok(Err(e)) => Err(LmError::corrupt("checkpoint", path, e.to_string())),
        Err(panic) => Err(LmError::corrupt(
            "checkpoint",
            path,
            format!("Burn's loader failed: {}", panic_message(&panic)),
        )),
    }
}

/// The record's shapes against the config and the vocabulary (Burn's `load_record`
/// would silently take a tensor of any shape, and panic on a layer count).
fn check_record<B: Backend>(
    record: &WordLmRecord<B>,
    config: &LmConfig,
    vocab_size: usize,
    model_path: &Path,
    vocab_path: &Path,
) -> Result<(), LmError> {
    let mismatch = |message: String| LmError::Mismatch {
        path: model_path.to_path_buf(),
        message,
    };
    let embedding = record.encoder.weight.dims();
    if embedding[0] != vocab_size {
        return Err(LmError::Mismatch {
            path: vocab_path.to_path_buf(),
            message: format!(
                "expected as many words as the checkpoint's embedding has rows \
                 (encoder.weight {embedding:?} in {}), got {vocab_size} words",
                model_path.display()
            ),
        });
    }
    if embedding != [config.vocab_size, config.emsize] {
        return Err(mismatch(format!(
            "encoder.weight: expected shape [{}, {}] (vocab_size, emsize), got {embedding:?}",
            config.vocab_size, config.emsize
        )));
    }
    match (&record.decoder.weight, config.tied) {
        (Some(weight), false) => {
            let dims = weight.dims();
            if dims != [config.nhid, vocab_size] {
                return Err(mismatch(format!(
                    "decoder.weight: expected shape [{}, {vocab_size}] (nhid, vocabulary), got {dims:?}",
                    config.nhid
                )));
            }
        }
        (None, false) => {
            return Err(mismatch(
                "decoder.weight: expected a tensor (config: tied = false), got none (a tied model)"
                    .into(),
            ));
        }
        (Some(_), true) => {
            return Err(mismatch(
                "decoder.weight: expected none (config: tied = true), got a tensor (an untied model)"
                    .into(),
            ));
        }
        (None, true) => {}
    }
    let bias = record.decoder.bias.dims();
    if bias != [vocab_size] {
        return Err(mismatch(format!(
            "decoder.bias: expected shape [{vocab_size}] (vocabulary), got {bias:?}"
        )));
    }
    let layers = record.rnn.layers.len();
    if layers != config.nlayers {
        return Err(mismatch(format!(
            "rnn.layers: expected {} (config nlayers), got {layers}",
            config.nlayers
        )));
    }
    Ok(())
}

/// `read()` on a stack of [`DECODER_STACK_BYTES`] this thread switches to, or on its own
/// stack where the new one cannot be mapped (`stacker` panics before `read` starts then:
/// an address-space limit, say).
fn on_decoder_stack<T>(read: impl FnOnce() -> T) -> T {
    let mut read = Some(read);
    let switched = catch_unwind(AssertUnwindSafe(|| {
        stacker::grow(DECODER_STACK_BYTES, || {
            read.take().expect("the read runs once")()
        })
    }));
    match (switched, read) {
        (Ok(value), _) => value,
        (Err(_), Some(read)) => read(),
        (Err(panic), None) => std::panic::resume_unwind(panic),
    }
}

/// The text of a caught panic.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}
