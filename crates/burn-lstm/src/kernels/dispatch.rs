//! Burn's `Dispatch` backend (feature `dispatch`): one backend type whose device
//! (`DispatchDevice::Flex`, `::NdArray`, `::Cuda`, ...) is chosen at run time, with
//! autodiff built in (`DispatchDevice::autodiff(device)`).
//!
//! Burn 0.21 keeps `DispatchTensor`'s inner tensor crate-private, and Dispatch's
//! autodiff records Burn ops in a graph of its own that no custom backward can join. So:
//!
//! - **Inference on a CPU device** (`Flex`, `NdArray`, no autodiff) runs the fused CPU
//!   kernel: the tensors cross over by `into_data` / `from_data` (which move a buffer
//!   nobody else holds without a copy) and run through Flex's glue. The parameters are
//!   copied and packed every call (the weight cache cannot see Dispatch's storage); use
//!   `Flex` or `NdArray` directly to skip that.
//! - **Training** (an autodiff device) and every other device run the portable kernel,
//!   whose Burn ops Dispatch's autodiff differentiates. For the fused kernels, train on
//!   `Autodiff<Flex>`, `Autodiff<NdArray>` or `Autodiff<Cuda>` (cuDNN).

use burn::tensor::backend::{Backend, DeviceOps};
use burn::tensor::ops::{FloatTensor, FloatTensorOps};
use burn::{Dispatch, DispatchDevice};
use burn_flex::{Flex, FlexTensor};

use crate::kernels::fused_cpu;
use crate::kernels::portable;
use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::contract::RnnBackend;
use crate::op::io::{RnnInputs, RnnOutput, RnnSaved};
use crate::op::spec::RnnSpec;
use crate::op::tensor::tensor;

impl RnnBackend for Dispatch {
    fn rnn_kernel(device: &DispatchDevice, spec: &RnnSpec) -> KernelChoice {
        choice(device, spec)
    }

    fn rnn_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> RnnOutput<Self> {
        let device = Dispatch::float_device(&input);
        let inputs = RnnInputs {
            input,
            weights,
            h0,
            c0,
        };
        let tracked = inputs.tensors().any(Dispatch::float_is_require_grad);
        if choice(&device, spec).kernel != RnnKernel::FusedCpu || tracked {
            return portable::forward::<Self>(inputs, spec, false).0;
        }
        let on_flex = inputs.map(|t| FlexTensor::from_data(tensor::<Self, 1>(t).into_data()));
        let (output, _) = fused_cpu::call::run::<Flex>(on_flex, spec, false);
        let back = |t: FlexTensor| Dispatch::float_from_data(t.into_data(), &device);
        RnnOutput {
            y: back(output.y),
            h_n: back(output.h_n),
            c_n: output.c_n.map(back),
        }
    }

    fn rnn_forward_train(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: Option<FloatTensor<Self>>,
        spec: &RnnSpec,
    ) -> (RnnOutput<Self>, RnnSaved<Self>) {
        // Only `Autodiff<Dispatch>` calls this (Dispatch's own autodiff calls
        // `rnn_forward`): the portable kernel, whose backward reads its residuals.
        let inputs = RnnInputs {
            input,
            weights,
            h0,
            c0,
        };
        let (output, saved) = portable::forward::<Self>(inputs, spec, true);
        let saved = saved.expect("a training forward saves its residuals");
        (output, saved)
    }
}

/// The kernel a call runs on `device`, and why not a faster one.
fn choice(device: &DispatchDevice, spec: &RnnSpec) -> KernelChoice {
    if spec.kernel == Some(RnnKernel::Portable) {
        return KernelChoice::fastest(RnnKernel::Portable);
    }
    let cpu = matches!(
        device.inner(),
        DispatchDevice::Flex(_) | DispatchDevice::NdArray(_)
    );
    let autodiff = Dispatch::ad_enabled(device);
    let dtype = burn::tensor::backend::get_device_settings::<Dispatch>(device).float_dtype;
    match (cpu, autodiff) {
        (true, false) => fused_cpu::choice(dtype.into(), spec),
        (true, true) => KernelChoice::fallback(
            RnnKernel::Portable,
            "Dispatch's autodiff records Burn ops and no custom backward can join its \
             graph; train on Autodiff<Flex> or Autodiff<NdArray> for the fused CPU kernel",
        ),
        (false, _) => KernelChoice::fallback(
            RnnKernel::Portable,
            "Burn 0.21 keeps Dispatch's device tensors crate-private; use the concrete \
             backend (Cuda for cuDNN) for a fused kernel",
        ),
    }
}
