//! Training as PyTorch's `main.py` trains its LSTM: truncated backpropagation through
//! time over the batchified training stream (windows of `bptt` steps, the final state of
//! each window detached and carried into the next), the total gradient norm clipped, plain
//! SGD (`p -= lr * grad`), the learning rate divided by 4 whenever the validation loss
//! does not improve, the best model saved.
//!
//! A hand-written loop rather than burn-train's `Learner`: the `Learner` treats batches
//! as independent items (its `TrainStep::step(&self, batch)` gets no state from the step
//! before), while here each step starts from the LSTM state the previous step ended
//! with, in the order of the stream; the learning-rate schedule depends on the
//! validation loss (the `Learner`'s schedulers see only the step count); and the
//! clipping is by the total norm over all parameters (its optimizer adaptor clips each
//! parameter on its own).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::backend::Autodiff;
use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{ElementConversion, Int, Tensor};
use burn_lstm::{LstmState, RnnBackend};

use super::batches::{batchify, get_batch, window_count, windows};
use super::checkpoint::{save_config_and_vocab, save_model};
use super::clip::clip_grad_norm;
use super::corpus::Corpus;
use super::decoder_loss::training_loss;
use super::error::LmError;
use super::evaluate::evaluate;
use super::loss::perplexity;
use super::model::{LmConfig, WordLm};
use super::profile::{PhaseTimes, profiled_gradients};

/// Rows of the validation and test batches (`eval_batch_size` in PyTorch's example).
pub const EVAL_BATCH_SIZE: usize = 10;

/// Training settings: the flags of PyTorch's `main.py`, with its defaults.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    /// Size of the word embeddings.
    pub emsize: usize,
    /// Hidden units per LSTM layer.
    pub nhid: usize,
    /// LSTM layers.
    pub nlayers: usize,
    /// Initial learning rate.
    pub lr: f64,
    /// Largest total L2 norm of the gradients.
    pub clip: f64,
    /// Passes over the training stream.
    pub epochs: usize,
    /// Columns of the training stream (rows of a batch).
    pub batch_size: usize,
    /// Steps of a window (truncated BPTT length).
    pub bptt: usize,
    /// Dropout while training.
    pub dropout: f64,
    /// Tie the decoder's weight to the embedding's.
    pub tied: bool,
    /// Seed of the initialisation and of the dropout masks.
    pub seed: u64,
    /// Batches between progress lines.
    pub log_interval: usize,
    /// Where the best model goes (`model.mpk`, `config.json`, `vocab.txt`); `None`: nowhere.
    pub save: Option<PathBuf>,
    /// Time each phase of a step, synchronising the device between phases.
    pub profile: bool,
    /// Print nothing (tests).
    pub quiet: bool,
    /// At most this many batches per epoch (tests, smoke runs); `None`: all.
    pub max_batches: Option<usize>,
    /// The loss as one autodiff op (`fused_loss.rs`); `false`: Burn's `CrossEntropyLoss`
    /// (same values, slower backward), for comparison.
    pub fused_loss: bool,
}

impl Default for TrainOptions {
    /// PyTorch's defaults (`main.py`), saving to `target/language-model`.
    fn default() -> Self {
        Self {
            emsize: 200,
            nhid: 200,
            nlayers: 2,
            lr: 20.0,
            clip: 0.25,
            epochs: 40,
            batch_size: 20,
            bptt: 35,
            dropout: 0.2,
            tied: false,
            seed: 1111,
            log_interval: 200,
            save: Some(PathBuf::from("target/language-model")),
            profile: false,
            quiet: false,
            max_batches: None,
            fused_loss: true,
        }
    }
}

impl TrainOptions {
    /// The model's config for a vocabulary of `vocab_size` words.
    pub fn config(&self, vocab_size: usize) -> LmConfig {
        LmConfig::new(vocab_size)
            .with_emsize(self.emsize)
            .with_nhid(self.nhid)
            .with_nlayers(self.nlayers)
            .with_dropout(self.dropout)
            .with_tied(self.tied)
    }

