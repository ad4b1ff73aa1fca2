//! Which kernel runs an LSTM call, and why it is not a faster one.

use core::fmt;

/// The implementations of the LSTM op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RnnKernel {
    /// Burn tensor ops (one input-projection matmul per layer and direction, then one
    /// matmul plus the gate math per step): runs on every backend.
    Portable,
    /// The fused CPU kernel of the `lstm-cpu` crate.
    FusedCpu,
    /// NVIDIA cuDNN's fused RNN (`cudnnRNNForward` and friends).
    Cudnn,
    /// The int8 inference kernel of the `lstm-cpu` crate: runs the int8 copies of the
    /// modules ([`Int8Lstm`](crate::Int8Lstm), [`Int8Gru`](crate::Int8Gru), made by
    /// `quantized_int8()`), not the f32 modules, which fall back when asked for it.
    FusedCpuInt8,
}

impl fmt::Display for RnnKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Portable => "portable",
            Self::FusedCpu => "fused-cpu",
            Self::Cudnn => "cudnn",
            Self::FusedCpuInt8 => "fused-cpu-int8",
        })
    }
}

/// The kernel a call will use on a device, and, when a faster kernel exists for that
/// device but cannot run, the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelChoice {
    /// The kernel that runs.
    pub kernel: RnnKernel,
    /// Why a faster kernel for this device does not run (`None`: this is the fastest one).
    pub fallback_reason: Option<String>,
    /// How the kernel runs this call, where it has a choice of its own (cuDNN: which of
    /// its RNN algorithms, and why).
    pub detail: Option<String>,
}

impl KernelChoice {
    /// The fastest kernel for the device runs.
    pub fn fastest(kernel: RnnKernel) -> Self {
        Self {
            kernel,
            fallback_reason: None,
            detail: None,
        }
    }

    /// This choice with `detail` ([`Self::detail`]).
    pub fn with_detail(self, detail: impl Into<String>) -> Self {
        Self {
            detail: Some(detail.into()),
            ..self
        }
    }

    /// The choice on a backend whose only kernel is the portable one, given the kernel the
    /// caller asked for.
    pub fn portable_only(requested: Option<RnnKernel>) -> Self {
        match requested {
            None | Some(RnnKernel::Portable) => Self::fastest(RnnKernel::Portable),
            Some(other) => Self::fallback(
                RnnKernel::Portable,
                format!("the {other} kernel was asked for but does not run on this backend"),
            ),
        }
    }

    /// `kernel` runs although a faster one exists, because of `reason`.
    pub fn fallback(kernel: RnnKernel, reason: impl Into<String>) -> Self {
        Self {
            kernel,
            fallback_reason: Some(reason.into()),
            detail: None,
        }
    }
}

impl fmt::Display for KernelChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.kernel)?;
        if let Some(detail) = &self.detail {
            write!(f, " [{detail}]")?;
        }
        match &self.fallback_reason {
            None => Ok(()),
            Some(reason) => write!(f, " (fallback: {reason})"),
        }
    }
}
