//! Training through burn-train's `Learner`: the forecaster's `TrainStep` and
//! `InferenceStep`, loaders over the training and held-back months, the loss and the
//! held-back RMSE as metrics, checkpoints of every epoch under `checkpoint/`, and Burn's
//! dashboard on a terminal (a line per epoch otherwise).

use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use burn::optim::AdamConfig;
use burn::optim::adaptor::OptimizerAdaptor;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;
use burn::train::logger::InMemoryMetricLogger;
use burn::train::metric::LossMetric;
use burn::train::{
    InferenceStep, Learner, LearningComponentsMarker, LearningResult, RegressionOutput,
    SupervisedTraining, TrainOutput, TrainStep,
};
use burn_lstm::RnnBackend;

use super::checkpoint::save_forecaster;
use super::data::Series;
use super::error::ExampleError;
use super::evaluate::{Evaluation, evaluate, persistence_rmse};
use super::loader::{WindowBatch, WindowLoader};
use super::metric::HeldBackRmse;
use super::model::{ForecastConfig, Forecaster, split};
use super::renderer::EpochLog;

/// How training reports its progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Burn's dashboard on a terminal (feature `tui`), a line per epoch otherwise.
    Auto,
    /// A line per epoch.
    Lines,
    /// Nothing (tests).
    Quiet,
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
    /// At most this many batches per epoch (tests); `None` runs every batch.
    pub max_batches_per_epoch: Option<usize>,
    /// How training reports its progress.
    pub progress: Progress,
    /// Data-parallel peers, each on a copy of the device (feature `distributed`; 1: the
    /// learner's own single-device strategy).
    pub devices: usize,
}

impl<B: AutodiffBackend + RnnBackend> TrainStep for Forecaster<B> {
    type Input = WindowBatch<B>;
    type Output = RegressionOutput<B>;

    fn step(&self, batch: WindowBatch<B>) -> TrainOutput<RegressionOutput<B>> {
        let output = self.regression(batch);
        TrainOutput::new(self, output.loss.backward(), output)
    }
}

impl<B: RnnBackend> InferenceStep for Forecaster<B> {
    type Input = WindowBatch<B>;
    type Output = RegressionOutput<B>;

    fn step(&self, batch: WindowBatch<B>) -> RegressionOutput<B> {
        self.regression(batch)
    }
}

impl<B: RnnBackend> Forecaster<B> {
    /// The standardised forecasts of a batch with their mean squared error.
    fn regression(&self, batch: WindowBatch<B>) -> RegressionOutput<B> {
        let forecasts = self.forward(batch.windows);
        let loss = (forecasts.clone() - batch.targets.clone())
            .powi_scalar(2)
            .mean()
            .mul_scalar(batch.loss_scale);
        let n = forecasts.dims()[0];
        RegressionOutput::new(
            loss,
            forecasts.reshape([n, 1]),
            batch.targets.reshape([n, 1]),
        )
    }
}

