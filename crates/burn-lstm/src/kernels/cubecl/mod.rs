//! The op contract on Burn's CubeCL backends (feature `cubecl`): Wgpu, Cuda and Rocm,
//! with and without fusion. On the CUDA runtime (feature `cuda`) the op runs on cuDNN
//! (`kernels/cudnn`), elsewhere and as the fallback on the portable kernel.

use burn::tensor::ops::FloatTensorOps;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
use burn_fusion::{Fusion, FusionBackend};

pub(crate) mod flat_cache;
pub(crate) mod flat_join;
pub(crate) mod keep_awake;
pub(crate) mod release;

use crate::kernels::portable;
use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::contract::RnnBackend;
use crate::op::flat_weights::FlatJoinOps;
use crate::op::fusion as fusion_op;
use crate::op::io::{RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
#[cfg(feature = "cuda")]
use crate::op::shapes::debug_check_non_empty;
use crate::op::spec::RnnSpec;

/// Wgpu, Cuda and Rocm without fusion: cuDNN on the CUDA runtime (feature `cuda`),
/// the portable kernel otherwise and as the fallback.
impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> RnnBackend
    for CubeBackend<R, F, I, BT>
{
    fn rnn_kernel(device: &Self::Device, spec: &RnnSpec) -> KernelChoice {
        choice::<R>(device, spec, F::dtype(), true)
    }

    fn rnn_kernel_of_call(device: &Self::Device, spec: &RnnSpec) -> RnnKernel {
        choice::<R>(device, spec, F::dtype(), false).kernel
    }

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
        forward::<R, F, I, BT>(inputs, spec, false).0
    }

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
        let (output, saved) = forward::<R, F, I, BT>(inputs, spec, true);
        (
            output,
            saved.expect("a training forward saves its residuals"),
        )
    }

    fn rnn_backward(saved: RnnSaved<Self>, grads: RnnOutputGrads<Self>) -> RnnGrads<Self> {
        backward::<R, F, I, BT>(saved, grads)
    }
}

use burn::tensor::ops::FloatTensor;

/// A forward's outputs and, for training, what its backward needs.
type ForwardResult<B> = (RnnOutput<B>, Option<RnnSaved<B>>);

/// The kernel of a call, with cuDNN's algorithm and its reason when `detail` (the
/// user-facing [`RnnBackend::rnn_kernel`]) or without (each call's dispatch).
#[cfg(feature = "cuda")]
fn choice<R: CubeRuntime>(
    device: &R::Device,
    spec: &RnnSpec,
    dtype: burn::tensor::DType,
    detail: bool,
) -> KernelChoice {
    crate::kernels::cudnn::choice::choice::<R, R::Device>(device, spec, dtype, detail)
}

#[cfg(not(feature = "cuda"))]
fn choice<R: CubeRuntime>(
    _device: &R::Device,
    spec: &RnnSpec,
    _dtype: burn::tensor::DType,
    _detail: bool,
) -> KernelChoice {
    KernelChoice::portable_only(spec.kernel)
}

#[cfg(feature = "cuda")]
fn forward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    inputs: RnnInputs<CubeBackend<R, F, I, BT>>,
    spec: &RnnSpec,
    save: bool,
) -> ForwardResult<CubeBackend<R, F, I, BT>> {
    use crate::kernels::cudnn::device::log_fallback_once;
    use crate::kernels::empty_rows::{self, EmptyRows};
    debug_check_non_empty::<CubeBackend<R, F, I, BT>>("the CubeCL op's inputs", inputs.tensors());
    let choice = choice::<R>(&inputs.input.device, spec, inputs.input.dtype, false);
    if choice.kernel == RnnKernel::Cudnn {
        // Rows of length 0 (unless BURN_LSTM_CUDNN_EMPTY_ROWS=0, see `choice`) are
        // taken out before cuDNN, which refuses them, and put back after.
        return match EmptyRows::of(spec) {
            Some(rows) => {
                empty_rows::forward(&rows, inputs, spec, save, cudnn_forward::<R, F, I, BT>)
            }
            None => cudnn_forward::<R, F, I, BT>(inputs, spec, save),
        };
    }
    if let (Some(reason), true) = (
        &choice.fallback_reason,
        crate::kernels::cudnn::choice::is_cuda::<R>(),
    ) {
        log_fallback_once(reason);
    }
    portable::forward::<CubeBackend<R, F, I, BT>>(inputs, spec, save)
}

