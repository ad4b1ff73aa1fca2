//! The public methods that [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm) and
//! [`CudnnCompatibleGru`](crate::CudnnCompatibleGru) share word for word, written once.
//!
//! A module type that uses [`rnn_module_methods!`] has the fields `layers`, `dropout`
//! and `kernel` and an inherent `arch()`; each method delegates to a shared helper, so
//! both layers get every feature added here.

/// Implements `directions`, `with_kernel`, `validate`, `flat_weights`, `kernel` and
/// `kernel_with_lengths` (and the private `spec`) on the module type `$module`.
macro_rules! rnn_module_methods {
    ($module:ident) => {
        impl<B: burn::tensor::backend::Backend> $module<B> {
            /// Every (layer, direction), in the canonical order `layer * dirs + direction`.
            pub fn directions(
                &self,
            ) -> impl Iterator<Item = &$crate::module::weights::RnnDirectionWeights<B>> {
                $crate::module::weights::directions(&self.layers)
            }

            /// Asks for a kernel (`None`: the fastest one the backend can run). A kernel
            /// the backend cannot run falls back; [`Self::kernel`] reports which runs and
            /// why.
            pub fn with_kernel(mut self, kernel: Option<$crate::op::choice::RnnKernel>) -> Self {
                self.kernel = kernel;
                self
            }

            /// Checks the module's fields as its config's `validate` does (a module's
            /// fields are public), then that every parameter is present with the shape
            /// the architecture needs.
            pub fn validate(&self) -> Result<(), $crate::error::RnnError> {
                let arch = self.arch();
                $crate::module::validate::validate_arch(&arch, self.dropout)?;
                $crate::module::shapes::validate_layers(&arch, &self.layers)
            }
        }

        impl<B: $crate::op::contract::RnnBackend> $module<B> {
            /// All parameters in one flat tensor, in the op's canonical layout (see
            /// [`RnnArch::direction_layout`](crate::RnnArch::direction_layout)), built by
            /// [`RnnBackend::rnn_flat_weights`](crate::RnnBackend::rnn_flat_weights).
            /// Differentiable: gradients reach every `Param`.
            pub fn flat_weights(&self) -> burn::tensor::Tensor<B, 1> {
                $crate::module::weights::flat_parameters(&self.layers)
            }

            /// Which kernel runs a call of `batch` rows of `seq_len` steps on `device`,
            /// and why not a faster one.
            pub fn kernel(
                &self,
                device: &B::Device,
                batch: usize,
                seq_len: usize,
            ) -> $crate::op::choice::KernelChoice {
                B::rnn_kernel(device, &self.spec(batch, seq_len, None, device))
            }

            /// [`Self::kernel`] for a right-padded call with `lengths` (one per row):
            /// rows of length 0 can change the choice (cuDNN refuses them; see
            /// `forward_with_lengths`).
            pub fn kernel_with_lengths(
                &self,
                device: &B::Device,
                batch: usize,
                seq_len: usize,
                lengths: Option<&[usize]>,
            ) -> $crate::op::choice::KernelChoice {
                B::rnn_kernel(device, &self.spec(batch, seq_len, lengths, device))
            }

            fn spec(
                &self,
                batch: usize,
                seq_len: usize,
                lengths: Option<&[usize]>,
                device: &B::Device,
            ) -> $crate::op::spec::RnnSpec {
                $crate::op::spec::RnnSpec::of_module::<B>(
                    self.arch(),
                    self.dropout,
                    self.kernel,
                    batch,
                    seq_len,
                    lengths,
                    device,
                )
            }
        }
    };
}

pub(crate) use rnn_module_methods;
