//! Forward pass of the portable kernel.

use burn::tensor::{DType, Distribution, Tensor, TensorData, backend::Backend, ops::FloatTensor};

use super::residuals::{self, CellResiduals, LayerResiduals};
use super::steps::{index_leading, time_index};
use super::weights::{CellWeights, GateAffine, step_masks, zero_padding};
use crate::op::choice::LstmKernel;
use crate::op::io::{LstmOutput, LstmSaved};
use crate::op::spec::LstmSpec;
use crate::op::tensor::{primitive, tensor};

/// Runs the layer stack. With `save`, also returns the residuals of the backward.
pub(crate) fn forward<B: Backend>(
    inputs: [FloatTensor<B>; 4],
    spec: &LstmSpec,
    save: bool,
) -> (LstmOutput<B>, Option<LstmSaved<B>>) {
    let [x, w, h0, c0] = inputs.clone();
    let x = tensor::<B, 3>(x);
    let w = tensor::<B, 1>(w);
    let h0 = tensor::<B, 3>(h0);
    let c0 = tensor::<B, 3>(c0);
    let arch = &spec.arch;
    let device = x.device();
    // Constants take the input's dtype (Burn's device default may differ, see docs/numerics.md).
    let dtype = x.dtype();
    let affine = GateAffine::<B>::new(arch.hidden_size, &device, dtype);
    let masks = step_masks::<B>(spec, &device, dtype);

    let mut layer_input = zero_padding(x, spec);
    let mut h_n = Vec::with_capacity(arch.cells());
    let mut c_n = Vec::with_capacity(arch.cells());
    let mut saved_layers = Vec::new();
    for layer in 0..arch.num_layers {
        let mut layer_mask = None;
        if layer > 0 && spec.dropout_active() {
            let mask = dropout_mask::<B>(
                layer_input.dims(),
                spec.dropout,
                spec.dropout_seed,
                layer,
                (&device, dtype),
            );
            layer_input = layer_input * mask.clone();
            layer_mask = Some(mask);
        }
        let mut outputs = Vec::with_capacity(arch.dirs());
        let mut cells = Vec::new();
        for direction in 0..arch.dirs() {
            let cell = layer * arch.dirs() + direction;
            let weights =
                CellWeights::new(&w, arch, &arch.direction_layout(layer, direction), &affine);
            let state = (index_leading(&h0, cell), index_leading(&c0, cell));
            let run = run_direction(
                &layer_input,
                &weights,
                &affine,
                state,
                masks.as_ref(),
                direction == 1,
                save,
            );
            outputs.push(run.output);
            h_n.push(run.hidden);
            c_n.push(run.cell);
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

    let output = LstmOutput {
        y: primitive(layer_input),
        h_n: primitive(Tensor::stack::<3>(h_n, 0)),
        c_n: primitive(Tensor::stack::<3>(c_n, 0)),
    };
    let saved = save.then(|| LstmSaved {
        spec: spec.clone(),
        kernel: LstmKernel::Portable,
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

struct DirectionRun<B: Backend> {
    output: Tensor<B, 3>,
    hidden: Tensor<B, 2>,
    cell: Tensor<B, 2>,
    residuals: Option<CellResiduals<B>>,
}

fn run_direction<B: Backend>(
    input: &Tensor<B, 3>,
    weights: &CellWeights<B>,
    affine: &GateAffine<B>,
    (mut hidden, mut cell): (Tensor<B, 2>, Tensor<B, 2>),
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
    save: bool,
) -> DirectionRun<B> {
    let [seq_len, batch, input_size] = input.dims();
    let gates = weights.weight_ih_scaled_t.dims()[1];
    let h = gates / 4;
    // Input projection of every step at once: [T*B, in] x [in, 4H].
    let mut projected = input
        .clone()
        .reshape([seq_len * batch, input_size])
        .matmul(weights.weight_ih_scaled_t.clone());
    if let Some(bias) = &weights.bias_scaled {
        projected = projected + bias.clone();
    }
    let projected = projected.reshape([seq_len, batch, gates]);

    let mut outputs: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut saved = save.then(|| Saved::with_capacity(seq_len));
    for step in 0..seq_len {
        let t = time_index(step, seq_len, reverse);
        let z = index_leading(&projected, t)
            + hidden.clone().matmul(weights.weight_hh_scaled_t.clone());
        let gate_tanh = z.tanh();
        let act = gate_tanh.clone() * affine.scale.clone() + affine.offset.clone();
        let input_gate = act.clone().slice([0..batch, 0..h]);
        let forget_gate = act.clone().slice([0..batch, h..2 * h]);
        let cell_gate = act.clone().slice([0..batch, 2 * h..3 * h]);
        let output_gate = act.slice([0..batch, 3 * h..4 * h]);
        let new_cell = forget_gate * cell.clone() + input_gate * cell_gate;
        let unprojected = output_gate * new_cell.clone().tanh();
        let new_hidden = match &weights.weight_hr_t {
            Some(w_hr_t) => unprojected.clone().matmul(w_hr_t.clone()),
            None => unprojected.clone(),
        };
        if let Some(saved) = saved.as_mut() {
            saved.gate_tanh[t] = Some(gate_tanh);
            saved.cell[t] = Some(new_cell.clone());
            saved.cell_prev[t] = Some(cell.clone());
            saved.hidden_prev[t] = Some(hidden.clone());
            if weights.weight_hr.is_some() {
                saved.unprojected[t] = Some(unprojected);
            }
        }
        match masks {
            // Rows past their length keep their state and emit zeros.
            Some(masks) => {
                let valid = index_leading(masks, t);
                outputs[t] = Some(new_hidden.clone() * valid.clone());
                hidden = hidden.clone() + (new_hidden - hidden) * valid.clone();
                cell = cell.clone() + (new_cell - cell) * valid;
            }
            None => {
                outputs[t] = Some(new_hidden.clone());
                hidden = new_hidden;
                cell = new_cell;
            }
        }
    }
    DirectionRun {
        output: stack_steps(outputs),
        hidden,
        cell,
        residuals: saved.map(|s| CellResiduals {
            gate_tanh: stack_steps(s.gate_tanh),
            cell: stack_steps(s.cell),
            cell_prev: stack_steps(s.cell_prev),
            hidden_prev: stack_steps(s.hidden_prev),
            unprojected: weights
                .weight_hr
                .as_ref()
                .map(|_| stack_steps(s.unprojected)),
        }),
    }
}

struct Saved<B: Backend> {
    gate_tanh: Vec<Option<Tensor<B, 2>>>,
    cell: Vec<Option<Tensor<B, 2>>>,
    cell_prev: Vec<Option<Tensor<B, 2>>>,
    hidden_prev: Vec<Option<Tensor<B, 2>>>,
    unprojected: Vec<Option<Tensor<B, 2>>>,
}

impl<B: Backend> Saved<B> {
    fn with_capacity(seq_len: usize) -> Self {
        Self {
            gate_tanh: vec![None; seq_len],
            cell: vec![None; seq_len],
            cell_prev: vec![None; seq_len],
            hidden_prev: vec![None; seq_len],
            unprojected: vec![None; seq_len],
        }
    }
}

/// `[T, B, ·]` from per-step `[B, ·]` tensors indexed by time.
pub(crate) fn stack_steps<B: Backend>(steps: Vec<Option<Tensor<B, 2>>>) -> Tensor<B, 3> {
    Tensor::stack(
        steps
            .into_iter()
            .map(|s| s.expect("every time step was computed"))
            .collect(),
        0,
    )
}
