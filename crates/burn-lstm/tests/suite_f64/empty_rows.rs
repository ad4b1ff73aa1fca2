//! Rows of length 0 on every CPU kernel (portable and fused CPU, on NdArray and Flex, in
//! f64), against PyTorch: see `common/empty_rows_check.rs`. The reference of the
//! non-empty rows is the golden case itself (PyTorch run on those rows alone); the empty
//! rows are checked exactly. cuDNN's leg (compaction around cuDNN) is tested on these
//! CPU kernels in `src/kernels/empty_rows.rs` and on a GPU in `tests/cudnn.rs`.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::empty_rows_check::{only_empty_rows, run_all};

#[test]
fn empty_rows_portable_ndarray() {
    run_all::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::Portable, 1e-9);
}

#[test]
fn empty_rows_fused_cpu_ndarray() {
    run_all::<Autodiff<NdArray<f64>>>("ndarray", RnnKernel::FusedCpu, 1e-9);
}

#[test]
fn empty_rows_portable_flex() {
    common::flex_f64();
    run_all::<Autodiff<Flex>>("flex", RnnKernel::Portable, 1e-9);
}

#[test]
fn empty_rows_fused_cpu_flex() {
    common::flex_f64();
    run_all::<Autodiff<Flex>>("flex", RnnKernel::FusedCpu, 1e-9);
}

#[test]
fn only_empty_rows_on_every_cpu_kernel() {
    common::flex_f64();
    for kernel in [RnnKernel::Portable, RnnKernel::FusedCpu] {
        only_empty_rows::<Autodiff<NdArray<f64>>>(kernel);
        only_empty_rows::<Autodiff<Flex>>(kernel);
    }
}
