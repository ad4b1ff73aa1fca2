//! [`CudnnCompatibleGruConfig`]: the architecture of the GRU module and how it is
//! initialised (its checkpoints load in `checkpoint.rs`, beside the LSTM's).

use burn::config::Config;
use burn::module::Initializer;
use burn::tensor::backend::Backend;

use crate::error::RnnError;
use crate::module::config::NanPolicy;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::validate::validate_arch;
use crate::module::weights::init_layers;
use crate::op::spec::{CellKind, RnnArch};

/// Configuration of a [`CudnnCompatibleGru`]. Field names follow PyTorch's `nn.GRU`;
/// defaults follow Burn's `nn::GruConfig` (batch-first) and PyTorch (everything else).
#[derive(Config, Debug)]
pub struct CudnnCompatibleGruConfig {
    /// Features of each input step.
    pub input_size: usize,
    /// Size of the hidden state.
    pub hidden_size: usize,
    /// Stacked layers.
    #[config(default = 1)]
    pub num_layers: usize,
    /// Run every layer in both directions and concatenate them.
    #[config(default = false)]
    pub bidirectional: bool,
    /// Gate biases `bias_ih` and `bias_hh`.
    #[config(default = true)]
    pub bias: bool,
    /// Dropout on the output of every layer but the last, while training, in `[0, 1)`.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Input and output are `[batch, seq, features]` (true, Burn's default) or
    /// `[seq, batch, features]` (false, PyTorch's default).
    #[config(default = true)]
    pub batch_first: bool,
    /// Initializer of every parameter; `None` is PyTorch's `U(-1/√H, 1/√H)`.
    #[config(default = "None")]
    pub initializer: Option<Initializer>,
    /// What to do with non-finite inputs.
    #[config(default = "NanPolicy::Propagate")]
    pub nan_policy: NanPolicy,
}

impl CudnnCompatibleGruConfig {
    /// The architecture this config describes.
    pub fn arch(&self) -> RnnArch {
        RnnArch {
            cell: CellKind::Gru,
            input_size: self.input_size,
            hidden_size: self.hidden_size,
            proj_size: 0,
            num_layers: self.num_layers,
            bidirectional: self.bidirectional,
            bias: self.bias,
        }
    }

    /// Checks every field, naming the first that is out of range.
    pub fn validate(&self) -> Result<(), RnnError> {
        validate_arch(&self.arch(), self.dropout)
    }

    /// Creates the module, or says which field is invalid.
    pub fn try_init<B: Backend>(
        &self,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        self.validate()?;
        let layers = init_layers(&self.arch(), self.initializer.clone(), device);
        Ok(CudnnCompatibleGru {
            layers,
            input_size: self.input_size,
            hidden_size: self.hidden_size,
            bidirectional: self.bidirectional,
            bias: self.bias,
            batch_first: self.batch_first,
            dropout: self.dropout,
            reject_non_finite: self.nan_policy == NanPolicy::Reject,
            kernel: None,
        })
    }

    /// Creates the module.
    ///
    /// # Panics
    /// With the message of [`CudnnCompatibleGruConfig::try_init`]'s error when a field is invalid.
    pub fn init<B: Backend>(&self, device: &B::Device) -> CudnnCompatibleGru<B> {
        self.try_init(device).unwrap_or_else(|e| panic!("{e}"))
    }
}
