//! Backward pass of the portable kernel for GRU cells: backpropagation through time
//! from the residuals of the training forward (`forward.rs` has the cell).
//!
//! Per step (in the reverse of the direction's processing order), with `m` the row's
//! validity mask (1 without padding) and `ĥ_n = W_hn·h + b_hn`:
//!
//! ```text
//! dh' = m·(dh + dy_t)
//! dn̂ = dh'·(1 − z)·(1 − n²)      (gradient of n's pre-activation)
//! dẑ = dh'·(h − n)·z·(1 − z)      dr̂ = dn̂·ĥ_n·r·(1 − r)
//! input side  [dr̂, dẑ, dn̂]       hidden side [dr̂, dẑ, dn̂·r]
//! dh ← (hidden side)·W_hh + dh'·z + (1 − m)·dh
//! ```
//!
//! Unlike the LSTM's, the two sides differ (in the `n` block), so both are kept: after
//! the loop `dW_ih`, `dW_hh`, the two biases and the input gradient are one matmul (or
//! sum) each. The factors that depend only on the residuals are computed for the whole
//! sequence before the loop.

use burn::tensor::{Tensor, backend::Backend};

use crate::kernels::portable::gru::forward::GruWeights;
use crate::kernels::portable::gru::residuals::GruCellResiduals;
use crate::kernels::portable::stack::{CellGrads, backprop_layers};
use crate::kernels::portable::steps::{index_leading, stack_steps, time_index};
use crate::kernels::portable::weights::step_masks;
use crate::op::io::{RnnGrads, RnnOutputGrads, RnnSaved};
use crate::op::tensor::tensor;

/// Gradients of the op's inputs from the upstream gradients of its outputs (a GRU has no
/// cell state: no `dc_n`, no `c0` gradient).
pub(crate) fn backward<B: Backend>(saved: RnnSaved<B>, grads: RnnOutputGrads<B>) -> RnnGrads<B> {
    let spec = saved.spec.clone();
    let arch = &spec.arch;
    let x = tensor::<B, 3>(saved.inputs.input.clone());
    let w = tensor::<B, 1>(saved.inputs.weights.clone());
    let masks = step_masks::<B>(&spec, &x.device(), x.dtype());
    let dh_n = tensor::<B, 3>(grads.dh_n);
    backprop_layers(saved, grads.dy, |input, residuals, layer, direction, dy| {
        let weights = GruWeights::new(&w, arch, &arch.direction_layout(layer, direction));
        let dh = index_leading(&dh_n, layer * arch.dirs() + direction);
        backward_direction(
            input,
            residuals,
            &weights,
            dy,
            dh,
            masks.as_ref(),
            direction == 1,
        )
    })
}

fn backward_direction<B: Backend>(
    input: &Tensor<B, 3>,
    res: GruCellResiduals<B>,
    weights: &GruWeights<B>,
    dy: Tensor<B, 3>,
    mut dh: Tensor<B, 2>,
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
) -> CellGrads<B> {
    let [seq_len, batch, input_size] = input.dims();
    let rows = res.gates.dims()[2];
    let h = rows / 3;
    let gate = |k: usize| {
        res.gates
            .clone()
            .slice([0..seq_len, 0..batch, k * h..(k + 1) * h])
    };
    let (reset, update, new_gate) = (gate(0), gate(1), gate(2));
    let one_minus = |t: Tensor<B, 3>| t.neg().add_scalar(1.0);
    // Whole-sequence factors: dn̂ = dh'·to_new, dẑ = dh'·to_update, dr̂ = dn̂·to_reset.
    let to_new = one_minus(update.clone()) * one_minus(new_gate.clone().powi_scalar(2));
    let to_update =
        (res.hidden_prev.clone() - new_gate) * update.clone() * one_minus(update.clone());
    let to_reset = res.hidden_n * reset.clone() * one_minus(reset.clone());

    let mut d_input_side: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut d_hidden_side: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    // Walk time against the direction's processing order.
    for s in 0..seq_len {
        let t = time_index(s, seq_len, !reverse);
        let dy_t = index_leading(&dy, t);
        let (d_new_hidden, carry) = match masks {
            Some(masks) => {
                let valid = index_leading(masks, t);
                let invalid = valid.clone().neg().add_scalar(1.0);
                ((dh.clone() + dy_t) * valid, Some(dh.clone() * invalid))
            }
            None => (dh.clone() + dy_t, None),
        };
        let d_new = d_new_hidden.clone() * index_leading(&to_new, t);
        let d_update = d_new_hidden.clone() * index_leading(&to_update, t);
        let d_reset = d_new.clone() * index_leading(&to_reset, t);
        let d_hidden_n = d_new.clone() * index_leading(&reset, t);
        let hidden_side = Tensor::cat(vec![d_reset.clone(), d_update.clone(), d_hidden_n], 1);
        dh = hidden_side.clone().matmul(weights.weight_hh.clone())
            + d_new_hidden * index_leading(&update, t);
        if let Some(carry) = carry {
            dh = dh + carry;
        }
        d_input_side[t] = Some(Tensor::cat(vec![d_reset, d_update, d_new], 1));
        d_hidden_side[t] = Some(hidden_side);
    }

    let steps = seq_len * batch;
    let d_x_side = stack_steps(d_input_side).reshape([steps, rows]);
    let d_h_side = stack_steps(d_hidden_side).reshape([steps, rows]);
    let d_weight_ih = d_x_side
        .clone()
        .transpose()
        .matmul(input.clone().reshape([steps, input_size]));
    let d_weight_hh = d_h_side
        .clone()
        .transpose()
        .matmul(res.hidden_prev.reshape([steps, h]));
    let d_input = d_x_side
        .clone()
        .matmul(weights.weight_ih.clone())
        .reshape([seq_len, batch, input_size]);
    let mut flat = vec![d_weight_ih.reshape([-1]), d_weight_hh.reshape([-1])];
    if weights.bias.is_some() {
        flat.push(d_x_side.sum_dim(0).reshape([rows]));
        flat.push(d_h_side.sum_dim(0).reshape([rows]));
    }
    CellGrads {
        d_input,
        weights: flat,
        d_hidden0: dh,
        d_cell0: None,
    }
}
