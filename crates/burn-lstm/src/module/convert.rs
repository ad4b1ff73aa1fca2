//! Conversion from Burn's own `nn::Lstm`, `nn::BiLstm`, `nn::Gru` and `nn::BiGru`, whose
//! gates are separate `Linear` layers (weights stored `[in, out]`), into the canonical
//! stacked layout.

use burn::module::Param;
use burn::nn::activation::Activation;
use burn::nn::{BiGru, BiLstm, GateController, Gru, Lstm};
use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::module::weights::{RnnDirectionWeights, RnnLayer};

fn check_standard<B: Backend>(lstm: &Lstm<B>, what: &str) -> Result<(), RnnError> {
    let standard = matches!(lstm.gate_activation, Activation::Sigmoid(_))
        && matches!(lstm.cell_activation, Activation::Tanh(_))
        && matches!(lstm.hidden_activation, Activation::Tanh(_));
    if !standard {
        return Err(RnnError::invalid(
            format!("{what} activations"),
            "sigmoid gates with tanh cell and hidden activations (cuDNN's LSTM)",
            format!(
                "{:?} / {:?} / {:?}",
                lstm.gate_activation, lstm.cell_activation, lstm.hidden_activation
            ),
        ));
    }
    if lstm.clip.is_some() || lstm.input_forget {
        return Err(RnnError::invalid(
            what,
            "no cell clipping and no coupled input-forget gate",
            format!(
                "clip = {:?}, input_forget = {}",
                lstm.clip, lstm.input_forget
            ),
        ));
    }
    Ok(())
}

/// One direction's canonical parameters from its gate controllers, in the canonical gate
/// order (LSTM: i, f, g, o; GRU: r, z, n). Each stacked tensor is detached: a new
/// parameter is a leaf of the autodiff graph (on an `Autodiff` backend, `Param` of the
/// concatenation's graph node would panic: "Can't convert a non leaf tensor").
fn stacked_gates<B: Backend>(gates: &[&GateController<B>]) -> RnnDirectionWeights<B> {
    let stack = |pick: &dyn Fn(&GateController<B>) -> Tensor<B, 2>| {
        Param::from_tensor(Tensor::cat(gates.iter().map(|g| pick(g)).collect(), 0).detach())
    };
    let bias = |pick: &dyn Fn(&GateController<B>) -> Option<Tensor<B, 1>>| {
        gates
            .iter()
            .map(|g| pick(g))
            .collect::<Option<Vec<_>>>()
            .map(|parts| Param::from_tensor(Tensor::cat(parts, 0).detach()))
    };
    RnnDirectionWeights {
        weight_ih: stack(&|g| g.input_transform.weight.val().transpose()),
        weight_hh: stack(&|g| g.hidden_transform.weight.val().transpose()),
        bias_ih: bias(&|g| g.input_transform.bias.as_ref().map(|b| b.val())),
        bias_hh: bias(&|g| g.hidden_transform.bias.as_ref().map(|b| b.val())),
        weight_hr: None,
    }
}

fn direction<B: Backend>(lstm: &Lstm<B>) -> RnnDirectionWeights<B> {
    stacked_gates(&[
        &lstm.input_gate,
        &lstm.forget_gate,
        &lstm.cell_gate,
        &lstm.output_gate,
    ])
}

fn single_layer<B: Backend>(
    layer: RnnLayer<B>,
    d_input: usize,
    d_hidden: usize,
    batch_first: bool,
) -> CudnnCompatibleLstm<B> {
    CudnnCompatibleLstm {
        bias: layer.forward.bias_ih.is_some(),
        bidirectional: layer.reverse.is_some(),
        layers: vec![layer],
        input_size: d_input,
        hidden_size: d_hidden,
        proj_size: 0,
        batch_first,
        dropout: 0.0,
        reject_non_finite: false,
        kernel: None,
    }
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// The same network as Burn's `nn::Lstm` (identical outputs; states gain the leading
    /// `[layers * dirs]` axis). Refuses LSTMs cuDNN cannot express: `reverse`, clipping,
    /// coupled gates or other activations.
    pub fn from_burn_lstm(lstm: &Lstm<B>) -> Result<Self, RnnError> {
        check_standard(lstm, "nn::Lstm")?;
        if lstm.reverse {
            return Err(RnnError::invalid(
                "nn::Lstm reverse",
                "false (a lone reverse direction has no cuDNN equivalent)",
                "true",
            ));
        }
        let [d_input, _] = lstm.input_gate.input_transform.weight.val().dims();
        let layer = RnnLayer {
            forward: direction(lstm),
            reverse: None,
        };
        Ok(single_layer(
            layer,
            d_input,
            lstm.d_hidden,
            lstm.batch_first,
        ))
    }

    /// The same network as Burn's `nn::BiLstm` (identical outputs and `[2, B, H]` states).
    pub fn from_burn_bilstm(bilstm: &BiLstm<B>) -> Result<Self, RnnError> {
        check_standard(&bilstm.forward, "nn::BiLstm forward")?;
        check_standard(&bilstm.reverse, "nn::BiLstm reverse")?;
        let [d_input, _] = bilstm
            .forward
            .input_gate
            .input_transform
            .weight
            .val()
            .dims();
        let layer = RnnLayer {
            forward: direction(&bilstm.forward),
            reverse: Some(direction(&bilstm.reverse)),
        };
        Ok(single_layer(
            layer,
            d_input,
            bilstm.d_hidden,
            bilstm.batch_first,
        ))
    }
}

