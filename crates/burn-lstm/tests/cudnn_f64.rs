//! Golden parity of the cuDNN op in f64 (`CUDNN_DATA_DOUBLE`), in its own test binary
//! because Burn 0.21 fixes a device's float dtype at first use (docs/numerics.md).
//! Needs a GPU: run with `cargo test -p burn-lstm --features cuda --test cudnn_f64 --
//! --ignored`. It runs on the plain (unfused) CubeCL backend: Burn 0.21's fusion compiler
//! has no f64 ("Unsupported precision for fusion: f64", seen on an H100), so
//! `burn::backend::Cuda<f64>` itself cannot run f64 element-wise work.
#![cfg(feature = "cuda")]

mod common;

use burn::backend::Autodiff;
use burn_lstm::RnnKernel;
use common::golden_check::run_all;

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_f64() {
    type PlainCuda64 = burn_cubecl::CubeBackend<cubecl_cuda::CudaRuntime, f64, i32, u8>;
    run_all::<Autodiff<PlainCuda64>>("cuda-plain", RnnKernel::Cudnn, "f64", 1e-9);
    let errors = burn_lstm::cudnn_runtime_errors();
    assert!(errors.is_empty(), "cuDNN failed at run time: {errors:#?}");
}
