//! The decoder and the loss as one autodiff op: `x · W + b`, log-softmax and the
//! targets' mean negative log-likelihood, with the backward written directly.
//!
//! The decoder's three products (the logits, and the gradients of its input and of its
//! weight) are most of a training step: `[700, 200] · [200, vocabulary]` and its two
//! transposes at the example's defaults. On Flex (f32) this op runs them on the fused
//! CPU kernel's GEMM and its softmax on the kernel's vectorised `exp`
//! ([`lstm_cpu::dense`]), reading the operands in place (a tied weight is the
//! embedding's transpose, read through its strides); Flex's own `matmul` runs the
//! `gemm` crate's AVX2 kernel on AVX-512 machines too, and its softmax one scalar `exp`
//! at a time. On any other backend it is Burn's `linear` followed by [`fused_nll_loss`]:
//! the same value and gradients (the tests check both against Burn's ops).

use std::any::Any;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::tensor::backend::Backend;
use burn::tensor::module::linear;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, ElementConversion, Int, Tensor, TensorData, TensorPrimitive};
use burn_flex::{Flex, FlexTensor};
use burn_lstm::RnnBackend;
use lstm_cpu::dense::{MatrixRef, column_sums, matmul, softmax_nll, softmax_nll_grad};

use super::fused_loss::fused_nll_loss;
use super::loss::{cross_entropy, nll_loss};
use super::model::WordLm;

/// Mean negative log-likelihood of `targets [n]` under `x [n, in] · weight [in, vocab] +
/// bias [vocab]`, as one autodiff node (see the module's documentation).
pub fn decoder_nll_loss<B: Backend, C: CheckpointStrategy>(
    x: Tensor<Autodiff<B, C>, 2>,
    weight: Tensor<Autodiff<B, C>, 2>,
    bias: Tensor<Autodiff<B, C>, 1>,
    targets: Tensor<Autodiff<B, C>, 1, Int>,
) -> Tensor<Autodiff<B, C>, 1> {
    check_shapes(x.dims(), weight.dims(), bias.dims(), targets.dims());
    if !on_flex_f32::<B>(&[x.dtype(), weight.dtype(), bias.dtype()]) {
        return fused_nll_loss(linear(x, weight, Some(bias)), targets);
    }
    let targets = target_classes(targets);
    let (x, weight, bias) = (
        x.into_primitive().tensor(),
        weight.into_primitive().tensor(),
        bias.into_primitive().tensor(),
    );
    let nodes = [x.node.clone(), weight.node.clone(), bias.node.clone()];
    let (x, weight, bias) = (
        flex::<B>(x.primitive),
        flex::<B>(weight.primitive),
        flex::<B>(bias.primitive),
    );
    let (mean_nll, probabilities) = forward(&x, &weight, &bias, &targets);
    let loss = from_flex::<B>(FlexTensor::from_data(TensorData::new(vec![mean_nll], [1])));
    let output = match DecoderNllBackward
        .prepare::<C>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(
            DecoderState {
                x,
                weight,
                probabilities,
                targets,
            },
            loss,
        ),
        OpsKind::UnTracked(prep) => {
            lstm_cpu::recycle_vec(probabilities);
            prep.finish(loss)
        }
    };
    Tensor::from_primitive(TensorPrimitive::Float(output))
}

/// [`decoder_nll_loss`] without autodiff (evaluation): the mean negative log-likelihood
/// of `targets [n]` under `x [n, in] · weight [in, vocab] + bias [vocab]`, on the fused
/// CPU kernel's products on Flex (f32), else Burn's `linear` and [`nll_loss`].
pub fn decoder_nll<B: Backend>(
    x: Tensor<B, 2>,
    weight: Tensor<B, 2>,
    bias: Tensor<B, 1>,
    targets: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    check_shapes(x.dims(), weight.dims(), bias.dims(), targets.dims());
    if !on_flex_f32::<B>(&[x.dtype(), weight.dtype(), bias.dtype()]) {
        return nll_loss(linear(x, weight, Some(bias)), targets);
    }
    let device = x.device();
    let targets = target_classes(targets);
    let (x, weight, bias) = (
        flex::<B>(x.into_primitive().tensor()),
        flex::<B>(weight.into_primitive().tensor()),
        flex::<B>(bias.into_primitive().tensor()),
    );
    let (mean_nll, probabilities) = forward(&x, &weight, &bias, &targets);
    lstm_cpu::recycle_vec(probabilities);
    Tensor::from_data(TensorData::new(vec![mean_nll], [1]), &device)
}

