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

use burn::tensor::{Tensor, backend::Backend, ops::FloatTensor};

use super::forward::{dropout_mask, stack_steps};
use super::gru_residuals::{self, GruCellResiduals, GruLayerResiduals};
use super::steps::{index_leading, time_index};
use super::weights::{step_masks, zero_padding};
use crate::op::choice::LstmKernel;
use crate::op::io::{LstmOutput, LstmSaved};
use crate::op::spec::{DirectionLayout, LstmArch, LstmSpec};
use crate::op::tensor::{primitive, tensor};

/// One GRU cell's parameters, as views of the flat buffer.
pub(super) struct GruWeights<B: Backend> {
    /// `W_ih`, `[3H, in]` (for the input gradient).
    pub weight_ih: Tensor<B, 2>,
    /// `W_hh`, `[3H, H]` (for the state gradient).
    pub weight_hh: Tensor<B, 2>,
    /// `W_ihᵀ`, `[in, 3H]`, row-major (see `weights.rs` on why laid out once).
    pub weight_ih_t: Tensor<B, 2>,
    /// `W_hhᵀ`, `[H, 3H]`, row-major.
    pub weight_hh_t: Tensor<B, 2>,
    /// `b_ih` and `b_hh`, `[1, 3H]` each, with biases.
    pub bias: Option<(Tensor<B, 2>, Tensor<B, 2>)>,
}

impl<B: Backend> GruWeights<B> {
    pub fn new(flat: &Tensor<B, 1>, arch: &LstmArch, layout: &DirectionLayout) -> Self {
        let rows = arch.gate_rows();
        let matrix = |range: core::ops::Range<usize>, cols: usize| {
            flat.clone().slice([range]).reshape([rows, cols])
        };
        let row_major = |t: Tensor<B, 2>| {
            let dims = t.dims();
            t.reshape([-1]).reshape(dims)
        };
        let weight_ih = matrix(layout.weight_ih.clone(), layout.input_size);
        let weight_hh = matrix(layout.weight_hh.clone(), arch.hidden_size);
        let vector =
            |range: core::ops::Range<usize>| flat.clone().slice([range]).reshape([1, rows]);
        Self {
            weight_ih_t: row_major(weight_ih.clone().transpose()),
            weight_hh_t: row_major(weight_hh.clone().transpose()),
            bias: layout
                .bias_ih
                .clone()
                .zip(layout.bias_hh.clone())
                .map(|(ih, hh)| (vector(ih), vector(hh))),
            weight_ih,
            weight_hh,
        }
    }
}

/// Runs the layer stack of GRU cells. With `save`, also returns the residuals of the
/// backward. `c0` is empty (`[cells, B, 0]`) and so is the returned `c_n`.
pub(crate) fn forward<B: Backend>(
    inputs: [FloatTensor<B>; 4],
    spec: &LstmSpec,
    save: bool,
) -> (LstmOutput<B>, Option<LstmSaved<B>>) {
    let [x, w, h0, _] = inputs.clone();
    let x = tensor::<B, 3>(x);
    let w = tensor::<B, 1>(w);
    let h0 = tensor::<B, 3>(h0);
    let arch = &spec.arch;
    let device = x.device();
    let dtype = x.dtype();
    let masks = step_masks::<B>(spec, &device, dtype);

    let mut layer_input = zero_padding(x, spec);
    let mut h_n = Vec::with_capacity(arch.cells());
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
            let cell = layer * arch.dirs() + direction;
            let weights = GruWeights::new(&w, arch, &arch.direction_layout(layer, direction));
            let run = run_direction(
                &layer_input,
                &weights,
                index_leading(&h0, cell),
                masks.as_ref(),
                direction == 1,
                save,
            );
            outputs.push(run.output);
            h_n.push(run.hidden);
            cells.extend(run.residuals);
        }
        let output = if outputs.len() == 1 {
            outputs.pop().unwrap()
        } else {
            Tensor::cat(outputs, 2)
        };
        if save {
            saved_layers.push(GruLayerResiduals {
                input: layer_input,
                dropout_mask: layer_mask,
                cells,
            });
        }
        layer_input = output;
    }

    let batch = spec.batch;
    let output = LstmOutput {
        y: primitive(layer_input),
        h_n: primitive(Tensor::stack::<3>(h_n, 0)),
        c_n: primitive(Tensor::<B, 3>::zeros(
            [arch.cells(), batch, 0],
            (&device, dtype),
        )),
    };
    let saved = save.then(|| LstmSaved {
        spec: spec.clone(),
        kernel: LstmKernel::Portable,
        inputs,
        residuals: gru_residuals::flatten(saved_layers),
        host: None,
    });
    (output, saved)
}

/// `σ(x) = ½·tanh(x/2) + ½`, in the tensor's own float type: Burn 0.21's
/// `activation::sigmoid` computes through f32 on some backends (NdArray<f64> lost
/// nine digits on the golden cases with it).
fn sigmoid<B: Backend>(x: Tensor<B, 2>) -> Tensor<B, 2> {
    x.mul_scalar(0.5).tanh().mul_scalar(0.5).add_scalar(0.5)
}

struct DirectionRun<B: Backend> {
    output: Tensor<B, 3>,
    hidden: Tensor<B, 2>,
    residuals: Option<GruCellResiduals<B>>,
}

fn run_direction<B: Backend>(
    input: &Tensor<B, 3>,
    weights: &GruWeights<B>,
    mut hidden: Tensor<B, 2>,
    masks: Option<&Tensor<B, 3>>,
    reverse: bool,
    save: bool,
) -> DirectionRun<B> {
    let [seq_len, batch, input_size] = input.dims();
    let rows = weights.weight_ih_t.dims()[1];
    let h = rows / 3;
    // Input projection of every step at once: [T*B, in] x [in, 3H].
    let mut projected = input
        .clone()
        .reshape([seq_len * batch, input_size])
        .matmul(weights.weight_ih_t.clone());
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
        let mut h_hat = hidden.clone().matmul(weights.weight_hh_t.clone());
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
        residuals: save.then(|| GruCellResiduals {
            gates: stack_steps(gates),
            hidden_n: stack_steps(hidden_n),
            hidden_prev: stack_steps(hidden_prev),
        }),
    }
}
