//! What an LSTM layer stack is, in the terms cuDNN's RNN descriptor takes.

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};

/// Element type of every tensor of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    pub(crate) fn cudnn(self) -> sys::cudnnDataType_t {
        match self {
            Self::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            Self::F64 => sys::cudnnDataType_t::CUDNN_DATA_DOUBLE,
        }
    }
}

/// How cuDNN may compute `f32` products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MathMode {
    /// Exact `f32` arithmetic on FMA units (`CUDNN_FMA_MATH`): the numbers of the CPU
    /// kernels. The default.
    #[default]
    Fma,
    /// Tensor cores with TF32 inputs (`CUDNN_DEFAULT_MATH` on Ampere and newer): faster,
    /// with about 3 decimal digits per product. Opt-in. Ignored for `f64`.
    Tf32,
}

/// The architecture of an LSTM layer stack (cuDNN `CUDNN_LSTM`, linear input,
/// standard algorithm).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RnnConfig {
    /// Features per input step.
    pub input_size: usize,
    /// Cell size `H`.
    pub hidden_size: usize,
    /// Projected hidden size (LSTMP); 0 for none. Must be smaller than `hidden_size`.
    pub proj_size: usize,
    /// Stacked layers.
    pub num_layers: usize,
    /// Whether each layer also runs backwards in time.
    pub bidirectional: bool,
    /// Whether the gates have both bias vectors (`CUDNN_RNN_DOUBLE_BIAS`, PyTorch's
    /// `bias_ih` and `bias_hh`), or none.
    pub bias: bool,
    /// Element type.
    pub data_type: DataType,
    /// `f32` math mode.
    pub math: MathMode,
}

impl RnnConfig {
    /// Number of directions.
    pub fn dirs(&self) -> usize {
        if self.bidirectional { 2 } else { 1 }
    }

    /// Size of the hidden state each direction emits.
    pub fn output_size(&self) -> usize {
        if self.proj_size > 0 {
            self.proj_size
        } else {
            self.hidden_size
        }
    }

    /// `num_layers * dirs`: cuDNN's pseudo-layers.
    pub fn pseudo_layers(&self) -> usize {
        self.num_layers * self.dirs()
    }

    /// Checks what cuDNN requires of an LSTM, with named errors.
    pub fn validate(&self) -> Result<()> {
        for (argument, value) in [
            ("input_size", self.input_size),
            ("hidden_size", self.hidden_size),
            ("num_layers", self.num_layers),
        ] {
            if value == 0 || value > i32::MAX as usize {
                return Err(CudnnRnnError::invalid(argument, "1..=i32::MAX", value));
            }
        }
        if self.proj_size >= self.hidden_size && self.proj_size != 0 {
            return Err(CudnnRnnError::invalid(
                "proj_size",
                format!(
                    "0 (none) or less than hidden_size {} (cuDNN's LSTMP)",
                    self.hidden_size
                ),
                self.proj_size,
            ));
        }
        Ok(())
    }

    pub(crate) fn math_type(&self) -> sys::cudnnMathType_t {
        match (self.data_type, self.math) {
            (DataType::F32, MathMode::Fma) => sys::cudnnMathType_t::CUDNN_FMA_MATH,
            _ => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        }
    }
}
