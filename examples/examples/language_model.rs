//! Trains a word-level language model on WikiText-2: PyTorch's
//! `examples/word_language_model` (`--model LSTM`, same flags and defaults) in Burn, with
//! `CudnnCompatibleLstm` as its recurrent layers. Prints PyTorch's progress lines (plus
//! words/s), the validation and test perplexity of every epoch, and last one JSON line for
//! scripts; saves the best model, its vocabulary and its config for `generate`.
//!
//! The shipped data (`examples/data/wikitext-2/`) trains on the first 90 % of WikiText-2's
//! validation split, validates on its last 10 % and tests on the test split (the training
//! split is not shipped; see the README there).
//!
//! ```text
//! cargo run --release --example language_model -- --epochs 1          # CPU (Autodiff<Flex>)
//! cargo run --release --example language_model -- --epochs 6 --tied   # tied weights
//! cargo run --release --features cuda --example language_model -- --device cuda
//! cargo run --release --example language_model -- --epochs 1 --profile   # where a step's time goes
//! cargo run --release --example generate -- target/language-model
//! ```
//!
//! `--epochs` defaults to PyTorch's 40; one or two epochs are enough to compare speed and
//! the perplexity after the same number of steps.

use std::path::PathBuf;

use burn::backend::Flex;
use clap::{Parser, ValueEnum};
use lstm_examples::language_model::{self, Corpus, LmError, TrainOptions, TrainReport};

/// Where training runs.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Device {
    /// The CPU through Flex, Burn's recommended CPU backend (the fused CPU kernel).
    #[value(alias = "flex")]
    Cpu,
    /// An NVIDIA GPU through Burn's Cuda backend (cuDNN; builds with `--features cuda`).
    Cuda,
}

/// Trains PyTorch's word-level LSTM language model in Burn.
#[derive(Parser, Debug)]
#[command(name = "language_model")]
struct Args {
    /// Folder of the corpus: `train.txt`, `valid.txt`, `test.txt`.
    #[arg(long, default_value_os_t = language_model::default_data_dir())]
    data: PathBuf,
    /// Size of the word embeddings.
    #[arg(long, default_value_t = 200)]
    emsize: usize,
    /// Hidden units per LSTM layer.
    #[arg(long, default_value_t = 200)]
    nhid: usize,
    /// LSTM layers.
    #[arg(long, default_value_t = 2)]
    nlayers: usize,
    /// Initial learning rate (plain SGD; divided by 4 when validation does not improve).
    #[arg(long, default_value_t = 20.0)]
    lr: f64,
    /// Largest total L2 norm of the gradients.
    #[arg(long, default_value_t = 0.25)]
    clip: f64,
    /// Passes over the training data (PyTorch's default; 1-2 are enough for a comparison).
    #[arg(long, default_value_t = 40)]
    epochs: usize,
    /// Columns the training stream is cut into (rows of a batch).
    #[arg(long, alias = "batch_size", default_value_t = 20)]
    batch_size: usize,
    /// Steps of a window (truncated BPTT length).
    #[arg(long, default_value_t = 35)]
    bptt: usize,
    /// Dropout on the embeddings, between LSTM layers and on the LSTM's output.
    #[arg(long, default_value_t = 0.2)]
    dropout: f64,
    /// Tie the decoder's weight to the embedding's (needs --emsize == --nhid).
    #[arg(long)]
    tied: bool,
    /// Seed of the initialisation and the dropout masks.
    #[arg(long, default_value_t = 1111)]
    seed: u64,
    /// Batches between progress lines.
    #[arg(long, default_value_t = 200)]
    log_interval: usize,
    /// Directory of the best model (`model.mpk`, `config.json`, `vocab.txt`).
    #[arg(long, default_value = "target/language-model")]
    save: PathBuf,
    /// Where training runs (cuda needs the feature `cuda`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// Time each phase of a training step (synchronises the device between phases).
    #[arg(long)]
    profile: bool,
    /// Stop every epoch after this many batches (a quick smoke run).
    #[arg(long)]
    max_batches: Option<usize>,
    /// Burn's `CrossEntropyLoss` instead of the fused loss op (same values; for comparison).
    #[arg(long)]
    unfused_loss: bool,
    /// Leave glibc's allocator as it is (by default freed memory is kept for the next step).
    #[arg(long)]
    default_malloc: bool,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("language_model: {e}");
        std::process::exit(2);
    }
}

fn run(args: Args) -> Result<(), LmError> {
    let options = TrainOptions {
        emsize: args.emsize,
        nhid: args.nhid,
        nlayers: args.nlayers,
        lr: args.lr,
        clip: args.clip,
        epochs: args.epochs,
        batch_size: args.batch_size,
        bptt: args.bptt,
        dropout: args.dropout,
        tied: args.tied,
        seed: args.seed,
        log_interval: args.log_interval,
        save: Some(args.save.clone()),
        profile: args.profile,
        quiet: false,
        max_batches: args.max_batches,
        fused_loss: !args.unfused_loss,
    };
    // Flags first: a wrong one should not wait for the corpus to be read.
    options.validate()?;
    if !args.default_malloc {
        language_model::keep_freed_memory();
    }
    let corpus = Corpus::load(&args.data)?;
    println!(
        "corpus {}; training on {:?}",
        args.data.display(),
        args.device
    );
    let report = match args.device {
        Device::Cpu => language_model::train::<Flex>(&corpus, &options, &Default::default())?,
        Device::Cuda => train_cuda(&corpus, &options)?,
    };
    println!(
        "saved the best model to {} (next: cargo run --release --example generate -- {})",
        args.save.display(),
        args.save.display()
    );
    println!("{}", json_line(&report, args.device));
    Ok(())
}

/// The last line, for scripts.
fn json_line(report: &TrainReport, device: Device) -> String {
    serde_json::json!({
        "epochs": report.epochs.len(),
        "batches": report.batches,
        "median_ms_per_batch": report.median_ms_per_batch,
        "words_per_s": report.words_per_s,
        "valid_ppl": report.valid_ppl,
        "test_ppl": report.test_ppl,
        "device": match device {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        },
        "kernel": report.kernel,
    })
    .to_string()
}

#[cfg(feature = "cuda")]
fn train_cuda(corpus: &Corpus, options: &TrainOptions) -> Result<TrainReport, LmError> {
    use burn::backend::Cuda;
    let device = burn::backend::cuda::CudaDevice::default();
    language_model::train::<Cuda>(corpus, options, &device)
}

#[cfg(not(feature = "cuda"))]
fn train_cuda(_corpus: &Corpus, _options: &TrainOptions) -> Result<TrainReport, LmError> {
    Err(LmError::Usage(
        "--device cuda: this build has no CUDA; run with `--features cuda`".into(),
    ))
}
