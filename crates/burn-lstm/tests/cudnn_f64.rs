//! Golden parity of the cuDNN op in f64 (`CUDNN_DATA_DOUBLE`), in its own test binary
//! because Burn 0.21 fixes a device's float dtype at first use (docs/numerics.md).
//! Needs a GPU: run with `cargo test -p burn-lstm --features cuda --test cudnn_f64 --
//! --ignored`.
#![cfg(feature = "cuda")]

mod common;

use burn::backend::Autodiff;
use burn_lstm::LstmKernel;
use common::golden_check::run_all;

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_f64() {
    run_all::<Autodiff<burn::backend::Cuda<f64, i32>>>(LstmKernel::Cudnn, "f64", 1e-9);
}