/// Panics unless the shapes are `x [n, in]`, `weight [in, vocab]`, `bias [vocab]` and
/// `targets [n]` (the products below assume them).
fn check_shapes(x: [usize; 2], weight: [usize; 2], bias: [usize; 1], targets: [usize; 1]) {
    let ([rows, inputs], [weight_rows, vocab]) = (x, weight);
    assert_eq!(
        (inputs, rows, vocab),
        (weight_rows, targets[0], bias[0]),
        "decoder loss: x [n, in], weight [in, vocab], bias [vocab], targets [n]"
    );
}

/// Whether `B` is Flex and every operand f32: where the fused CPU kernel's products run.
fn on_flex_f32<B: Backend>(dtypes: &[DType]) -> bool {
    core::any::TypeId::of::<B>() == core::any::TypeId::of::<Flex>()
        && dtypes.iter().all(|&d| d == DType::F32)
}

/// The target classes, read to the host (a few hundred integers a window).
fn target_classes<B: Backend>(targets: Tensor<B, 1, Int>) -> Vec<usize> {
    targets
        .into_data()
        .convert::<i64>()
        .into_vec::<i64>()
        .expect("converted to i64")
        .into_iter()
        .map(|t| usize::try_from(t).unwrap_or(usize::MAX))
        .collect()
}

/// Threads of the products: those of the fused CPU kernel (`BURN_LSTM_THREADS`).
fn threads() -> usize {
    burn_lstm::cpu_threads()
}

/// The mean loss and the softmax `[n, vocab]` of `x · weight + bias`.
fn forward(
    x: &FlexTensor,
    weight: &FlexTensor,
    bias: &FlexTensor,
    targets: &[usize],
) -> (f32, Vec<f32>) {
    let (x, weight, bias) = (matrix(x), matrix(weight), bias.to_contiguous());
    let (x_ref, w_ref) = (x.as_ref("x"), weight.as_ref("weight"));
    let (rows, vocab) = (x_ref.rows(), w_ref.cols());
    let mut logits = lstm_cpu::vec_with_capacity::<f32>(rows * vocab);
    logits.resize(rows * vocab, 0.0);
    let bias = bias.as_slice::<f32>().expect("contiguous f32");
    matmul(threads(), x_ref, w_ref, Some(bias), &mut logits).expect("shapes checked");
    let nll = softmax_nll(threads(), &mut logits, vocab, targets)
        .unwrap_or_else(|e| panic!("decoder_nll_loss: {e}"));
    ((nll / rows.max(1) as f64) as f32, logits)
}

/// What the backward of [`decoder_nll_loss`] reads.
#[derive(Clone, Debug)]
struct DecoderState {
    x: FlexTensor,
    weight: FlexTensor,
    /// The softmax of the logits, `[n, vocab]`.
    probabilities: Vec<f32>,
    targets: Vec<usize>,
}

/// The backward of [`decoder_nll_loss`].
#[derive(Debug)]
struct DecoderNllBackward;

