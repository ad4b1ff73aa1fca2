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
                ) || in_category(*status, CUDNN_STATUS_NOT_SUPPORTED)
            }
            _ => false,
        }
    }

    /// Whether the same call may pass later, once memory is freed: out of memory
    /// ([`CudnnRnnError::is_out_of_memory`]), or cuDNN's `NOT_INITIALIZED` or a status of
    /// its `INTERNAL_ERROR` category (what `cudnnCreate` answers when the device is short
    /// of memory). A missing, too old or mismatched library, another driver error (no
    /// such device, say), a refusal, a bad argument or any other status would fail again.
    pub fn may_pass(&self) -> bool {
        use cudnnStatus_t::{CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_NOT_INITIALIZED};
        let initialisation = |status: cudnnStatus_t| {
            status == CUDNN_STATUS_NOT_INITIALIZED
                || in_category(status, CUDNN_STATUS_INTERNAL_ERROR)
        };
        self.is_out_of_memory()
            || matches!(self, Self::Status { status, .. } if initialisation(*status))
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

/// Whether `status` is of `category`: cuDNN 9 groups its statuses by thousands, each
/// category named by its first status (`CUDNN_STATUS_NOT_SUPPORTED_SHAPE`, 3002, is of
/// `CUDNN_STATUS_NOT_SUPPORTED`, 3000).
fn in_category(status: cudnnStatus_t, category: cudnnStatus_t) -> bool {
    status as u32 / 1000 == category as u32 / 1000
}

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

    /// Asserts that `test` answers `answer` for an error of each of `statuses`.
    fn answers(test: fn(&CudnnRnnError) -> bool, answer: bool, statuses: &[cudnnStatus_t]) {
        for &code in statuses {
            assert_eq!(test(&status(code)), answer, "{code:?}");
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
        answers(
            CudnnRnnError::is_refusal,
            true,
            &[
                S::CUDNN_STATUS_NOT_SUPPORTED,
                S::CUDNN_STATUS_NOT_SUPPORTED_SHAPE,
                S::CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,
                S::CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT,
                S::CUDNN_STATUS_BAD_PARAM,
                S::CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND,
                S::CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
            ],
        );
        answers(
            CudnnRnnError::is_refusal,
            false,
            &[
                S::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
                S::CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
                S::CUDNN_STATUS_EXECUTION_FAILED,
                S::CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                S::CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                S::CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH,
                S::CUDNN_STATUS_NOT_INITIALIZED,
            ],
        );
        assert!(!CudnnRnnError::invalid("batch", "at least 1", 0).is_refusal());
        assert!(!driver(true).is_refusal());
    }

    #[test]
    fn out_of_memory_is_told_apart() {
        assert!(driver(true).is_out_of_memory());
        assert!(!driver(false).is_out_of_memory());
        answers(
            CudnnRnnError::is_out_of_memory,
            true,
            &[
                S::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
                S::CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
            ],
        );
        assert!(!status(S::CUDNN_STATUS_NOT_SUPPORTED).is_out_of_memory());
        assert!(!CudnnRnnError::DriverMissing.is_out_of_memory());
    }

    #[test]
    fn what_may_pass_is_memory_and_initialisation() {
        assert!(driver(true).may_pass());
        answers(
            CudnnRnnError::may_pass,
            true,
            &[
                S::CUDNN_STATUS_NOT_INITIALIZED,
                S::CUDNN_STATUS_INTERNAL_ERROR,
                S::CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED,
                S::CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
            ],
        );
        answers(
            CudnnRnnError::may_pass,
            false,
            &[
                S::CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
                S::CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                S::CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED,
                S::CUDNN_STATUS_EXECUTION_FAILED,
            ],
        );
        assert!(!driver(false).may_pass());
        assert!(!CudnnRnnError::DriverMissing.may_pass());
        assert!(!CudnnRnnError::invalid("batch", "at least 1", 0).may_pass());
    }
}
