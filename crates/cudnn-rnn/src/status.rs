//! The checked-call layer: every cuDNN status becomes a [`CudnnRnnError::Status`] that
//! names the call.

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};

/// Turns the status of `call` into a result.
pub(crate) fn check(call: &'static str, status: sys::cudnnStatus_t) -> Result<()> {
    if status == sys::cudnnStatus_t::CUDNN_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: a status was returned, so the library is loaded; the string is static.
    let message = unsafe {
        let text = sys::cudnnGetErrorString(status);
        if text.is_null() {
            String::from("(no description)")
        } else {
            std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned()
        }
    };
    Err(CudnnRnnError::Status {
        call,
        status,
        message,
    })
}
