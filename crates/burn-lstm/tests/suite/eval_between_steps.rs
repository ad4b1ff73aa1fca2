//! Evaluation between training steps on the CPU backends, whose inference keeps the
//! packed parameters while they are unchanged (`kernels/fused_cpu/weights_cache.rs`):
//! each evaluation sees the step just taken (`common::eval_between_steps_check`; the
//! fused GPU backends run the same check in `fusion.rs` and `cudnn.rs`).

use burn::backend::{Autodiff, Flex, NdArray};
use burn_lstm::RnnKernel;

use crate::common::eval_between_steps_check::check_evaluation_between_steps;

#[test]
fn evaluation_between_training_steps_sees_each_steps_parameters_on_ndarray() {
    check_evaluation_between_steps::<Autodiff<NdArray<f32>>>(
        &Default::default(),
        4,
        RnnKernel::FusedCpu,
        1e-5,
        burn_lstm::release_cpu_buffers,
    );
}

#[test]
fn evaluation_between_training_steps_sees_each_steps_parameters_on_flex() {
    check_evaluation_between_steps::<Autodiff<Flex>>(
        &Default::default(),
        4,
        RnnKernel::FusedCpu,
        1e-5,
        burn_lstm::release_cpu_buffers,
    );
}
