//! What an LSTM or GRU layer stack is, in the terms cuDNN's RNN descriptor takes.

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};
use crate::rnn_algo::RnnAlgo;
use crate::version::{CudnnVersion, REQUIRED_CUDNN_MAJOR};

/// Element type of every tensor of a call (data, states and weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// IEEE half precision (`CUDNN_DATA_HALF`), computed in `f32` on tensor cores.
    F16,
    /// bfloat16 (`CUDNN_DATA_BFLOAT16`), computed in `f32` on tensor cores. Needs cuDNN
    /// [`DataType::minimum_cudnn`] or newer.
    Bf16,
}

impl DataType {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Self::F32 => 4,
            Self::F64 => 8,
            Self::F16 | Self::Bf16 => 2,
        }
    }

    /// The oldest cuDNN that runs RNNs of this type. bf16 RNNs: cuDNN 9.13 (PyTorch
    /// enables its bf16 cuDNN RNN from that release on); the others: any cuDNN 9.
    pub fn minimum_cudnn(self) -> CudnnVersion {
        match self {
            Self::Bf16 => CudnnVersion {
                major: 9,
                minor: 13,
                patch: 0,
            },
            _ => CudnnVersion {
                major: REQUIRED_CUDNN_MAJOR,
                minor: 0,
                patch: 0,
            },
        }
    }

    /// Checks that cuDNN `loaded` runs RNNs of this type.
    pub fn check_supported_by(self, loaded: CudnnVersion) -> Result<()> {
        let minimum = self.minimum_cudnn();
        if loaded < minimum {
            return Err(CudnnRnnError::invalid(
                "data_type",
                format!("a type cuDNN {loaded} runs in an RNN ({self:?} needs cuDNN >= {minimum})"),
                format!("{self:?}"),
            ));
        }
        Ok(())
    }

    pub(crate) fn cudnn(self) -> sys::cudnnDataType_t {
        match self {
            Self::F32 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            Self::F64 => sys::cudnnDataType_t::CUDNN_DATA_DOUBLE,
            Self::F16 => sys::cudnnDataType_t::CUDNN_DATA_HALF,
            Self::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_BFLOAT16,
        }
    }

    /// The precision cuDNN computes in (`mathPrec`): `f32` for the half types, as
    /// PyTorch sets it (its `promote_rnn_math_type`): the gate math and the cell state
    /// in f32, only the tensors in memory in half precision.
    pub(crate) fn math_precision(self) -> sys::cudnnDataType_t {
        match self {
            Self::F16 | Self::Bf16 => sys::cudnnDataType_t::CUDNN_DATA_FLOAT,
            other => other.cudnn(),
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
    /// with about 3 decimal digits per product. Opt-in. Ignored for `f64`; f16 and bf16
    /// always run on tensor cores (`CUDNN_TENSOR_OP_MATH`).
    Tf32,
}

/// The recurrent cell of a layer stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RnnCell {
    /// `CUDNN_LSTM`: gates i, f, g, o, a hidden and a cell state.
    #[default]
    Lstm,
    /// `CUDNN_GRU`: gates r, z, n with the reset gate applied after the recurrent product
    /// (PyTorch's `nn.GRU`); a hidden state only (`cx` / `cy` are not read or written).
    Gru,
}

impl RnnCell {
    /// Gate blocks per weight matrix: 4 or 3.
    pub fn gates(self) -> usize {
        match self {
            Self::Lstm => 4,
            Self::Gru => 3,
        }
    }

    pub(crate) fn cudnn(self) -> sys::cudnnRNNMode_t {
        match self {
            Self::Lstm => sys::cudnnRNNMode_t::CUDNN_LSTM,
            Self::Gru => sys::cudnnRNNMode_t::CUDNN_GRU,
        }
    }
}

/// The architecture of an LSTM or GRU layer stack (cuDNN `CUDNN_LSTM` / `CUDNN_GRU`,
/// linear input) and the algorithm that runs it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RnnConfig {
    /// The cell.
    pub cell: RnnCell,
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
    /// cuDNN's algorithm ([`RnnAlgo::Standard`] unless a caller asks for another, for
    /// instance what [`choose_algo`](crate::choose_algo) picks). One descriptor serves a
    /// training forward and the backward that reads its reserve space, so both run it.
    pub algo: RnnAlgo,
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

    /// Checks what cuDNN requires of the layer stack and of its algorithm
    /// ([`RnnAlgo::check_config`]), with named errors.
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
        if self.cell == RnnCell::Gru && self.proj_size != 0 {
            return Err(CudnnRnnError::invalid(
                "proj_size",
                "0 for a GRU (cuDNN projects LSTMs only)",
                self.proj_size,
            ));
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
        self.algo.check_config(self)
    }

    pub(crate) fn math_type(&self) -> sys::cudnnMathType_t {
        match (self.data_type, self.math) {
            (DataType::F32, MathMode::Fma) => sys::cudnnMathType_t::CUDNN_FMA_MATH,
            // Half data on tensor cores, as PyTorch runs it.
            (DataType::F16 | DataType::Bf16, _) => sys::cudnnMathType_t::CUDNN_TENSOR_OP_MATH,
            _ => sys::cudnnMathType_t::CUDNN_DEFAULT_MATH,
        }
    }
}

