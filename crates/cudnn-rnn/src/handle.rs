//! A cuDNN handle bound to one CUDA stream, freed on drop.

use std::sync::Arc;

use cudarc::cudnn::sys;
use cudarc::driver::{CudaContext, CudaStream};

use crate::error::{CudnnRnnError, Result};
use crate::library::{check_cudnn, driver_present};
use crate::status::check;

/// A cuDNN handle whose work runs on one CUDA stream.
///
/// cuDNN handles are not thread-safe: the handle may move between threads (`Send`) but
/// is not shared (`!Sync`); callers serialise its use (burn-lstm keeps one per device
/// behind a mutex).
#[derive(Debug)]
pub struct CudnnHandle {
    raw: sys::cudnnHandle_t,
    stream: Arc<CudaStream>,
}

// SAFETY: a cuDNN handle may be used from any thread as long as it is used by one thread
// at a time, which `&mut`/`!Sync` and the callers' locks guarantee.
unsafe impl Send for CudnnHandle {}

impl CudnnHandle {
    /// A handle on a new stream of device `ordinal`'s primary context (the context CubeCL
    /// and the CUDA runtime use, so their device pointers are valid here).
    ///
    /// Errors, never panics, when libcuda or libcudnn is missing, cuDNN is older than 9,
    /// or there is no such device.
    pub fn for_device(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(CudnnRnnError::DriverMissing);
        }
        check_cudnn()?;
        let context =
            CudaContext::new(ordinal).map_err(|e| CudnnRnnError::driver("cuCtxRetain", e))?;
        // Everything this crate allocates and runs is on one stream, so cudarc's
        // cross-stream event tracking is pure overhead.
        // SAFETY: no allocation of this context is used on another stream.
        unsafe { context.disable_event_tracking() };
        let stream = context
            .new_stream()
            .map_err(|e| CudnnRnnError::driver("cuStreamCreate", e))?;
        Self::new(stream)
    }

    /// A handle that runs its work on `stream`.
    pub fn new(stream: Arc<CudaStream>) -> Result<Self> {
        check_cudnn()?;
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| CudnnRnnError::driver("cuCtxSetCurrent", e))?;
        let mut raw = core::ptr::null_mut();
        // SAFETY: the library is loaded and checked; `raw` is a valid out-pointer.
        check("cudnnCreate", unsafe { sys::cudnnCreate(&mut raw) })?;
        let handle = Self { raw, stream };
        // SAFETY: both the handle and the stream are alive.
        check("cudnnSetStream", unsafe {
            sys::cudnnSetStream(handle.raw, handle.stream.cu_stream() as sys::cudaStream_t)
        })?;
        Ok(handle)
    }

    /// The stream every call of this handle runs on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Makes this handle's context current on the calling thread (cuDNN needs it).
    pub fn bind_to_thread(&self) -> Result<()> {
        self.stream
            .context()
            .bind_to_thread()
            .map_err(|e| CudnnRnnError::driver("cuCtxSetCurrent", e))
    }

    /// Blocks until all work queued on the handle's stream has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| CudnnRnnError::driver("cuStreamSynchronize", e))
    }

    /// Queues zeroing `buffer` on the handle's stream.
    ///
    /// # Safety
    /// `buffer` must be a live device allocation of this handle's context.
    pub unsafe fn zero(&self, buffer: crate::DeviceBuffer) -> Result<()> {
        // SAFETY: guaranteed by the caller.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                buffer.ptr,
                0,
                buffer.bytes,
                self.stream.cu_stream(),
            )
        }
        .map_err(|e| CudnnRnnError::driver("cuMemsetD8Async", e))
    }

    /// Free and total memory of the handle's device, in bytes (`cuMemGetInfo`): what a
    /// caller watches to see that repeated calls do not leak device memory.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.bind_to_thread()?;
        cudarc::driver::result::mem_get_info().map_err(|e| CudnnRnnError::driver("cuMemGetInfo", e))
    }

    pub(crate) fn raw(&self) -> sys::cudnnHandle_t {
        self.raw
    }
}

impl Drop for CudnnHandle {
    fn drop(&mut self) {
        // SAFETY: created by cudnnCreate and destroyed once.
        let status = unsafe { sys::cudnnDestroy(self.raw) };
        if let Err(e) = check("cudnnDestroy", status) {
            log::warn!("{e}");
        }
    }
}
