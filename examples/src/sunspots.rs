//! A monthly sunspot-number forecaster built around `CudnnCompatibleLstm`: the data, the
//! model, training (used by `examples/train.rs`), loading a checkpoint, evaluation on the
//! held-back years and the forecast picture (used by `examples/infer.rs`).
//!
//! Data: `examples/data/sunspots_monthly.csv`, monthly mean sunspot numbers 1749–2008
//! (public domain, NOAA NGDC via statsmodels; see `examples/data/README.md`).

use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use burn::config::Config;
use burn::module::{AutodiffModule, Module};
use burn::nn::{Linear, LinearConfig};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder, Recorder};
use burn::tensor::{
    ElementConversion, Tensor, TensorData, backend::AutodiffBackend, backend::Backend,
};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, LstmBackend, LstmError};

/// The data file shipped with the repository.
pub fn default_data_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/sunspots_monthly.csv")
}

/// File names inside a checkpoint directory.
pub const MODEL_FILE: &str = "model.mpk";
/// The config saved next to the model.
pub const CONFIG_FILE: &str = "config.json";

/// What can go wrong in the examples, each naming the file and what was expected.
#[derive(Debug)]
pub enum ExampleError {
    /// A file that should be there is not.
    Missing {
        /// What the file is.
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A file is there but cannot be read as what it should be.
    Corrupt {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The checkpoint's parameters do not fit the config next to it.
    ConfigMismatch {
        /// The checkpoint.
        path: PathBuf,
        /// Which parameter and shapes.
        message: String,
    },
    /// A flag's value.
    Usage(String),
}

impl fmt::Display for ExampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { what, path } => write!(f, "{what} not found: {}", path.display()),
            Self::Corrupt {
                what,
                path,
                message,
            } => write!(f, "{what} {} cannot be read: {message}", path.display()),
            Self::ConfigMismatch { path, message } => write!(
                f,
                "checkpoint {} does not match its config (was it saved by another run?): {message}",
                path.display()
            ),
            Self::Usage(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ExampleError {}

/// The monthly series.
#[derive(Clone, Debug)]
pub struct Series {
    /// `(year, month)` of each value.
    pub dates: Vec<(u16, u8)>,
    /// Mean sunspot number of each month.
    pub values: Vec<f32>,
}

/// Reads `year,month,sunspots` lines (with a header).
pub fn load_series(path: &Path) -> Result<Series, ExampleError> {
    let text = std::fs::read_to_string(path).map_err(|_| ExampleError::Missing {
        what: "data file",
        path: path.to_path_buf(),
    })?;
    let corrupt = |line: usize, message: String| ExampleError::Corrupt {
        what: "data file",
        path: path.to_path_buf(),
        message: format!("line {line}: {message}"),
    };
    let mut series = Series {
        dates: Vec::new(),
        values: Vec::new(),
    };
    for (index, line) in text.lines().enumerate().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let [year, month, value] = fields[..] else {
            return Err(corrupt(
                index + 1,
                format!("expected 3 fields, got {line:?}"),
            ));
        };
        let parse_err = |e: &dyn fmt::Display| corrupt(index + 1, e.to_string());
        series.dates.push((
            year.parse().map_err(|e| parse_err(&e))?,
            month.parse().map_err(|e| parse_err(&e))?,
        ));
        let value: f32 = value.parse().map_err(|e| parse_err(&e))?;
        if !value.is_finite() {
            return Err(corrupt(index + 1, format!("value {value} is not finite")));
        }
        series.values.push(value);
    }
    if series.values.len() < 100 {
        return Err(corrupt(
            0,
            format!("{} months, need at least 100", series.values.len()),
        ));
    }
    Ok(series)
}

/// Everything that fixes a trained forecaster (saved as `config.json`).
#[derive(Config, Debug)]
pub struct ForecastConfig {
    /// Months of history the model reads.
    #[config(default = 48)]
    pub window: usize,
    /// LSTM hidden size.
    #[config(default = 32)]
    pub hidden: usize,
    /// LSTM layers.
    #[config(default = 2)]
    pub layers: usize,
    /// Dropout between LSTM layers while training.
    #[config(default = 0.1)]
    pub dropout: f64,
    /// Months at the end of the series held back from training.
    #[config(default = 240)]
    pub test_months: usize,
    /// Mean of the training months (inputs are standardised with it).
    #[config(default = 0.0)]
    pub mean: f32,
    /// Standard deviation of the training months.
    #[config(default = 1.0)]
    pub std: f32,
}

/// The model: an LSTM over the window, a linear head on its last output.
#[derive(Module, Debug)]
pub struct Forecaster<B: Backend> {
    /// The recurrent part.
    pub lstm: CudnnCompatibleLstm<B>,
    /// Next-month value from the last hidden state.
    pub head: Linear<B>,
}

impl ForecastConfig {
    fn lstm(&self) -> CudnnCompatibleLstmConfig {
        CudnnCompatibleLstmConfig::new(1, self.hidden)
            .with_num_layers(self.layers)
            .with_dropout(self.dropout)
            .with_batch_first(true)
    }

    /// A freshly initialised forecaster.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Forecaster<B> {
        Forecaster {
            lstm: self.lstm().init(device),
            head: LinearConfig::new(self.hidden, 1).init(device),
        }
    }
}

impl<B: LstmBackend> Forecaster<B> {
    /// `windows [N, window]` of standardised values to the standardised next value `[N]`.
    pub fn forward(&self, windows: Tensor<B, 2>) -> Tensor<B, 1> {
        let [n, window] = windows.dims();
        let (y, _) = self.lstm.forward(windows.reshape([n, window, 1]), None);
        let hidden = y.dims()[2];
        let last = y.narrow(1, window - 1, 1).reshape([n, hidden]);
        self.head.forward(last).reshape([n])
    }
}

/// Training settings (command-line flags of `train`).
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// The model's shape.
    pub config: ForecastConfig,
    /// Passes over the training windows.
    pub epochs: usize,
    /// Windows per step.
    pub batch_size: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Seed of the shuffling (and of Burn's generator).
    pub seed: u64,
    /// Stop after this many steps in total (for tests); `None` runs every epoch.
    pub max_steps: Option<usize>,
    /// Print progress.
    pub verbose: bool,
}

/// Standardised windows and targets for months `targets` (each reads the `window` months
/// before it).
fn windows<B: Backend>(
    values: &[f32],
    targets: &[usize],
    config: &ForecastConfig,
    device: &B::Device,
) -> (Tensor<B, 2>, Tensor<B, 1>) {
    let w = config.window;
    let scale = |v: f32| (v - config.mean) / config.std;
    let x: Vec<f32> = targets
        .iter()
        .flat_map(|&t| values[t - w..t].iter().map(|&v| scale(v)))
        .collect();
    let y: Vec<f32> = targets.iter().map(|&t| scale(values[t])).collect();
    (
        Tensor::from_data(TensorData::new(x, [targets.len(), w]), device),
        Tensor::from_data(TensorData::new(y, [targets.len()]), device),
    )
}

/// Index of the first held-back month.
fn split(series: &Series, config: &ForecastConfig) -> Result<usize, ExampleError> {
    let n = series.values.len();
    if config.test_months + config.window + 1 >= n {
        return Err(ExampleError::Usage(format!(
            "--window {} and {} held-back months need more than the {n} months of data",
            config.window, config.test_months
        )));
    }
    Ok(n - config.test_months)
}

/// Trains a forecaster on everything but the held-back months, printing the training loss
/// and the held-back RMSE per epoch, and saves `model.mpk` and `config.json` in `out_dir`.
pub fn train<B: AutodiffBackend + LstmBackend>(
    series: &Series,
    options: &TrainOptions,
    out_dir: &Path,
    device: &B::Device,
) -> Result<Evaluation, ExampleError>
where
    B::InnerBackend: LstmBackend,
{
    B::seed(device, options.seed);
    let mut config = options.config.clone();
    if config.window == 0 || config.hidden == 0 || config.layers == 0 || options.batch_size == 0 {
        return Err(ExampleError::Usage(
            "--window, --hidden, --layers and --batch-size must be at least 1".into(),
        ));
    }
    let test_start = split(series, &config)?;
    let train_values = &series.values[..test_start];
    let mean = train_values.iter().sum::<f32>() / train_values.len() as f32;
    let var =
        train_values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / train_values.len() as f32;
    config.mean = mean;
    config.std = var.sqrt().max(1e-6);
    let mut model = config.init::<B>(device);
    if options.verbose {
        let kernel = model.lstm.kernel(device, options.batch_size, config.window);
        println!("LSTM kernel: {kernel}");
    }
    let mut optimizer = AdamConfig::new().init();
    let mut order: Vec<usize> = (config.window..test_start).collect();
    let mut rng = options.seed | 1;
    let steps_per_epoch = order.len().div_ceil(options.batch_size);
    let mut steps = 0;
    let mut last = None;
    'epochs: for epoch in 1..=options.epochs {
        // Fisher–Yates with a xorshift generator: reproducible from --seed.
        for i in (1..order.len()).rev() {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            order.swap(i, (rng % (i as u64 + 1)) as usize);
        }
        let mut loss_sum = 0.0;
        for (step, batch) in order.chunks(options.batch_size).enumerate() {
            let (x, y) = windows::<B>(&series.values, batch, &config, device);
            let loss = (model.forward(x) - y).powi_scalar(2).mean();
            loss_sum += loss.clone().into_scalar().elem::<f64>();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(options.learning_rate, model, grads);
            steps += 1;
            if options.verbose {
                progress(
                    epoch,
                    options.epochs,
                    step + 1,
                    steps_per_epoch,
                    loss_sum / (step + 1) as f64,
                );
            }
            if options.max_steps.is_some_and(|max| steps >= max) {
                last = Some(evaluate(&model.valid(), &config, series, device)?);
                break 'epochs;
            }
        }
        let evaluation = evaluate(&model.valid(), &config, series, device)?;
        if options.verbose {
            eprint!("\r\x1b[2K");
            println!(
                "epoch {epoch:>3}/{}  train mse (standardised) {:.4}  held-back rmse {:.2} (persistence {:.2})",
                options.epochs,
                loss_sum / steps_per_epoch as f64,
                evaluation.rmse,
                evaluation.persistence_rmse
            );
        }
        last = Some(evaluation);
    }
    std::fs::create_dir_all(out_dir).map_err(|e| ExampleError::Corrupt {
        what: "output directory",
        path: out_dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    model
        .valid()
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
        })?;
    last.ok_or_else(|| ExampleError::Usage("--epochs must be at least 1".into()))
}

