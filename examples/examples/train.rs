//! Trains the sunspot forecaster (an LSTM over 48 months, then a linear head) on the
//! monthly sunspot numbers 1749–1988 and saves the checkpoint and its config; the last 20
//! years are held back for `infer`.
//!
//! ```text
//! cargo run --release --example train                        # CPU (Autodiff<NdArray>)
//! cargo run --release --features cuda --example train        # CUDA (cuDNN) when built with it
//! cargo run --release --example train -- --epochs 5 --hidden 16 --out target/my-model
//! ```

use std::path::PathBuf;

use burn::backend::{Autodiff, NdArray};
use lstm_examples::flags::Flags;
use lstm_examples::sunspots::{self, ExampleError, ForecastConfig, TrainOptions};

const USAGE: &str = "usage: train [--epochs N] [--batch-size N] [--lr X] [--window N] [--hidden N] \
[--layers N] [--dropout X] [--seed N] [--data FILE.csv] [--out DIR] [--device cpu|cuda]";

fn main() {
    if let Err(e) = run() {
        eprintln!("train: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), ExampleError> {
    let flags = Flags::parse(std::env::args().skip(1), &[])?;
    flags.only(
        &[
            "epochs",
            "batch-size",
            "lr",
            "window",
            "hidden",
            "layers",
            "dropout",
            "seed",
            "data",
            "out",
            "device",
        ],
        USAGE,
    )?;
    let config = ForecastConfig::new()
        .with_window(flags.get("window", 48)?)
        .with_hidden(flags.get("hidden", 32)?)
        .with_layers(flags.get("layers", 2)?)
        .with_dropout(flags.get("dropout", 0.1)?);
    let options = TrainOptions {
        config,
        epochs: flags.get("epochs", 30)?,
        batch_size: flags.get("batch-size", 64)?,
        learning_rate: flags.get("lr", 3e-3)?,
        seed: flags.get("seed", 42)?,
        max_steps: None,
        verbose: true,
    };
    let data: PathBuf = flags.get("data", sunspots::default_data_path())?;
    let out: PathBuf = flags.get("out", PathBuf::from("target/sunspots-model"))?;
    let default_device = if cfg!(feature = "cuda") {
        "cuda"
    } else {
        "cpu"
    };
    let device: String = flags.get("device", default_device.to_string())?;
    let series = sunspots::load_series(&data)?;
    println!(
        "{} months of sunspot numbers from {}; training on {device}",
        series.values.len(),
        data.display()
    );
    let start = std::time::Instant::now();
    let evaluation = match device.as_str() {
        "cpu" => {
            sunspots::train::<Autodiff<NdArray>>(&series, &options, &out, &Default::default())?
        }
        "cuda" => train_cuda(&series, &options, &out)?,
        other => {
            return Err(ExampleError::Usage(format!(
                "--device {other}: expected cpu or cuda"
            )));
        }
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
