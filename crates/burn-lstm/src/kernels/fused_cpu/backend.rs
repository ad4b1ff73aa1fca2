//! The op contract on a [`HostTensors`](super::host::HostTensors) backend: every method
//! delegates to this folder's glue. A macro, because Rust cannot write one `impl` for
//! several foreign backend types (and a blanket `impl` over the crate-private trait
//! would put a private bound in the public trait's impls).

/// `impl RnnBackend for $backend` with the fused CPU kernel, given the `impl` header.
macro_rules! impl_fused_cpu_backend {
    ([$($header:tt)*]) => {
        $($header)* {
            fn rnn_kernel(
                device: &Self::Device,
                spec: &$crate::op::spec::RnnSpec,
            ) -> $crate::op::choice::KernelChoice {
                let dtype = burn::tensor::backend::get_device_settings::<Self>(device).float_dtype;
                $crate::kernels::fused_cpu::choice(dtype.into(), spec)
            }

            fn rnn_flat_weights(
                parts: Vec<burn::tensor::ops::FloatTensor<Self>>,
            ) -> burn::tensor::ops::FloatTensor<Self> {
                $crate::kernels::fused_cpu::weights_cache::flat_weights::<Self>(parts)
            }

            fn rnn_flat_weights_quantized(
                parts: Vec<burn::tensor::TensorPrimitive<Self>>,
            ) -> burn::tensor::ops::FloatTensor<Self> {
                $crate::kernels::fused_cpu::weights_cache::flat_weights_quantized::<Self>(parts)
            }

            fn rnn_flat_buffer_ops() -> Option<$crate::op::flat_weights::FlatBufferOps<Self>> {
                Some($crate::kernels::fused_cpu::host::flat_buffer_ops::<Self>())
            }

            fn rnn_forward(
                input: burn::tensor::ops::FloatTensor<Self>,
                weights: burn::tensor::ops::FloatTensor<Self>,
                h0: burn::tensor::ops::FloatTensor<Self>,
                c0: Option<burn::tensor::ops::FloatTensor<Self>>,
                spec: &$crate::op::spec::RnnSpec,
            ) -> $crate::op::io::RnnOutput<Self> {
                let inputs = $crate::op::io::RnnInputs { input, weights, h0, c0 };
                $crate::kernels::fused_cpu::call::run::<Self>(inputs, spec, false).0
            }

            fn rnn_forward_train(
                input: burn::tensor::ops::FloatTensor<Self>,
                weights: burn::tensor::ops::FloatTensor<Self>,
                h0: burn::tensor::ops::FloatTensor<Self>,
                c0: Option<burn::tensor::ops::FloatTensor<Self>>,
                spec: &$crate::op::spec::RnnSpec,
            ) -> ($crate::op::io::RnnOutput<Self>, $crate::op::io::RnnSaved<Self>) {
                let inputs = $crate::op::io::RnnInputs { input, weights, h0, c0 };
                let (output, saved) = $crate::kernels::fused_cpu::call::run::<Self>(inputs, spec, true);
                (output, saved.expect("a training forward saves its residuals"))
            }

            fn rnn_backward(
                saved: $crate::op::io::RnnSaved<Self>,
                grads: $crate::op::io::RnnOutputGrads<Self>,
            ) -> $crate::op::io::RnnGrads<Self> {
                $crate::kernels::fused_cpu::call::run_backward::<Self>(saved, grads)
            }
        }
    };
}

pub(crate) use impl_fused_cpu_backend;
