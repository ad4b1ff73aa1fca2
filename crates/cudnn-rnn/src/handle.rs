//! A cuDNN handle bound to one CUDA stream, freed on drop, with the per-call reuse
//! switches ([`CallReuse`]) and the work-space and reserve-space pools they may turn on.

use std::cell::{RefCell, RefMut};
use std::sync::{Arc, Mutex};

use cudarc::cudnn::sys;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};

use crate::error::{CudnnRnnError, Result};
use crate::library::{check_cudnn, driver_present};
use crate::reserve_pool::{FreeList, Lent, RESERVE_POOL_MAX_IDLE, SharedFreeList, lend, locked};
use crate::reuse::{CallReuse, next_capacity};
use crate::status::check;

/// A cuDNN handle whose work runs on one CUDA stream.
///
/// cuDNN handles are not thread-safe: the handle may move between threads (`Send`) but
/// is not shared (`!Sync`); callers serialise its use (burn-lstm keeps one per device
/// in its `DeviceCudnn`, behind an `Arc<Mutex<_>>` whose guard is held while a forward
/// or backward is queued).
///
/// # Work-space pool
///
/// With [`CallReuse::work_pool`] on, the handle keeps one work-space buffer, grown (never
/// shrunk) to the largest size a call has needed ([`next_capacity`]), and lends it to
/// every [`Rnn`](crate::Rnn) call made with it. Reuse is sound because:
///
/// - cuDNN's work space is scratch for one call only: nothing in it is read by a later
///   call (what a backward needs of its forward is in the reserve space, which is never
///   pooled);
/// - every call that uses it is queued on this handle's one stream, so a later call's
///   kernels start only after an earlier call's kernels have finished with the buffer
///   (stream order), whether or not the host has synchronised in between;
/// - the buffer is lent by a `RefCell` borrow held for the whole call, and the handle is
///   `!Sync`, so two calls cannot hold it at once from one thread or from two;
/// - a buffer replaced by a bigger one is freed with cudarc's `cuMemFreeAsync` on this
///   stream (or after a stream synchronisation without stream-ordered allocation), so the
///   free happens after the kernels already queued on it.
///
/// None of this needs the host to synchronise between calls: a caller that orders the
/// handle's stream against other streams with events instead keeps it sound, as long as
/// it queues every call of this handle on the handle's stream (as this crate does).
///
/// The pool is dropped when the switch is turned off ([`CudnnHandle::set_call_reuse`]),
/// by [`CudnnHandle::release_work_pool`], and with the handle.
///
/// # Reserve-space pool
///
/// With [`CallReuse::reserve_pool`] on, a training forward's reserve space is lent from
/// the handle's idle reserve spaces (the smallest large enough; a new one, rounded up to
/// [`RESERVE_POOL_GRANULE`](crate::RESERVE_POOL_GRANULE), when none is), and its
/// [`ReserveSpace`](crate::ReserveSpace) gives it back when dropped, after its backward;
/// at most [`RESERVE_POOL_MAX_IDLE`] stay idle, the smallest freed first. Reuse is sound
/// because:
///
/// - a reserve space is touched only by cuDNN calls queued on this handle's stream: the
///   forward that writes it and the backward that reads it (a backward on a handle of
///   another stream is refused), and cuDNN writes a reserve space in the forward before
///   reading it in the backward;
/// - it is given back only when its `ReserveSpace` is dropped, after every call that uses
///   it was queued (the backward borrows it), so a forward that takes it next is queued
///   after them on the same stream, and its kernels start after theirs have finished
///   (stream order), whether or not the host has synchronised;
/// - the idle list is behind its own lock (a `ReserveSpace` may be dropped on any
///   thread, without the handle), and idle buffers are freed with cudarc's
///   `cuMemFreeAsync` on this stream, after the work queued on them.
///
/// The idle reserve spaces are freed when the switch is turned off, by
/// [`CudnnHandle::release_reserve_pool`], when an allocation fails (then it is tried once
/// more), and with the handle; a `ReserveSpace` that outlives its handle frees its buffer.
#[derive(Debug)]
pub struct CudnnHandle {
    raw: sys::cudnnHandle_t,
    stream: Arc<CudaStream>,
    reuse: CallReuse,
    /// The pooled work space ([`CallReuse::work_pool`]); `None` until a call needs it.
    work_pool: RefCell<Option<CudaSlice<u8>>>,
    /// The idle reserve spaces ([`CallReuse::reserve_pool`]).
    reserve_pool: SharedFreeList<CudaSlice<u8>>,
}

/// A work space lent to one call: allocated for it, or the handle's pool.
pub(crate) enum WorkSpace<'a> {
    /// Allocated for this call, freed (stream-ordered) when dropped.
    Call(CudaSlice<u8>),
    /// The handle's pool, held for the call.
    Pool(RefMut<'a, CudaSlice<u8>>),
}

impl WorkSpace<'_> {
    /// The buffer.
    pub(crate) fn slice_mut(&mut self) -> &mut CudaSlice<u8> {
        match self {
            Self::Call(slice) => slice,
            Self::Pool(slice) => slice,
        }
    }
}

