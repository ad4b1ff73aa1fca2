//! On Burn's fused backends, the flat parameter buffer as **one custom fusion operation**
//! (the parameters in, the buffer out) and its gradient cut back by one more (the
//! buffer's gradient in, each parameter's out), instead of a fusion operation per
//! `reshape` and `slice`: autodiff's `cat` of a training step's `P` tracked parameters
//! registers `P + 1` operations and its backward `2P` (49 for a two-layer bidirectional
//! LSTM), each processed by fusion's stream on the host. Inside, the inner backend's own
//! ops run: its flat buffer ([`RnnBackend::rnn_flat_weights`]) and slices that are views.
//!
//! On by default: `BURN_LSTM_FUSION_FLAT_JOIN` (`1` on, anything else off) or
//! [`set_fusion_flat_join`] decides. On, it also builds the untracked buffer of inference
//! where the GPU weight cache (`flat_cache.rs`) misses.

use burn::tensor::{Shape, TensorMetadata, ops::FloatTensor};
use burn_fusion::{
    Fusion, FusionBackend, FusionRuntime,
    stream::{Operation, OperationStreams},
};
use burn_ir::{CustomOpIr, HandleContainer, OperationIr, TensorIr};

use crate::kernels::switch::OptInSwitch;
use crate::op::contract::RnnBackend;
use crate::op::flat_weights::{FlatJoinOps, concatenate, split};

static SWITCH: OptInSwitch = OptInSwitch::new("BURN_LSTM_FUSION_FLAT_JOIN", true);

/// Whether Burn's fused backends (`burn::backend::Cuda`, `Wgpu`) build the flat
/// parameter buffer, and cut its gradient back, as one fusion operation each way. On
/// by default; `BURN_LSTM_FUSION_FLAT_JOIN` (`1` on, anything else off) decides until
/// [`set_fusion_flat_join`] is called.
pub fn fusion_flat_join() -> bool {
    SWITCH.get()
}

/// Turns the one-operation flat buffer of the fused backends on or off for calls that
/// start after this one (see [`fusion_flat_join`]).
pub fn set_fusion_flat_join(enabled: bool) {
    SWITCH.set(enabled);
}

/// The fused backend's [`FlatJoinOps`] when [`fusion_flat_join`] is on.
pub(crate) fn join_ops<B: FusionBackend + RnnBackend>() -> Option<FlatJoinOps<Fusion<B>>> {
    fusion_flat_join().then_some(FlatJoinOps {
        join: join::<B>,
        split: split_gradient::<B>,
    })
}

/// The flat buffer of untracked `parts` (inference): one fusion operation when
/// [`fusion_flat_join`] is on, else Burn's ops.
pub(crate) fn untracked_buffer<B: FusionBackend + RnnBackend>(
    parts: Vec<FloatTensor<Fusion<B>>>,
) -> FloatTensor<Fusion<B>> {
    if fusion_flat_join() {
        join::<B>(parts)
    } else {
        concatenate::<Fusion<B>>(parts)
    }
}

type Handles<B> =
    HandleContainer<<<B as FusionBackend>::FusionRuntime as FusionRuntime>::FusionHandle>;

/// Inputs: the parts; output: the flat buffer.
#[derive(Debug)]
struct JoinOp<B> {
    desc: CustomOpIr,
    backend: core::marker::PhantomData<B>,
}

impl<B: FusionBackend + RnnBackend> Operation<B::FusionRuntime> for JoinOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let parts = self
            .desc
            .inputs
            .iter()
            .map(|part| handles.get_float_tensor::<B>(part))
            .collect();
        let flat = B::rnn_flat_weights(parts);
        handles.register_float_tensor::<B>(&self.desc.outputs[0].id, flat);
    }
}

/// Input: the flat buffer's gradient; outputs: the parts' gradients, in order.
#[derive(Debug)]
struct SplitOp<B> {
    desc: CustomOpIr,
    backend: core::marker::PhantomData<B>,
}

impl<B: FusionBackend + RnnBackend> Operation<B::FusionRuntime> for SplitOp<B> {
    fn execute(&self, handles: &mut Handles<B>) {
        let grad = handles.get_float_tensor::<B>(&self.desc.inputs[0]);
        let shapes: Vec<Shape> = self
            .desc
            .outputs
            .iter()
            .map(|ir| ir.shape.clone())
            .collect();
        for (ir, part) in self.desc.outputs.iter().zip(split::<B>(grad, &shapes)) {
            handles.register_float_tensor::<B>(&ir.id, part);
        }
    }
}

/// `parts` (at least one) flattened and joined, as one fusion operation.
fn join<B: FusionBackend + RnnBackend>(
    parts: Vec<FloatTensor<Fusion<B>>>,
) -> FloatTensor<Fusion<B>> {
    let client = parts[0].client.clone();
    let len = parts.iter().map(|part| part.shape().num_elements()).sum();
    let flat = TensorIr::uninit(
        client.create_empty_handle(),
        Shape::new([len]),
        parts[0].dtype,
    );
    let streams = OperationStreams::with_inputs(&parts);
    let irs: Vec<TensorIr> = parts.into_iter().map(|part| part.into_ir()).collect();
    let desc = CustomOpIr::new("burn_lstm_flat_join", &irs, &[flat]);
    let op = JoinOp::<B> {
        desc: desc.clone(),
        backend: core::marker::PhantomData,
    };
    client
        .register(streams, OperationIr::Custom(desc), op)
        .pop()
        .expect("one registered output")
}

/// `grad` (one-dimensional) cut into consecutive parts of `shapes`, as one fusion
/// operation.
fn split_gradient<B: FusionBackend + RnnBackend>(
    grad: FloatTensor<Fusion<B>>,
    shapes: &[Shape],
) -> Vec<FloatTensor<Fusion<B>>> {
    let client = grad.client.clone();
    let parts: Vec<TensorIr> = shapes
        .iter()
        .map(|shape| TensorIr::uninit(client.create_empty_handle(), shape.clone(), grad.dtype))
        .collect();
    let streams = OperationStreams::with_inputs([&grad]);
    let desc = CustomOpIr::new("burn_lstm_flat_split", &[grad.into_ir()], &parts);
    let op = SplitOp::<B> {
        desc: desc.clone(),
        backend: core::marker::PhantomData,
    };
    client.register(streams, OperationIr::Custom(desc), op)
}
