//! The held-back RMSE in sunspot numbers as a burn-train metric: the forecasts and
//! targets of a validation batch un-standardised (forecasts floored at zero, as
//! `evaluate` does), the root of the mean squared error over the epoch so far.

use std::sync::Arc;

use burn::backend::Flex;
use burn::train::RegressionOutput;
use burn::train::metric::{
    Adaptor, Metric, MetricAttributes, MetricMetadata, MetricName, Numeric, NumericAttributes,
    NumericEntry, SerializedEntry,
};

/// A validation batch's standardised forecasts and targets (what the metric reads).
pub struct StandardisedForecasts {
    forecasts: Vec<f32>,
    targets: Vec<f32>,
}

/// burn-train syncs every output to Flex before the metrics read it.
impl Adaptor<StandardisedForecasts> for RegressionOutput<Flex> {
    fn adapt(&self) -> StandardisedForecasts {
        let values = |t: &burn::tensor::Tensor<Flex, 2>| {
            t.to_data()
                .convert::<f32>()
                .into_vec::<f32>()
                .expect("f32 values")
        };
        StandardisedForecasts {
            forecasts: values(&self.output),
            targets: values(&self.targets),
        }
    }
}

/// RMSE of the one-month-ahead forecasts in sunspot numbers, over an epoch.
#[derive(Clone)]
pub struct HeldBackRmse {
    name: MetricName,
    mean: f32,
    std: f32,
    squared_errors: f64,
    count: usize,
}

impl HeldBackRmse {
    /// The metric for a model whose inputs are standardised with `mean` and `std`.
    pub fn new(mean: f32, std: f32) -> Self {
        Self {
            name: Arc::new("Held-back RMSE".to_string()),
            mean,
            std,
            squared_errors: 0.0,
            count: 0,
        }
    }

    fn rmse(&self) -> f64 {
        (self.squared_errors / self.count.max(1) as f64).sqrt()
    }
}

impl Metric for HeldBackRmse {
    type Input = StandardisedForecasts;

    fn update(&mut self, item: &StandardisedForecasts, _: &MetricMetadata) -> SerializedEntry {
        let unscale = |v: f32| v * self.std + self.mean;
        for (&forecast, &target) in item.forecasts.iter().zip(&item.targets) {
            // Sunspot numbers are never negative.
            let error = unscale(forecast).max(0.0) - unscale(target);
            self.squared_errors += (error as f64).powi(2);
        }
        self.count += item.targets.len();
        let rmse = self.rmse();
        SerializedEntry::new(format!("{rmse:.2}"), rmse.to_string())
    }

    fn clear(&mut self) {
        self.squared_errors = 0.0;
        self.count = 0;
    }

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn attributes(&self) -> MetricAttributes {
        NumericAttributes {
            unit: None,
            higher_is_better: false,
        }
        .into()
    }
}

impl Numeric for HeldBackRmse {
    /// The RMSE over the epoch so far (an RMSE is not the mean of its batches' RMSEs).
    fn value(&self) -> NumericEntry {
        NumericEntry::Value(self.rmse())
    }

    fn running_value(&self) -> NumericEntry {
        NumericEntry::Value(self.rmse())
    }
}
