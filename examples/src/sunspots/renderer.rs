//! A plain-text renderer for burn-train: one line per epoch (the training loss averaged
//! over the epoch's batches, the held-back RMSE and the persistence baseline), for logs
//! and pipes, where Burn's dashboard (a terminal UI) cannot draw. Also the silent
//! renderer of the tests.

use std::collections::HashMap;

use burn::train::metric::{MetricDefinition, MetricId};
use burn::train::renderer::{
    EvaluationName, EvaluationProgress, MetricState, MetricsRenderer, MetricsRendererEvaluation,
    MetricsRendererTraining, ProgressType, TrainingProgress,
};

/// Prints an epoch's line when its validation pass ends (`quiet`: nothing).
pub struct EpochLog {
    names: HashMap<MetricId, String>,
    train_losses: Vec<f64>,
    valid: HashMap<String, f64>,
    persistence_rmse: f64,
    quiet: bool,
}

impl EpochLog {
    /// A log that prints to stdout, with the held-back persistence RMSE for reference.
    pub fn new(persistence_rmse: f64, quiet: bool) -> Self {
        Self {
            names: HashMap::new(),
            train_losses: Vec::new(),
            valid: HashMap::new(),
            persistence_rmse,
            quiet,
        }
    }

    fn numeric(&self, state: MetricState) -> Option<(String, f64)> {
        match state {
            MetricState::Numeric(entry, value) => {
                let name = self.names.get(&entry.metric_id)?.clone();
                Some((name, value.current()))
            }
            MetricState::Generic(_) => None,
        }
    }
}

impl MetricsRendererTraining for EpochLog {
    fn update_train(&mut self, state: MetricState) {
        if let Some((name, value)) = self.numeric(state)
            && name == "Loss"
        {
            self.train_losses.push(value);
        }
    }

    fn update_valid(&mut self, state: MetricState) {
        if let Some((name, value)) = self.numeric(state) {
            self.valid.insert(name, value);
        }
    }

    fn render_train(&mut self, _item: TrainingProgress, _indicators: Vec<ProgressType>) {}

    fn render_valid(&mut self, item: TrainingProgress, _indicators: Vec<ProgressType>) {
        let done = item
            .progress
            .as_ref()
            .is_some_and(|p| p.items_processed >= p.items_total);
        if !done {
            return;
        }
        let losses = std::mem::take(&mut self.train_losses);
        let train = losses.iter().sum::<f64>() / losses.len().max(1) as f64;
        if !self.quiet {
            let epoch = item.global_progress;
            println!(
                "epoch {:>3}/{}  train mse (standardised) {train:.4}  held-back rmse {:.2} (persistence {:.2})",
                epoch.items_processed,
                epoch.items_total,
                self.valid
                    .get("Held-back RMSE")
                    .copied()
                    .unwrap_or(f64::NAN),
                self.persistence_rmse
            );
        }
    }
}

impl MetricsRendererEvaluation for EpochLog {
    fn update_test(&mut self, _name: EvaluationName, _state: MetricState) {}

    fn render_test(&mut self, _item: EvaluationProgress, _indicators: Vec<ProgressType>) {}
}

impl MetricsRenderer for EpochLog {
    fn manual_close(&mut self) {}

    fn register_metric(&mut self, definition: MetricDefinition) {
        self.names.insert(definition.metric_id, definition.name);
    }
}
