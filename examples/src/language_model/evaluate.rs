//! The perplexity of a split, as PyTorch's `evaluate`.

use burn::tensor::backend::Backend;
use burn::tensor::{ElementConversion, Int, Tensor};
use burn_lstm::{CudnnCompatibleLstm, Int8Lstm, LstmState, RnnBackend};

use super::batches::{get_batch, windows};
use super::decoder_loss::decoder_nll;
use super::model::WordLm;

/// Mean negative log-likelihood per word of a batchified split `source [steps, batch]`
/// (PyTorch's `evaluate`): windows of `bptt` steps in order, the LSTM's state carried
/// from each window to the next, starting from zeros. Reads one number back from the
/// device, at the end. Run it on a model without autodiff (`model.valid()`): dropout is
/// then off.
pub fn evaluate<B: RnnBackend>(model: &WordLm<B>, source: &Tensor<B, 2, Int>, bptt: usize) -> f64 {
    evaluate_with(model, &model.rnn, source, bptt)
}

/// [`evaluate`] with the model's recurrent layers replaced by `rnn` (for instance their
/// int8 copy, `model.rnn.quantized_int8()`).
pub fn evaluate_with<B: RnnBackend>(
    model: &WordLm<B>,
    rnn: &impl Recurrent<B>,
    source: &Tensor<B, 2, Int>,
    bptt: usize,
) -> f64 {
    let [steps, _] = source.dims();
    let device = source.device();
    let mut state = None;
    let mut total = Tensor::<B, 1>::zeros([1], &device);
    for window in windows(steps, bptt) {
        let (data, targets) = get_batch(source, window);
        let (y, next) = rnn.run(model.embed(data), state);
        let (x, weight, bias) = model.decoder_operands(y);
        total = total + decoder_nll(x, weight, bias, targets).mul_scalar(window.1 as f64);
        state = Some(next);
    }
    let total: f64 = total.into_scalar().elem();
    total / (steps - 1) as f64
}

/// The recurrent layers of a [`WordLm`]: the f32 LSTM or its int8 copy.
pub trait Recurrent<B: Backend> {
    /// The layers' `forward`: outputs and the final state.
    fn run(&self, input: Tensor<B, 3>, state: Option<LstmState<B>>)
    -> (Tensor<B, 3>, LstmState<B>);
}

impl<B: RnnBackend> Recurrent<B> for CudnnCompatibleLstm<B> {
    fn run(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.forward(input, state)
    }
}

impl<B: Backend> Recurrent<B> for Int8Lstm<B> {
    fn run(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.forward(input, state)
    }
}
