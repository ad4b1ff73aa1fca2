//! The op on Burn's fused backends as **one custom fusion operation** that runs the inner
//! backend's op (the pattern `burn-vision` uses for its kernels). It is used when the
//! inner backend runs a fused kernel (cuDNN): the stream then sees a single opaque
//! operation instead of the portable kernel's hundreds of small ones.
//!
//! A fusion operation runs later than it is registered, so what a training forward saves
//! is put in a shared slot when the operation executes, and taken by the backward
//! operation (registered after it on the same stream). If the slot is empty anyway, the
//! backward recomputes the forward.

use std::sync::{Arc, Mutex};

use burn::tensor::{Shape, TensorMetadata, backend::Backend, ops::FloatTensor};
use burn_fusion::{
    Fusion, FusionBackend, FusionRuntime,
    stream::{Operation, OperationStreams},
};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, OperationOutput, TensorIr};

use crate::op::choice::LstmKernel;
use crate::op::contract::LstmBackend;
use crate::op::io::{HostResiduals, LstmGrads, LstmOutput, LstmOutputGrads, LstmSaved};
use crate::op::spec::LstmSpec;

/// The inner backend's saved state, filled when the forward operation executes.
struct SavedSlot<B: Backend>(Mutex<Option<LstmSaved<B>>>);

type Handles<B> =
    HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

struct ForwardOp<B: Backend> {
    desc: CustomOpIr,
    spec: LstmSpec,
    slot: Option<Arc<SavedSlot<B>>>,
}

impl<B: Backend> core::fmt::Debug for ForwardOp<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LstmForwardOp")
            .field("desc", &self.desc)
            .finish()
    }
}

impl<B: FusionBackend + LstmBackend> Operation<B::FusionRuntime> for ForwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let ([input, weights, h0, c0], [y, h_n, c_n]) = self.desc.as_fixed();
        let [input, weights, h0, c0] =
            [input, weights, h0, c0].map(|t| handles.get_float_tensor::<B>(t));
        let output = match &self.slot {
            None => B::lstm_forward(input, weights, h0, c0, &self.spec),
            Some(slot) => {
                let (output, saved) = B::lstm_forward_train(input, weights, h0, c0, &self.spec);
                *slot.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(saved);
                output
            }
        };
        handles.register_float_tensor::<B>(&y.id, output.y);
        handles.register_float_tensor::<B>(&h_n.id, output.h_n);
        handles.register_float_tensor::<B>(&c_n.id, output.c_n);
    }
}

struct BackwardOp<B: Backend> {
    desc: CustomOpIr,
    spec: LstmSpec,
    slot: Arc<SavedSlot<B>>,
}

impl<B: Backend> core::fmt::Debug for BackwardOp<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LstmBackwardOp")
            .field("desc", &self.desc)
            .finish()
    }
}

impl<B: FusionBackend + LstmBackend> Operation<B::FusionRuntime> for BackwardOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let ([input, weights, h0, c0, dy, dh_n, dc_n], [d_input, d_weights, d_h0, d_c0]) =
            self.desc.as_fixed();
        let [input, weights, h0, c0, dy, dh_n, dc_n] =
            [input, weights, h0, c0, dy, dh_n, dc_n].map(|t| handles.get_float_tensor::<B>(t));
        let saved = self.slot.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        let saved = saved.unwrap_or_else(|| {
            log::warn!("burn-lstm: the forward's saved state is missing; recomputing it");
            B::lstm_forward_train(input, weights, h0, c0, &self.spec).1
        });
        // The fused operation has four outputs: the input's gradient is computed always.
        let output_grads = LstmOutputGrads {
            dy,
            dh_n,
            dc_n,
            input_required: true,
        };
        let grads = B::lstm_backward(saved, output_grads);
        let d_input_value = grads
            .input
            .expect("a backward asked for the input's gradient returns it");
        handles.register_float_tensor::<B>(&d_input.id, d_input_value);
        handles.register_float_tensor::<B>(&d_weights.id, grads.weights);
        handles.register_float_tensor::<B>(&d_h0.id, grads.h0);
        handles.register_float_tensor::<B>(&d_c0.id, grads.c0);
    }
}

