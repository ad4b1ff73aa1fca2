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

    pub(crate) fn driver(call: &'static str, error: cudarc::driver::DriverError) -> Self {
        Self::Driver {
            call,
            message: error.to_string(),
        }
    }
}

/// Result of this crate.
pub type Result<T> = core::result::Result<T, CudnnRnnError>;
