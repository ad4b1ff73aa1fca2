//! Forward pass of the portable kernel for GRU cells (PyTorch's `nn.GRU`, cuDNN's
//! `CUDNN_GRU`): per step, with `x̂ = W_ih·x + b_ih` (one matmul for the whole sequence)
//! and `ĥ = W_hh·h + b_hh`, blocks (r, z, n) along the `3H` columns,
//!
//! ```text
//! r = σ(x̂_r + ĥ_r)   z = σ(x̂_z + ĥ_z)   n = tanh(x̂_n + r ⊙ ĥ_n)
//! h' = (1 − z) ⊙ n + z ⊙ h
//! ```
//!
//! The reset gate multiplies `ĥ_n` after the hidden product (with its bias), which is
//! what cuDNN computes and Keras calls `reset_after=True`.

use core::ops::Range;

use burn::tensor::{Tensor, backend::Backend};

use crate::kernels::portable::gru::residuals::GruCellResiduals;
use crate::kernels::portable::stack::{DirectionRun, run_layers};
use crate::kernels::portable::steps::{index_leading, stack_steps, time_index};
use crate::kernels::portable::weights::{matrix, row_major, step_masks};
use crate::op::io::{RnnInputs, RnnOutput, RnnSaved};
use crate::op::spec::{DirectionLayout, RnnArch, RnnSpec};
use crate::op::tensor::tensor;

/// One GRU cell's parameters, as views of the flat buffer (the backward reads these;
/// the forward also lays out their transposes, [`run_direction`]).
pub(super) struct GruWeights<B: Backend> {
    /// `W_ih`, `[3H, in]`.
    pub weight_ih: Tensor<B, 2>,
    /// `W_hh`, `[3H, H]`.
    pub weight_hh: Tensor<B, 2>,
    /// `b_ih` and `b_hh`, `[1, 3H]` each, with biases.
    pub bias: Option<(Tensor<B, 2>, Tensor<B, 2>)>,
}

impl<B: Backend> GruWeights<B> {
    pub fn new(flat: &Tensor<B, 1>, arch: &RnnArch, layout: &DirectionLayout) -> Self {
        let rows = arch.gate_rows();
        let vector = |range: Range<usize>| flat.clone().slice([range]).reshape([1, rows]);
        Self {
            weight_ih: matrix(flat, layout.weight_ih.clone(), layout.input_size),
            weight_hh: matrix(flat, layout.weight_hh.clone(), arch.hidden_size),
            bias: layout
                .bias_ih
                .clone()
                .zip(layout.bias_hh.clone())
                .map(|(ih, hh)| (vector(ih), vector(hh))),
        }
    }
}

/// Runs the layer stack of GRU cells. With `save`, also returns the residuals of the
/// backward. A GRU has no cell state: no `c0`, no `c_n`.
pub(crate) fn forward<B: Backend>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    let x = tensor::<B, 3>(inputs.input.clone());
    let w = tensor::<B, 1>(inputs.weights.clone());
    let h0 = tensor::<B, 3>(inputs.h0.clone());
    let arch = &spec.arch;
    let masks = step_masks::<B>(spec, &x.device(), x.dtype());
    run_layers(inputs, spec, save, |layer_input, layer, direction| {
        let weights = GruWeights::new(&w, arch, &arch.direction_layout(layer, direction));
        let h0 = index_leading(&h0, layer * arch.dirs() + direction);
        run_direction(
            layer_input,
            &weights,
            h0,
            masks.as_ref(),
            direction == 1,
            save,
        )
    })
}

/// `σ(x) = ½·tanh(x/2) + ½`, in the tensor's own float type: Burn 0.21's
/// `activation::sigmoid` computes through f32 on some backends (`NdArray<f64>` lost
/// nine digits on the golden cases with it).
fn sigmoid<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    x.mul_scalar(0.5).tanh().mul_scalar(0.5).add_scalar(0.5)
}

fn run_direction<B: Backend>(
    input: &Tensor<B, 3>,
    weights: &GruWeights<B>,
    mut hidden: Tensor<B, 2>,
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
    save: bool,
) -> DirectionRun<B, GruCellResiduals<B>> {
    let [seq_len, batch, input_size] = input.dims();
    let rows = weights.weight_ih.dims()[0];
    let h = rows / 3;
    // Transposes laid out once per call (see `weights.rs`): the step loop reuses them.
    let weight_ih_t = row_major(weights.weight_ih.clone().transpose());
    let weight_hh_t = row_major(weights.weight_hh.clone().transpose());
    // Input projection of every step at once: [T*B, in] x [in, 3H].
    let mut projected = input
        .clone()
        .reshape([seq_len * batch, input_size])
        .matmul(weight_ih_t);
    if let Some((bias_ih, _)) = &weights.bias {
        projected = projected + bias_ih.clone();
    }
    let projected = projected.reshape([seq_len, batch, rows]);

    let mut outputs: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut gates: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut hidden_n: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    let mut hidden_prev: Vec<Option<Tensor<B, 2>>> = vec![None; seq_len];
    for step in 0..seq_len {
        let t = time_index(step, seq_len, reverse);
        let x_hat = index_leading(&projected, t);
        let mut h_hat = hidden.clone().matmul(weight_hh_t.clone());
        if let Some((_, bias_hh)) = &weights.bias {
            h_hat = h_hat + bias_hh.clone();
        }
        let block = |t: &Tensor<B, 2>, k: usize| t.clone().slice([0..batch, k * h..(k + 1) * h]);
        let reset_update = sigmoid(
            x_hat.clone().slice([0..batch, 0..2 * h]) + h_hat.clone().slice([0..batch, 0..2 * h]),
        );
        let reset = block(&reset_update, 0);
        let update = block(&reset_update, 1);
        let h_hat_n = block(&h_hat, 2);
        let new_gate = (block(&x_hat, 2) + reset * h_hat_n.clone()).tanh();
        // (1 − z) ⊙ n + z ⊙ h = n + z ⊙ (h − n)
        let new_hidden = new_gate.clone() + update * (hidden.clone() - new_gate.clone());
        if save {
            gates[t] = Some(Tensor::cat(vec![reset_update, new_gate], 1));
            hidden_n[t] = Some(h_hat_n);
            hidden_prev[t] = Some(hidden.clone());
        }
        match masks {
            // Rows past their length keep their state and emit zeros.
            Some(masks) => {
                let valid = index_leading(masks, t);
                outputs[t] = Some(new_hidden.clone() * valid.clone());
                hidden = hidden.clone() + (new_hidden - hidden) * valid;
            }
            None => {
                outputs[t] = Some(new_hidden.clone());
                hidden = new_hidden;
            }
        }
    }
    DirectionRun {
        output: stack_steps(outputs),
        hidden,
        cell: None,
        residuals: save.then(|| GruCellResiduals {
            gates: stack_steps(gates),
            hidden_n: stack_steps(hidden_n),
            hidden_prev: stack_steps(hidden_prev),
        }),
    }
}
