//! Conversion from Burn's own `nn::Lstm` and `nn::BiLstm`, whose four gates are separate
//! `Linear` layers (weights stored `[in, out]`), into the canonical stacked layout.

use burn::module::Param;
use burn::nn::activation::Activation;
use burn::nn::{BiLstm, Lstm};
use burn::tensor::{Tensor, backend::Backend};

use crate::error::LstmError;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::module::weights::{LstmDirectionWeights, LstmLayer};

fn check_standard<B: Backend>(lstm: &Lstm<B>, what: &str) -> Result<(), LstmError> {
    let standard = matches!(lstm.gate_activation, Activation::Sigmoid(_))
        && matches!(lstm.cell_activation, Activation::Tanh(_))
        && matches!(lstm.hidden_activation, Activation::Tanh(_));
    if !standard {
        return Err(LstmError::invalid(
            format!("{what} activations"),
            "sigmoid gates with tanh cell and hidden activations (cuDNN's LSTM)",
            format!(
                "{:?} / {:?} / {:?}",
                lstm.gate_activation, lstm.cell_activation, lstm.hidden_activation
            ),
        ));
    }
    if lstm.clip.is_some() || lstm.input_forget {
        return Err(LstmError::invalid(
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

fn direction<B: Backend>(lstm: &Lstm<B>) -> LstmDirectionWeights<B> {
    let gates = [
        &lstm.input_gate,
        &lstm.forget_gate,
        &lstm.cell_gate,
        &lstm.output_gate,
    ];
    let stack = |pick: &dyn Fn(&burn::nn::GateController<B>) -> Tensor<B, 2>| {
        Param::from_tensor(Tensor::cat(gates.iter().map(|g| pick(g)).collect(), 0))
    };
    let bias = |pick: &dyn Fn(&burn::nn::GateController<B>) -> Option<Tensor<B, 1>>| {
        gates
            .iter()
            .map(|g| pick(g))
            .collect::<Option<Vec<_>>>()
            .map(|parts| Param::from_tensor(Tensor::cat(parts, 0)))
    };
    LstmDirectionWeights {
        weight_ih: stack(&|g| g.input_transform.weight.val().transpose()),
        weight_hh: stack(&|g| g.hidden_transform.weight.val().transpose()),
        bias_ih: bias(&|g| g.input_transform.bias.as_ref().map(|b| b.val())),
        bias_hh: bias(&|g| g.hidden_transform.bias.as_ref().map(|b| b.val())),
        weight_hr: None,
    }
}

fn single_layer<B: Backend>(
    layer: LstmLayer<B>,
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
    pub fn from_burn_lstm(lstm: &Lstm<B>) -> Result<Self, LstmError> {
        check_standard(lstm, "nn::Lstm")?;
        if lstm.reverse {
            return Err(LstmError::invalid(
                "nn::Lstm reverse",
                "false (a lone reverse direction has no cuDNN equivalent)",
                "true",
            ));
        }
        let [d_input, _] = lstm.input_gate.input_transform.weight.val().dims();
        let layer = LstmLayer {
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
    pub fn from_burn_bilstm(bilstm: &BiLstm<B>) -> Result<Self, LstmError> {
        check_standard(&bilstm.forward, "nn::BiLstm forward")?;
        check_standard(&bilstm.reverse, "nn::BiLstm reverse")?;
        let [d_input, _] = bilstm
            .forward
            .input_gate
            .input_transform
            .weight
            .val()
            .dims();
        let layer = LstmLayer {
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
