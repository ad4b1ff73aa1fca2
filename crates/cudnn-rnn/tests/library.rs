//! What happens on a machine without a GPU, without libcuda or without libcudnn: typed
//! errors, never a panic. With `LD_LIBRARY_PATH` pointing at a cuDNN 9 (for instance
//! `pip install nvidia-cudnn-cu13`), the version check itself runs.

use cudnn_rnn::{CudnnHandle, CudnnRnnError, REQUIRED_CUDNN_MAJOR, check_cudnn, driver_present};

#[test]
fn cudnn_check_reports_the_library_state() {
    match check_cudnn() {
        Ok(version) => {
            assert!(version.major >= REQUIRED_CUDNN_MAJOR, "{version}");
            println!("cuDNN {version} loaded");
        }
        Err(CudnnRnnError::CudnnMissing { candidates }) => {
            assert!(candidates.contains("libcudnn.so"), "{candidates}");
            let message = check_cudnn().unwrap_err().to_string();
            assert!(message.contains("LD_LIBRARY_PATH"), "{message}");
            println!("{message}");
        }
        Err(CudnnRnnError::CudnnTooOld { found, required }) => {
            assert!(found.major < required);
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[test]
fn a_handle_without_a_gpu_is_an_error_not_a_panic() {
    let result = CudnnHandle::for_device(0);
    if !driver_present() {
        assert_eq!(result.unwrap_err(), CudnnRnnError::DriverMissing);
    } else if let Err(e) = &result {
        // A driver without a usable GPU, or no cuDNN: a named error.
        let text = e.to_string();
        assert!(
            text.contains("failed") || text.contains("libcudnn") || text.contains("cuDNN"),
            "{text}"
        );
    }
}

/// A device that no machine has: the first thing missing on this machine, named (no
/// driver, no usable cuDNN, or the driver's refusal of the ordinal).
#[test]
fn a_missing_device_is_an_error() {
    let err = CudnnHandle::for_device(10_000).unwrap_err();
    match (driver_present(), check_cudnn()) {
        (false, _) => assert_eq!(err, CudnnRnnError::DriverMissing),
        (true, Err(library)) => assert_eq!(err, library),
        (true, Ok(_)) => assert!(matches!(err, CudnnRnnError::Driver { .. }), "{err}"),
    }
}
