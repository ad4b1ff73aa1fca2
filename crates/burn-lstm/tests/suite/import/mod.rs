//! Keras and ONNX import (`src/import/`, docs/keras-onnx.md): golden outputs of Keras
//! itself and of ONNX Runtime (fixtures made by the scripts under
//! `tests/fixtures/keras/` and `tests/fixtures/onnx/`), the settings refused, and
//! damaged files.
//!
//! The float32 checks run on Flex and `NdArray<f32>` in this process; the float64 checks
//! run the test binary again in a child process that runs only them
//! (`lstm_cpu::reran_in_child`), whose devices are set to float64 before any tensor
//! is made (Burn 0.21 keeps one float type per device type for the whole process).
//!
//! Bounds (largest absolute difference; every output and state is in (-1, 1)):
//! - float32, against Keras's and ONNX Runtime's float32 outputs: [`F32_TOL`];
//! - float64, against Keras's float64 outputs from the same weights, and against
//!   PyTorch's float64 module for the ONNX files: [`F64_TOL`].

pub(crate) mod io;
mod keras;
mod onnx;

/// Bound of the float32 comparisons: a few float32 roundings of values below 1 over a
/// handful of steps, with Keras's and ONNX Runtime's own summation orders (measured
/// errors are printed by each test, around 1e-7).
pub const F32_TOL: f64 = 2e-6;
/// Bound of the float64 comparisons (measured errors around 1e-16).
pub const F64_TOL: f64 = 1e-13;