// SAFETY: a cuDNN handle may be used from any thread as long as it is used by one thread
// at a time, which `&mut`/`!Sync` and the callers' locks guarantee. The other fields are
// `Send` themselves (the stream, the pooled `CudaSlice` inside a `RefCell`, which keeps
// the handle `!Sync`, and the reserve spaces behind an `Arc<Mutex<_>>`).
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
        let handle = Self {
            raw,
            stream,
            reuse: CallReuse::OFF,
            work_pool: RefCell::new(None),
            reserve_pool: Arc::new(Mutex::new(FreeList::new(RESERVE_POOL_MAX_IDLE))),
        };
        // SAFETY: both the handle and the stream are alive.
        check("cudnnSetStream", unsafe {
            sys::cudnnSetStream(handle.raw, handle.stream.cu_stream() as sys::cudaStream_t)
        })?;
        Ok(handle)
    }

    /// The per-call reuse switches (all off unless set).
    pub fn call_reuse(&self) -> CallReuse {
        self.reuse
    }

    /// Sets the per-call reuse switches for every later call made with this handle.
    /// Turning [`CallReuse::work_pool`] off frees the pooled work space, turning
    /// [`CallReuse::reserve_pool`] off the idle reserve spaces (stream-ordered); reserve
    /// spaces lent before still come back to the pool when dropped (freed with the
    /// handle, or by [`Self::release_reserve_pool`]).
    pub fn set_call_reuse(&mut self, reuse: CallReuse) {
        self.reuse = reuse;
        if !reuse.work_pool {
            self.release_work_pool();
        }
        if !reuse.reserve_pool {
            self.release_reserve_pool();
        }
    }

    /// This handle with the per-call reuse switches `reuse` ([`Self::set_call_reuse`]).
    pub fn with_call_reuse(mut self, reuse: CallReuse) -> Self {
        self.set_call_reuse(reuse);
        self
    }

    /// Bytes of the pooled work space (0 when there is none).
    pub fn work_pool_bytes(&self) -> usize {
        self.work_pool
            .try_borrow()
            .map_or(0, |pool| pool.as_ref().map_or(0, |buffer| buffer.len()))
    }

    /// Frees the pooled work space (stream-ordered); the next call that uses the pool
    /// allocates it again.
    pub fn release_work_pool(&mut self) {
        *self.work_pool.get_mut() = None;
    }

    /// Bytes and number of the idle pooled reserve spaces (those lent to an outstanding
    /// forward are not counted).
    pub fn reserve_pool_idle(&self) -> (usize, usize) {
        let list = locked(&self.reserve_pool);
        (list.idle_bytes(), list.idle_count())
    }

    /// Frees the idle pooled reserve spaces (stream-ordered).
    pub fn release_reserve_pool(&self) {
        let idle = locked(&self.reserve_pool).drain();
        drop(idle);
    }

    /// A reserve space of at least `bytes` bytes (at least 1) for one training forward
    /// and its backward on this handle's stream: lent from the pool when
    /// [`CallReuse::reserve_pool`] is on, otherwise allocated for the call.
    /// Uninitialised: cuDNN's forward writes it before its backward reads it.
    pub(crate) fn reserve_space(&self, bytes: usize) -> Result<Lent<CudaSlice<u8>>> {
        if !self.reuse.reserve_pool {
            let buffer = self.scratch(bytes, "cuMemAlloc (reserve space)")?;
            return Ok(Lent::own(buffer));
        }
        lend(&self.reserve_pool, bytes, |capacity| {
            self.scratch(capacity, "cuMemAlloc (reserve-space pool)")
        })
    }

    /// `bytes` (at least 1) of uninitialised device memory on this handle's stream, `call`
    /// naming the allocation in an error. For memory cuDNN writes before it reads it (work
    /// and reserve spaces), or whose address alone is used (the weight-space probe).
    pub(crate) fn scratch(&self, bytes: usize, call: &'static str) -> Result<CudaSlice<u8>> {
        // SAFETY: every caller gives cuDNN memory it writes before reading, or uses only
        // its address; the memory is not read from the host.
        unsafe { self.stream.alloc::<u8>(bytes.max(1)) }.map_err(|e| CudnnRnnError::driver(call, e))
    }

    /// A work space of at least `bytes` bytes (at least 1) for one call on this handle's
    /// stream: the pool, grown first if it is smaller, when [`CallReuse::work_pool`] is
    /// on; otherwise a new allocation. Uninitialised: cuDNN writes its work space before
    /// reading it.
    pub(crate) fn work_space(&self, bytes: usize) -> Result<WorkSpace<'_>> {
        if !self.reuse.work_pool {
            let buffer = self.scratch(bytes, "cuMemAlloc (work space)")?;
            return Ok(WorkSpace::Call(buffer));
        }
        let mut pool = self.work_pool.try_borrow_mut().map_err(|_| {
            CudnnRnnError::invalid(
                "handle",
                "a handle whose work-space pool no other call holds",
                "a pool in use",
            )
        })?;
        let current = pool.as_ref().map_or(0, |buffer| buffer.len());
        if let Some(capacity) = next_capacity(current, bytes) {
            // Free the old buffer first (stream-ordered, after the calls queued on it) so
            // that its memory can serve the new one.
            *pool = None;
            let buffer = match self.scratch(capacity, "cuMemAlloc (work-space pool)") {
                Ok(buffer) => buffer,
                // The growth margin may not fit where the call's own need does.
                Err(_) if capacity > bytes => {
                    self.scratch(bytes, "cuMemAlloc (work-space pool)")?
                }
                Err(e) => return Err(e),
            };
            log::debug!("cuDNN work-space pool: {current} -> {} bytes", buffer.len());
            *pool = Some(buffer);
        }
        RefMut::filter_map(pool, Option::as_mut)
            .map(WorkSpace::Pool)
            .map_err(|_| {
                CudnnRnnError::invalid("work_pool", "a pooled work space", "none allocated")
            })
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
