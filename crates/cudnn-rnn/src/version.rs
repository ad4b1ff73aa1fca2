//! A cuDNN version and the one this crate needs.

use core::fmt;

/// The lowest cuDNN major version whose RNN API (`cudnnRNNForward`,
/// `cudnnRNNBackwardData_v8`, `cudnnRNNBackwardWeights_v8`, `cudnnAdvVersionCheck`)
/// this crate calls.
pub const REQUIRED_CUDNN_MAJOR: usize = 9;

/// A cuDNN version, as `cudnnGetVersion` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CudnnVersion {
    /// Major version.
    pub major: usize,
    /// Minor version.
    pub minor: usize,
    /// Patch level.
    pub patch: usize,
}

impl CudnnVersion {
    /// Decodes `cudnnGetVersion`'s number: `major * 10000 + minor * 100 + patch` since
    /// cuDNN 9, `major * 1000 + minor * 100 + patch` before.
    pub fn from_raw(raw: usize) -> Self {
        let (major, rest) = if raw >= 90_000 {
            (raw / 10_000, raw % 10_000)
        } else {
            (raw / 1_000, raw % 1_000)
        };
        Self {
            major,
            minor: rest / 100,
            patch: rest % 100,
        }
    }
}

impl fmt::Display for CudnnVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}
