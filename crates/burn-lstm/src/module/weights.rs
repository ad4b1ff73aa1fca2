//! The parameters of one layer stack: per layer a forward and an optional reverse
//! direction, each in PyTorch's and cuDNN's canonical layout. The LSTM and the GRU
//! share these types (a GRU has three gate blocks and no `weight_hr`).

use burn::module::{Initializer, Module, Param};
use burn::tensor::{Tensor, TensorPrimitive, backend::Backend};

use crate::op::contract::RnnBackend;
use crate::op::spec::RnnArch;
use crate::op::tensor::tensor;

/// Parameters of one direction of one layer. Gate blocks along the rows: (i, f, g, o)
/// for an LSTM (`4H` rows), (r, z, n) for a GRU (`3H` rows).
#[derive(Module, Debug)]
pub struct RnnDirectionWeights<B: Backend> {
    /// Input-to-gates weights, `[4H, in]` (GRU: `[3H, in]`).
    pub weight_ih: Param<Tensor<B, 2>>,
    /// Hidden-to-gates weights, `[4H, H_out]` (GRU: `[3H, H]`).
    pub weight_hh: Param<Tensor<B, 2>>,
    /// Input-side gate bias, `[4H]` or `[3H]` (with `bias`).
    pub bias_ih: Option<Param<Tensor<B, 1>>>,
    /// Hidden-side gate bias, `[4H]` or `[3H]` (with `bias`).
    pub bias_hh: Option<Param<Tensor<B, 1>>>,
    /// Projection of the hidden state, `[H_out, H]` (LSTM with `proj_size > 0`; never
    /// for a GRU).
    pub weight_hr: Option<Param<Tensor<B, 2>>>,
}

/// One layer: its forward direction and, when bidirectional, its reverse direction.
#[derive(Module, Debug)]
pub struct RnnLayer<B: Backend> {
    /// Runs from the first step to the last.
    pub forward: RnnDirectionWeights<B>,
    /// Runs from each row's last valid step to the first.
    pub reverse: Option<RnnDirectionWeights<B>>,
}

/// Every (layer, direction) of `layers`, in the canonical order `layer * dirs + direction`.
pub(crate) fn directions<B: Backend>(
    layers: &[RnnLayer<B>],
) -> impl Iterator<Item = &RnnDirectionWeights<B>> {
    layers
        .iter()
        .flat_map(|layer| core::iter::once(&layer.forward).chain(layer.reverse.as_ref()))
}

/// All parameters of `layers` in one flat tensor, in the op's canonical layout, built
/// by [`RnnBackend::rnn_flat_weights`]. Differentiable: gradients reach every `Param`.
/// Parameters quantized by Burn (`Module::quantize_weights`) go to
/// [`RnnBackend::rnn_flat_weights_quantized`] as they are.
pub(crate) fn flat_parameters<B: RnnBackend>(layers: &[RnnLayer<B>]) -> Tensor<B, 1> {
    let parts = parameter_parts(layers);
    if parts
        .iter()
        .any(|p| matches!(p, TensorPrimitive::QFloat(_)))
    {
        return tensor(B::rnn_flat_weights_quantized(parts));
    }
    tensor(B::rnn_flat_weights(
        parts.into_iter().map(TensorPrimitive::tensor).collect(),
    ))
}

/// [`flat_parameters`] built with Burn's own ops, kept by no cache of a backend: for a
/// copy made once (an int8 model), whose source module may be dropped right after.
pub(crate) fn flat_parameters_once<B: Backend>(layers: &[RnnLayer<B>]) -> Tensor<B, 1> {
    let parts = parameter_parts(layers);
    tensor(crate::op::flat_weights::concatenate::<B>(
        parts.into_iter().map(TensorPrimitive::tensor).collect(),
    ))
}

/// Every parameter of `layers` in canonical order, as the module holds it.
fn parameter_parts<B: Backend>(layers: &[RnnLayer<B>]) -> Vec<TensorPrimitive<B>> {
    let mut parts = Vec::new();
    for cell in directions(layers) {
        parts.push(cell.weight_ih.val().into_primitive());
        parts.push(cell.weight_hh.val().into_primitive());
        parts.extend(cell.bias_ih.as_ref().map(|b| b.val().into_primitive()));
        parts.extend(cell.bias_hh.as_ref().map(|b| b.val().into_primitive()));
        parts.extend(cell.weight_hr.as_ref().map(|w| w.val().into_primitive()));
    }
    parts
}

/// Fresh parameters of `arch`, drawn from `initializer` (`None`: PyTorch's
/// `U(-1/√H, 1/√H)`), each direction's tensors in canonical order, forward before
/// reverse. Fan-in and fan-out are the PyTorch ones, for initializers that use them.
pub(crate) fn init_layers<B: Backend>(
    arch: &RnnArch,
    initializer: Option<Initializer>,
    device: &B::Device,
) -> Vec<RnnLayer<B>> {
    let bound = 1.0 / (arch.hidden_size as f64).sqrt();
    let initializer = initializer.unwrap_or(Initializer::Uniform {
        min: -bound,
        max: bound,
    });
    let (rows, h, out) = (arch.gate_rows(), arch.hidden_size, arch.output_size());
    let direction = |layer: usize| {
        let input = arch.layer_input_size(layer);
        RnnDirectionWeights {
            weight_ih: initializer.init_with([rows, input], Some(input), Some(rows), device),
            weight_hh: initializer.init_with([rows, out], Some(out), Some(rows), device),
            bias_ih: arch
                .bias
                .then(|| initializer.init_with([rows], Some(input), Some(rows), device)),
            bias_hh: arch
                .bias
                .then(|| initializer.init_with([rows], Some(out), Some(rows), device)),
            weight_hr: (arch.proj_size > 0)
                .then(|| initializer.init_with([out, h], Some(h), Some(out), device)),
        }
    };
    (0..arch.num_layers)
        .map(|layer| RnnLayer {
            forward: direction(layer),
            reverse: arch.bidirectional.then(|| direction(layer)),
        })
        .collect()
}
