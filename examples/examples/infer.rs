//! Loads a checkpoint written by `train` on the CPU (Flex by default; a checkpoint
//! trained on CUDA loads unchanged), forecasts every held-back month from the months
//! before it, prints the error against the real numbers and the persistence baseline,
//! forecasts the months after the data ends, and draws the held-back years as an SVG.
//!
//! ```text
//! cargo run --release --example infer -- target/sunspots-model [--plot FILE.svg] [--horizon N]
//! cargo run --release --example infer -- target/sunspots-model --backend ndarray
//! cargo run --release --example infer -- target/sunspots-model --backend dispatch
//! cargo run --release --example infer -- target/sunspots-model --int8
//! ```
//!
//! `--int8` serves the model with its LSTM quantized to int8 (`quantized_int8()`) and
//! prints the f32 model's held-back error beside it.

use std::path::{Path, PathBuf};

use burn::backend::{Flex, NdArray};
use burn::tensor::backend::Backend as BurnBackend;
use burn_lstm::RnnBackend;
use clap::{Parser, ValueEnum};
use lstm_examples::say;
use lstm_examples::sunspots::{self, ExampleError};

/// Burn's CPU backend that serves the model.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Backend {
    /// Flex, Burn's recommended CPU backend.
    Flex,
    /// NdArray.
    Ndarray,
    /// Burn's `Dispatch` backend (feature `dispatch`) on its Flex device: one backend
    /// type whose device is chosen at run time (the fused CPU kernel serves there too).
    #[cfg(feature = "dispatch")]
    Dispatch,
}

/// Serves a checkpoint written by `train`: held-back error, a forecast past the data
/// and a plot.
#[derive(Parser, Debug)]
#[command(name = "infer")]
struct Args {
    /// The checkpoint directory (or the `model.mpk` in one).
    checkpoint: PathBuf,
    /// The config (default: `config.json` next to the model).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The data file (`year,month,sunspots`).
    #[arg(long, default_value_os_t = sunspots::default_data_path())]
    data: PathBuf,
    /// Where to draw the held-back months (SVG).
    #[arg(long, default_value = "target/sunspots-forecast.svg")]
    plot: PathBuf,
    /// Months to forecast past the end of the data.
    #[arg(long, default_value_t = 12)]
    horizon: usize,
    /// Burn's CPU backend.
    #[arg(long, value_enum, default_value_t = Backend::Flex)]
    backend: Backend,
    /// Serve the LSTM with int8 weights (and compare with the f32 model).
    #[arg(long)]
    int8: bool,
}

fn main() {
    let args = Args::parse();
    let result = match args.backend {
        Backend::Flex => run::<Flex>(&args, &Default::default()),
        Backend::Ndarray => run::<NdArray>(&args, &Default::default()),
        #[cfg(feature = "dispatch")]
        Backend::Dispatch => run::<burn::Dispatch>(
            &args,
            &burn::DispatchDevice::Flex(burn::backend::flex::FlexDevice),
        ),
    };
    if let Err(e) = result {
        eprintln!("infer: {e}");
        std::process::exit(2);
    }
}

fn run<B: RnnBackend>(args: &Args, device: &B::Device) -> Result<(), ExampleError> {
    let (checkpoint, data, plot, horizon): (&Path, &Path, &Path, usize) =
        (&args.checkpoint, &args.data, &args.plot, args.horizon);
    let (model, config) =
        sunspots::load_forecaster::<B>(checkpoint, args.config.as_deref(), device)?;
    say!(
        "loaded {} (window {}, hidden {}, layers {}); LSTM kernel: {}",
        checkpoint.display(),
        config.window,
        config.hidden,
        config.layers,
        model.lstm.kernel(device, 1, config.window)
    );
    let series = sunspots::load_series(data)?;
    let evaluation = sunspots::evaluate(&model, &config, &series, device)?;
    if args.int8 {
        // The checks of loading passed: what can fail here is a parameter that is not
        // finite, a damaged checkpoint.
        let int8 = model.quantized_int8().map_err(|e| ExampleError::Corrupt {
            what: "checkpoint",
            path: checkpoint.to_path_buf(),
            message: e.to_string(),
        })?;
        let quantized = sunspots::evaluate(&int8, &config, &series, device)?;
        say!(
            "int8 LSTM (kernel {}, {} weight bytes against {} in f32): held-back RMSE {:.3} against f32 {:.3} ({:+.3} %)",
            int8.lstm.kernel(),
            int8.lstm.weight_bytes(),
            4 * model.lstm.arch().weight_count(),
            quantized.rmse,
            evaluation.rmse,
            100.0 * (quantized.rmse - evaluation.rmse) / evaluation.rmse
        );
        return serve(&int8, &config, &series, &quantized, (plot, horizon), device);
    }
    serve(
        &model,
        &config,
        &series,
        &evaluation,
        (plot, horizon),
        device,
    )
}

/// Prints the held-back error and the forecast past the data, and draws the plot.
fn serve<B: BurnBackend>(
    model: &impl sunspots::Predict<B>,
    config: &sunspots::ForecastConfig,
    series: &sunspots::Series,
    evaluation: &sunspots::Evaluation,
    (plot, horizon): (&Path, usize),
    device: &B::Device,
) -> Result<(), ExampleError> {
    let (y0, m0) = series.dates[evaluation.start];
    say!(
        "held-back months {y0}-{m0:02} .. end ({} months), one month ahead: RMSE {:.2}, MAE {:.2}; persistence RMSE {:.2}",
        evaluation.forecasts.len(),
        evaluation.rmse,
        evaluation.mae,
        evaluation.persistence_rmse
    );
    let ahead = sunspots::forecast_ahead(model, config, series, horizon, device);
    let (mut year, mut month) = *series.dates.last().expect("data");
    say!("forecast past the data:");
    for value in ahead {
        month += 1;
        if month > 12 {
            (year, month) = (year.saturating_add(1), 1);
        }
        say!("  {year}-{month:02}  {value:6.1}");
    }
    if let Some(dir) = plot.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    sunspots::write_svg(plot, series, evaluation)?;
    say!("plot: {}", plot.display());
    Ok(())
}
