//! Where the time of one cuDNN op call goes, printed to stderr when the environment
//! variable `BURN_LSTM_CUDNN_TRACE=1` is set (read once). A diagnostic for measuring
//! the binding's overhead on a GPU (docs/cudnn.md); off, it costs one branch per mark.

use std::sync::OnceLock;
use std::time::Instant;

use cudnn_rnn::SeqLayout;

use crate::kernels::cudnn::weights::WeightPlan;

fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("BURN_LSTM_CUDNN_TRACE").is_ok_and(|v| v == "1"))
}

/// Host-side timings of one call, phase by phase.
pub(crate) struct CallTrace {
    label: &'static str,
    last: Option<Instant>,
    phases: Vec<(&'static str, f64)>,
}

impl CallTrace {
    /// Starts timing a call named `label` (nothing is recorded when tracing is off).
    pub fn start(label: &'static str) -> Self {
        Self {
            label,
            last: enabled().then(Instant::now),
            phases: Vec::new(),
        }
    }

    /// Ends the phase `name` (the time since the previous mark).
    pub fn mark(&mut self, name: &'static str) {
        if let Some(last) = self.last {
            let now = Instant::now();
            self.phases.push((name, (now - last).as_secs_f64() * 1e3));
            self.last = Some(now);
        }
    }

    /// Prints the phases on one line, with the algorithm and why (`algo`), the sequence
    /// tensors' `layout`, and how the call copied the parameters between the canonical
    /// layout and cuDNN's weight space (`plan`).
    pub fn finish(self, plan: &WeightPlan, algo: &str, layout: SeqLayout) {
        if self.last.is_some() {
            let phases: Vec<String> = self
                .phases
                .iter()
                .map(|(name, ms)| format!("{name} {ms:.3} ms"))
                .collect();
            eprintln!(
                "burn-lstm cuDNN {}: {} (algorithm: {algo}; layout: {}; weight copy: {})",
                self.label,
                phases.join(", "),
                layout.name(),
                if plan.identity {
                    "none".to_owned()
                } else {
                    format!(
                        "{} runs, {} of {} elements, gaps: {}",
                        plan.to_cudnn.runs().len(),
                        plan.to_cudnn.covered(),
                        plan.space_len,
                        plan.has_gaps
                    )
                }
            );
        }
    }
}
