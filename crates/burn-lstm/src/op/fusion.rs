//! The op on Burn's fused backends as **one custom fusion operation** that runs the inner
//! backend's op (the pattern `burn-vision` uses for its kernels). It is used when the
//! inner backend runs a fused kernel (cuDNN): the stream then sees a single opaque
//! operation instead of the portable kernel's hundreds of small ones.
//!
//! A fusion operation runs later than it is registered, so what a training forward saves
//! is put in a shared slot when the operation executes, and taken by the backward
//! operation (registered after it on the same stream). If the slot is empty anyway, the
//! backward recomputes the forward.
//!
//! [`set_one_operation_on_every_fused_backend`] routes every fused backend's calls here,
//! the inner backend's portable kernel running inside: how this file is tested on a CPU
//! Wgpu adapter, where no fused kernel exists.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use burn::tensor::{Shape, TensorMetadata, backend::Backend, ops::FloatTensor};
use burn_fusion::{
    Fusion, FusionBackend, FusionRuntime,
    stream::{Operation, OperationStreams},
};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorId, TensorIr};
use cubecl_common::device::Device as _;

use crate::kernels::cubecl::keep_awake::{self, Flush, Runner, Stage};
use crate::op::choice::RnnKernel;
use crate::op::contract::RnnBackend;
use crate::op::io::{HostResiduals, RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::shapes::ResultShapes;
use crate::op::spec::RnnSpec;

/// See [`set_one_operation_on_every_fused_backend`].
static ON_EVERY_FUSED_BACKEND: AtomicBool = AtomicBool::new(false);

/// Whether the op runs as one custom fusion operation on a fused backend whose inner
/// kernel for the call is `kernel`: always for a fused kernel (cuDNN), otherwise only when
/// [`set_one_operation_on_every_fused_backend`] asked for it.
pub(crate) fn runs_as_one_operation(kernel: RnnKernel) -> bool {
    kernel == RnnKernel::Cudnn || ON_EVERY_FUSED_BACKEND.load(Ordering::Relaxed)
}

/// For tests: every fused backend (`Wgpu` too) runs the op as one custom fusion
/// operation, with the inner backend's kernel (the portable one where there is no fused
/// kernel) inside, as fused `Cuda` runs cuDNN. Off by default: the portable kernel is
/// faster as ordinary fusion operations, whose gate math fuses.
#[doc(hidden)]
pub fn set_one_operation_on_every_fused_backend(enabled: bool) {
    ON_EVERY_FUSED_BACKEND.store(enabled, Ordering::Relaxed);
}

thread_local! {
    /// The fusion id of the flat parameter buffer of the forward operation executing on
    /// this thread (set around the inner backend's call). Equal ids name equal values
    /// (fusion ids are never reused), so the cuDNN op keys its weight-space cache on it.
    static EXECUTING_WEIGHTS: std::cell::Cell<Option<TensorId>> = const { std::cell::Cell::new(None) };
}

/// The fusion id of the flat parameter buffer of the forward operation this thread is
/// executing, if any (see `EXECUTING_WEIGHTS`).
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) fn executing_weights_id() -> Option<TensorId> {
    EXECUTING_WEIGHTS.with(|id| id.get())
}

/// Sets `EXECUTING_WEIGHTS` for as long as it lives (cleared on unwinding too).
struct ExecutingWeights;

impl ExecutingWeights {
    fn set(id: TensorId) -> Self {
        EXECUTING_WEIGHTS.with(|executing| executing.set(Some(id)));
        Self
    }
}

impl Drop for ExecutingWeights {
    fn drop(&mut self) {
        EXECUTING_WEIGHTS.with(|executing| executing.set(None));
    }
}

/// The inner backend's saved state, filled when the forward operation executes.
struct SavedSlot<B: Backend>(Mutex<Option<RnnSaved<B>>>);

type Handles<B> =
    HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

struct ForwardOp<B: Backend> {
    desc: CustomOpIr,
    spec: RnnSpec,
    slot: Option<Arc<SavedSlot<B>>>,
}

