//! Where a training step's time goes (`language_model --profile`): the step's graph is
//! cut at the phase boundaries (the LSTM's input and output become leaves), each part is
//! run forward and backward on its own with the device synchronised after it, and the
//! parts' parameter gradients are added up. The gradients are the whole step's (chain
//! rule: each part's backward starts from the gradient the part after it computed), so a
//! profiled run trains the same model; it only pays the synchronisations and two small
//! element-wise products.

use std::fmt;
use std::time::{Duration, Instant};

use burn::backend::Autodiff;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{Int, Tensor};
use burn_lstm::{LstmState, RnnBackend};

use super::decoder_loss::training_loss;
use super::model::WordLm;

/// The phases of a training step.
pub const PHASES: [&str; 8] = [
    "data (get_batch)",
    "embedding + dropout, forward",
    "LSTM forward",
    "dropout + decoder + log-softmax + NLL, forward",
    "decoder + softmax, backward",
    "LSTM backward",
    "embedding + dropout, backward",
    "optimizer (clip + SGD)",
];

/// Time spent in each of [`PHASES`] over `batches` steps.
#[derive(Clone, Debug, Default)]
pub struct PhaseTimes {
    /// One total per phase, in [`PHASES`] order.
    pub totals: [Duration; 8],
    /// Steps measured.
    pub batches: usize,
}

impl PhaseTimes {
    /// Milliseconds per step of phase `index`.
    pub fn ms_per_batch(&self, index: usize) -> f64 {
        self.totals[index].as_secs_f64() * 1e3 / self.batches.max(1) as f64
    }

    /// Runs `f`, synchronises `device`, and adds the time to phase `index`.
    pub(crate) fn time<B: Backend, T>(
        &mut self,
        index: usize,
        device: &B::Device,
        f: impl FnOnce() -> T,
    ) -> T {
        let start = Instant::now();
        let out = f();
        B::sync(device).expect("the device failed while profiling");
        self.totals[index] += start.elapsed();
        out
    }
}

impl fmt::Display for PhaseTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total: f64 = (0..PHASES.len()).map(|i| self.ms_per_batch(i)).sum();
        writeln!(
            f,
            "| phase of a training step ({} steps)              | ms/batch |  share |",
            self.batches
        )?;
        writeln!(f, "| --- | ---: | ---: |")?;
        for (i, name) in PHASES.iter().enumerate() {
            let ms = self.ms_per_batch(i);
            writeln!(
                f,
                "| {name:<46} | {ms:8.2} | {:5.1} % |",
                100.0 * ms / total.max(f64::MIN_POSITIVE)
            )?;
        }
        write!(f, "| {:<46} | {total:8.2} | 100.0 % |", "total")
    }
}

/// The gradients of one step, phase by phase (see the module's documentation), with
/// the loss and the LSTM's final state. `state` is the carried state, already detached.
pub(crate) fn profiled_gradients<B: RnnBackend>(
    model: &WordLm<Autodiff<B>>,
    data: Tensor<Autodiff<B>, 2, Int>,
    targets: Tensor<Autodiff<B>, 1, Int>,
    state: Option<LstmState<Autodiff<B>>>,
    fused_loss: bool,
    times: &mut PhaseTimes,
    device: &B::Device,
) -> (
    Tensor<Autodiff<B>, 1>,
    LstmState<Autodiff<B>>,
    GradientsParams,
) {
    let emb = times.time::<B, _>(1, device, || model.embed(data));
    let emb_leaf = emb.clone().detach().require_grad();
    let (y, state) = times.time::<B, _>(2, device, || model.rnn.forward(emb_leaf.clone(), state));
    let y_leaf = y.clone().detach().require_grad();
    let loss = times.time::<B, _>(3, device, || {
        training_loss(model, y_leaf.clone(), targets, fused_loss)
    });
    let (mut params, dy) = times.time::<B, _>(4, device, || {
        let mut grads = loss.backward();
        let dy = y_leaf.grad_remove(&mut grads).expect("the decoder reads y");
        (GradientsParams::from_grads(grads, model), dy)
    });
    let (lstm, demb) = times.time::<B, _>(5, device, || {
        let mut grads = (y * Tensor::from_inner(dy)).sum().backward();
        let demb = emb_leaf
            .grad_remove(&mut grads)
            .expect("the LSTM reads emb");
        (GradientsParams::from_grads(grads, model), demb)
    });
    let embedding = times.time::<B, _>(6, device, || {
        let grads = (emb * Tensor::from_inner(demb)).sum().backward();
        GradientsParams::from_grads(grads, model)
    });
    add_gradients(model, &mut params, lstm);
    add_gradients(model, &mut params, embedding);
    times.batches += 1;
    (loss, state, params)
}

/// Adds the gradients in `from` to those in `into`, parameter by parameter (a tied
/// weight gets one from the decoder and one from the embedding).
fn add_gradients<B: AutodiffBackend, M: AutodiffModule<B>>(
    module: &M,
    into: &mut GradientsParams,
    mut from: GradientsParams,
) {
    struct Add<'a> {
        into: &'a mut GradientsParams,
        from: &'a mut GradientsParams,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Add<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(grad) = self.from.remove::<B::InnerBackend, D>(param.id) {
                let sum = match self.into.remove::<B::InnerBackend, D>(param.id) {
                    Some(existing) => existing + grad,
                    None => grad,
                };
                self.into.register(param.id, sum);
            }
        }
    }
    module.visit(&mut Add {
        into,
        from: &mut from,
    });
}
