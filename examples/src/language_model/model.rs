//! The model of PyTorch's `RNNModel` with `--model LSTM`: an embedding, a
//! `CudnnCompatibleLstm` (dropout between its layers), dropout, and a linear decoder to
//! the vocabulary's logits (optionally tied to the embedding); its config, saved as
//! `config.json`.

use burn::config::Config;
use burn::module::{Initializer, Module, Param};
use burn::nn::{Dropout, DropoutConfig, Embedding, EmbeddingConfig};
use burn::tensor::backend::Backend;
use burn::tensor::module::linear;
use burn::tensor::{Int, Tensor};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, LstmState, RnnBackend};

/// PyTorch's `initrange`: the embedding and decoder weights start uniform in ±0.1.
pub const INIT_RANGE: f64 = 0.1;

/// Everything that fixes a model's architecture (saved as `config.json`).
#[derive(Config, Debug, PartialEq)]
pub struct LmConfig {
    /// Words in the vocabulary (`ntoken`).
    pub vocab_size: usize,
    /// Size of the word embeddings (`--emsize`).
    #[config(default = 200)]
    pub emsize: usize,
    /// Hidden units per LSTM layer (`--nhid`).
    #[config(default = 200)]
    pub nhid: usize,
    /// LSTM layers (`--nlayers`).
    #[config(default = 2)]
    pub nlayers: usize,
    /// Dropout on the embeddings, between LSTM layers and on the LSTM's output, while
    /// training (`--dropout`).
    #[config(default = 0.2)]
    pub dropout: f64,
    /// The decoder's weight is the embedding's (`--tied`; needs `emsize == nhid`).
    #[config(default = false)]
    pub tied: bool,
}

/// Largest vocabulary, sizes and layer count a config may ask for (a `config.json` is
/// user input: a damaged one must not make `init` allocate without bound).
const MAX_VOCAB: usize = 10_000_000;
const MAX_SIZE: usize = 65_536;
const MAX_LAYERS: usize = 64;
const MAX_PARAMETERS: usize = 1 << 31;

impl LmConfig {
    /// Checks every field, naming the first out of range with the expected and the
    /// actual value.
    pub fn validate(&self) -> Result<(), String> {
        let within = |name: &str, value: usize, max: usize| {
            if (1..=max).contains(&value) {
                Ok(())
            } else {
                Err(format!("{name}: expected 1..={max}, got {value}"))
            }
        };
        within("vocab_size", self.vocab_size, MAX_VOCAB)?;
        within("emsize", self.emsize, MAX_SIZE)?;
        within("nhid", self.nhid, MAX_SIZE)?;
        within("nlayers", self.nlayers, MAX_LAYERS)?;
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(format!("dropout: expected [0, 1), got {}", self.dropout));
        }
        if self.tied && self.emsize != self.nhid {
            return Err(format!(
                "tied: the decoder's weight is the embedding's, so emsize must equal nhid; \
                 got emsize {} and nhid {}",
                self.emsize, self.nhid
            ));
        }
        let table = self.vocab_size * self.emsize.max(self.nhid);
        if table > MAX_PARAMETERS {
            return Err(format!(
                "vocab_size * max(emsize, nhid): expected at most {MAX_PARAMETERS}, got {table}"
            ));
        }
        // The LSTM's parameters too: a damaged config must not make `init` allocate
        // without bound before its record is compared with it.
        let lstm = self.lstm().arch().checked_weight_count();
        if lstm.is_none_or(|count| count > MAX_PARAMETERS) {
            return Err(format!(
                "the LSTM's parameters (emsize {}, nhid {}, nlayers {}): expected at most \
                 {MAX_PARAMETERS}, got {}",
                self.emsize,
                self.nhid,
                self.nlayers,
                lstm.map_or("more than fit in an address".into(), |count| count
                    .to_string())
            ));
        }
        Ok(())
    }

    /// The LSTM's config: sequence-major input `[seq, batch, emsize]`, as PyTorch's
    /// example feeds its `nn.LSTM`, dropout between layers.
    pub fn lstm(&self) -> CudnnCompatibleLstmConfig {
        CudnnCompatibleLstmConfig::new(self.emsize, self.nhid)
            .with_num_layers(self.nlayers)
            .with_dropout(self.dropout)
            .with_batch_first(false)
    }

    /// A freshly initialised model: embedding and decoder weights uniform in ±0.1, decoder
    /// bias zero, the LSTM as PyTorch initialises `nn.LSTM` (uniform in ±1/√nhid).
    ///
    /// # Panics
    /// When [`Self::validate`] fails.
    pub fn init<B: Backend>(&self, device: &B::Device) -> WordLm<B> {
        if let Err(e) = self.validate() {
            panic!("invalid language model config: {e}");
        }
        let uniform = Initializer::Uniform {
            min: -INIT_RANGE,
            max: INIT_RANGE,
        };
        WordLm {
            encoder: EmbeddingConfig::new(self.vocab_size, self.emsize)
                .with_initializer(uniform.clone())
                .init(device),
            rnn: self.lstm().init(device),
            decoder: Decoder {
                weight: (!self.tied).then(|| uniform.init([self.nhid, self.vocab_size], device)),
                bias: Initializer::Zeros.init([self.vocab_size], device),
            },
            drop: DropoutConfig::new(self.dropout).init(),
        }
    }
}

