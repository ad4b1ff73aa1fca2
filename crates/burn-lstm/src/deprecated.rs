//! The names of the op's API while it held LSTMs only, kept for one release: type
//! aliases, the `lstm` function and the `LstmBackend` trait (implemented for every
//! [`RnnBackend`], its methods forward to the `rnn_*` ones).

#![allow(deprecated)]

use burn::tensor::{Tensor, ops::FloatTensor};

use crate::{
    FlatBufferOps, KernelChoice, RnnArch, RnnBackend, RnnDirectionWeights, RnnError, RnnGrads,
    RnnInputs, RnnKernel, RnnLayer, RnnOutput, RnnOutputGrads, RnnSaved, RnnSpec,
};

/// The name [`RnnArch`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnArch`")]
pub type LstmArch = RnnArch;

/// The name [`RnnSpec`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnSpec`")]
pub type LstmSpec = RnnSpec;

/// The name [`RnnKernel`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnKernel`")]
pub type LstmKernel = RnnKernel;

/// The name [`RnnError`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnError`")]
pub type LstmError = RnnError;

/// The name [`RnnLayer`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnLayer`")]
pub type LstmLayer<B> = RnnLayer<B>;

/// The name [`RnnDirectionWeights`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnDirectionWeights`")]
pub type LstmDirectionWeights<B> = RnnDirectionWeights<B>;

/// The name [`RnnInputs`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnInputs`")]
pub type LstmInputs<B> = RnnInputs<B>;

/// The name [`RnnOutput`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnOutput`")]
pub type LstmOutput<B> = RnnOutput<B>;

/// The name [`RnnOutputGrads`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnOutputGrads`")]
pub type LstmOutputGrads<B> = RnnOutputGrads<B>;

/// The name [`RnnGrads`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnGrads`")]
pub type LstmGrads<B> = RnnGrads<B>;

/// The name [`RnnSaved`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnSaved`")]
pub type LstmSaved<B> = RnnSaved<B>;

/// The name [`rnn`](crate::rnn) had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `rnn`")]
pub fn lstm<B: RnnBackend>(
    input: Tensor<B, 3>,
    weights: Tensor<B, 1>,
    h0: Tensor<B, 3>,
    c0: Option<Tensor<B, 3>>,
    spec: &RnnSpec,
) -> (Tensor<B, 3>, Tensor<B, 3>, Option<Tensor<B, 3>>) {
    crate::rnn(input, weights, h0, c0, spec)
}

/// The name [`RnnBackend`] had before the GRU, with its methods' names of then. Every
/// [`RnnBackend`] is one; a bound `B: LstmBackend` keeps working. A backend implements
/// [`RnnBackend`] (the `rnn_*` methods) instead.
#[deprecated(since = "0.2.0", note = "renamed `RnnBackend` (methods `rnn_*`)")]
pub trait LstmBackend: RnnBackend {
    /// [`RnnBackend::rnn_kernel`].
    fn lstm_kernel(device: &Self::Device, spec: &RnnSpec) -> KernelChoice {
        Self::rnn_kernel(device, spec)
    }

    /// [`RnnBackend::rnn_flat_weights`].
    fn lstm_flat_weights(parts: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        Self::rnn_flat_weights(parts)
    }

    /// [`RnnBackend::rnn_flat_buffer_ops`].
    fn lstm_flat_buffer_ops() -> Option<FlatBufferOps<Self>> {
        Self::rnn_flat_buffer_ops()
    }

    /// [`RnnBackend::rnn_forward`].
    fn lstm_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> RnnOutput<Self> {
        Self::rnn_forward(input, weights, h0, c0, spec)
    }

    /// [`RnnBackend::rnn_forward_train`].
    fn lstm_forward_train(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> (RnnOutput<Self>, RnnSaved<Self>) {
        Self::rnn_forward_train(input, weights, h0, c0, spec)
    }

    /// [`RnnBackend::rnn_backward`].
    fn lstm_backward(saved: RnnSaved<Self>, grads: RnnOutputGrads<Self>) -> RnnGrads<Self> {
        Self::rnn_backward(saved, grads)
    }
}

impl<B: RnnBackend> LstmBackend for B {}
