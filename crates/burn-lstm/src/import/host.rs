//! Parameters read from a file, on the host in float64, already in PyTorch's layout; and
//! the modules built from them once every tensor of the selection has been read and
//! checked (nothing is loaded half-way).

use burn::module::Param;
use burn::tensor::{Tensor, TensorData, backend::Backend};

use crate::error::RnnError;
use crate::module::config::CudnnCompatibleLstmConfig;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::gru_config::CudnnCompatibleGruConfig;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::module::weights::{RnnDirectionWeights, RnnLayer};
use crate::op::spec::CellKind;

/// A dense row-major tensor read from a file (float32 or float64 values, held in f64:
/// float32 converts exactly).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostTensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// `shape.iter().product()` values, row-major.
    pub values: Vec<f64>,
}

impl HostTensor {
    /// Elements in total.
    pub fn len(&self) -> usize {
        self.values.len()
    }
}

/// One direction's parameters in PyTorch's layout: `weight_ih [G*H, in]`,
/// `weight_hh [G*H, H]`, biases `[G*H]` (gates i, f, g, o or r, z, n).
#[derive(Debug, Clone)]
pub(crate) struct DirectionParams {
    pub weight_ih: HostTensor,
    pub weight_hh: HostTensor,
    pub bias_ih: Option<Vec<f64>>,
    pub bias_hh: Option<Vec<f64>>,
}

/// A layer stack's parameters and the architecture they imply.
#[derive(Debug, Clone)]
pub(crate) struct StackParams {
    pub cell: CellKind,
    pub input_size: usize,
    pub hidden_size: usize,
    pub bidirectional: bool,
    pub bias: bool,
    pub batch_first: bool,
    /// Per layer, bottom first: forward and (when bidirectional) reverse.
    pub layers: Vec<(DirectionParams, Option<DirectionParams>)>,
}

/// The config a stack implies for an LSTM.
pub(crate) fn lstm_config(stack: &StackParams) -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(stack.input_size, stack.hidden_size)
        .with_num_layers(stack.layers.len())
        .with_bidirectional(stack.bidirectional)
        .with_bias(stack.bias)
        .with_batch_first(stack.batch_first)
}

/// The config a stack implies for a GRU.
pub(crate) fn gru_config(stack: &StackParams) -> CudnnCompatibleGruConfig {
    CudnnCompatibleGruConfig::new(stack.input_size, stack.hidden_size)
        .with_num_layers(stack.layers.len())
        .with_bidirectional(stack.bidirectional)
        .with_bias(stack.bias)
        .with_batch_first(stack.batch_first)
}

/// The LSTM module of `stack` (its shapes checked against the config first).
pub(crate) fn build_lstm<B: Backend>(
    stack: StackParams,
    device: &B::Device,
) -> Result<(CudnnCompatibleLstm<B>, CudnnCompatibleLstmConfig), RnnError> {
    debug_assert_eq!(stack.cell, CellKind::Lstm);
    let config = lstm_config(&stack);
    let mut module = config.try_init::<B>(device)?;
    module.layers = layers(stack, device);
    module.validate()?;
    Ok((module, config))
}

/// The GRU module of `stack` (its shapes checked against the config first).
pub(crate) fn build_gru<B: Backend>(
    stack: StackParams,
    device: &B::Device,
) -> Result<(CudnnCompatibleGru<B>, CudnnCompatibleGruConfig), RnnError> {
    debug_assert_eq!(stack.cell, CellKind::Gru);
    let config = gru_config(&stack);
    let mut module = config.try_init::<B>(device)?;
    module.layers = layers(stack, device);
    module.validate()?;
    Ok((module, config))
}

fn layers<B: Backend>(stack: StackParams, device: &B::Device) -> Vec<RnnLayer<B>> {
    stack
        .layers
        .into_iter()
        .map(|(forward, reverse)| RnnLayer {
            forward: direction(forward, device),
            reverse: reverse.map(|r| direction(r, device)),
        })
        .collect()
}

fn direction<B: Backend>(params: DirectionParams, device: &B::Device) -> RnnDirectionWeights<B> {
    // `Tensor::from_data` converts the f64 values to the device's float type.
    let matrix = |t: HostTensor| {
        Param::from_tensor(Tensor::<B, 2>::from_data(
            TensorData::new(t.values, [t.shape[0], t.shape[1]]),
            device,
        ))
    };
    let vector = |v: Vec<f64>| {
        let n = v.len();
        Param::from_tensor(Tensor::<B, 1>::from_data(TensorData::new(v, [n]), device))
    };
    RnnDirectionWeights {
        weight_ih: matrix(params.weight_ih),
        weight_hh: matrix(params.weight_hh),
        bias_ih: params.bias_ih.map(vector),
        bias_hh: params.bias_hh.map(vector),
        weight_hr: None,
    }
}
