//! Forward pass of the portable kernel.

use burn::tensor::{Tensor, backend::Backend};

use crate::kernels::portable::lstm::residuals::CellResiduals;
use crate::kernels::portable::stack::{DirectionRun, run_layers};
use crate::kernels::portable::steps::{index_leading, stack_steps, time_index};
use crate::kernels::portable::weights::{CellWeights, GateAffine, step_masks};
use crate::op::io::{RnnInputs, RnnOutput, RnnSaved};
use crate::op::spec::RnnSpec;
use crate::op::tensor::tensor;

/// Runs the layer stack. With `save`, also returns the residuals of the backward.
pub(crate) fn forward<B: Backend>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    let x = tensor::<B, 3>(inputs.input.clone());
    let w = tensor::<B, 1>(inputs.weights.clone());
    let h0 = tensor::<B, 3>(inputs.h0.clone());
    let c0 = tensor::<B, 3>(inputs.c0.clone().expect("an LSTM's inputs hold c0"));
    let arch = &spec.arch;
    let device = x.device();
    // Constants take the input's dtype (Burn's device default may differ, see docs/numerics.md).
    let dtype = x.dtype();
    let affine = GateAffine::<B>::new(arch.hidden_size, &device, dtype);
    let masks = step_masks::<B>(spec, &device, dtype);
    run_layers(inputs, spec, save, |layer_input, layer, direction| {
        let cell = layer * arch.dirs() + direction;
        let weights = CellWeights::new(&w, arch, &arch.direction_layout(layer, direction), &affine);
        let state = (index_leading(&h0, cell), index_leading(&c0, cell));
        run_direction(
            layer_input,
            &weights,
            &affine,
            state,
            masks.as_ref(),
            direction == 1,
            save,
        )
    })
}

fn run_direction<B: Backend>(
    input: &Tensor<B, 3>,
    weights: &CellWeights<B>,
    affine: &GateAffine<B>,
    (mut hidden, mut cell): (Tensor<B, 2>, Tensor<B, 2>),
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
    save: bool,
) -> DirectionRun<B, CellResiduals<B>> {
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
            if weights.stored.weight_hr.is_some() {
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
        cell: Some(cell),
        residuals: saved.map(|s| CellResiduals {
            gate_tanh: stack_steps(s.gate_tanh),
            cell: stack_steps(s.cell),
            cell_prev: stack_steps(s.cell_prev),
            hidden_prev: stack_steps(s.hidden_prev),
            unprojected: weights
                .stored
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
