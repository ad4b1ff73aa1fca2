//! [`CudnnCompatibleLstm`]: a Burn module with ordinary `Param` tensors in PyTorch's and
//! cuDNN's canonical layout, running the fused op of its backend.

use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::layer_call::{checked_shape, run_in_layout};
use crate::module::methods::rnn_module_methods;
use crate::module::state::LstmState;
use crate::module::validate;
use crate::module::weights::RnnLayer;
use crate::op::choice::RnnKernel;
use crate::op::contract::RnnBackend;
use crate::op::spec::{CellKind, RnnArch};
use crate::op::zero_state;

/// A multi-layer, optionally bidirectional LSTM with PyTorch's semantics whose whole
/// layer stack runs as one op: cuDNN on CUDA, a fused kernel on CPU, the portable
/// kernel elsewhere. Create it with [`CudnnCompatibleLstmConfig`](crate::CudnnCompatibleLstmConfig).
#[derive(Module, Debug)]
pub struct CudnnCompatibleLstm<B: Backend> {
    /// The layers, bottom first.
    pub layers: Vec<RnnLayer<B>>,
    /// Features of each input step.
    pub input_size: usize,
    /// Size of the cell state.
    pub hidden_size: usize,
    /// Projected hidden size, 0 for none.
    pub proj_size: usize,
    /// Whether each layer runs in both directions.
    pub bidirectional: bool,
    /// Whether the gates have biases.
    pub bias: bool,
    /// `[batch, seq, features]` (true) or `[seq, batch, features]` (false).
    pub batch_first: bool,
    /// Inter-layer dropout while training.
    pub dropout: f64,
    /// Whether non-finite input or state is an error ([`NanPolicy::Reject`](crate::NanPolicy)).
    pub reject_non_finite: bool,
    /// The kernel asked for ([`Self::with_kernel`]); `None`: the fastest available.
    /// Not saved in checkpoints: it is a choice of the process, not of the model.
    #[module(skip)]
    pub kernel: Option<RnnKernel>,
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// The architecture of the layer stack.
    pub fn arch(&self) -> RnnArch {
        RnnArch {
            cell: CellKind::Lstm,
            input_size: self.input_size,
            hidden_size: self.hidden_size,
            proj_size: self.proj_size,
            num_layers: self.layers.len(),
            bidirectional: self.bidirectional,
            bias: self.bias,
        }
    }
}

rnn_module_methods!(CudnnCompatibleLstm);

impl<B: RnnBackend> CudnnCompatibleLstm<B> {
    /// Runs the layer stack over full-length sequences.
    ///
    /// - `input`: `[batch, seq, input_size]` when `batch_first`, else `[seq, batch, input_size]`.
    /// - `state`: initial state (zeros when `None`).
    ///
    /// Returns the output sequence of the last layer (`[.., dirs * H_out]`, same layout as
    /// the input) and the final state of every layer and direction.
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.try_forward(input, state, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Self::forward`] for right-padded batches: row `b` has `lengths[b]` valid steps
    /// (0 to `seq`). Its final state is taken at its own last valid step, its outputs past
    /// that are zero, and its reverse direction starts at its last valid step. Values at
    /// padded steps are never read into a result (a NaN there changes nothing).
    ///
    /// **Empty rows** (length 0: an empty utterance, a user with no history) are
    /// accepted on every kernel: such a row's outputs are zero at every step, its final
    /// state is its initial state (zeros without one), and in training the gradients of
    /// its final state flow unchanged to its initial state, with no gradient to the
    /// parameters or to its input. cuDNN refuses empty rows, so on CUDA the op takes them
    /// out around the cuDNN call (`BURN_LSTM_CUDNN_EMPTY_ROWS=0` runs such a batch on the
    /// portable kernel instead, [`crate::settings`]; [`Self::kernel_with_lengths`] tells
    /// which kernel runs). A batch of only empty rows works too (an input of at least one
    /// step: no rows or no steps is an error).
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward_with_lengths(
        &self,
        input: Tensor<B, 3>,
        lengths: &[usize],
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.try_forward(input, state, Some(lengths))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::forward`] / [`Self::forward_with_lengths`] returning an error, naming the
    /// argument with the expected and the actual value, instead of panicking.
    pub fn try_forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor<B, 3>, LstmState<B>), RnnError> {
        let arch = self.arch();
        let device = input.device();
        let [batch, seq_len] = checked_shape(&input, &arch, self.batch_first, lengths)?;
        self.validate()?;
        let (h0, c0) = match state {
            Some(state) => {
                validate::state(&state, &arch, batch)?;
                (state.hidden, state.cell)
            }
            None => {
                let place = (&device, input.dtype());
                (
                    zero_state::zeros([arch.cells(), batch, arch.output_size()], place),
                    zero_state::zeros([arch.cells(), batch, arch.hidden_size], place),
                )
            }
        };
        if self.reject_non_finite {
            validate::finite("input", &input)?;
            validate::finite("state.hidden", &h0)?;
            validate::finite("state.cell", &c0)?;
        }
        let spec = self.spec(batch, seq_len, lengths, &device);
        let (y, h_n, c_n) = run_in_layout(
            input,
            self.batch_first,
            self.flat_weights(),
            (h0, Some(c0)),
            &spec,
        );
        let c_n = c_n.expect("an LSTM's op returns its cell state");
        Ok((y, LstmState::new(h_n, c_n)))
    }
}