    /// Checks the flags, naming the first out of range with the expected and actual value.
    pub fn validate(&self) -> Result<(), LmError> {
        let usage = |m: String| Err(LmError::Usage(m));
        for (flag, value) in [
            ("--emsize", self.emsize),
            ("--nhid", self.nhid),
            ("--nlayers", self.nlayers),
            ("--epochs", self.epochs),
            ("--batch-size", self.batch_size),
            ("--bptt", self.bptt),
            ("--log-interval", self.log_interval),
            // Not given: no limit.
            ("--max-batches", self.max_batches.unwrap_or(usize::MAX)),
        ] {
            if value == 0 {
                return usage(format!("{flag}: expected at least 1, got 0"));
            }
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return usage(format!(
                "--lr: expected a finite number > 0, got {}",
                self.lr
            ));
        }
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return usage(format!(
                "--clip: expected a finite number > 0, got {}",
                self.clip
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return usage(format!("--dropout: expected [0, 1), got {}", self.dropout));
        }
        if self.tied && self.emsize != self.nhid {
            return usage(format!(
                "--tied: the decoder's weight is the embedding's, so --emsize must equal \
                 --nhid; got --emsize {} and --nhid {}",
                self.emsize, self.nhid
            ));
        }
        Ok(())
    }
}

/// One epoch's numbers.
#[derive(Clone, Debug)]
pub struct EpochReport {
    /// 1-based.
    pub epoch: usize,
    /// Learning rate the epoch trained with.
    pub lr: f64,
    /// Mean training loss over the epoch's batches.
    pub train_loss: f64,
    /// Mean negative log-likelihood per word of the validation split.
    pub valid_loss: f64,
    /// Mean negative log-likelihood per word of the test split.
    pub test_loss: f64,
    /// Wall time of the epoch, evaluation included.
    pub seconds: f64,
}

/// What a training run measured.
#[derive(Clone, Debug)]
pub struct TrainReport {
    /// Every epoch, in order.
    pub epochs: Vec<EpochReport>,
    /// Training steps over all epochs.
    pub batches: usize,
    /// Median over the progress intervals of their milliseconds per batch (each interval
    /// ends with a read of the loss, which waits for the device); with no complete
    /// interval, the mean over the whole run.
    pub median_ms_per_batch: f64,
    /// Training words (targets) per second of training, evaluation excluded.
    pub words_per_s: f64,
    /// Validation perplexity of the best epoch (the saved model).
    pub valid_ppl: f64,
    /// Test perplexity of the best epoch (the saved model).
    pub test_ppl: f64,
    /// Which LSTM kernel trained (`model.rnn.kernel(..)`).
    pub kernel: String,
    /// The phases' times (`--profile`).
    pub profile: Option<PhaseTimes>,
}

/// Detaches a state from the graph that made it (PyTorch's `repackage_hidden`): the next
/// window starts from its values, and backpropagation stops there.
pub fn repackage<B: AutodiffBackend>(state: LstmState<B>) -> LstmState<B> {
    LstmState::new(state.hidden.detach(), state.cell.detach())
}

/// The loss of one window (`data [len, batch]`, `targets [len * batch]`) starting from
/// `state` (detached first; zeros when `None`), and the window's final state, detached.
/// `fused`: the loss as one autodiff op ([`fused_nll_loss`](super::fused_nll_loss)), else
/// Burn's `CrossEntropyLoss`.
pub fn window_loss<B: RnnBackend>(
    model: &WordLm<Autodiff<B>>,
    data: Tensor<Autodiff<B>, 2, Int>,
    targets: Tensor<Autodiff<B>, 1, Int>,
    state: Option<LstmState<Autodiff<B>>>,
    fused: bool,
) -> (Tensor<Autodiff<B>, 1>, LstmState<Autodiff<B>>) {
    let (y, state) = model.rnn.forward(model.embed(data), state.map(repackage));
    (training_loss(model, y, targets, fused), repackage(state))
}

/// Trains a model on `corpus.train` with `options` on `Autodiff<B>`, validating and
/// testing after every epoch (on `B`), and saves the best (by validation loss) to
/// `options.save`.
pub fn train<B: RnnBackend>(
    corpus: &Corpus,
    options: &TrainOptions,
    device: &B::Device,
) -> Result<TrainReport, LmError> {
    options.validate()?;
    let config = options.config(corpus.dictionary.len());
    config
        .validate()
        .map_err(|e| LmError::Usage(format!("model config: {e}")))?;
    let train_data =
        batchify::<Autodiff<B>>(&corpus.train, options.batch_size, "train.txt", device)?;
    let valid_data = batchify::<B>(&corpus.valid, EVAL_BATCH_SIZE, "valid.txt", device)?;
    let test_data = batchify::<B>(&corpus.test, EVAL_BATCH_SIZE, "test.txt", device)?;
    if let Some(dir) = &options.save {
        save_config_and_vocab(&config, &corpus.dictionary, dir)?;
    }

    B::seed(device, options.seed);
    let mut model = config.init::<Autodiff<B>>(device);
    let kernel = model
        .rnn
        .kernel(device, options.batch_size, options.bptt)
        .to_string();
    let say = |line: &str| {
        if !options.quiet {
            println!("{line}");
        }
    };
    say(&format!(
        "vocabulary {} words; train {} words, valid {}, test {}; LSTM kernel: {kernel}",
        corpus.dictionary.len(),
        corpus.train.len(),
        corpus.valid.len(),
        corpus.test.len()
    ));

    let mut optim = SgdConfig::new().init::<Autodiff<B>, WordLm<Autodiff<B>>>();
    let mut run = Run {
        lr: options.lr,
        interval_ms: Vec::new(),
        train_time: Duration::ZERO,
        words: 0,
        batches: 0,
        profile: options.profile.then(PhaseTimes::default),
    };
    let mut epochs = Vec::new();
    let mut best: Option<(f64, f64)> = None;
    for epoch in 1..=options.epochs {
        let start = Instant::now();
        let train_loss;
        (model, train_loss) = run.epoch(model, &mut optim, &train_data, epoch, options, device);
        let inner = model.valid();
        let valid_loss = evaluate(&inner, &valid_data, options.bptt);
        let test_loss = evaluate(&inner, &test_data, options.bptt);
        let seconds = start.elapsed().as_secs_f64();
        say(&"-".repeat(89));
        say(&format!(
            "| end of epoch {epoch:3} | time: {seconds:5.2}s | valid loss {valid_loss:5.2} | \
             valid ppl {:8.2} | test ppl {:8.2}",
            perplexity(valid_loss),
            perplexity(test_loss)
        ));
        say(&"-".repeat(89));
        epochs.push(EpochReport {
            epoch,
            lr: run.lr,
            train_loss,
            valid_loss,
            test_loss,
            seconds,
        });
        if best.is_none_or(|(best_valid, _)| valid_loss < best_valid) {
            if let Some(dir) = &options.save {
                save_model(&model, dir)?;
            }
            best = Some((valid_loss, test_loss));
        } else {
            // No improvement on the validation split: anneal.
            run.lr /= 4.0;
        }
    }
    let (valid_loss, test_loss) = best.expect("at least one epoch");
    say(&"=".repeat(89));
    say(&format!(
        "| End of training | test loss {test_loss:5.2} | test ppl {:8.2}",
        perplexity(test_loss)
    ));
    say(&"=".repeat(89));
    if let Some(profile) = &run.profile {
        say(&profile.to_string());
    }
    let train_seconds = run.train_time.as_secs_f64();
    Ok(TrainReport {
        epochs,
        batches: run.batches,
        median_ms_per_batch: median(&run.interval_ms)
            .unwrap_or(train_seconds * 1e3 / run.batches.max(1) as f64),
        words_per_s: run.words as f64 / train_seconds.max(f64::MIN_POSITIVE),
        valid_ppl: perplexity(valid_loss),
        test_ppl: perplexity(test_loss),
        kernel,
        profile: run.profile,
    })
}

/// What carries over from epoch to epoch.
struct Run {
    lr: f64,
    interval_ms: Vec<f64>,
    train_time: Duration,
    words: usize,
    batches: usize,
    profile: Option<PhaseTimes>,
}

impl Run {
    /// One pass over the training stream; returns the model and the epoch's mean loss.
    fn epoch<B: RnnBackend>(
        &mut self,
        mut model: WordLm<Autodiff<B>>,
        optim: &mut impl Optimizer<WordLm<Autodiff<B>>, Autodiff<B>>,
        train_data: &Tensor<Autodiff<B>, 2, Int>,
        epoch: usize,
        options: &TrainOptions,
        device: &B::Device,
    ) -> (WordLm<Autodiff<B>>, f64) {
        let [steps, batch_size] = train_data.dims();
        // PyTorch prints `len(train_data) // bptt` as the epoch's batch count.
        let shown_total = steps / options.bptt;
        let windows = windows(steps, options.bptt)
            .take(options.max_batches.unwrap_or(usize::MAX))
            .collect::<Vec<_>>();
        debug_assert!(windows.len() <= window_count(steps, options.bptt));
        let mut state: Option<LstmState<Autodiff<B>>> = None;
        // Losses summed on the device; read back at each progress line and at the end.
        let mut interval_loss: Option<Tensor<B, 1>> = None;
        let (mut interval_batches, mut interval_words) = (0usize, 0usize);
        let (mut epoch_loss, mut epoch_batches) = (0.0f64, 0usize);
        let mut interval_start = Instant::now();
        let epoch_start = Instant::now();
        for (batch, &window) in windows.iter().enumerate() {
            let (loss, next, grads) = match self.profile.as_mut() {
                None => {
                    let (data, targets) = get_batch(train_data, window);
                    let (loss, next) =
                        window_loss(&model, data, targets, state, options.fused_loss);
                    let grads = GradientsParams::from_grads(loss.backward(), &model);
                    (loss, next, grads)
                }
                Some(times) => {
                    let (data, targets) =
                        times.time::<B, _>(0, device, || get_batch(train_data, window));
                    let (loss, next, grads) = profiled_gradients(
                        &model,
                        data,
                        targets,
                        state.map(repackage),
                        options.fused_loss,
                        times,
                        device,
                    );
                    (loss, repackage(next), grads)
                }
            };
            state = Some(next);
            let mut grads = grads;
            let lr = self.lr;
            let mut step = |model: WordLm<Autodiff<B>>, grads: &mut GradientsParams| {
                clip_grad_norm(&model, grads, options.clip);
                optim.step(lr, model, std::mem::take(grads))
            };
            model = match self.profile.as_mut() {
                None => step(model, &mut grads),
                Some(times) => times.time::<B, _>(7, device, || step(model, &mut grads)),
            };
            let loss = loss.inner();
            interval_loss = Some(match interval_loss.take() {
                Some(sum) => sum + loss,
                None => loss,
            });
            interval_batches += 1;
            interval_words += window.1 * batch_size;
            let last = batch + 1 == windows.len();
            if (batch % options.log_interval == 0 && batch > 0) || last {
                let sum: f64 = interval_loss
                    .take()
                    .expect("a batch ran")
                    .into_scalar()
                    .elem();
                let elapsed = interval_start.elapsed().as_secs_f64();
                let ms = elapsed * 1e3 / interval_batches as f64;
                let loss = sum / interval_batches as f64;
                epoch_loss += sum;
                epoch_batches += interval_batches;
                self.words += interval_words;
                if !last || batch % options.log_interval == 0 {
                    self.interval_ms.push(ms);
                    if !options.quiet {
                        println!(
                            "| epoch {epoch:3} | {batch:5}/{shown_total:5} batches | lr {:02.2} | \
                             ms/batch {ms:5.2} | loss {loss:5.2} | ppl {:8.2} | words/s {:6.0}",
                            self.lr,
                            perplexity(loss),
                            interval_words as f64 / elapsed.max(f64::MIN_POSITIVE),
                        );
                    }
                }
                (interval_batches, interval_words) = (0, 0);
                interval_start = Instant::now();
            }
        }
        self.train_time += epoch_start.elapsed();
        self.batches += epoch_batches;
        (model, epoch_loss / epoch_batches.max(1) as f64)
    }
}

/// The median of `values` (the mean of the middle two for an even count); `None` when
/// empty.
fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}
