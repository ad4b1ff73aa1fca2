//! The op contract: an extension trait over Burn's [`Backend`] (Burn's backend-extension
//! pattern). One call covers a whole layer stack, every direction and every time step.
//!
//! Every method has a default, the portable kernel, so a backend opts in with an empty
//! `impl`. Backends with a faster kernel (cuDNN, the fused CPU kernel) override them.

use burn::tensor::{TensorPrimitive, backend::Backend, ops::FloatTensor};

use crate::kernels::portable;
use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::flat_weights::{FlatBufferOps, FlatJoinOps};
use crate::op::io::{RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::spec::RnnSpec;

/// Backends that run a whole LSTM layer stack as one op.
///
/// Tensor layouts: `input` `[T, B, I]` (sequence-major), `weights` the flat parameter
/// buffer of [`RnnArch::direction_layout`](crate::RnnArch::direction_layout),
/// `h0` `[layers * dirs, B, H_out]`, `c0` `[layers * dirs, B, H]` for an LSTM and `None`
/// for a GRU (no cell state: no tensor of zero elements reaches a backend). Callers
/// keep that invariant ([`rnn`](crate::rnn) does); kernels may rely on it.
pub trait RnnBackend: Backend {
    /// Which kernel a call with `spec` runs on `device`, and why it is not a faster one.
    fn rnn_kernel(_device: &Self::Device, spec: &RnnSpec) -> KernelChoice {
        KernelChoice::portable_only(spec.kernel)
    }

    /// The kernel a call with `spec` runs on `device`: [`Self::rnn_kernel`]'s, without
    /// its explanation. The backends' glue asks it on every call; a backend whose
    /// explanation costs host time (cuDNN's algorithm and its reason) overrides it.
    #[doc(hidden)]
    fn rnn_kernel_of_call(device: &Self::Device, spec: &RnnSpec) -> RnnKernel {
        Self::rnn_kernel(device, spec).kernel
    }

    /// The flat parameter buffer of the op ([`RnnArch::direction_layout`](crate::RnnArch::direction_layout))
    /// from the module's parameters, in that order, each as stored (`weight_ih`
    /// `[4H, in]`, `weight_hh`, the biases `[4H]`, `weight_hr`). Differentiable on
    /// autodiff backends. The default flattens and concatenates with Burn's ops;
    /// NdArray copies each value once into one buffer.
    fn rnn_flat_weights(parts: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        crate::op::flat_weights::concatenate::<Self>(parts)
    }

    /// [`Self::rnn_flat_weights`] for parameters of which some are quantized (Burn's
    /// `Module::quantize_weights`): the buffer of their dequantized values, in the
    /// device's float type. The default dequantizes every part on every call; the CPU
    /// backends keep the buffer while the quantized parameters are unchanged, as they
    /// keep a float module's.
    fn rnn_flat_weights_quantized(parts: Vec<TensorPrimitive<Self>>) -> FloatTensor<Self> {
        Self::rnn_flat_weights(parts.into_iter().map(TensorPrimitive::tensor).collect())
    }

    /// How `Autodiff<Self>` builds the flat buffer of *tracked* parameters: one autodiff
    /// op per parameter appends it to the buffer so far (an autodiff op has a fixed
    /// number of parents). `None`, the default, joins them with Burn's `cat` instead,
    /// which is right for backends whose `reshape` and `slice` are views (Flex, CubeCL);
    /// NdArray returns an append that extends an unshared buffer in place (its
    /// `reshape` and `cat` copy each value three times).
    fn rnn_flat_buffer_ops() -> Option<FlatBufferOps<Self>> {
        None
    }

    /// How `Autodiff<Self>` builds the flat buffer of *tracked* parameters in one
    /// operation and cuts its gradient back in one: each autodiff op joins up to 32
    /// parameters (the buffer so far among them), so a stack of up to four bidirectional
    /// LSTM layers with biases takes one. Taken before [`Self::rnn_flat_buffer_ops`]; `None`, the
    /// default, leaves the choice to it. Burn's fused backends return it when
    /// `BURN_LSTM_FUSION_FLAT_JOIN` is on (`kernels/cubecl/flat_join.rs`).
    fn rnn_flat_join_ops() -> Option<FlatJoinOps<Self>> {
        None
    }

    /// Forward pass for inference (nothing saved for a backward).
    fn rnn_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> RnnOutput<Self> {
        let inputs = RnnInputs {
            input,
            weights,
            h0,
            c0,
        };
        portable::forward::<Self>(inputs, spec, false).0
    }

    /// Forward pass that also returns what [`RnnBackend::rnn_backward`] needs.
    fn rnn_forward_train(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> (RnnOutput<Self>, RnnSaved<Self>) {
        let inputs = RnnInputs {
            input,
            weights,
            h0,
            c0,
        };
        let (output, saved) = portable::forward::<Self>(inputs, spec, true);
        (
            output,
            saved.expect("a training forward saves its residuals"),
        )
    }

    /// Backpropagation through time from the saved residuals.
    fn rnn_backward(saved: RnnSaved<Self>, grads: RnnOutputGrads<Self>) -> RnnGrads<Self> {
        portable::backward::<Self>(saved, grads)
    }
}
