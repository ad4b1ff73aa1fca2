//! cuDNN's RNN algorithms by name ([`RnnAlgo`]); which one a call runs is `algo.rs`'s.

use core::fmt;
use core::str::FromStr;

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};

/// cuDNN's RNN algorithm (`cudnnRNNAlgo_t`), fixed per RNN descriptor
/// ([`RnnConfig::algo`](crate::RnnConfig::algo)). `CUDNN_RNN_ALGO_PERSIST_DYNAMIC` is not
/// offered: it needs a run-time compiled plan (`cudnnBuildRNNDynamic`) and PyTorch does
/// not use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RnnAlgo {
    /// `CUDNN_RNN_ALGO_STANDARD`: each layer as a sequence of GEMMs and pointwise kernels.
    /// Runs every configuration; the default.
    #[default]
    Standard,
    /// `CUDNN_RNN_ALGO_PERSIST_STATIC`: the recurrence in one persistent kernel that keeps
    /// the recurrent weights on chip; fast for small batches. Compute capability >= 6.0,
    /// no projection, equal sequence lengths.
    PersistStatic,
    /// `CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H`: a persistent kernel for small hidden
    /// sizes. Compute capability >= 6.0, no projection, no double precision, equal
    /// sequence lengths.
    PersistStaticSmallH,
}

impl RnnAlgo {
    /// Every algorithm, in the order of [`RnnAlgo::NAMES`].
    pub const ALL: [Self; 3] = [
        Self::Standard,
        Self::PersistStatic,
        Self::PersistStaticSmallH,
    ];

    /// The names [`RnnAlgo::name`] gives and [`str::parse`] accepts.
    pub const NAMES: [&'static str; 3] = ["standard", "persist_static", "persist_static_small_h"];

    /// `"standard"`, `"persist_static"` or `"persist_static_small_h"`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Standard => Self::NAMES[0],
            Self::PersistStatic => Self::NAMES[1],
            Self::PersistStaticSmallH => Self::NAMES[2],
        }
    }

    /// The `cudnnRNNAlgo_t` value `cudnnSetRNNDescriptor_v8` takes.
    pub fn cudnn(self) -> sys::cudnnRNNAlgo_t {
        match self {
            Self::Standard => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_STANDARD,
            Self::PersistStatic => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_PERSIST_STATIC,
            Self::PersistStaticSmallH => sys::cudnnRNNAlgo_t::CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H,
        }
    }

    /// Whether this is one of the persistent-kernel algorithms.
    pub fn is_persistent(self) -> bool {
        self != Self::Standard
    }
}

impl fmt::Display for RnnAlgo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RnnAlgo {
    type Err = CudnnRnnError;

    /// Parses one of [`RnnAlgo::NAMES`] (surrounding blanks and ASCII case ignored); any
    /// other text is an [`CudnnRnnError::InvalidArgument`] for `algo` listing the names.
    fn from_str(text: &str) -> Result<Self> {
        let wanted = text.trim();
        Self::ALL
            .into_iter()
            .find(|algo| algo.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                CudnnRnnError::invalid(
                    "algo",
                    format!(
                        "one of {}",
                        Self::NAMES.map(|name| format!("\"{name}\"")).join(", ")
                    ),
                    format!("\"{text}\""),
                )
            })
    }
}