impl<B: Backend> core::fmt::Debug for ForwardOp<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LstmForwardOp")
            .field("desc", &self.desc)
            .finish()
    }
}

impl<B: FusionBackend + RnnBackend> Operation<B::FusionRuntime> for ForwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        // Inputs `[input, weights, h0, c0]` and outputs `[y, h_n, c_n]`, without the cell
        // state's for a GRU.
        let mut inputs = self
            .desc
            .inputs
            .iter()
            .map(|t| handles.get_float_tensor::<B>(t));
        let [input, weights, h0] = [(); 3].map(|_| inputs.next().expect("three inputs"));
        let c0 = inputs.next();
        let weights_id = self.desc.inputs[1].id;
        let output = match &self.slot {
            None => {
                let _executing = ExecutingWeights::set(weights_id);
                B::rnn_forward(input, weights, h0, c0, &self.spec)
            }
            Some(slot) => {
                let (output, saved) = B::rnn_forward_train(input, weights, h0, c0, &self.spec);
                *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
                output
            }
        };
        let values = [output.y, output.h_n].into_iter().chain(output.c_n);
        for (ir, value) in self.desc.outputs.iter().zip(values) {
            handles.register_float_tensor::<B>(&ir.id, value);
        }
    }
}

struct BackwardOp<B: Backend> {
    desc: CustomOpIr,
    spec: RnnSpec,
    slot: Arc<SavedSlot<B>>,
}

impl<B: Backend> core::fmt::Debug for BackwardOp<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LstmBackwardOp")
            .field("desc", &self.desc)
            .finish()
    }
}

impl<B: FusionBackend + RnnBackend> Operation<B::FusionRuntime> for BackwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        // Inputs `[input, weights, h0, (c0), dy, dh_n, (dc_n)]` and outputs the gradients
        // of `[input, weights, h0, (c0)]`: the cell state's only for an LSTM.
        let cell_state = self.spec.arch.cell_state_size() > 0;
        let mut inputs = self
            .desc
            .inputs
            .iter()
            .map(|t| handles.get_float_tensor::<B>(t));
        let mut next = || inputs.next().expect("the inputs registered by `backward`");
        let [input, weights, h0] = [(); 3].map(|_| next());
        let c0 = cell_state.then(&mut next);
        let [dy, dh_n] = [(); 2].map(|_| next());
        let dc_n = cell_state.then(&mut next);
        let saved = self.slot.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        let saved = saved.unwrap_or_else(|| {
            log::warn!("burn-lstm: the forward's saved state is missing; recomputing it");
            B::rnn_forward_train(input, weights, h0, c0, &self.spec).1
        });
        // The fused operation's outputs are fixed: the input's gradient is computed always.
        let output_grads = RnnOutputGrads {
            dy,
            dh_n,
            dc_n,
            input_required: true,
        };
        let grads = B::rnn_backward(saved, output_grads);
        let d_input = grads
            .input
            .expect("a backward asked for the input's gradient returns it");
        let values = [d_input, grads.weights, grads.h0]
            .into_iter()
            .chain(grads.c0);
        for (ir, value) in self.desc.outputs.iter().zip(values) {
            handles.register_float_tensor::<B>(&ir.id, value);
        }
    }
}

/// Keeps Burn's fusion thread of `client`'s device polling for a while: it runs the
/// op's operations (`BURN_LSTM_KEEP_AWAKE`, `kernels/cubecl/keep_awake.rs`; the op
/// keeps CubeCL's device thread awake itself).
fn keep_fusion_thread_awake<B: FusionBackend>(
    client: &burn_fusion::client::GlobalFusionClient<B::FusionRuntime>,
) {
    let runner = Runner {
        device: client.device().to_id(),
        stage: Stage::Fusion,
    };
    keep_awake::note(runner, || {
        let client = client.clone();
        Some(Box::new(move || client.flush_queue()) as Flush)
    });
}

