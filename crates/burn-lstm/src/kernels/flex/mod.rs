//! Flex, Burn 0.21's recommended CPU backend, runs the fused CPU kernel (f32, f64 by the
//! tensors' run-time dtype; the portable kernel for f16/bf16): its
//! [`HostTensors`](crate::kernels::fused_cpu::host::HostTensors) in `host.rs`, the op
//! contract by the fused CPU glue.

mod host;

use burn_flex::Flex;

use crate::kernels::fused_cpu::backend::impl_fused_cpu_backend;

impl_fused_cpu_backend!([impl crate::op::contract::RnnBackend for Flex]);
