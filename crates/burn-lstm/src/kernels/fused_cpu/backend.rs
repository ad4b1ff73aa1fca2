//! The op contract on a [`HostTensors`](super::host::HostTensors) backend: every method
//! delegates to this folder's glue. A macro, because Rust cannot write one `impl` for
//! several foreign backend types (and a blanket `impl` over the crate-private trait
//! would put a private bound in the public trait's impls).

/// `impl LstmBackend for $backend` with the fused CPU kernel, given the `impl` header.
macro_rules! impl_fused_cpu_backend {
    ([$($header:tt)*]) => {
        $($header)* {
            fn lstm_kernel(
                device: &Self::Device,
                spec: &$crate::op::spec::LstmSpec,
            ) -> $crate::op::choice::KernelChoice {
                let dtype = burn::tensor::backend::get_device_settings::<Self>(device).float_dtype;
                $crate::kernels::fused_cpu::choice(dtype.into(), spec)
            }

            fn lstm_flat_weights(
                parts: Vec<burn::tensor::ops::FloatTensor<Self>>,
            ) -> burn::tensor::ops::FloatTensor<Self> {
                $crate::kernels::fused_cpu::weights_cache::flat_weights::<Self>(parts)
            }

            fn lstm_flat_buffer_ops() -> Option<$crate::op::flat_weights::FlatBufferOps<Self>> {
                Some($crate::kernels::fused_cpu::host::flat_buffer_ops::<Self>())
            }

            fn lstm_forward(
                input: burn::tensor::ops::FloatTensor<Self>,
                weights: burn::tensor::ops::FloatTensor<Self>,
                h0: burn::tensor::ops::FloatTensor<Self>,
                c0: Option<burn::tensor::ops::FloatTensor<Self>>,
                spec: &$crate::op::spec::LstmSpec,
            ) -> $crate::op::io::LstmOutput<Self> {
                let inputs = $crate::op::io::LstmInputs { input, weights, h0, c0 };
                $crate::kernels::fused_cpu::call::run::<Self>(inputs, spec, false).0
            }

            fn lstm_forward_train(
                input: burn::tensor::ops::FloatTensor<Self>,
                weights: burn::tensor::ops::FloatTensor<Self>,
                h0: burn::tensor::ops::FloatTensor<Self>,
                c0: Option<burn::tensor::ops::FloatTensor<Self>>,
                spec: &$crate::op::spec::LstmSpec,
            ) -> ($crate::op::io::LstmOutput<Self>, $crate::op::io::LstmSaved<Self>) {
                let inputs = $crate::op::io::LstmInputs { input, weights, h0, c0 };
                let (output, saved) = $crate::kernels::fused_cpu::call::run::<Self>(inputs, spec, true);
                (output, saved.expect("a training forward saves its residuals"))
            }

            fn lstm_backward(
                saved: $crate::op::io::LstmSaved<Self>,
                grads: $crate::op::io::LstmOutputGrads<Self>,
            ) -> $crate::op::io::LstmGrads<Self> {
                $crate::kernels::fused_cpu::call::run_backward::<Self>(saved, grads)
            }
        }
    };
}

pub(crate) use impl_fused_cpu_backend;
