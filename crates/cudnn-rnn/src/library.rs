//! Is cuDNN (and the CUDA driver) there, and new enough? Checked once per process,
//! before any symbol is looked up: cudarc's loader panics on a missing library or symbol,
//! so nothing else in this crate touches cuDNN until [`check_cudnn`] has succeeded.

use std::sync::OnceLock;

use cudarc::cudnn::sys;

use crate::error::{CudnnRnnError, Result};
use crate::status::check;
pub use crate::version::{CudnnVersion, REQUIRED_CUDNN_MAJOR};

/// Whether the CUDA driver library can be loaded.
pub fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    // SAFETY: only tries to open the library.
    *PRESENT.get_or_init(|| unsafe { cudarc::driver::sys::is_culib_present() })
}

/// Loads libcudnn, checks that it is cuDNN >= 9 and that its sub-libraries agree
/// (`cudnnAdvVersionCheck`). The result is computed once per process.
pub fn check_cudnn() -> Result<CudnnVersion> {
    static CHECKED: OnceLock<Result<CudnnVersion>> = OnceLock::new();
    CHECKED.get_or_init(load_and_check).clone()
}

fn load_and_check() -> Result<CudnnVersion> {
    // SAFETY: only tries to open the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudnnRnnError::CudnnMissing {
            candidates: cudarc::get_lib_name_candidates("cudnn").join(", "),
        });
    }
    // SAFETY: the library is loaded; cudnnGetVersion exists in every cuDNN.
    let version = CudnnVersion::from_raw(unsafe { sys::cudnnGetVersion() });
    if version.major < REQUIRED_CUDNN_MAJOR {
        return Err(CudnnRnnError::CudnnTooOld {
            found: version,
            required: REQUIRED_CUDNN_MAJOR,
        });
    }
    // SAFETY: cuDNN 9 exports it; it checks that libcudnn_adv matches libcudnn.
    let status = unsafe { sys::cudnnAdvVersionCheck() };
    if status == sys::cudnnStatus_t::CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH {
        // Seen on a machine with a system libcudnn.so beside a pip cuDNN on
        // LD_LIBRARY_PATH: cudarc tries `libcudnn.so` before `libcudnn.so.9`.
        return Err(CudnnRnnError::SublibraryMismatch {
            main: version,
            candidates: cudarc::get_lib_name_candidates("cudnn").join(", "),
        });
    }
    check("cudnnAdvVersionCheck", status)?;
    Ok(version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_both_version_schemes() {
        assert_eq!(
            CudnnVersion::from_raw(91_002),
            CudnnVersion {
                major: 9,
                minor: 10,
                patch: 2
            }
        );
        assert_eq!(
            CudnnVersion::from_raw(8_906),
            CudnnVersion {
                major: 8,
                minor: 9,
                patch: 6
            }
        );
        assert_eq!(CudnnVersion::from_raw(90_100).to_string(), "9.1.0");
    }
}