/// Forward as one fusion operation running `B`'s op.
pub(crate) fn forward<B: FusionBackend + LstmBackend>(
    inputs: [FloatTensor<Fusion<B>>; 4],
    spec: &LstmSpec,
    save: bool,
) -> (LstmOutput<Fusion<B>>, Option<LstmSaved<Fusion<B>>>) {
    let client = inputs[0].client.clone();
    let dtype = inputs[0].dtype;
    let arch = &spec.arch;
    let (t, b, cells) = (spec.seq_len, spec.batch, arch.cells());
    let out = |shape: [usize; 3]| {
        TensorIr::uninit(client.create_empty_handle(), Shape::from(shape), dtype)
    };
    let outputs = [
        out([t, b, arch.dirs() * arch.output_size()]),
        out([cells, b, arch.output_size()]),
        out([cells, b, arch.cell_state_size()]),
    ];
    let streams = OperationStreams::with_inputs(&inputs);
    let irs = inputs.clone().map(|t| t.into_ir());
    let desc = CustomOpIr::new("burn_lstm_forward", &irs, &outputs);
    let slot = save.then(|| Arc::new(SavedSlot::<B>(Mutex::new(None))));
    let op = ForwardOp::<B> {
        desc: desc.clone(),
        spec: spec.clone(),
        slot: slot.clone(),
    };
    let [y, h_n, c_n] = client
        .register(streams, OperationIr::Custom(desc), op)
        .outputs();
    let saved = slot.map(|slot| LstmSaved {
        spec: spec.clone(),
        kernel: LstmKernel::Cudnn,
        inputs,
        residuals: Vec::new(),
        host: Some(HostResiduals(slot)),
    });
    (LstmOutput { y, h_n, c_n }, saved)
}

/// Whether `saved` came from [`forward`] with inner backend `B`.
pub(crate) fn is_fused_op<B: FusionBackend + LstmBackend>(saved: &LstmSaved<Fusion<B>>) -> bool {
    saved
        .host
        .as_ref()
        .is_some_and(|h| h.0.downcast_ref::<SavedSlot<B>>().is_some())
}

/// Backward as one fusion operation running `B`'s backward on what [`forward`] saved.
pub(crate) fn backward<B: FusionBackend + LstmBackend>(
    saved: LstmSaved<Fusion<B>>,
    grads: LstmOutputGrads<Fusion<B>>,
) -> LstmGrads<Fusion<B>> {
    let host = saved.host.expect("checked by is_fused_op");
    let slot: Arc<SavedSlot<B>> = host
        .0
        .downcast::<SavedSlot<B>>()
        .unwrap_or_else(|_| unreachable!("checked by is_fused_op"));
    let [input, weights, h0, c0] = saved.inputs;
    let client = input.client.clone();
    let grad_ir = |t: &FloatTensor<Fusion<B>>| {
        TensorIr::uninit(client.create_empty_handle(), t.shape(), t.dtype)
    };
    let outputs = [
        grad_ir(&input),
        grad_ir(&weights),
        grad_ir(&h0),
        grad_ir(&c0),
    ];
    let all = [input, weights, h0, c0, grads.dy, grads.dh_n, grads.dc_n];
    let streams = OperationStreams::with_inputs(&all);
    let irs = all.map(|t| t.into_ir());
    let desc = CustomOpIr::new("burn_lstm_backward", &irs, &outputs);
    let op = BackwardOp::<B> {
        desc: desc.clone(),
        spec: saved.spec,
        slot,
    };
    let [input, weights, h0, c0] = client
        .register(streams, OperationIr::Custom(desc), op)
        .outputs();
    LstmGrads {
        input: Some(input),
        weights,
        h0,
        c0,
    }
}
