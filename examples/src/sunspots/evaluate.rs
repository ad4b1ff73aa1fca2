//! Serving a forecaster: one-step-ahead forecasts of the held-back months with their
//! errors, and forecasts past the end of the data.

use burn::tensor::backend::Backend;

use super::data::Series;
use super::error::ExampleError;
use super::model::{ForecastConfig, Predict, split, windows};

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
pub fn evaluate<B: Backend>(
    model: &impl Predict<B>,
    config: &ForecastConfig,
    series: &Series,
    device: &B::Device,
) -> Result<Evaluation, ExampleError> {
    let start = split(series, config)?;
    let targets: Vec<usize> = (start..series.values.len()).collect();
    let (x, _) = windows::<B>(&series.values, &targets, config, device);
    let predicted = model
        .predict(x)
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
    let persistence_rmse = persistence_rmse(series, start);
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
pub fn forecast_ahead<B: Backend>(
    model: &impl Predict<B>,
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
            .predict(x)
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .expect("f32")[0];
        values[target] = (next * config.std + config.mean).max(0.0);
    }
    values.split_off(series.values.len())
}

/// RMSE of the persistence forecast (next month = this month) over the months from
/// `start` on: the baseline a forecaster has to beat.
pub(crate) fn persistence_rmse(series: &Series, start: usize) -> f64 {
    let n = (series.values.len() - start) as f64;
    ((start..series.values.len())
        .map(|t| ((series.values[t] - series.values[t - 1]) as f64).powi(2))
        .sum::<f64>()
        / n)
        .sqrt()
}
