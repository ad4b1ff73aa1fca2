//! A word-level language model on WikiText-2: PyTorch's `examples/word_language_model`
//! (`--model LSTM`) in Burn, trained through `CudnnCompatibleLstm`. The corpus read as
//! `data.py` reads it (`corpus.rs`, `vocab.rs`), truncated-BPTT batches (`batches.rs`), the
//! model (`model.rs`), the loss and perplexity (`loss.rs`; `fused_loss.rs`, the training loss as one autodiff op), total-norm gradient clipping
//! (`clip.rs`), the training loop (`train.rs`, `profile.rs` for `--profile`), the saved
//! model (`checkpoint.rs`), sampling (`sample.rs`) and the allocator setting of the
//! binaries (`memory.rs`).

mod batches;
mod checkpoint;
mod clip;
mod corpus;
mod decoder_loss;
mod error;
mod evaluate;
mod fused_loss;
mod loss;
mod memory;
mod model;
mod profile;
mod sample;
mod train;
mod vocab;

pub use batches::{batchify, get_batch, window_count, windows};
pub use checkpoint::{
    CONFIG_FILE, MODEL_FILE, SavedModel, VOCAB_FILE, load_model, save_config_and_vocab, save_model,
};
pub use clip::clip_grad_norm;
pub use corpus::{Corpus, EOS, default_data_dir, encode_file, lines, words};
pub use decoder_loss::{decoder_nll, decoder_nll_loss, training_loss};
pub use error::LmError;
pub use evaluate::{Recurrent, evaluate, evaluate_with};
pub use fused_loss::fused_nll_loss;
pub use loss::{cross_entropy, nll_loss, perplexity};
pub use memory::keep_freed_memory;
pub use model::{Decoder, DecoderRecord, INIT_RANGE, LmConfig, WordLm, WordLmRecord};
pub use profile::{PHASES, PhaseTimes};
pub use sample::{MIN_TEMPERATURE, Sampler, generate};
pub use train::{
    EVAL_BATCH_SIZE, EpochReport, TrainOptions, TrainReport, repackage, train, window_loss,
};
pub use vocab::Dictionary;
