//! What flows through the op: its results, the upstream gradients, the gradients it
//! returns and what a training forward keeps for its backward.

use burn::tensor::{backend::Backend, ops::FloatTensor};

use crate::op::choice::RnnKernel;
use crate::op::spec::RnnSpec;

/// The op's inputs. Layouts are sequence-major; a cell without a cell state (the GRU)
/// has no `c0`, so no tensor of zero elements ever reaches a backend.
#[derive(Debug, Clone)]
pub struct RnnInputs<B: Backend> {
    /// Input sequence, `[T, B, I]`.
    pub input: FloatTensor<B>,
    /// The flat parameter buffer ([`RnnArch::direction_layout`](crate::RnnArch::direction_layout)).
    pub weights: FloatTensor<B>,
    /// Initial hidden state, `[layers * dirs, B, H_out]`.
    pub h0: FloatTensor<B>,
    /// Initial cell state, `[layers * dirs, B, H]` (an LSTM); `None` for a GRU.
    pub c0: Option<FloatTensor<B>>,
}

impl<B: Backend> RnnInputs<B> {
    /// Each tensor through `f` (for instance into another backend's tensors).
    pub fn map<C: Backend>(
        self,
        mut f: impl FnMut(FloatTensor<B>) -> FloatTensor<C>,
    ) -> RnnInputs<C> {
        RnnInputs {
            input: f(self.input),
            weights: f(self.weights),
            h0: f(self.h0),
            c0: self.c0.map(f),
        }
    }

    /// The tensors present, in the order `input, weights, h0, c0`.
    pub fn tensors(&self) -> impl Iterator<Item = &FloatTensor<B>> {
        [&self.input, &self.weights, &self.h0]
            .into_iter()
            .chain(self.c0.as_ref())
    }
}

/// Results of a forward call. Layouts are sequence-major.
#[derive(Debug, Clone)]
pub struct RnnOutput<B: Backend> {
    /// Output sequence of the last layer, `[T, B, dirs * H_out]`, zero past each row's length.
    pub y: FloatTensor<B>,
    /// Final hidden state of every layer and direction, `[layers * dirs, B, H_out]`.
    pub h_n: FloatTensor<B>,
    /// Final cell state of every layer and direction, `[layers * dirs, B, H]` (an
    /// LSTM); `None` for a GRU.
    pub c_n: Option<FloatTensor<B>>,
}

/// Upstream gradients of the three outputs (same shapes as [`RnnOutput`]).
#[derive(Debug, Clone)]
pub struct RnnOutputGrads<B: Backend> {
    /// Gradient of `y`.
    pub dy: FloatTensor<B>,
    /// Gradient of `h_n`.
    pub dh_n: FloatTensor<B>,
    /// Gradient of `c_n` (`None` for a GRU).
    pub dc_n: Option<FloatTensor<B>>,
    /// Whether the gradient of the input sequence is wanted (autodiff tracks the input).
    /// When it is not (raw features nobody trains), a kernel may skip it and return
    /// `None` in [`RnnGrads::input`]: the fused CPU kernel then skips the first layer's
    /// input product, a sixth of a one-layer step's work.
    pub input_required: bool,
}

/// Gradients of the four inputs of the op.
#[derive(Debug, Clone)]
pub struct RnnGrads<B: Backend> {
    /// Gradient of the input sequence, `[T, B, I]`; `None` only when it was not
    /// required ([`RnnOutputGrads::input_required`]).
    pub input: Option<FloatTensor<B>>,
    /// Gradient of the flat parameter buffer, same layout as the parameters.
    pub weights: FloatTensor<B>,
    /// Gradient of the initial hidden state.
    pub h0: FloatTensor<B>,
    /// Gradient of the initial cell state (`None` for a GRU).
    pub c0: Option<FloatTensor<B>>,
}

/// What a training forward keeps for its backward: the call, the kernel that ran and
/// that kernel's residuals (for the portable kernel: gate activations and states per
/// step; for cuDNN: its reserve space).
#[derive(Debug, Clone)]
pub struct RnnSaved<B: Backend> {
    /// The call.
    pub spec: RnnSpec,
    /// The kernel that produced the residuals (its backward must read them).
    pub kernel: RnnKernel,
    /// The op's inputs.
    pub inputs: RnnInputs<B>,
    /// Kernel-defined residual tensors.
    pub residuals: Vec<FloatTensor<B>>,
    /// Kernel-defined residuals that live outside the backend's tensors (the fused CPU
    /// kernel's tape).
    pub host: Option<HostResiduals>,
}

/// Residuals a kernel keeps in host memory, shared cheaply between clones of
/// [`RnnSaved`] and taken back by the backward.
#[derive(Clone)]
pub struct HostResiduals(pub std::sync::Arc<dyn core::any::Any + Send + Sync>);

impl core::fmt::Debug for HostResiduals {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HostResiduals(..)")
    }
}