impl<B: Backend> Backward<B, 3> for DecoderNllBackward {
    type State = DecoderState;

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let grad =
            Tensor::<B, 1>::from_primitive(TensorPrimitive::Float(grads.consume::<B>(&ops.node)))
                .into_scalar()
                .elem::<f32>();
        let [x_node, weight_node, bias_node] = ops.parents;
        let DecoderState {
            x,
            weight,
            mut probabilities,
            targets,
        } = ops.state;
        let (x, weight) = (matrix(&x), matrix(&weight));
        let (x_ref, w_ref) = (x.as_ref("x"), weight.as_ref("weight"));
        let (rows, inputs, vocab) = (x_ref.rows(), x_ref.cols(), w_ref.cols());
        let threads = threads();
        // d loss / d logits = (softmax - one_hot(target)) · g / n, in place.
        let scale = grad / rows.max(1) as f32;
        softmax_nll_grad(threads, &mut probabilities, vocab, &targets, scale)
            .expect("checked in the forward");
        let dlogits = MatrixRef::row_major("dlogits", &probabilities, rows, vocab)
            .expect("the forward's shape");
        let register = |id, values: Vec<f32>, shape: Vec<usize>, grads: &mut Gradients| {
            let tensor = FlexTensor::from_data(TensorData::new(values, shape));
            grads.register::<B>(id, from_flex::<B>(tensor));
        };
        if let Some(node) = x_node {
            // dx = dlogits · weightᵀ.
            let mut dx = vec![0.0f32; rows * inputs];
            matmul(threads, dlogits, w_ref.transposed(), None, &mut dx).expect("shapes checked");
            register(node.id, dx, vec![rows, inputs], grads);
        }
        if let Some(node) = weight_node {
            // dweight = xᵀ · dlogits.
            let mut dw = vec![0.0f32; inputs * vocab];
            matmul(threads, x_ref.transposed(), dlogits, None, &mut dw).expect("shapes checked");
            register(node.id, dw, vec![inputs, vocab], grads);
        }
        if let Some(node) = bias_node {
            let mut db = vec![0.0f32; vocab];
            column_sums(threads, &probabilities, &mut db).expect("shapes checked");
            register(node.id, db, vec![vocab], grads);
        }
        lstm_cpu::recycle_vec(probabilities);
    }
}

/// A 2-D Flex tensor as the kernel reads it: its values and strides, copied to a
/// contiguous tensor first only if a stride is negative (a flipped view).
struct Matrix {
    tensor: FlexTensor,
}

impl Matrix {
    fn as_ref(&self, name: &'static str) -> MatrixRef<'_, f32> {
        let layout = self.tensor.layout();
        let [rows, cols] = layout.shape().dims::<2>();
        let [rs, cs] = [layout.strides()[0], layout.strides()[1]].map(|s| s as usize);
        let values = &self.tensor.storage::<f32>()[layout.start_offset()..];
        MatrixRef::new(name, values, rows, cols, rs, cs).expect("a Flex layout lies in its storage")
    }
}

fn matrix(t: &FlexTensor) -> Matrix {
    let tensor = if t.layout().strides().iter().any(|&s| s < 0) {
        t.to_contiguous()
    } else {
        t.clone()
    };
    Matrix { tensor }
}

/// `B`'s tensor as Flex's (`B` is Flex: checked by the caller).
fn flex<B: Backend>(t: FloatTensor<B>) -> FlexTensor {
    let any: Box<dyn Any> = Box::new(t);
    *any.downcast::<FlexTensor>().expect("B is Flex")
}

/// Flex's tensor as `B`'s (`B` is Flex: checked by the caller).
fn from_flex<B: Backend>(t: FlexTensor) -> FloatTensor<B> {
    let any: Box<dyn Any> = Box::new(t);
    *any.downcast::<FloatTensor<B>>().expect("B is Flex")
}

/// The mean negative log-likelihood of a training window from the LSTM's output
/// `y [seq, batch, nhid]`: the decoder and the loss as one op ([`decoder_nll_loss`]), or
/// (`fused = false`) Burn's `linear` and `CrossEntropyLoss`.
pub fn training_loss<B: RnnBackend>(
    model: &WordLm<Autodiff<B>>,
    y: Tensor<Autodiff<B>, 3>,
    targets: Tensor<Autodiff<B>, 1, Int>,
    fused: bool,
) -> Tensor<Autodiff<B>, 1> {
    if fused {
        let (x, weight, bias) = model.decoder_operands(y);
        decoder_nll_loss(x, weight, bias, targets)
    } else {
        cross_entropy(model.decode(y), targets)
    }
}
