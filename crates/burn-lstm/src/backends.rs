//! The op contract on Burn's backends. Each `impl` without a body runs the portable
//! kernel (the trait's defaults); faster kernels override per backend.

use burn_ndarray::{
    FloatNdArrayElement, IntNdArrayElement, NdArray, NdArrayTensor, QuantElement, SharedArray,
};

use crate::backend::LstmBackend;

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> LstmBackend for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
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