/// The linear decoder from the LSTM's output to the vocabulary's logits.
#[derive(Module, Debug)]
pub struct Decoder<B: Backend> {
    /// `[nhid, vocab]` (Burn's `Linear` layout); `None` when tied to the embedding (the
    /// weight is then the embedding's `[vocab, emsize]`, transposed).
    pub weight: Option<Param<Tensor<B, 2>>>,
    /// `[vocab]`.
    pub bias: Param<Tensor<B, 1>>,
}

/// PyTorch's `RNNModel` (LSTM): `drop(encoder(x))` → `rnn` → `drop` → `decoder`.
#[derive(Module, Debug)]
pub struct WordLm<B: Backend> {
    /// Word embeddings `[vocab, emsize]`.
    pub encoder: Embedding<B>,
    /// The recurrent layers (sequence-major).
    pub rnn: CudnnCompatibleLstm<B>,
    /// Logits from the last layer's output.
    pub decoder: Decoder<B>,
    /// Dropout on the embeddings and on the LSTM's output (training only).
    pub drop: Dropout,
}

impl<B: Backend> WordLm<B> {
    /// Words in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.encoder.weight.dims()[0]
    }

    /// Embeddings of `input [seq, batch]` with dropout: `[seq, batch, emsize]`.
    pub fn embed(&self, input: Tensor<B, 2, Int>) -> Tensor<B, 3> {
        let [seq, batch] = input.dims();
        // Burn's embedding reads `[batch, seq]` and writes `[batch, seq, d]`: any two
        // dims do, so the sequence-major ids give sequence-major embeddings.
        let emb = self.encoder.forward(input);
        debug_assert_eq!(emb.dims()[..2], [seq, batch]);
        self.drop.forward(emb)
    }

    /// Logits `[seq * batch, vocab]` (rows time-major, like the targets) of the LSTM's
    /// output `y [seq, batch, nhid]`, after dropout.
    pub fn decode(&self, y: Tensor<B, 3>) -> Tensor<B, 2> {
        let (x, weight, bias) = self.decoder_operands(y);
        linear(x, weight, Some(bias))
    }

    /// What the decoder multiplies, from the LSTM's output `y [seq, batch, nhid]`: its
    /// input after dropout `[seq * batch, nhid]` (rows time-major), its weight
    /// `[nhid, vocab]` (the embedding's transpose when tied) and its bias `[vocab]`.
    pub fn decoder_operands(&self, y: Tensor<B, 3>) -> (Tensor<B, 2>, Tensor<B, 2>, Tensor<B, 1>) {
        let [seq, batch, hidden] = y.dims();
        let x = self.drop.forward(y).reshape([seq * batch, hidden]);
        let weight = match &self.decoder.weight {
            Some(weight) => weight.val(),
            None => self.encoder.weight.val().transpose(),
        };
        (x, weight, self.decoder.bias.val())
    }
}

impl<B: RnnBackend> WordLm<B> {
    /// Logits `[seq * batch, vocab]` of the next word after every word of
    /// `input [seq, batch]`, and the LSTM's final state (`state`: the initial one, zeros
    /// when `None`). PyTorch's `forward` returns the log-softmax of these logits; the loss
    /// (`loss.rs`) applies it fused with the negative log-likelihood.
    pub fn forward(
        &self,
        input: Tensor<B, 2, Int>,
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 2>, LstmState<B>) {
        let (y, state) = self.rnn.forward(self.embed(input), state);
        (self.decode(y), state)
    }
}
