//! RAII owners of the cuDNN descriptors the RNN API needs: created checked, destroyed on
//! drop. Only this file calls `cudnnCreate*Descriptor` / `cudnnDestroy*Descriptor`.

use cudarc::cudnn::sys;

use crate::error::Result;
use crate::status::check;

macro_rules! descriptor {
    ($(#[$doc:meta])* $name:ident, $raw:ty, $create:ident, $destroy:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub(crate) struct $name($raw);

        impl $name {
            pub(crate) fn new() -> Result<Self> {
                let mut raw = core::ptr::null_mut();
                // SAFETY: the library was checked before any descriptor is made; `raw`
                // is a valid out-pointer.
                check(stringify!($create), unsafe { sys::$create(&mut raw) })?;
                Ok(Self(raw))
            }

            pub(crate) fn raw(&self) -> $raw {
                self.0
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: created by the matching create call and destroyed once.
                let status = unsafe { sys::$destroy(self.0) };
                if let Err(e) = check(stringify!($destroy), status) {
                    log::warn!("{e}");
                }
            }
        }

        // SAFETY: a descriptor is plain host memory owned by this value.
        unsafe impl Send for $name {}
        // SAFETY: shared access only reads the descriptor (cuDNN calls take it as input).
        unsafe impl Sync for $name {}
    };
}

descriptor!(
    /// `cudnnRNNDescriptor_t`.
    RnnDescriptor,
    sys::cudnnRNNDescriptor_t,
    cudnnCreateRNNDescriptor,
    cudnnDestroyRNNDescriptor
);
descriptor!(
    /// `cudnnRNNDataDescriptor_t`.
    RnnDataDescriptor,
    sys::cudnnRNNDataDescriptor_t,
    cudnnCreateRNNDataDescriptor,
    cudnnDestroyRNNDataDescriptor
);
descriptor!(
    /// `cudnnTensorDescriptor_t`.
    TensorDescriptor,
    sys::cudnnTensorDescriptor_t,
    cudnnCreateTensorDescriptor,
    cudnnDestroyTensorDescriptor
);
descriptor!(
    /// `cudnnDropoutDescriptor_t`.
    DropoutDescriptor,
    sys::cudnnDropoutDescriptor_t,
    cudnnCreateDropoutDescriptor,
    cudnnDestroyDropoutDescriptor
);

impl TensorDescriptor {
    /// A dense 3-D tensor `[d0, d1, d2]` (the layout of `h` and `c`).
    pub(crate) fn dense_3d(data_type: sys::cudnnDataType_t, dims: [i32; 3]) -> Result<Self> {
        let desc = Self::new()?;
        let strides = [dims[1] * dims[2], dims[2], 1];
        // SAFETY: the arrays hold 3 elements each.
        check("cudnnSetTensorNdDescriptor", unsafe {
            sys::cudnnSetTensorNdDescriptor(
                desc.raw(),
                data_type,
                3,
                dims.as_ptr(),
                strides.as_ptr(),
            )
        })?;
        Ok(desc)
    }

    /// Element count of the tensor this descriptor describes.
    pub(crate) fn element_count(&self) -> Result<usize> {
        let mut data_type = sys::cudnnDataType_t::CUDNN_DATA_FLOAT;
        let mut rank = 0;
        let mut dims = [0i32; 8];
        let mut strides = [0i32; 8];
        // SAFETY: the arrays hold the 8 elements requested.
        check("cudnnGetTensorNdDescriptor", unsafe {
            sys::cudnnGetTensorNdDescriptor(
                self.raw(),
                8,
                &mut data_type,
                &mut rank,
                dims.as_mut_ptr(),
                strides.as_mut_ptr(),
            )
        })?;
        let rank = (rank.max(0) as usize).min(8);
        Ok(dims[..rank].iter().map(|&d| d.max(0) as usize).product())
    }
}
