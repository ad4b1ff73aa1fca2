//! The walk over a layer stack that every cell shares: in the forward, inter-layer
//! dropout, every direction of every layer and the saved residuals; in the backward,
//! the layers from the top, the directions' input gradients summed and masked, and the
//! results gathered in the canonical order. What one direction computes is the cell's
//! (`lstm/`, `gru/`: `forward.rs`, `backward.rs`).

use burn::tensor::{DType, Distribution, Tensor, TensorData, backend::Backend, ops::FloatTensor};

use super::residuals::{self, CellResidualTensors, LayerResiduals};
use super::steps::stack_steps;
use super::weights::zero_padding;
use crate::op::choice::RnnKernel;
use crate::op::io::{RnnGrads, RnnInputs, RnnOutput, RnnSaved};
use crate::op::spec::RnnSpec;
use crate::op::tensor::{primitive, tensor};

/// What one direction of one layer returns to the forward's walk.
pub(super) struct DirectionRun<B: Backend, C> {
    /// Its output sequence, `[T, B, H_out]`.
    pub output: Tensor<B, 3>,
    /// Its final hidden state, `[B, H_out]`.
    pub hidden: Tensor<B, 2>,
    /// Its final cell state, `[B, H]` (`None` for a cell without one: the GRU).
    pub cell: Option<Tensor<B, 2>>,
    /// Its residuals, when the call saves them.
    pub residuals: Option<C>,
}

/// Runs the layer stack of `inputs`: each (layer, direction)
/// through `run_direction(layer_input, layer, direction)`. With `save`, also returns the
/// residuals of the backward.
pub(super) fn run_layers<B: Backend, C: CellResidualTensors<B>>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
    mut run_direction: impl FnMut(&Tensor<B, 3>, usize, usize) -> DirectionRun<B, C>,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    let x = tensor::<B, 3>(inputs.input.clone());
    let arch = &spec.arch;
    let device = x.device();
    // Constants take the input's dtype (Burn's device default may differ, see docs/numerics.md).
    let dtype = x.dtype();

    let mut layer_input = zero_padding(x, spec);
    let mut h_n = Vec::with_capacity(arch.cells());
    let mut c_n = Vec::with_capacity(arch.cells());
    let mut saved_layers = Vec::new();
    for layer in 0..arch.num_layers {
        let mut layer_mask = None;
        if layer > 0 && spec.dropout_active() {
            let shape = layer_input.dims();
            let place = (&device, dtype);
            let mask = dropout_mask::<B>(shape, spec.dropout, spec.dropout_seed, layer, place);
            layer_input = layer_input * mask.clone();
            layer_mask = Some(mask);
        }
        let mut outputs = Vec::with_capacity(arch.dirs());
        let mut cells = Vec::new();
        for direction in 0..arch.dirs() {
            let run = run_direction(&layer_input, layer, direction);
            outputs.push(run.output);
            h_n.push(run.hidden);
            c_n.extend(run.cell);
            cells.extend(run.residuals);
        }
        let output = if outputs.len() == 1 {
            outputs.pop().unwrap()
        } else {
            Tensor::cat(outputs, 2)
        };
        if save {
            saved_layers.push(LayerResiduals {
                input: layer_input,
                dropout_mask: layer_mask,
                cells,
            });
        }
        layer_input = output;
    }

    // A cell without a cell state (the GRU) has no `c_n`.
    let c_n = (!c_n.is_empty()).then(|| primitive(Tensor::stack::<3>(c_n, 0)));
    let output = RnnOutput {
        y: primitive(layer_input),
        h_n: primitive(Tensor::stack::<3>(h_n, 0)),
        c_n,
    };
    let saved = save.then(|| RnnSaved {
        spec: spec.clone(),
        kernel: RnnKernel::Portable,
        inputs,
        residuals: residuals::flatten(saved_layers),
        host: None,
    });
    (output, saved)
}

