//! [`CudnnCompatibleGru`]: a Burn module with ordinary `Param` tensors in PyTorch's and
//! cuDNN's canonical GRU layout, running its whole layer stack as one op.

use burn::module::Module;
use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::layer_call::{checked_shape, run_in_layout};
use crate::module::methods::rnn_module_methods;
use crate::module::state::GruState;
use crate::module::validate;
use crate::module::weights::RnnLayer;
use crate::op::choice::RnnKernel;
use crate::op::contract::RnnBackend;
use crate::op::spec::{CellKind, RnnArch};
use crate::op::zero_state;

/// A multi-layer, optionally bidirectional GRU with PyTorch's semantics (`nn.GRU`: gates
/// r, z, n; `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, which cuDNN computes and
/// Keras calls `reset_after=True`), whose whole layer stack runs as one op. Create it
/// with [`CudnnCompatibleGruConfig`](crate::CudnnCompatibleGruConfig).
///
/// Flex and NdArray run it with the fused CPU kernel, Burn's Cuda backend with cuDNN
/// (`CUDNN_GRU`; [`crate::settings`]), every other backend with the portable kernel; the
/// kernel-choice API ([`Self::kernel`]) says which. The repository's `docs/gru.md` has the cell's
/// equations and how Keras and Burn GRUs relate to it.
#[derive(Module, Debug)]
pub struct CudnnCompatibleGru<B: Backend> {
    /// The layers, bottom first (each direction's `weight_hr` is always `None`).
    pub layers: Vec<RnnLayer<B>>,
    /// Features of each input step.
    pub input_size: usize,
    /// Size of the hidden state.
    pub hidden_size: usize,
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

impl<B: Backend> CudnnCompatibleGru<B> {
    /// The architecture of the layer stack.
    pub fn arch(&self) -> RnnArch {
        RnnArch {
            cell: CellKind::Gru,
            input_size: self.input_size,
            hidden_size: self.hidden_size,
            proj_size: 0,
            num_layers: self.layers.len(),
            bidirectional: self.bidirectional,
            bias: self.bias,
        }
    }
}

rnn_module_methods!(CudnnCompatibleGru);

impl<B: RnnBackend> CudnnCompatibleGru<B> {
    /// Runs the layer stack over full-length sequences.
    ///
    /// - `input`: `[batch, seq, input_size]` when `batch_first`, else `[seq, batch, input_size]`.
    /// - `state`: initial hidden state (zeros when `None`).
    ///
    /// Returns the output sequence of the last layer (`[.., dirs * H]`, same layout as
    /// the input) and the final hidden state of every layer and direction.
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<GruState<B>>,
    ) -> (Tensor<B, 3>, GruState<B>) {
        self.try_forward(input, state, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Self::forward`] for right-padded batches: row `b` has `lengths[b]` valid
    /// steps (0 to `seq`), with the semantics of
    /// [`CudnnCompatibleLstm::forward_with_lengths`](crate::CudnnCompatibleLstm::forward_with_lengths)
    /// (empty rows included).
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward_with_lengths(
        &self,
        input: Tensor<B, 3>,
        lengths: &[usize],
        state: Option<GruState<B>>,
    ) -> (Tensor<B, 3>, GruState<B>) {
        self.try_forward(input, state, Some(lengths))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::forward`] / [`Self::forward_with_lengths`] returning an error, naming the
    /// argument with the expected and the actual value, instead of panicking.
    pub fn try_forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<GruState<B>>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor<B, 3>, GruState<B>), RnnError> {
        let arch = self.arch();
        let device = input.device();
        let [batch, seq_len] = checked_shape(&input, &arch, self.batch_first, lengths)?;
        self.validate()?;
        let shape = [arch.cells(), batch, arch.hidden_size];
        let place = (&device, input.dtype());
        let h0 = match state {
            Some(state) => {
                validate::state_part("state.hidden", state.hidden.dims(), shape, "H")?;
                state.hidden
            }
            None => zero_state::zeros(shape, place),
        };
        if self.reject_non_finite {
            validate::finite("input", &input)?;
            validate::finite("state.hidden", &h0)?;
        }
        let spec = self.spec(batch, seq_len, lengths, &device);
        let (y, h_n, _) = run_in_layout(
            input,
            self.batch_first,
            self.flat_weights(),
            (h0, None),
            &spec,
        );
        Ok((y, GruState::new(h_n)))
    }
}
