//! Loads a checkpoint written by `train` on the CPU (NdArray; a checkpoint trained on CUDA
//! loads unchanged), forecasts every held-back month from the months before it, prints
//! the error against the real numbers and the persistence baseline, forecasts the months
//! after the data ends, and draws the held-back years as an SVG.
//!
//! ```text
//! cargo run --release --example infer -- target/sunspots-model [--plot FILE.svg] [--horizon N]
//! ```

use std::path::PathBuf;

use burn::backend::NdArray;
use lstm_examples::flags::Flags;
use lstm_examples::sunspots::{self, ExampleError};

const USAGE: &str = "usage: infer <checkpoint dir or model.mpk> [--config FILE.json] [--data FILE.csv] [--plot FILE.svg] [--horizon N]";

fn main() {
    if let Err(e) = run() {
        eprintln!("infer: {e}");
        std::process::exit(2);
    }
}

fn run() -> Result<(), ExampleError> {
    let flags = Flags::parse(std::env::args().skip(1), &[])?;
    flags.only(&["config", "data", "plot", "horizon"], USAGE)?;
    let [checkpoint] = &flags.positional[..] else {
        return Err(ExampleError::Usage(USAGE.into()));
    };
    let checkpoint = PathBuf::from(checkpoint);
    let config = Some(flags.get("config", String::new())?)
        .filter(|s| !s.is_empty())
        .map(PathBuf::from);
    let data: PathBuf = flags.get("data", sunspots::default_data_path())?;
    let plot: PathBuf = flags.get("plot", PathBuf::from("target/sunspots-forecast.svg"))?;
    let horizon: usize = flags.get("horizon", 12)?;

    let device = Default::default();
    let (model, config) =
        sunspots::load_forecaster::<NdArray>(&checkpoint, config.as_deref(), &device)?;
    println!(
        "loaded {} (window {}, hidden {}, layers {}); LSTM kernel: {}",
        checkpoint.display(),
        config.window,
        config.hidden,
        config.layers,
        model.lstm.kernel(&device, 1, config.window)
    );
    let series = sunspots::load_series(&data)?;
    let evaluation = sunspots::evaluate(&model, &config, &series, &device)?;
    let (y0, m0) = series.dates[evaluation.start];
    println!(
        "held-back months {y0}-{m0:02} .. end ({} months), one month ahead: RMSE {:.2}, MAE {:.2}; persistence RMSE {:.2}",
        evaluation.forecasts.len(),
        evaluation.rmse,
        evaluation.mae,
        evaluation.persistence_rmse
    );
    let ahead = sunspots::forecast_ahead(&model, &config, &series, horizon, &device);
    let (mut year, mut month) = *series.dates.last().expect("data");
    println!("forecast past the data:");
    for value in ahead {
        month += 1;
        if month > 12 {
            (year, month) = (year + 1, 1);
        }
        println!("  {year}-{month:02}  {value:6.1}");
    }
    if let Some(dir) = plot.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    sunspots::write_svg(&plot, &series, &evaluation)?;
    println!("plot: {}", plot.display());
    Ok(())
}