/// Inverted-dropout mask (`0` or `1 / (1 - p)`) for the input of `layer`. With a seed
/// the mask comes from a host generator, so it does not depend on (or disturb) the
/// backend's global generator; without one, from the backend's generator.
pub(crate) fn dropout_mask<B: Backend>(
    shape: [usize; 3],
    p: f64,
    seed: Option<u64>,
    layer: usize,
    (device, dtype): (&B::Device, DType),
) -> Tensor<B, 3> {
    let keep = 1.0 - p;
    match seed {
        Some(seed) => {
            let mut state = seed ^ (layer as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let data: Vec<f64> = (0..shape.iter().product::<usize>())
                .map(|_| {
                    if splitmix64(&mut state) < keep {
                        1.0 / keep
                    } else {
                        0.0
                    }
                })
                .collect();
            Tensor::from_data(TensorData::new(data, shape), (device, dtype))
        }
        None => {
            Tensor::random(shape, Distribution::Bernoulli(keep), (device, dtype)).div_scalar(keep)
        }
    }
}

/// A uniform draw in `[0, 1)` (SplitMix64).
fn splitmix64(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// What one direction of one layer returns to the backward's walk.
pub(super) struct CellGrads<B: Backend> {
    /// Gradient of the layer's input, `[T, B, in]`.
    pub d_input: Tensor<B, 3>,
    /// Flattened gradients in the canonical parameter order of the cell.
    pub weights: Vec<Tensor<B, 1>>,
    /// Gradient of the initial hidden state, `[B, H_out]`.
    pub d_hidden0: Tensor<B, 2>,
    /// Gradient of the initial cell state, `[B, H]` (`None` without one: the GRU).
    pub d_cell0: Option<Tensor<B, 2>>,
}

/// Backpropagates `dy` through the layer stack of `saved` from the top: each (layer,
/// direction) through `backward_direction(layer_input, residuals, layer, direction,
/// its slice of the output gradient)`.
pub(super) fn backprop_layers<B: Backend, C: CellResidualTensors<B>>(
    saved: RnnSaved<B>,
    dy: FloatTensor<B>,
    mut backward_direction: impl FnMut(&Tensor<B, 3>, C, usize, usize, Tensor<B, 3>) -> CellGrads<B>,
) -> RnnGrads<B> {
    assert_eq!(
        saved.kernel,
        RnnKernel::Portable,
        "the portable backward reads only the portable forward's residuals"
    );
    let spec = saved.spec;
    let arch = &spec.arch;
    let layers = residuals::unflatten::<B, C>(&spec, saved.residuals);
    let mut weight_grads: Vec<Option<Vec<Tensor<B, 1>>>> = vec![None; arch.cells()];
    let mut dh0 = vec![None; arch.cells()];
    let mut dc0 = vec![None; arch.cells()];
    let mut d_output = tensor::<B, 3>(dy);
    let out = arch.output_size();
    for (layer, residuals) in layers.into_iter().enumerate().rev() {
        let mut d_input: Option<Tensor<B, 3>> = None;
        for (direction, cell_res) in residuals.cells.into_iter().enumerate() {
            let cell = layer * arch.dirs() + direction;
            let dy = d_output.clone().slice([
                0..spec.seq_len,
                0..spec.batch,
                direction * out..(direction + 1) * out,
            ]);
            let cell_grads = backward_direction(&residuals.input, cell_res, layer, direction, dy);
            d_input = Some(match d_input {
                Some(acc) => acc + cell_grads.d_input,
                None => cell_grads.d_input,
            });
            weight_grads[cell] = Some(cell_grads.weights);
            dh0[cell] = Some(cell_grads.d_hidden0);
            dc0[cell] = cell_grads.d_cell0;
        }
        let mut d_input = d_input.expect("a layer has at least one direction");
        if let Some(mask) = residuals.dropout_mask {
            d_input = d_input * mask;
        }
        d_output = d_input;
    }

    let weights_grad = Tensor::cat(
        weight_grads
            .into_iter()
            .flat_map(|g| g.expect("every cell"))
            .collect(),
        0,
    );
    RnnGrads {
        input: Some(primitive(d_output)),
        weights: primitive(weights_grad),
        h0: primitive(stack_steps(dh0)),
        // A cell without a cell state (the GRU) has no `c0`.
        c0: (arch.cell_state_size() > 0).then(|| primitive(stack_steps(dc0))),
    }
}
