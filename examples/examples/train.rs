//! Trains the sunspot forecaster (an LSTM over 48 months, then a linear head) on the
//! monthly sunspot numbers 1749–1988 with burn-train's `Learner`, and saves the
//! checkpoint and its config; the last 20 years are held back for `infer`.
//!
//! ```text
//! cargo run --release --example train                          # CPU (Autodiff<Flex>)
//! cargo run --release --example train -- --device ndarray      # CPU (Autodiff<NdArray>)
//! cargo run --release --example train -- --epochs 5 --hidden 16 --out target/my-model
//! cargo run --release --features cuda --example train -- --device cuda   # cuDNN (CUDA 13, cuDNN 9)
//! cargo run --release --example train -- --devices 2            # data-parallel (burn-collective)
//! ```

use std::path::PathBuf;

use burn::backend::{Autodiff, Flex, NdArray};
use clap::{Parser, ValueEnum};
use lstm_examples::sunspots::{self, ExampleError, ForecastConfig, Progress, TrainOptions};

/// Where training runs.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Device {
    /// The CPU through Flex, Burn's recommended CPU backend (the fused CPU kernel).
    #[value(alias = "flex")]
    Cpu,
    /// The CPU through NdArray (the fused CPU kernel).
    Ndarray,
    /// An NVIDIA GPU through Burn's Cuda backend (cuDNN; builds with `--features cuda`).
    Cuda,
}

/// Trains the sunspot forecaster and saves `model.mpk` and `config.json`.
#[derive(Parser, Debug)]
#[command(name = "train")]
struct Args {
    /// Passes over the training months.
    #[arg(long, default_value_t = 30)]
    epochs: usize,
    /// Windows per step.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Adam's learning rate.
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Months of history the model reads.
    #[arg(long, default_value_t = 48)]
    window: usize,
    /// LSTM hidden size.
    #[arg(long, default_value_t = 32)]
    hidden: usize,
    /// LSTM layers.
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// Dropout between LSTM layers while training.
    #[arg(long, default_value_t = 0.1)]
    dropout: f64,
    /// Seed of the initialisation, the dropout masks and the batch order.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// The data file (`year,month,sunspots`).
    #[arg(long, default_value_os_t = sunspots::default_data_path())]
    data: PathBuf,
    /// Directory of the checkpoint.
    #[arg(long, default_value = "target/sunspots-model")]
    out: PathBuf,
    /// Where training runs (cuda needs the feature `cuda`).
    #[arg(long, value_enum, default_value_t = Device::Cpu)]
    device: Device,
    /// A line per epoch instead of Burn's dashboard (which needs a terminal).
    #[arg(long)]
    plain: bool,
    /// Data-parallel peers: every batch is split over N copies of the device and the
    /// gradients all-reduced (burn-collective; the examples' default feature
    /// `distributed`).
    #[arg(long, default_value_t = 1)]
    devices: usize,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("train: {e}");
        std::process::exit(2);
    }
}

fn run(args: Args) -> Result<(), ExampleError> {
    let config = ForecastConfig::new()
        .with_window(args.window)
        .with_hidden(args.hidden)
        .with_layers(args.layers)
        .with_dropout(args.dropout);
    let options = TrainOptions {
        config,
        epochs: args.epochs,
        batch_size: args.batch_size,
        learning_rate: args.lr,
        seed: args.seed,
        max_batches_per_epoch: None,
        progress: if args.plain {
            Progress::Lines
        } else {
            Progress::Auto
        },
        devices: args.devices,
    };
    // CPU unless asked: a build with `--features cuda` has the CUDA backend compiled in
    // (it loads CUDA at run time), which says nothing about a GPU being there.
    let device = args.device;
    let series = sunspots::load_series(&args.data)?;
    println!(
        "{} months of sunspot numbers from {}; training on {device:?}",
        series.values.len(),
        args.data.display()
    );
    let out = &args.out;
    let start = std::time::Instant::now();
    let evaluation = match device {
        Device::Cpu => {
            sunspots::train::<Autodiff<Flex>>(&series, &options, out, &Default::default())?
        }
        Device::Ndarray => {
            sunspots::train::<Autodiff<NdArray>>(&series, &options, out, &Default::default())?
        }
        Device::Cuda => train_cuda(&series, &options, out)?,
    };
    println!(
        "trained in {:.1} s; held-back RMSE {:.2} (persistence {:.2}); saved {} and {}",
        start.elapsed().as_secs_f64(),
        evaluation.rmse,
        evaluation.persistence_rmse,
        out.join(sunspots::MODEL_FILE).display(),
        out.join(sunspots::CONFIG_FILE).display()
    );
    println!(
        "next: cargo run --release --example infer -- {}",
        out.display()
    );
    Ok(())
}

#[cfg(feature = "cuda")]
fn train_cuda(
    series: &sunspots::Series,
    options: &TrainOptions,
    out: &std::path::Path,
) -> Result<sunspots::Evaluation, ExampleError> {
    use burn::backend::Cuda;
    let device = burn::backend::cuda::CudaDevice::default();
    sunspots::train::<Autodiff<Cuda>>(series, options, out, &device)
}

#[cfg(not(feature = "cuda"))]
fn train_cuda(
    _series: &sunspots::Series,
    _options: &TrainOptions,
    _out: &std::path::Path,
) -> Result<sunspots::Evaluation, ExampleError> {
    Err(ExampleError::Usage(
        "--device cuda: this build has no CUDA; run with `--features cuda`".into(),
    ))
}