/// Refuses a Burn GRU that cuDNN's (and PyTorch's) GRU cannot run: the reset gate applied
/// before the matrix product (`reset_after = false`), clipping, other activations.
fn check_standard_gru<B: Backend>(gru: &Gru<B>, what: &str) -> Result<(), RnnError> {
    if !gru.reset_after {
        return Err(RnnError::invalid(
            format!("{what} reset_after"),
            "true (cuDNN's and PyTorch's GRU apply the reset gate after the product; docs/gru.md)",
            "false",
        ));
    }
    let standard = matches!(gru.gate_activation, Activation::Sigmoid(_))
        && matches!(gru.hidden_activation, Activation::Tanh(_));
    if !standard {
        return Err(RnnError::invalid(
            format!("{what} activations"),
            "sigmoid gates with a tanh candidate (cuDNN's GRU)",
            format!("{:?} / {:?}", gru.gate_activation, gru.hidden_activation),
        ));
    }
    if let Some(clip) = gru.clip {
        return Err(RnnError::invalid(
            format!("{what} clip"),
            "None (cuDNN's GRU does not clip its hidden state)",
            format!("Some({clip})"),
        ));
    }
    Ok(())
}

fn gru_direction<B: Backend>(gru: &Gru<B>) -> RnnDirectionWeights<B> {
    stacked_gates(&[&gru.reset_gate, &gru.update_gate, &gru.new_gate])
}

fn single_gru_layer<B: Backend>(
    layer: RnnLayer<B>,
    d_input: usize,
    d_hidden: usize,
    batch_first: bool,
) -> CudnnCompatibleGru<B> {
    CudnnCompatibleGru {
        bias: layer.forward.bias_ih.is_some(),
        bidirectional: layer.reverse.is_some(),
        layers: vec![layer],
        input_size: d_input,
        hidden_size: d_hidden,
        batch_first,
        dropout: 0.0,
        reject_non_finite: false,
        kernel: None,
    }
}

impl<B: Backend> CudnnCompatibleGru<B> {
    /// The same network as Burn's `nn::Gru` (identical outputs; Burn's GRU takes
    /// `[batch, seq, features]`, so the result is batch-first; states gain the leading
    /// `[layers * dirs]` axis). Refuses GRUs cuDNN cannot express: `reset_after = false`,
    /// clipping or other activations.
    pub fn from_burn_gru(gru: &Gru<B>) -> Result<Self, RnnError> {
        check_standard_gru(gru, "nn::Gru")?;
        let [d_input, _] = gru.reset_gate.input_transform.weight.val().dims();
        let layer = RnnLayer {
            forward: gru_direction(gru),
            reverse: None,
        };
        Ok(single_gru_layer(layer, d_input, gru.d_hidden, true))
    }

    /// The same network as Burn's `nn::BiGru` (identical outputs and `[2, B, H]` states).
    pub fn from_burn_bigru(bigru: &BiGru<B>) -> Result<Self, RnnError> {
        check_standard_gru(&bigru.forward, "nn::BiGru forward")?;
        check_standard_gru(&bigru.reverse, "nn::BiGru reverse")?;
        let [d_input, _] = bigru.forward.reset_gate.input_transform.weight.val().dims();
        let layer = RnnLayer {
            forward: gru_direction(&bigru.forward),
            reverse: Some(gru_direction(&bigru.reverse)),
        };
        Ok(single_gru_layer(
            layer,
            d_input,
            bigru.d_hidden,
            bigru.batch_first,
        ))
    }
}
