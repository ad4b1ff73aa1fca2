//! The forecaster: an LSTM over a window of months, then a linear head on its last
//! output; its config (saved as `config.json`); the standardised windows it reads.

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, Int8Lstm, RnnBackend, RnnError};

use super::data::Series;
use super::error::ExampleError;

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
    /// Checks every field (a `config.json` is user input: a damaged one must not make
    /// `init` allocate without bound or panic), naming the first out of range.
    pub fn validate(&self) -> Result<(), String> {
        let within = |name: &str, value: usize, max: usize| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(format!("{name}: expected 1..={max}, got {value}"))
            }
        };
        within("window", self.window, 1200)?;
        within("hidden", self.hidden, 4096)?;
        within("layers", self.layers, 16)?;
        within("test_months", self.test_months, 12_000)?;
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(format!("dropout: expected [0, 1), got {}", self.dropout));
        }
        if !(self.mean.is_finite() && self.std.is_finite() && self.std > 0.0) {
            return Err(format!(
                "mean and std: expected finite numbers and std > 0, got {} and {}",
                self.mean, self.std
            ));
        }
        Ok(())
    }

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

impl<B: RnnBackend> Forecaster<B> {
    /// `windows [N, window]` of standardised values to the standardised next value `[N]`.
    pub fn forward(&self, windows: Tensor<B, 2>) -> Tensor<B, 1> {
        let [n, window] = windows.dims();
        let (y, _) = self.lstm.forward(windows.reshape([n, window, 1]), None);
        self.head.forward(last_step(y)).reshape([n])
    }

    /// The forecaster with its LSTM quantized to int8 for CPU inference
    /// (`burn_lstm::Int8Lstm`); the head stays f32.
    pub fn quantized_int8(&self) -> Result<Int8Forecaster<B>, RnnError> {
        Ok(Int8Forecaster {
            lstm: self.lstm.quantized_int8()?,
            head: self.head.clone(),
        })
    }
}

/// A [`Forecaster`] whose LSTM runs on int8 weights ([`Forecaster::quantized_int8`]).
#[derive(Clone, Debug)]
pub struct Int8Forecaster<B: Backend> {
    /// The recurrent part, quantized.
    pub lstm: Int8Lstm<B>,
    /// Next-month value from the last hidden state.
    pub head: Linear<B>,
}

impl<B: Backend> Int8Forecaster<B> {
    /// As [`Forecaster::forward`].
    pub fn forward(&self, windows: Tensor<B, 2>) -> Tensor<B, 1> {
        let [n, window] = windows.dims();
        let (y, _) = self.lstm.forward(windows.reshape([n, window, 1]), None);
        self.head.forward(last_step(y)).reshape([n])
    }
}

/// The last step of a batch-first output `[N, window, H]`, as `[N, H]`.
fn last_step<B: Backend>(y: Tensor<B, 3>) -> Tensor<B, 2> {
    let [n, window, hidden] = y.dims();
    y.narrow(1, window - 1, 1).reshape([n, hidden])
}

/// A model that forecasts the next month of each window: [`Forecaster`] or
/// [`Int8Forecaster`], for [`evaluate`](super::evaluate) and
/// [`forecast_ahead`](super::forecast_ahead).
pub trait Predict<B: Backend> {
    /// `windows [N, window]` of standardised values to the standardised next value `[N]`.
    fn predict(&self, windows: Tensor<B, 2>) -> Tensor<B, 1>;
}

impl<B: RnnBackend> Predict<B> for Forecaster<B> {
    fn predict(&self, windows: Tensor<B, 2>) -> Tensor<B, 1> {
        self.forward(windows)
    }
}

impl<B: Backend> Predict<B> for Int8Forecaster<B> {
    fn predict(&self, windows: Tensor<B, 2>) -> Tensor<B, 1> {
        self.forward(windows)
    }
}

/// Standardised windows and targets for months `targets` (each reads the `window` months
/// before it).
pub(crate) fn windows<B: Backend>(
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
pub(crate) fn split(series: &Series, config: &ForecastConfig) -> Result<usize, ExampleError> {
    let n = series.values.len();
    if config.test_months + config.window + 1 >= n {
        return Err(ExampleError::Usage(format!(
            "--window {} and {} held-back months need more than the {n} months of data",
            config.window, config.test_months
        )));
    }
    Ok(n - config.test_months)
}