impl RnnAlgo {
    /// Refuses a layer stack this algorithm does not run, naming `algo`, what it needs
    /// and the algorithm given, so that a caller can fall back to
    /// [`RnnAlgo::Standard`]: a projection on a persistent algorithm (PyTorch: "LSTM with
    /// projections only works with standard algorithm"), and double precision on
    /// [`RnnAlgo::PersistStaticSmallH`] (it has no double-precision kernels; PyTorch
    /// excludes it). Called by [`RnnConfig::validate`].
    pub fn check_config(self, config: &RnnConfig) -> Result<()> {
        if self.is_persistent() && config.proj_size != 0 {
            return Err(CudnnRnnError::invalid(
                "algo",
                format!(
                    "standard with proj_size {} (cuDNN runs the LSTM projection on the standard algorithm only)",
                    config.proj_size
                ),
                self,
            ));
        }
        if self == Self::PersistStaticSmallH && config.data_type == DataType::F64 {
            return Err(CudnnRnnError::invalid(
                "algo",
                "standard or persist_static for F64 (persist_static_small_h has no double-precision kernels)",
                self,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(data_type: DataType, math: MathMode) -> RnnConfig {
        RnnConfig {
            cell: RnnCell::Lstm,
            input_size: 8,
            hidden_size: 16,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
            data_type,
            math,
            algo: RnnAlgo::Standard,
        }
    }

    #[test]
    fn half_types_compute_in_f32_on_tensor_cores() {
        use sys::{cudnnDataType_t as D, cudnnMathType_t as M};
        for (data_type, size, cudnn) in [
            (DataType::F16, 2, D::CUDNN_DATA_HALF),
            (DataType::Bf16, 2, D::CUDNN_DATA_BFLOAT16),
        ] {
            assert_eq!(data_type.size(), size);
            assert_eq!(data_type.cudnn(), cudnn);
            assert_eq!(data_type.math_precision(), D::CUDNN_DATA_FLOAT);
            for math in [MathMode::Fma, MathMode::Tf32] {
                assert_eq!(config(data_type, math).math_type(), M::CUDNN_TENSOR_OP_MATH);
            }
        }
        assert_eq!(DataType::F32.math_precision(), D::CUDNN_DATA_FLOAT);
        assert_eq!(DataType::F64.math_precision(), D::CUDNN_DATA_DOUBLE);
        assert_eq!(
            config(DataType::F32, MathMode::Fma).math_type(),
            M::CUDNN_FMA_MATH
        );
        assert_eq!(
            config(DataType::F32, MathMode::Tf32).math_type(),
            M::CUDNN_DEFAULT_MATH
        );
    }

    #[test]
    fn bf16_needs_cudnn_9_13() {
        let version = |minor| CudnnVersion {
            major: 9,
            minor,
            patch: 0,
        };
        let err = DataType::Bf16.check_supported_by(version(12)).unwrap_err();
        let text = err.to_string();
        assert!(text.starts_with("data_type: expected"), "{text}");
        assert!(text.contains("Bf16 needs cuDNN >= 9.13.0"), "{text}");
        assert!(text.contains("cuDNN 9.12.0"), "{text}");
        assert!(DataType::Bf16.check_supported_by(version(13)).is_ok());
        for data_type in [DataType::F16, DataType::F32, DataType::F64] {
            assert!(data_type.check_supported_by(version(0)).is_ok());
        }
    }

    #[test]
    fn a_gru_has_three_gates_and_no_projection() {
        let gru = RnnConfig {
            cell: RnnCell::Gru,
            ..config(DataType::F32, MathMode::Fma)
        };
        assert_eq!(gru.cell.gates(), 3);
        assert_eq!(gru.cell.cudnn(), sys::cudnnRNNMode_t::CUDNN_GRU);
        assert!(gru.validate().is_ok());
        let err = RnnConfig {
            proj_size: 4,
            ..gru
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("proj_size: expected 0 for a GRU"), "{err}");
        assert!(err.contains("got 4"), "{err}");
    }
}
