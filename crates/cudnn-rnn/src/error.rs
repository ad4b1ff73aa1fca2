//! Every failure of this crate as one typed error. cuDNN statuses keep the call that
//! returned them; bad arguments name the argument, the expected and the actual value.

use cudarc::cudnn::sys::cudnnStatus_t;
use thiserror::Error;

use crate::version::CudnnVersion;

/// Errors of the cuDNN RNN wrapper.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CudnnRnnError {
    /// The CUDA driver library (`libcuda`) could not be loaded.
    #[error(
        "the CUDA driver library (libcuda) could not be loaded: is an NVIDIA driver installed on this machine?"
    )]
    DriverMissing,
    /// The cuDNN library could not be loaded.
    #[error(
        "libcudnn could not be loaded (tried {candidates}): install cuDNN 9 (for instance `pip install nvidia-cudnn-cu13`) and put its lib/ directory on LD_LIBRARY_PATH"
    )]
    CudnnMissing {
        /// The file names that were tried.
        candidates: String,
    },
    /// The loaded cuDNN is older than the RNN API this crate calls.
    #[error(
        "cuDNN {found} is loaded, but cuDNN >= {required}.0 is needed (the RNN API of cuDNN 9)"
    )]
    CudnnTooOld {
        /// Version found.
        found: CudnnVersion,
        /// Lowest supported major version.
        required: usize,
    },
    /// The loaded libcudnn and its RNN sub-library (libcudnn_adv) come from different
    /// cuDNN installations.
    #[error(
        "libcudnn {main} was loaded, but its RNN sub-library libcudnn_adv is from another cuDNN installation (cudnnAdvVersionCheck: CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH). The first of {candidates} found on the loader's path is loaded, and libcudnn_adv.so.9 is then looked up on LD_LIBRARY_PATH: put the lib/ directory of one complete cuDNN 9 first on LD_LIBRARY_PATH, with a libcudnn.so link in it if another installation provides libcudnn.so"
    )]
    SublibraryMismatch {
        /// Version of the main library that was loaded.
        main: CudnnVersion,
        /// The file names that are tried, in order.
        candidates: String,
    },
    /// A cuDNN call returned a status other than success.
    #[error("{call} failed with {status:?}: {message}")]
    Status {
        /// The cuDNN function.
        call: &'static str,
        /// Its status.
        status: cudnnStatus_t,
        /// cuDNN's description of the status.
        message: String,
    },
    /// A CUDA driver call failed.
    #[error("{call} failed: {message}")]
    Driver {
        /// The operation.
        call: &'static str,
        /// The driver's error.
        message: String,
        /// Whether the driver was out of device memory (`CUDA_ERROR_OUT_OF_MEMORY`).
        out_of_memory: bool,
    },
    /// cuDNN reported a weight-space layout this wrapper does not understand.
    #[error("unexpected cuDNN weight-space layout: {0}")]
    UnexpectedWeightLayout(String),
    /// An argument is outside what cuDNN (or this wrapper) accepts.
    #[error("{argument}: expected {expected}, got {actual}")]
    InvalidArgument {
        /// The argument's name.
        argument: &'static str,
        /// What was expected.
        expected: String,
        /// What was given.
        actual: String,
    },
}

impl CudnnRnnError {
    /// An [`CudnnRnnError::InvalidArgument`].
    pub fn invalid(
        argument: &'static str,
        expected: impl Into<String>,
        actual: impl ToString,
    ) -> Self {
        Self::InvalidArgument {
            argument,
            expected: expected.into(),
            actual: actual.to_string(),
        }
    }

    /// Whether cuDNN refused the call's configuration, algorithm, layout or shape, so
    /// that the same call is refused again: a status of the `CUDNN_STATUS_NOT_SUPPORTED`
    /// category (cuDNN 9 groups its statuses by thousands), or `CUDNN_STATUS_BAD_PARAM`
    /// plain, out of bound or shape mismatch. Allocation and execution failures, bad
    /// pointers, driver errors and this crate's own checks are not refusals.
    pub fn is_refusal(&self) -> bool {
        use cudnnStatus_t::{
            CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND,
            CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH, CUDNN_STATUS_NOT_SUPPORTED,
        };
        match self {
            Self::Status { status, .. } => {
                matches!(
                    status,
                    CUDNN_STATUS_BAD_PARAM
                        | CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND
                        | CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH
                ) || *status as u32 / 1000 == CUDNN_STATUS_NOT_SUPPORTED as u32 / 1000
            }
            _ => false,
        }
    }

    /// Whether the call failed for want of memory, device or host (a driver
    /// `CUDA_ERROR_OUT_OF_MEMORY`, or cuDNN's host or device allocation failure): the
    /// same call may pass once memory is freed.
    pub fn is_out_of_memory(&self) -> bool {
        use cudnnStatus_t::{
            CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
            CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
        };
        match self {
            Self::Driver { out_of_memory, .. } => *out_of_memory,
            Self::Status { status, .. } => matches!(
                status,
                CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED
                    | CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
            ),
            _ => false,
        }
    }

    pub(crate) fn driver(call: &'static str, error: cudarc::driver::DriverError) -> Self {
        use cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY;
        Self::Driver {
            call,
            out_of_memory: error.0 == CUDA_ERROR_OUT_OF_MEMORY,
            message: error.to_string(),
        }
    }
}

/// Result of this crate.
pub type Result<T> = core::result::Result<T, CudnnRnnError>;

#[cfg(test)]
mod tests {
    use super::*;
    use cudnnStatus_t as S;

    fn status(status: cudnnStatus_t) -> CudnnRnnError {
        CudnnRnnError::Status {
            call: "cudnnRNNForward",
            status,
            message: String::new(),
        }
    }

    /// A driver error (made by hand: a `DriverError`'s text needs the driver loaded).
    fn driver(out_of_memory: bool) -> CudnnRnnError {
        CudnnRnnError::Driver {
            call: "cuMemAllocAsync",
            message: String::new(),
            out_of_memory,
        }
    }

    #[test]
    fn refusals_are_the_statuses_a_repeated_call_gets_again() {
        for refused in [
            S::CUDNN_STATUS_NOT_SUPPORTED,
            S::CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
            S::CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
            S::CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT,
            S::CUDNN_STATUS_BAD_PARAM,
            S::CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND,
            S::CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
        ] {
            assert!(status(refused).is_refusal(), "{refused:?}");
        }
        for passing in [
            S::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
            S::CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
            S::CUDNN_STATUS_EXECUTION_FAILED,
            S::CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
            S::CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
            S::CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
            S::CUDNN_STATUS_NOT_INITIALIZED,
        ] {
            assert!(!status(passing).is_refusal(), "{passing:?}");
        }
        assert!(!CudnnRnnError::invalid("batch", "at least 1", 0).is_refusal());
        assert!(!driver(true).is_refusal());
    }

    #[test]
    fn out_of_memory_is_told_apart() {
        assert!(driver(true).is_out_of_memory());
        assert!(!driver(false).is_out_of_memory());
        for status_code in [
            S::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
            S::CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
        ] {
            assert!(status(status_code).is_out_of_memory(), "{status_code:?}");
        }
        assert!(!status(S::CUDNN_STATUS_NOT_SUPPORTED).is_out_of_memory());
        assert!(!CudnnRnnError::DriverMissing.is_out_of_memory());
    }
}