/// Forward as one fusion operation running `B`'s op, whose kernel for the call is
/// `kernel`.
pub(crate) fn forward<B: FusionBackend + RnnBackend>(
    inputs: RnnInputs<Fusion<B>>,
    spec: &RnnSpec,
    save: bool,
    kernel: RnnKernel,
) -> (RnnOutput<Fusion<B>>, Option<RnnSaved<Fusion<B>>>) {
    let client = inputs.input.client.clone();
    keep_fusion_thread_awake::<B>(&client);
    let dtype = inputs.input.dtype;
    let shapes = ResultShapes::of(spec);
    let out = |shape: [usize; 3]| {
        TensorIr::uninit(client.create_empty_handle(), Shape::from(shape), dtype)
    };
    let outputs: Vec<TensorIr> = [shapes.y, shapes.h_n]
        .into_iter()
        .chain(shapes.c_n)
        .map(out)
        .collect();
    let streams = OperationStreams::with_inputs(inputs.tensors());
    let irs: Vec<TensorIr> = inputs.tensors().map(|t| t.clone().into_ir()).collect();
    let desc = CustomOpIr::new("burn_lstm_forward", &irs, &outputs);
    let slot = save.then(|| Arc::new(SavedSlot::<B>(Mutex::new(None))));
    let op = ForwardOp::<B> {
        desc: desc.clone(),
        spec: spec.clone(),
        slot: slot.clone(),
    };
    let mut results = client
        .register(streams, OperationIr::Custom(desc), op)
        .into_iter();
    let [y, h_n] = [(); 2].map(|_| results.next().expect("the registered outputs"));
    let c_n = results.next();
    let saved = slot.map(|slot| RnnSaved {
        spec: spec.clone(),
        kernel,
        inputs,
        residuals: Vec::new(),
        host: Some(HostResiduals(slot)),
    });
    (RnnOutput { y, h_n, c_n }, saved)
}

/// Whether `saved` came from [`forward`] with inner backend `B`.
pub(crate) fn is_fused_op<B: FusionBackend + RnnBackend>(saved: &RnnSaved<Fusion<B>>) -> bool {
    saved
        .host
        .as_ref()
        .is_some_and(|h| h.0.downcast_ref::<SavedSlot<B>>().is_some())
}

/// Backward as one fusion operation running `B`'s backward on what [`forward`] saved.
pub(crate) fn backward<B: FusionBackend + RnnBackend>(
    saved: RnnSaved<Fusion<B>>,
    grads: RnnOutputGrads<Fusion<B>>,
) -> RnnGrads<Fusion<B>> {
    let host = saved.host.expect("checked by is_fused_op");
    let slot: Arc<SavedSlot<B>> = host
        .0
        .downcast::<SavedSlot<B>>()
        .unwrap_or_else(|_| unreachable!("checked by is_fused_op"));
    let RnnInputs {
        input,
        weights,
        h0,
        c0,
    } = saved.inputs;
    let client = input.client.clone();
    keep_fusion_thread_awake::<B>(&client);
    let grad_ir = |t: &FloatTensor<Fusion<B>>| {
        TensorIr::uninit(client.create_empty_handle(), t.shape(), t.dtype)
    };
    let outputs: Vec<TensorIr> = [&input, &weights, &h0]
        .into_iter()
        .chain(&c0)
        .map(grad_ir)
        .collect();
    let all: Vec<FloatTensor<Fusion<B>>> = [input, weights, h0]
        .into_iter()
        .chain(c0)
        .chain([grads.dy, grads.dh_n])
        .chain(grads.dc_n)
        .collect();
    let streams = OperationStreams::with_inputs(&all);
    let irs: Vec<TensorIr> = all.into_iter().map(|t| t.into_ir()).collect();
    let desc = CustomOpIr::new("burn_lstm_backward", &irs, &outputs);
    let op = BackwardOp::<B> {
        desc: desc.clone(),
        spec: saved.spec,
        slot,
    };
    let mut results = client
        .register(streams, OperationIr::Custom(desc), op)
        .into_iter();
    let [input, weights, h0] = [(); 3].map(|_| results.next().expect("the registered outputs"));
    RnnGrads {
        input: Some(input),
        weights,
        h0,
        c0: results.next(),
    }
}