fn progress(epoch: usize, epochs: usize, step: usize, steps: usize, loss: f64) {
    let width = 30;
    let done = step * width / steps;
    eprint!(
        "\repoch {epoch:>3}/{epochs} [{}{}] {step:>4}/{steps} loss {loss:.4}",
        "#".repeat(done),
        " ".repeat(width - done)
    );
    let _ = std::io::stderr().flush();
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

/// One-step-ahead forecasts of the held-back months and their errors.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// Index of the first held-back month in the series.
    pub start: usize,
    /// Forecast of each held-back month from the `window` months before it.
    pub forecasts: Vec<f32>,
    /// Root mean squared error of the forecasts (sunspot numbers).
    pub rmse: f64,
    /// Mean absolute error.
    pub mae: f64,
    /// RMSE of the persistence forecast (next month = this month), the baseline to beat.
    pub persistence_rmse: f64,
}

/// Forecasts every held-back month from the months before it.
pub fn evaluate<B: LstmBackend>(
    model: &Forecaster<B>,
    config: &ForecastConfig,
    series: &Series,
    device: &B::Device,
) -> Result<Evaluation, ExampleError> {
    let start = split(series, config)?;
    let targets: Vec<usize> = (start..series.values.len()).collect();
    let (x, _) = windows::<B>(&series.values, &targets, config, device);
    let predicted = model
        .forward(x)
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .expect("f32 data");
    // Sunspot numbers are never negative.
    let forecasts: Vec<f32> = predicted
        .iter()
        .map(|v| (v * config.std + config.mean).max(0.0))
        .collect();
    let actual = &series.values[start..];
    let n = actual.len() as f64;
    let rmse = (forecasts
        .iter()
        .zip(actual)
        .map(|(f, a)| ((f - a) as f64).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    let mae = forecasts
        .iter()
        .zip(actual)
        .map(|(f, a)| ((f - a) as f64).abs())
        .sum::<f64>()
        / n;
    let persistence_rmse = ((start..series.values.len())
        .map(|t| ((series.values[t] - series.values[t - 1]) as f64).powi(2))
        .sum::<f64>()
        / n)
        .sqrt();
    Ok(Evaluation {
        start,
        forecasts,
        rmse,
        mae,
        persistence_rmse,
    })
}

/// Forecasts `horizon` months past the end of the series, each from the previous
/// forecasts (recursive multi-step forecast).
pub fn forecast_ahead<B: LstmBackend>(
    model: &Forecaster<B>,
    config: &ForecastConfig,
    series: &Series,
    horizon: usize,
    device: &B::Device,
) -> Vec<f32> {
    let mut values = series.values.clone();
    for _ in 0..horizon {
        let target = values.len();
        values.push(0.0);
        let (x, _) = windows::<B>(&values, &[target], config, device);
        let next = model
            .forward(x)
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .expect("f32")[0];
        values[target] = (next * config.std + config.mean).max(0.0);
    }
    values.split_off(series.values.len())
}

/// Writes an SVG of the held-back months: the real series and the one-step forecasts.
pub fn write_svg(
    path: &Path,
    series: &Series,
    evaluation: &Evaluation,
) -> Result<(), ExampleError> {
    let actual = &series.values[evaluation.start..];
    let (width, height, margin) = (900.0f32, 360.0f32, 50.0f32);
    let max = actual
        .iter()
        .chain(&evaluation.forecasts)
        .fold(1.0f32, |m, &v| m.max(v));
    let n = actual.len().max(2) as f32;
    let point = |i: usize, v: f32| {
        (
            margin + i as f32 / (n - 1.0) * (width - 2.0 * margin),
            height - margin - v.max(0.0) / max * (height - 2.0 * margin),
        )
    };
    let polyline = |values: &[f32], colour: &str| {
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let (x, y) = point(i, v);
                format!("{x:.1},{y:.1}")
            })
            .collect();
        format!(
            r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
            points.join(" ")
        )
    };
    let (first, last) = (
        series.dates[evaluation.start],
        *series.dates.last().expect("data"),
    );
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{margin}" y="20">Monthly sunspot number, held-back months {}-{:02} to {}-{:02}: real (black) and one-month-ahead LSTM forecast (red). RMSE {:.1}, persistence {:.1}</text>
<line x1="{margin}" y1="{}" x2="{}" y2="{}" stroke="grey"/>
<line x1="{margin}" y1="{margin}" x2="{margin}" y2="{}" stroke="grey"/>
<text x="5" y="{}">{max:.0}</text><text x="5" y="{}">0</text>
"#,
        first.0,
        first.1,
        last.0,
        last.1,
        evaluation.rmse,
        evaluation.persistence_rmse,
        height - margin,
        width - margin,
        height - margin,
        height - margin,
        margin + 4.0,
        height - margin,
    );
    svg.push_str(&polyline(actual, "black"));
    svg.push('\n');
    svg.push_str(&polyline(&evaluation.forecasts, "red"));
    svg.push_str("\n</svg>\n");
    std::fs::write(path, svg).map_err(|e| ExampleError::Corrupt {
        what: "plot",
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}
