//! Sampling words from a trained model, as PyTorch's `generate.py`: each word drawn from
//! the multinomial over `softmax(logits / temperature)`, then fed back as the next input
//! with the LSTM's state carried.

use burn::tensor::{Int, Tensor, TensorData};
use burn_lstm::{LstmState, RnnBackend};

use super::error::LmError;
use super::model::WordLm;

/// The smallest temperature (`generate.py`: "--temperature has to be greater or equal
/// 1e-3").
pub const MIN_TEMPERATURE: f64 = 1e-3;

/// A seeded generator of uniform numbers in `[0, 1)` (SplitMix64): the same seed gives
/// the same words on every machine.
#[derive(Clone, Debug)]
pub struct Sampler {
    state: u64,
}

impl Sampler {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next number, uniform in `[0, 1)` (53 random bits).
    pub fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// An index drawn with probability `softmax(logits / temperature)` (computed in f64
    /// with the maximum subtracted, so no logit overflows).
    pub fn draw(&mut self, logits: &[f32], temperature: f64) -> usize {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let weights: Vec<f64> = logits
            .iter()
            .map(|&l| ((l as f64 - max) / temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut target = self.uniform() * total;
        for (i, w) in weights.iter().enumerate() {
            if target < *w {
                return i;
            }
            target -= w;
        }
        // Rounding left the target past the end: the last word with any weight.
        weights.iter().rposition(|&w| w > 0.0).unwrap_or(0)
    }
}

/// Feeds `prompt` (word ids, at least one) through `model` and samples `count` words
/// after it, each fed back as the next input with the state carried. Returns the sampled
/// ids.
pub fn generate<B: RnnBackend>(
    model: &WordLm<B>,
    prompt: &[u32],
    count: usize,
    temperature: f64,
    sampler: &mut Sampler,
    device: &B::Device,
) -> Result<Vec<u32>, LmError> {
    if !(temperature >= MIN_TEMPERATURE && temperature.is_finite()) {
        return Err(LmError::Usage(format!(
            "--temperature: expected a finite number >= {MIN_TEMPERATURE}, got {temperature}"
        )));
    }
    let Some((&last, context)) = prompt.split_last() else {
        return Err(LmError::Usage(
            "--prompt: expected at least one word, got none".into(),
        ));
    };
    let ids = |ids: &[u32]| -> Tensor<B, 2, Int> {
        let data: Vec<i64> = ids.iter().map(|&id| i64::from(id)).collect();
        Tensor::from_data(TensorData::new(data, [ids.len(), 1]), device)
    };
    // The prompt but its last word in one call, to set up the state.
    let mut state: Option<LstmState<B>> = None;
    if !context.is_empty() {
        let (_, next) = model.forward(ids(context), None);
        state = Some(next);
    }
    let mut input = last;
    // Grown as words come: `count` is the user's and may be past any allocation.
    let mut words = Vec::with_capacity(count.min(1 << 16));
    for _ in 0..count {
        let (logits, next) = model.forward(ids(&[input]), state);
        state = Some(next);
        let logits = logits
            .into_data()
            .convert::<f32>()
            .into_vec::<f32>()
            .expect("f32 logits");
        input = sampler.draw(&logits, temperature) as u32;
        words.push(input);
    }
    Ok(words)
}
