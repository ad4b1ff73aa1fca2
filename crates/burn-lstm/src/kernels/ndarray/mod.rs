//! NdArray runs the fused CPU kernel (f32, f64; the portable kernel for other float
//! types): its [`HostTensors`](crate::kernels::fused_cpu::host::HostTensors) in
//! `host.rs`, the op contract by the fused CPU glue.

mod host;

use burn_ndarray::{
    FloatNdArrayElement, IntNdArrayElement, NdArray, NdArrayTensor, QuantElement, SharedArray,
};

use crate::kernels::fused_cpu::backend::impl_fused_cpu_backend;

impl_fused_cpu_backend!([
    impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement>
        crate::op::contract::RnnBackend for NdArray<E, I, Q>
    where
        NdArrayTensor: From<SharedArray<E>>,
        NdArrayTensor: From<SharedArray<I>>,
]);
