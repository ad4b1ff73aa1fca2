//! The op contract on Burn's backends. Each `impl` without a body runs the portable
//! kernel (the trait's defaults); faster kernels override per backend.

use burn_ndarray::{
    FloatNdArrayElement, IntNdArrayElement, NdArray, NdArrayTensor, QuantElement, SharedArray,
};

use burn::tensor::{DType, TensorMetadata, backend::Backend, ops::FloatTensor};

use crate::backend::{LstmBackend, LstmGrads, LstmOutput, LstmOutputGrads, LstmSaved};
use crate::fused_cpu;
use crate::kernel::{KernelChoice, LstmKernel};
use crate::portable;
use crate::spec::LstmSpec;

/// NdArray runs the fused CPU kernel (f32, f64), else the portable kernel.
impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> LstmBackend for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
    fn lstm_kernel(_device: &Self::Device, spec: &LstmSpec) -> KernelChoice {
        fused_cpu::choice(E::dtype(), spec)
    }

    fn lstm_forward(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        spec: &LstmSpec,
    ) -> LstmOutput<Self> {
        run::<Self>([input, weights, h0, c0], spec, false).0
    }

    fn lstm_forward_train(
        input: FloatTensor<Self>,
        weights: FloatTensor<Self>,
        h0: FloatTensor<Self>,
        c0: FloatTensor<Self>,
        spec: &LstmSpec,
    ) -> (LstmOutput<Self>, LstmSaved<Self>) {
        let (output, saved) = run::<Self>([input, weights, h0, c0], spec, true);
        (
            output,
            saved.expect("a training forward saves its residuals"),
        )
    }

    fn lstm_backward(saved: LstmSaved<Self>, grads: LstmOutputGrads<Self>) -> LstmGrads<Self> {
        match (saved.kernel, saved.inputs[0].dtype()) {
            (LstmKernel::FusedCpu, DType::F64) => fused_cpu::backward::<Self, f64>(saved, grads),
            (LstmKernel::FusedCpu, _) => fused_cpu::backward::<Self, f32>(saved, grads),
            _ => portable::backward::<Self>(saved, grads),
        }
    }
}

/// Dispatches a forward to the kernel [`fused_cpu::choice`] picks for the input's dtype
/// (which is not always the backend's element type: Burn's device settings decide).
fn run<B: Backend>(
    inputs: [FloatTensor<B>; 4],
    spec: &LstmSpec,
    save: bool,
) -> (LstmOutput<B>, Option<LstmSaved<B>>) {
    let dtype = inputs[0].dtype();
    match (fused_cpu::choice(dtype, spec).kernel, dtype) {
        (LstmKernel::FusedCpu, DType::F64) => fused_cpu::forward::<B, f64>(inputs, spec, save),
        (LstmKernel::FusedCpu, _) => fused_cpu::forward::<B, f32>(inputs, spec, save),
        _ => portable::forward::<B>(inputs, spec, save),
    }
}

#[cfg(feature = "cubecl")]
mod cube {
    use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime, FloatElement, IntElement};
    use burn_fusion::{Fusion, FusionBackend};

    use crate::backend::LstmBackend;

    /// Wgpu, Cuda and Rocm without fusion.
    impl<R: CubeRuntime, F: FloatElement, I: IntElement, BT: BoolElement> LstmBackend
        for CubeBackend<R, F, I, BT>
    {
    }

    /// The fused backends that `burn::backend::Cuda` and `Wgpu` are by default.
    impl<B: FusionBackend> LstmBackend for Fusion<B> {}
}