/// A forward through cuDNN (no row of length 0), the portable kernel if cuDNN fails.
#[cfg(feature = "cuda")]
fn cudnn_forward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    inputs: RnnInputs<CubeBackend<R, F, I, BT>>,
    spec: &RnnSpec,
    save: bool,
) -> ForwardResult<CubeBackend<R, F, I, BT>> {
    use crate::kernels::cudnn::{
        device::record_runtime_error,
        ops,
        runtime_cast::{from_cuda, to_cuda},
    };
    match ops::forward(
        inputs.clone().map::<ops::CudaBackend>(to_cuda::<R>),
        spec,
        save,
    ) {
        Ok(result) => {
            let [y, h_n] = result.outputs.map(from_cuda::<R>);
            let c_n = result.c_n.map(from_cuda::<R>);
            debug_check_non_empty::<CubeBackend<R, F, I, BT>>(
                "cuDNN's results",
                [&y, &h_n].into_iter().chain(&c_n),
            );
            let saved = result.saved.map(|(residuals, tape)| RnnSaved {
                spec: spec.clone(),
                kernel: RnnKernel::Cudnn,
                inputs,
                residuals: residuals.into_iter().map(from_cuda::<R>).collect(),
                host: Some(crate::op::io::HostResiduals(std::sync::Arc::new(tape))),
            });
            (RnnOutput { y, h_n, c_n }, saved)
        }
        Err(reason) => {
            record_runtime_error(&reason);
            portable::forward::<CubeBackend<R, F, I, BT>>(inputs, spec, save)
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn forward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    inputs: RnnInputs<CubeBackend<R, F, I, BT>>,
    spec: &RnnSpec,
    save: bool,
) -> ForwardResult<CubeBackend<R, F, I, BT>> {
    portable::forward::<CubeBackend<R, F, I, BT>>(inputs, spec, save)
}

#[cfg(feature = "cuda")]
fn backward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    saved: RnnSaved<CubeBackend<R, F, I, BT>>,
    grads: RnnOutputGrads<CubeBackend<R, F, I, BT>>,
) -> RnnGrads<CubeBackend<R, F, I, BT>> {
    use crate::kernels::cudnn::{
        device::record_runtime_error,
        ops,
        runtime_cast::{from_cuda, to_cuda},
    };
    if crate::kernels::empty_rows::is_compacted(&saved) {
        return crate::kernels::empty_rows::backward(saved, grads, backward::<R, F, I, BT>);
    }
    if saved.kernel != RnnKernel::Cudnn {
        return portable::backward::<CubeBackend<R, F, I, BT>>(saved, grads);
    }
    let tape = saved
        .host
        .as_ref()
        .and_then(|h| h.0.downcast_ref::<ops::CudnnTape>());
    debug_check_non_empty::<CubeBackend<R, F, I, BT>>(
        "the CubeCL backward's upstream gradients",
        [&grads.dy, &grads.dh_n].into_iter().chain(&grads.dc_n),
    );
    let result = match (tape, saved.residuals.as_slice()) {
        (Some(tape), [y, space]) => ops::backward(
            saved.inputs.clone().map::<ops::CudaBackend>(to_cuda::<R>),
            [y.clone(), space.clone()].map(to_cuda::<R>),
            tape,
            ops::UpstreamGrads {
                dy: to_cuda::<R>(grads.dy.clone()),
                dh_n: to_cuda::<R>(grads.dh_n.clone()),
                dc_n: grads.dc_n.clone().map(to_cuda::<R>),
            },
            &saved.spec,
        ),
        _ => Err("the cuDNN forward's residuals are missing".to_string()),
    };
    match result {
        Ok(computed) => {
            let computed = computed.map::<CubeBackend<R, F, I, BT>>(from_cuda::<R>);
            RnnGrads {
                input: Some(computed.input),
                weights: computed.weights,
                h0: computed.h0,
                c0: computed.c0,
            }
        }
        Err(reason) => {
            // The portable backward needs its own residuals: recompute the forward.
            // With inter-layer dropout the masks differ from the forward cuDNN ran.
            record_runtime_error(&format!(
                "cuDNN backward failed ({reason}); recomputing with the portable kernel"
            ));
            let spec = saved.spec.clone();
            let (_, recomputed) =
                portable::forward::<CubeBackend<R, F, I, BT>>(saved.inputs, &spec, true);
            portable::backward::<CubeBackend<R, F, I, BT>>(recomputed.expect("saved"), grads)
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn backward<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement>(
    saved: RnnSaved<CubeBackend<R, F, I, BT>>,
    grads: RnnOutputGrads<CubeBackend<R, F, I, BT>>,
) -> RnnGrads<CubeBackend<R, F, I, BT>> {
    portable::backward::<CubeBackend<R, F, I, BT>>(saved, grads)
}

/// The fused backends that `burn::backend::Cuda` and `Wgpu` are by default: when the
/// inner backend runs a fused kernel (cuDNN), the whole op is one custom fusion
/// operation (`op/fusion.rs`); otherwise the portable kernel runs on the fused backend
/// (its gate math fuses into few kernels).
impl<B: FusionBackend + RnnBackend> RnnBackend for Fusion<B> {
    fn rnn_kernel(device: &Self::Device, spec: &RnnSpec) -> KernelChoice {
        B::rnn_kernel(device, spec)
    }

    fn rnn_kernel_of_call(device: &Self::Device, spec: &RnnSpec) -> RnnKernel {
        B::rnn_kernel_of_call(device, spec)
    }

    /// Untracked parameters (inference; autodiff joins tracked ones itself) may reuse the
    /// flat buffer of an earlier call (`flat_cache.rs`, behind its switch).
    fn rnn_flat_weights(parts: Vec<FloatTensor<Self>>) -> FloatTensor<Self> {
        flat_cache::flat_weights::<B>(parts)
    }

    /// One fusion operation each way (`flat_join.rs`, behind its switch).
    fn rnn_flat_join_ops() -> Option<FlatJoinOps<Self>> {
        flat_join::join_ops::<B>()
    }

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
        fused_forward::<B>(inputs, spec, false).0
    }

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
        let (output, saved) = fused_forward::<B>(inputs, spec, true);
        (
            output,
            saved.expect("a training forward saves its residuals"),
        )
    }

    fn rnn_backward(saved: RnnSaved<Self>, grads: RnnOutputGrads<Self>) -> RnnGrads<Self> {
        if fusion_op::is_fused_op::<B>(&saved) {
            fusion_op::backward::<B>(saved, grads)
        } else {
            portable::backward::<Self>(saved, grads)
        }
    }
}

fn fused_forward<B: FusionBackend + RnnBackend>(
    inputs: RnnInputs<Fusion<B>>,
    spec: &RnnSpec,
    save: bool,
) -> ForwardResult<Fusion<B>> {
    let device = <Fusion<B> as FloatTensorOps<Fusion<B>>>::float_device(&inputs.input);
    let kernel = B::rnn_kernel_of_call(&device, spec);
    if fusion_op::runs_as_one_operation(kernel) {
        fusion_op::forward::<B>(inputs, spec, save, kernel)
    } else {
        portable::forward::<Fusion<B>>(inputs, spec, save)
    }
}