/// Trains a forecaster on everything but the held-back months with burn-train's
/// `Learner` (Adam, constant learning rate), validating on the held-back months after
/// every epoch, and saves `model.mpk` and `config.json` in `out_dir` (the `Learner`'s
/// per-epoch checkpoints go to `out_dir/checkpoint/`). Returns the held-back evaluation
/// of the trained model.
pub fn train<B: AutodiffBackend + RnnBackend>(
    series: &Series,
    options: &TrainOptions,
    out_dir: &Path,
    device: &B::Device,
) -> Result<Evaluation, ExampleError>
where
    B::InnerBackend: RnnBackend,
{
    B::seed(device, options.seed);
    let mut config = options.config.clone();
    config.validate().map_err(ExampleError::Usage)?;
    if options.batch_size == 0 {
        return Err(ExampleError::Usage(
            "--batch-size must be at least 1".into(),
        ));
    }
    if options.epochs == 0 {
        return Err(ExampleError::Usage("--epochs must be at least 1".into()));
    }
    if !(options.learning_rate.is_finite() && options.learning_rate > 0.0) {
        return Err(ExampleError::Usage(format!(
            "--lr: expected a finite number > 0, got {}",
            options.learning_rate
        )));
    }
    let test_start = split(series, &config)?;
    let train_values = &series.values[..test_start];
    let mean = train_values.iter().sum::<f32>() / train_values.len() as f32;
    let var =
        train_values.iter().map(|v| (v - mean).powi(2)).sum::<f32>() / train_values.len() as f32;
    config.mean = mean;
    config.std = var.sqrt().max(1e-6);
    let model = config.init::<B>(device);
    if options.progress != Progress::Quiet {
        let kernel = model.lstm.kernel(device, options.batch_size, config.window);
        println!("LSTM kernel: {kernel}");
    }

    let values = Arc::new(series.values.clone());
    let train_loader = WindowLoader::<B>::new(
        values.clone(),
        (config.window..test_start).collect(),
        config.clone(),
        options.batch_size,
        Some(options.seed),
        device.clone(),
    )
    .with_max_batches(options.max_batches_per_epoch);
    let held_back: Vec<usize> = (test_start..series.values.len()).collect();
    let valid_loader = WindowLoader::<B::InnerBackend>::new(
        values,
        held_back.clone(),
        config.clone(),
        held_back.len(),
        None,
        device.clone(),
    );
    let persistence = persistence_rmse(series, test_start);
    let training: Training<B> =
        SupervisedTraining::new(out_dir, Arc::new(train_loader), Arc::new(valid_loader))
            .metric_train_numeric(LossMetric::new())
            .metric_valid_numeric(LossMetric::new())
            .metric_valid_numeric(HeldBackRmse::new(config.mean, config.std))
            .with_file_checkpointer(NamedMpkFileRecorder::<FullPrecisionSettings>::new())
            .with_application_logger(None)
            .with_metric_logger(InMemoryMetricLogger::new())
            .num_epochs(options.epochs);
    let dashboard = cfg!(feature = "tui") && std::io::stdout().is_terminal();
    let training = match options.progress {
        Progress::Auto if dashboard => training,
        Progress::Auto | Progress::Lines => training.renderer(EpochLog::new(persistence, false)),
        Progress::Quiet => training.renderer(EpochLog::new(persistence, true)),
    };
    let training = match options.devices {
        0 => return Err(ExampleError::Usage("--devices must be at least 1".into())),
        1 => training,
        n => with_data_parallel(training, vec![device.clone(); n])?,
    };
    let optimizer = AdamConfig::new().init();
    let LearningResult { model, .. } =
        training.launch(Learner::new(model, optimizer, options.learning_rate));
    let evaluation = evaluate(&model, &config, series, device)?;
    save_forecaster(model, &config, out_dir)?;
    Ok(evaluation)
}

/// The optimizer of the forecaster.
type Adam<B> = OptimizerAdaptor<burn::optim::Adam, Forecaster<B>, B>;

/// The training of the forecaster: Adam, a constant learning rate.
type Training<B> = SupervisedTraining<LearningComponentsMarker<B, f64, Forecaster<B>, Adam<B>>>;

/// `training` with one data-parallel peer per device (`data_parallel.rs`).
#[cfg(feature = "distributed")]
fn with_data_parallel<B: AutodiffBackend + RnnBackend>(
    training: Training<B>,
    devices: Vec<B::Device>,
) -> Result<Training<B>, ExampleError>
where
    B::InnerBackend: RnnBackend,
{
    use burn::train::TrainingStrategy;
    let strategy = super::data_parallel::custom_strategy::<B, f64, Adam<B>>(devices);
    Ok(training.with_training_strategy(TrainingStrategy::Custom(strategy)))
}

#[cfg(not(feature = "distributed"))]
fn with_data_parallel<B: AutodiffBackend + RnnBackend>(
    _training: Training<B>,
    _devices: Vec<B::Device>,
) -> Result<Training<B>, ExampleError>
where
    B::InnerBackend: RnnBackend,
{
    Err(ExampleError::Usage(
        "--devices: this build has no data-parallel training; build with `--features distributed`"
            .into(),
    ))
}

/// [`train`] on the CPU through `Autodiff<Flex>` (the `train` example's default),
/// compiled once, in this library: with the dev profile's generic sharing (our crates
/// build unoptimised), the `train` example and the examples' tests link this copy of
/// burn-train's learner for Flex instead of each compiling its own (docs/ci.md).
pub fn train_on_flex(
    series: &Series,
    options: &TrainOptions,
    out_dir: &Path,
) -> Result<Evaluation, ExampleError> {
    train::<burn::backend::Autodiff<burn::backend::Flex>>(
        series,
        options,
        out_dir,
        &Default::default(),
    )
}
