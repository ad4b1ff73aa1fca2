//! Backward pass of the portable kernel: backpropagation through time from the
//! residuals of the training forward.
//!
//! Per step (in the reverse of the direction's processing order), with `m` the row's
//! validity mask (1 without padding):
//!
//! ```text
//! dĥ  = m·(dh + dy_t)            dĉ = m·dc              (gradients of the step's result)
//! du  = dĥ·W_hr  (projection)     dW_hr += dĥᵀ·u
//! dc' = dĉ + du·o·(1 − tanh²c)
//! di = dc'·g   df = dc'·c_prev   dg = dc'·i   do = du·tanh c
//! dz = [di, df, dg, do] ⊙ s²(1 − tanh²(s·z))   (s of GateAffine: σ' or tanh')
//! dh ← dz·W_hh + (1 − m)·dh       dc ← dc'·f + (1 − m)·dc
//! ```
//!
//! After the loop the `dz` of all steps form `[T·B, 4H]`, and `dW_ih`, `dW_hh`, the
//! biases and the input gradient are one matmul (or sum) each.

use burn::tensor::{Tensor, backend::Backend};

use crate::kernels::portable::lstm::residuals::CellResiduals;
use crate::kernels::portable::stack::{CellGrads, backprop_layers};
use crate::kernels::portable::steps::{index_leading, stack_steps, time_index};
use crate::kernels::portable::weights::{CellMatrices, GateAffine, step_masks};
use crate::op::io::{RnnGrads, RnnOutputGrads, RnnSaved};
use crate::op::tensor::tensor;

/// Gradients of the op's inputs from the upstream gradients of its outputs.
pub(crate) fn backward<B: Backend>(saved: RnnSaved<B>, grads: RnnOutputGrads<B>) -> RnnGrads<B> {
    let spec = saved.spec.clone();
    let arch = &spec.arch;
    let x = tensor::<B, 3>(saved.inputs.input.clone());
    let w = tensor::<B, 1>(saved.inputs.weights.clone());
    let device = x.device();
    let dtype = x.dtype();
    let affine = GateAffine::<B>::new(arch.hidden_size, &device, dtype);
    // d act / d z for all four gates: s²·(1 − tanh²).
    let affine_slope = affine.scale.clone() * affine.scale.clone();
    let masks = step_masks::<B>(&spec, &device, dtype);
    let dh_n = tensor::<B, 3>(grads.dh_n);
    let dc_n = tensor::<B, 3>(grads.dc_n.expect("an LSTM's upstream gradients hold dc_n"));
    backprop_layers(saved, grads.dy, |input, residuals, layer, direction, dy| {
        let cell = layer * arch.dirs() + direction;
        let weights = CellMatrices::new(&w, arch, &arch.direction_layout(layer, direction));
        let carried = (index_leading(&dh_n, cell), index_leading(&dc_n, cell));
        backward_direction(
            input,
            residuals,
            &weights,
            (&affine, &affine_slope),
            dy,
            carried,
            masks.as_ref(),
            direction == 1,
        )
    })
}

#[allow(clippy::too_many_arguments)]
fn backward_direction<B: Backend>(
    input: &Tensor<B, 3>,
    res: CellResiduals<B>,
    weights: &CellMatrices<B>,
    (affine, affine_slope): (&GateAffine<B>, &Tensor<B, 2>),
    dy: Tensor<B, 3>,
    (mut dh, mut dc): (Tensor<B, 2>, Tensor<B, 2>),
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
) -> CellGrads<B> {
    let [seq_len, batch, input_size] = input.dims();
    let gates = res.gate_tanh.dims()[2];
    let h = gates / 4;
    let out = res.hidden_prev.dims()[2];
    // Whole-sequence element-wise work hoisted out of the step loop.
    let activations = res.gate_tanh.clone() * affine.scale.clone().unsqueeze::<3>()
        + affine.offset.clone().unsqueeze::<3>();
    let gate_slope = (res.gate_tanh.clone().powi_scalar(2).neg().add_scalar(1.0))
        * affine_slope.clone().unsqueeze::<3>();
    let cell_tanh = res.cell.clone().tanh();
    let cell_tanh_slope = cell_tanh.clone().powi_scalar(2).neg().add_scalar(1.0);

    let mut d_gates: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut d_projected: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    // Walk time against the direction's processing order.
    for s in 0..seq_len {
        let t = time_index(s, seq_len, !reverse);
        let dy_t = index_leading(&dy, t);
        let (d_new_hidden, d_new_cell, carry) = match masks {
            Some(masks) => {
                let valid = index_leading(masks, t);
                let invalid = valid.clone().neg().add_scalar(1.0);
                (
                    (dh.clone() + dy_t) * valid.clone(),
                    dc.clone() * valid,
                    Some((dh.clone() * invalid.clone(), dc.clone() * invalid)),
                )
            }
            None => (dh.clone() + dy_t, dc.clone(), None),
        };
        let d_unprojected = match &weights.weight_hr {
            Some(w_hr) => {
                d_projected[t] = Some(d_new_hidden.clone());
                d_new_hidden.matmul(w_hr.clone())
            }
            None => d_new_hidden,
        };
        let act = index_leading(&activations, t);
        let input_gate = act.clone().slice([0..batch, 0..h]);
        let forget_gate = act.clone().slice([0..batch, h..2 * h]);
        let cell_gate = act.clone().slice([0..batch, 2 * h..3 * h]);
        let output_gate = act.slice([0..batch, 3 * h..4 * h]);
        let d_cell =
            d_new_cell + d_unprojected.clone() * output_gate * index_leading(&cell_tanh_slope, t);
        let d_act = Tensor::cat(
            vec![
                d_cell.clone() * cell_gate,
                d_cell.clone() * index_leading(&res.cell_prev, t),
                d_cell.clone() * input_gate,
                d_unprojected * index_leading(&cell_tanh, t),
            ],
            1,
        );
        let dz = d_act * index_leading(&gate_slope, t);
        dh = dz.clone().matmul(weights.weight_hh.clone());
        dc = d_cell * forget_gate;
        if let Some((carry_h, carry_c)) = carry {
            dh = dh + carry_h;
            dc = dc + carry_c;
        }
        d_gates[t] = Some(dz);
    }

    let rows = seq_len * batch;
    let dz = stack_steps(d_gates).reshape([rows, gates]);
    let dz_t = dz.clone().transpose();
    let d_weight_ih = dz_t
        .clone()
        .matmul(input.clone().reshape([rows, input_size]));
    let d_weight_hh = dz_t.matmul(res.hidden_prev.reshape([rows, out]));
    let d_input = dz
        .clone()
        .matmul(weights.weight_ih.clone())
        .reshape([seq_len, batch, input_size]);
    let mut flat = vec![d_weight_ih.reshape([-1]), d_weight_hh.reshape([-1])];
    if weights.bias {
        let d_bias = dz.sum_dim(0).reshape([gates]);
        flat.push(d_bias.clone());
        flat.push(d_bias);
    }
    if let Some(unprojected) = res.unprojected {
        let d_proj = stack_steps(d_projected).reshape([rows, out]);
        let hidden = unprojected.dims()[2];
        flat.push(
            d_proj
                .transpose()
                .matmul(unprojected.reshape([rows, hidden]))
                .reshape([-1]),
        );
    }
    CellGrads {
        d_input,
        weights: flat,
        d_hidden0: dh,
        d_cell0: Some(dc),
    }
}
