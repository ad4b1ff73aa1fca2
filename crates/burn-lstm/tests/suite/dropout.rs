//! Inter-layer dropout on the CPU kernels: the masks seen through the numbers they produce
//! (rate, inverted scaling, per-element draws, the backward using the forward's masks;
//! `common/dropout_check.rs`). The cuDNN op runs the same check in `tests/cudnn.rs`.
//! f32 only: Burn 0.21 gives `NdArray<f32>` and `NdArray<f64>` one device dtype per
//! process (docs/numerics.md), and the f64 kernels share this code path.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;
use common::dropout_check::check_dropout_masks;

type AD = Autodiff<NdArray<f32>>;
type FlexAD = Autodiff<Flex>;

#[test]
fn fused_cpu_kernel_drops_with_rate_p_and_backpropagates_through_the_same_masks() {
    check_dropout_masks::<AD>(RnnKernel::FusedCpu, &Default::default(), 1e-5);
}

#[test]
fn portable_kernel_drops_with_rate_p_and_backpropagates_through_the_same_masks() {
    check_dropout_masks::<AD>(RnnKernel::Portable, &Default::default(), 1e-5);
}

#[test]
fn fused_cpu_kernel_on_flex_drops_with_rate_p_and_backpropagates_through_the_same_masks() {
    check_dropout_masks::<FlexAD>(RnnKernel::FusedCpu, &Default::default(), 1e-5);
}

#[test]
fn portable_kernel_on_flex_drops_with_rate_p_and_backpropagates_through_the_same_masks() {
    check_dropout_masks::<FlexAD>(RnnKernel::Portable, &Default::default(), 1e-5);
}
