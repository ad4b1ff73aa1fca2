//! A configured cuDNN LSTM or GRU: forward for inference and for training (reserve
//! space), then `cudnnRNNBackwardData_v8` and `cudnnRNNBackwardWeights_v8`. A GRU has no
//! cell state: its `cx`, `cy`, `dcy` and `dcx` buffers are not checked and cuDNN gets
//! null pointers for them (as PyTorch passes them).
//!
//! Tensors are given as raw device addresses ([`DeviceBuffer`]) because they belong to
//! someone else's allocator (CubeCL's in burn-lstm); every size is checked against the
//! shape before cuDNN sees it. Work space, reserve space and the device copy of the
//! lengths are allocated here on the handle's stream (or lent by its pools).
//!
//! The handle's [`CallReuse`](crate::CallReuse) switches (all off by default) let a call
//! take its work space from the handle's pool, a training forward its reserve space from
//! the handle's reserve pool, its descriptors and temp-space sizes from this `Rnn`'s
//! cache ([`Rnn::cached_calls`]), and give cuDNN a null `devSeqLengths` for full-length
//! rows.

use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::cudnn::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, result as driver};

use crate::config::{DataType, RnnCell, RnnConfig};
use crate::descriptor::{RnnDataDescriptor, RnnDescriptor, TensorDescriptor};
use crate::dropout::DropoutState;
use crate::error::{CudnnRnnError, Result};
use crate::handle::CudnnHandle;
use crate::reserve_pool::Lent;
use crate::reuse::{CALL_CACHE_CAPACITY, CallCache, CallKey, needs_dev_lengths};
use crate::shape::SeqShape;
use crate::status::check;
use crate::weights::WeightSpaceLayout;

/// `CUDNN_RNN_PADDED_IO_ENABLED` (a `#define` in cudnn_adv.h): needed for the unpacked
/// (padded) data layouts. Every call's tensors are `[T, B, ..]` (or `[B, T, ..]`),
/// right-padded where rows are shorter, so every call uses an unpacked layout: what PyTorch configures for an
/// input that is not a `PackedSequence` (its `RNNDescriptor::set`, ATen's
/// `cudnn/Descriptors.h`: `packed ? CUDNN_RNN_PADDED_IO_DISABLED :
/// CUDNN_RNN_PADDED_IO_ENABLED`). The packed layout without padded I/O is PyTorch's for
/// a `PackedSequence`, whose memory is packed already; here it would need a copy.
const PADDED_IO_ENABLED: u32 = 1;

/// No buffer: cuDNN gets a null pointer (a GRU's cell state).
const NULL_BUFFER: DeviceBuffer = DeviceBuffer { ptr: 0, bytes: 0 };

/// A device allocation (or part of one) holding `bytes` bytes at address `ptr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceBuffer {
    /// Device address (`CUdeviceptr`).
    pub ptr: u64,
    /// Usable bytes from `ptr`.
    pub bytes: usize,
}

/// The tensors of a forward call. Layouts: `x` `[T, B, input]` and `y`
/// `[T, B, dirs * H_out]` sequence-major and right-padded (`[B, T, ..]` for a shape
/// whose [`SeqShape::layout`] is batch-major); `hx`/`hy`
/// `[layers * dirs, B, H_out]`; `cx`/`cy` `[layers * dirs, B, H]` (LSTM; ignored for a
/// GRU); `weights` a weight
/// space of [`Rnn::weight_space_bytes`] bytes.
#[derive(Clone, Copy, Debug)]
pub struct ForwardBuffers {
    /// Input sequence.
    pub x: DeviceBuffer,
    /// Output sequence (written; zero past each row's length).
    pub y: DeviceBuffer,
    /// Initial hidden state.
    pub hx: DeviceBuffer,
    /// Initial cell state.
    pub cx: DeviceBuffer,
    /// Final hidden state (written).
    pub hy: DeviceBuffer,
    /// Final cell state (written).
    pub cy: DeviceBuffer,
    /// Weight space.
    pub weights: DeviceBuffer,
}

/// The tensors of a backward call (layouts as in [`ForwardBuffers`]); `d*` are gradients.
#[derive(Clone, Copy, Debug)]
pub struct BackwardBuffers {
    /// The forward's input.
    pub x: DeviceBuffer,
    /// The forward's output.
    pub y: DeviceBuffer,
    /// The forward's initial hidden state.
    pub hx: DeviceBuffer,
    /// The forward's initial cell state.
    pub cx: DeviceBuffer,
    /// The forward's weight space.
    pub weights: DeviceBuffer,
    /// Gradient of `y`.
    pub dy: DeviceBuffer,
    /// Gradient of the final hidden state.
    pub dhy: DeviceBuffer,
    /// Gradient of the final cell state.
    pub dcy: DeviceBuffer,
    /// Gradient of `x` (written; zero past each row's length).
    pub dx: DeviceBuffer,
    /// Gradient of `hx` (written).
    pub dhx: DeviceBuffer,
    /// Gradient of `cx` (written).
    pub dcx: DeviceBuffer,
    /// Gradient of the weight space (overwritten: zeroed, then accumulated by cuDNN).
    pub dweights: DeviceBuffer,
}

/// What a training forward leaves for its backward: cuDNN's reserve space, the device
/// copy of the lengths (none when the forward gave cuDNN a null `devSeqLengths`,
/// [`CallReuse::null_dev_lengths`](crate::CallReuse::null_dev_lengths); a backward that
/// needs them uploads them then), and the shape.
///
/// The reserve space lives from the forward to its backward, and several forwards may be
/// outstanding at once. It is allocated for its forward and freed (stream-ordered) with
/// this value, or, with [`CallReuse::reserve_pool`](crate::CallReuse::reserve_pool) on,
/// lent from its handle's pool and given back to it with this value (see
/// [`CudnnHandle`]'s documentation). Its backward must run on the handle of its forward.
#[derive(Debug)]
pub struct ReserveSpace {
    reserve: Lent<CudaSlice<u8>>,
    dev_lengths: Option<CudaSlice<i32>>,
    shape: SeqShape,
}

impl ReserveSpace {
    /// The shape of the forward call.
    pub fn shape(&self) -> &SeqShape {
        &self.shape
    }

    /// Bytes of the reserve space (a pooled one may be larger than its forward needed).
    pub fn bytes(&self) -> usize {
        self.reserve.get().len()
    }
}

/// A cuDNN LSTM descriptor for one architecture, with its weight-space layout.
///
/// With [`CallReuse::descriptor_cache`](crate::CallReuse::descriptor_cache) on, it also
/// keeps, per [`CallKey`] (sequence length, batch, every row's length, training or
/// inference), the call's data and state descriptors and its
/// `cudnnGetRNNTempSpaceSizes` result, at most [`CALL_CACHE_CAPACITY`] of them, least
/// recently used out. The cached sizes are those of the device of the handle the entry was
/// made with: use an `Rnn` with handles of one device (as with the handle it was made
/// with, whose device its weight layout was read on).
#[derive(Debug)]
pub struct Rnn {
    desc: RnnDescriptor,
    config: RnnConfig,
    layout: WeightSpaceLayout,
    calls: Mutex<CallCache<CallKey, Arc<CallPlan>>>,
}

impl Rnn {
    /// Configures an LSTM (`cudnnSetRNNDescriptor_v8`: the config's algorithm, linear
    /// input, padded I/O) and reads its weight-space layout. The descriptor points at
    /// `dropout`, which must outlive every [`Rnn::forward`] / [`Rnn::backward`] of this
    /// `Rnn` until [`Rnn::set_dropout`] points it elsewhere (their safety contract). A
    /// data type the loaded cuDNN does not run in an RNN (bf16 before 9.13,
    /// [`DataType::minimum_cudnn`]) is an
    /// [`CudnnRnnError::InvalidArgument`] naming
    /// both versions.
    pub fn new(handle: &CudnnHandle, config: RnnConfig, dropout: &DropoutState) -> Result<Self> {
        config.validate()?;
        // A handle exists, so cuDNN was loaded and checked: this reads the cached result.
        config
            .data_type
            .check_supported_by(crate::library::check_cudnn()?)?;
        handle.bind_to_thread()?;
        let desc = RnnDescriptor::new()?;
        set_descriptor(&desc, &config, dropout)?;
        let mut bytes = 0usize;
        // SAFETY: live handle and descriptor, valid out-pointer.
        check("cudnnGetRNNWeightSpaceSize", unsafe {
            sys::cudnnGetRNNWeightSpaceSize(handle.raw(), desc.raw(), &mut bytes)
        })?;
        // cudnnGetRNNWeightParams computes addresses inside a real weight space.
        let probe = handle.scratch(bytes, "cuMemAlloc (weight-space probe)")?;
        let layout = {
            let (base, _sync) = probe.device_ptr(handle.stream());
            // SAFETY: `probe` holds `bytes` bytes on this device; the descriptor is set.
            unsafe { WeightSpaceLayout::query(handle.raw(), desc.raw(), &config, base, bytes)? }
        };
        Ok(Self {
            desc,
            config,
            layout,
            calls: Mutex::new(CallCache::new(CALL_CACHE_CAPACITY)),
        })
    }

    /// Points the descriptor at `dropout` again (after its rate changed). Empties the
    /// descriptor cache: the temp-space sizes were queried with the old descriptor.
    pub fn set_dropout(&mut self, dropout: &DropoutState) -> Result<()> {
        self.clear_call_cache();
        set_descriptor(&self.desc, &self.config, dropout)
    }

    /// Calls whose descriptors and temp-space sizes are cached (0 unless
    /// [`CallReuse::descriptor_cache`](crate::CallReuse::descriptor_cache) is on).
    pub fn cached_calls(&self) -> usize {
        self.lock_calls().len()
    }

    /// Drops the cached descriptors (a call in flight keeps its own until it returns).
    pub fn clear_call_cache(&self) {
        self.lock_calls().clear();
    }

    /// The architecture.
    pub fn config(&self) -> &RnnConfig {
        &self.config
    }

    /// Bytes of the weight space (`cudnnGetRNNWeightSpaceSize`).
    pub fn weight_space_bytes(&self) -> usize {
        self.layout.bytes
    }

    /// Where each parameter lies in the weight space.
    pub fn weight_layout(&self) -> &WeightSpaceLayout {
        &self.layout
    }

    /// Runs `cudnnRNNForward`. With `training`, returns the reserve space the backward
    /// needs. Work is queued on the handle's stream; the caller synchronises. Row lengths
    /// that vary are refused on a persistent algorithm
    /// ([`RnnAlgo::check_shape`](crate::RnnAlgo::check_shape)).
    ///
    /// # Safety
    /// Every buffer must be a live device allocation of the handle's context, not written
    /// by other work until the stream has finished this call. The [`DropoutState`] last
    /// given to [`Rnn::new`] or [`Rnn::set_dropout`] must still be alive: the descriptor
    /// points at its descriptor and generator states, which a training call reads and
    /// advances (this `Rnn` does not keep it alive).
    pub unsafe fn forward(
        &self,
        handle: &CudnnHandle,
        shape: &SeqShape,
        buffers: &ForwardBuffers,
        training: bool,
    ) -> Result<Option<ReserveSpace>> {
        self.config.algo.check_shape(shape)?;
        let sizes = self.sizes(shape);
        let buffers = &self.without_cell_state(*buffers);
        for (name, buffer, bytes) in [
            ("x", buffers.x, sizes.x),
            ("y", buffers.y, sizes.y),
            ("hx", buffers.hx, sizes.h),
            ("cx", buffers.cx, sizes.c),
            ("hy", buffers.hy, sizes.h),
            ("cy", buffers.cy, sizes.c),
            ("weights", buffers.weights, self.layout.bytes),
        ] {
            check_buffer(name, buffer, bytes)?;
        }
        handle.bind_to_thread()?;
        let plan = self.call_plan(handle, shape, training)?;
        let (descs, work_bytes, reserve_bytes) = (&plan.descs, plan.work_bytes, plan.reserve_bytes);
        let mode = forward_mode(training);
        let stream = handle.stream();
        let mut work = handle.work_space(work_bytes)?;
        let mut reserve = if training {
            Some(handle.reserve_space(reserve_bytes)?)
        } else {
            None
        };
        let dev_lengths = if needs_dev_lengths(handle.call_reuse(), shape) {
            Some(upload_lengths(stream, shape)?)
        } else {
            None
        };
        {
            let lengths = dev_lengths.as_ref().map(|l| l.device_ptr(stream));
            let lengths_ptr = lengths.as_ref().map_or(0, |(ptr, _)| *ptr);
            let (work_ptr, _s2) = work.slice_mut().device_ptr_mut(stream);
            // cuDNN gets the size the call needs (as for the work space), which a pooled
            // buffer may exceed.
            let (reserve_ptr, reserve_len) = match reserve.as_mut() {
                Some(r) => (r.get_mut().device_ptr_mut(stream).0, reserve_bytes),
                None => (0, 0),
            };
            // SAFETY: descriptors match the shape (built for it, or cached under a key
            // equal to it), buffers were size-checked above, and the caller guarantees
            // they are live device memory. The work space holds at least `work_bytes`
            // and no other call uses it before this one's kernels finish (stream order,
            // see `CudnnHandle`). A null `devSeqLengths` is passed only for full-length
            // rows, as PyTorch passes it.
            check("cudnnRNNForward", unsafe {
                sys::cudnnRNNForward(
                    handle.raw(),
                    self.desc.raw(),
                    mode,
                    lengths_ptr as *const i32,
                    descs.x.raw(),
                    ptr(buffers.x),
                    descs.y.raw(),
                    ptr_mut(buffers.y),
                    descs.h.raw(),
                    ptr(buffers.hx),
                    ptr_mut(buffers.hy),
                    descs.c.raw(),
                    ptr(buffers.cx),
                    ptr_mut(buffers.cy),
                    self.layout.bytes,
                    ptr(buffers.weights),
                    work_bytes,
                    work_ptr as *mut core::ffi::c_void,
                    if training { reserve_len } else { 0 },
                    reserve_ptr as *mut core::ffi::c_void,
                )
            })?;
        }
        Ok(reserve.map(|reserve| ReserveSpace {
            reserve,
            dev_lengths,
            shape: shape.clone(),
        }))
    }

    /// Runs `cudnnRNNBackwardData_v8` then `cudnnRNNBackwardWeights_v8` (that order is
    /// cuDNN's requirement) from a training forward's reserve space. `dweights` is zeroed
    /// first because cuDNN adds into it; `dx` is zeroed so padded steps read as zero.
    ///
    /// # Safety
    /// As [`Rnn::forward`] (its dropout state alive included); `buffers` must hold the
    /// same `x`, `y`, `hx`, `cx` and weights the forward that made `reserve` used.
    pub unsafe fn backward(
        &self,
        handle: &CudnnHandle,
        reserve: &mut ReserveSpace,
        buffers: &BackwardBuffers,
    ) -> Result<()> {
        let shape = reserve.shape.clone();
        let sizes = self.sizes(&shape);
        let buffers = &self.without_cell_state_backward(*buffers);
        for (name, buffer, bytes) in [
            ("x", buffers.x, sizes.x),
            ("y", buffers.y, sizes.y),
            ("hx", buffers.hx, sizes.h),
            ("cx", buffers.cx, sizes.c),
            ("weights", buffers.weights, self.layout.bytes),
            ("dy", buffers.dy, sizes.y),
            ("dhy", buffers.dhy, sizes.h),
            ("dcy", buffers.dcy, sizes.c),
            ("dx", buffers.dx, sizes.x),
            ("dhx", buffers.dhx, sizes.h),
            ("dcx", buffers.dcx, sizes.c),
            ("dweights", buffers.dweights, self.layout.bytes),
        ] {
            check_buffer(name, buffer, bytes)?;
        }
        handle.bind_to_thread()?;
        let plan = self.call_plan(handle, &shape, true)?;
        let (descs, work_bytes, reserve_bytes) = (&plan.descs, plan.work_bytes, plan.reserve_bytes);
        if reserve_bytes > reserve.bytes() {
            return Err(CudnnRnnError::invalid(
                "reserve",
                format!("a reserve space of at least {reserve_bytes} bytes"),
                format!("{} bytes", reserve.bytes()),
            ));
        }
        // The reserve space is ordered by its stream only (pooled or freed there).
        if !Arc::ptr_eq(reserve.reserve.get().stream(), handle.stream()) {
            return Err(CudnnRnnError::invalid(
                "handle",
                "the handle (stream) of the forward that made `reserve`",
                "a handle on another stream",
            ));
        }
        let stream = handle.stream();
        let cu_stream = stream.cu_stream();
        let mut work = handle.work_space(work_bytes)?;
        // SAFETY: the caller guarantees both buffers; the sizes were checked.
        unsafe {
            driver::memset_d8_async(buffers.dx.ptr, 0, sizes.x, cu_stream)
                .and_then(|_| {
                    driver::memset_d8_async(buffers.dweights.ptr, 0, self.layout.bytes, cu_stream)
                })
                .map_err(|e| CudnnRnnError::driver("cuMemsetD8Async (gradients)", e))?;
        }
        let use_dev_lengths = needs_dev_lengths(handle.call_reuse(), &shape);
        if use_dev_lengths && reserve.dev_lengths.is_none() {
            // The forward passed a null pointer, and this call may not.
            reserve.dev_lengths = Some(upload_lengths(stream, &shape)?);
        }
        // The size this shape needs, as the forward gave it (checked above to fit).
        let reserve_len = reserve_bytes;
        let lengths = reserve
            .dev_lengths
            .as_ref()
            .filter(|_| use_dev_lengths)
            .map(|l| l.device_ptr(stream));
        let lengths_ptr = lengths.as_ref().map_or(0, |(ptr, _)| *ptr);
        let (work_ptr, _s2) = work.slice_mut().device_ptr_mut(stream);
        let (reserve_ptr, _s3) = reserve.reserve.get_mut().device_ptr_mut(stream);
        // SAFETY: as in `forward`; the reserve space comes from the matching forward, and
        // the work space is held until both backward calls are queued.
        check("cudnnRNNBackwardData_v8", unsafe {
            sys::cudnnRNNBackwardData_v8(
                handle.raw(),
                self.desc.raw(),
                lengths_ptr as *const i32,
                descs.y.raw(),
                ptr(buffers.y),
                ptr(buffers.dy),
                descs.x.raw(),
                ptr_mut(buffers.dx),
                descs.h.raw(),
                ptr(buffers.hx),
                ptr(buffers.dhy),
                ptr_mut(buffers.dhx),
                descs.c.raw(),
                ptr(buffers.cx),
                ptr(buffers.dcy),
                ptr_mut(buffers.dcx),
                self.layout.bytes,
                ptr(buffers.weights),
                work_bytes,
                work_ptr as *mut core::ffi::c_void,
                reserve_len,
                reserve_ptr as *mut core::ffi::c_void,
            )
        })?;
        // SAFETY: as above; runs after the data backward on the same stream.
        check("cudnnRNNBackwardWeights_v8", unsafe {
            sys::cudnnRNNBackwardWeights_v8(
                handle.raw(),
                self.desc.raw(),
                sys::cudnnWgradMode_t::CUDNN_WGRAD_MODE_ADD,
                lengths_ptr as *const i32,
                descs.x.raw(),
                ptr(buffers.x),
                descs.h.raw(),
                ptr(buffers.hx),
                descs.y.raw(),
                ptr(buffers.y),
                self.layout.bytes,
                ptr_mut(buffers.dweights),
                work_bytes,
                work_ptr as *mut core::ffi::c_void,
                reserve_len,
                reserve_ptr as *mut core::ffi::c_void,
            )
        })
    }

    fn sizes(&self, shape: &SeqShape) -> Sizes {
        let c = &self.config;
        let elem = c.data_type.size();
        let (t, b) = (shape.max_seq_len(), shape.batch());
        Sizes {
            x: t * b * c.input_size * elem,
            y: t * b * c.dirs() * c.output_size() * elem,
            h: c.pseudo_layers() * b * c.output_size() * elem,
            c: match c.cell {
                RnnCell::Lstm => c.pseudo_layers() * b * c.hidden_size * elem,
                RnnCell::Gru => 0,
            },
        }
    }

    /// `buffers` with null cell-state buffers for a GRU (cuDNN neither reads nor writes
    /// them; a null pointer is what it is documented to take there).
    fn without_cell_state(&self, buffers: ForwardBuffers) -> ForwardBuffers {
        match self.config.cell {
            RnnCell::Lstm => buffers,
            RnnCell::Gru => ForwardBuffers {
                cx: NULL_BUFFER,
                cy: NULL_BUFFER,
                ..buffers
            },
        }
    }

    /// As [`Self::without_cell_state`] for a backward call.
    fn without_cell_state_backward(&self, buffers: BackwardBuffers) -> BackwardBuffers {
        match self.config.cell {
            RnnCell::Lstm => buffers,
            RnnCell::Gru => BackwardBuffers {
                cx: NULL_BUFFER,
                dcy: NULL_BUFFER,
                dcx: NULL_BUFFER,
                ..buffers
            },
        }
    }

    fn lock_calls(&self) -> MutexGuard<'_, CallCache<CallKey, Arc<CallPlan>>> {
        // A panic while the lock was held left the cache consistent (its operations do
        // not panic midway), so a poisoned lock is used as is.
        self.calls.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The descriptors and temp-space sizes of a call of `shape`: from the cache when
    /// [`CallReuse::descriptor_cache`](crate::CallReuse::descriptor_cache) is on (made and
    /// kept on a miss), made for this call otherwise.
    fn call_plan(
        &self,
        handle: &CudnnHandle,
        shape: &SeqShape,
        training: bool,
    ) -> Result<Arc<CallPlan>> {
        if !handle.call_reuse().descriptor_cache {
            return self.new_plan(handle, shape, training).map(Arc::new);
        }
        if let Some(plan) = self.lock_calls().find(|k| k.matches(shape, training)) {
            return Ok(Arc::clone(plan));
        }
        let plan = Arc::new(self.new_plan(handle, shape, training)?);
        self.lock_calls()
            .insert(CallKey::new(shape, training), Arc::clone(&plan));
        Ok(plan)
    }

    fn new_plan(&self, handle: &CudnnHandle, shape: &SeqShape, training: bool) -> Result<CallPlan> {
        let descs = self.call_descriptors(shape)?;
        let (work_bytes, reserve_bytes) =
            self.temp_sizes(handle, &descs, forward_mode(training))?;
        Ok(CallPlan {
            descs,
            work_bytes,
            reserve_bytes,
        })
    }

    fn call_descriptors(&self, shape: &SeqShape) -> Result<CallDescriptors> {
        let c = &self.config;
        let layers = c.pseudo_layers() as i32;
        let batch = shape.batch() as i32;
        Ok(CallDescriptors {
            x: data_descriptor(c.data_type, shape, c.input_size)?,
            y: data_descriptor(c.data_type, shape, c.dirs() * c.output_size())?,
            h: TensorDescriptor::dense_3d(
                c.data_type.cudnn(),
                [layers, batch, c.output_size() as i32],
            )?,
            c: TensorDescriptor::dense_3d(
                c.data_type.cudnn(),
                [layers, batch, c.hidden_size as i32],
            )?,
        })
    }

    fn temp_sizes(
        &self,
        handle: &CudnnHandle,
        descs: &CallDescriptors,
        mode: sys::cudnnForwardMode_t,
    ) -> Result<(usize, usize)> {
        let (mut work, mut reserve) = (0usize, 0usize);
        // SAFETY: live handle and descriptors, valid out-pointers.
        check("cudnnGetRNNTempSpaceSizes", unsafe {
            sys::cudnnGetRNNTempSpaceSizes(
                handle.raw(),
                self.desc.raw(),
                mode,
                descs.x.raw(),
                &mut work,
                &mut reserve,
            )
        })?;
        Ok((work, reserve))
    }
}

struct Sizes {
    x: usize,
    y: usize,
    h: usize,
    c: usize,
}

/// What a call needs besides its buffers, kept per [`CallKey`] by the descriptor cache.
/// cuDNN only reads these descriptors during a call (host side), so one entry may serve
/// calls one after another, and an entry evicted while a call holds it lives until that
/// call returns (`Arc`). `cudnnSetRNNDataDescriptor` copies the lengths array into the
/// descriptor (PyTorch's `rnn_descriptor` passes a local vector it frees right after), so
/// an entry does not borrow the shape it was made for; the key holds its own copy.
#[derive(Debug)]
struct CallPlan {
    descs: CallDescriptors,
    /// `cudnnGetRNNTempSpaceSizes`: work space, then reserve space (0 for inference).
    work_bytes: usize,
    reserve_bytes: usize,
}

#[derive(Debug)]
struct CallDescriptors {
    x: RnnDataDescriptor,
    y: RnnDataDescriptor,
    h: TensorDescriptor,
    c: TensorDescriptor,
}

fn set_descriptor(desc: &RnnDescriptor, config: &RnnConfig, dropout: &DropoutState) -> Result<()> {
    let bias = if config.bias {
        sys::cudnnRNNBiasMode_t::CUDNN_RNN_DOUBLE_BIAS
    } else {
        sys::cudnnRNNBiasMode_t::CUDNN_RNN_NO_BIAS
    };
    let direction = if config.bidirectional {
        sys::cudnnDirectionMode_t::CUDNN_BIDIRECTIONAL
    } else {
        sys::cudnnDirectionMode_t::CUDNN_UNIDIRECTIONAL
    };
    // SAFETY: live descriptors; sizes were validated to fit i32.
    check("cudnnSetRNNDescriptor_v8", unsafe {
        sys::cudnnSetRNNDescriptor_v8(
            desc.raw(),
            config.algo.cudnn(),
            config.cell.cudnn(),
            bias,
            direction,
            sys::cudnnRNNInputMode_t::CUDNN_LINEAR_INPUT,
            config.data_type.cudnn(),
            config.data_type.math_precision(),
            config.math_type(),
            config.input_size as i32,
            config.hidden_size as i32,
            config.output_size() as i32,
            config.num_layers as i32,
            dropout.raw(),
            PADDED_IO_ENABLED,
        )
    })
}

/// A right-padded data descriptor in the shape's layout whose padding reads as zero.
fn data_descriptor(
    data_type: DataType,
    shape: &SeqShape,
    vector_size: usize,
) -> Result<RnnDataDescriptor> {
    let desc = RnnDataDescriptor::new()?;
    // cuDNN reads the fill value as one element of `data_type`; all-zero bits are 0.0
    // in every float type, and eight bytes cover the widest.
    let mut fill_zero = 0u64;
    let fill: *mut core::ffi::c_void = (&mut fill_zero as *mut u64).cast();
    // SAFETY: `lengths` holds `batch` entries; `fill` points at a value of the data type.
    check("cudnnSetRNNDataDescriptor", unsafe {
        sys::cudnnSetRNNDataDescriptor(
            desc.raw(),
            data_type.cudnn(),
            shape.layout().cudnn(),
            shape.max_seq_len() as i32,
            shape.batch() as i32,
            vector_size as i32,
            shape.lengths().as_ptr(),
            fill,
        )
    })?;
    Ok(desc)
}

/// `CUDNN_FWD_MODE_TRAINING` or `CUDNN_FWD_MODE_INFERENCE`.
fn forward_mode(training: bool) -> sys::cudnnForwardMode_t {
    if training {
        sys::cudnnForwardMode_t::CUDNN_FWD_MODE_TRAINING
    } else {
        sys::cudnnForwardMode_t::CUDNN_FWD_MODE_INFERENCE
    }
}

/// The row lengths in device memory (`devSeqLengths`), queued on `stream`.
fn upload_lengths(stream: &Arc<CudaStream>, shape: &SeqShape) -> Result<CudaSlice<i32>> {
    stream
        .clone_htod(shape.lengths())
        .map_err(|e| CudnnRnnError::driver("cuMemcpyHtoD (lengths)", e))
}

/// Checks that `buffer` holds `bytes` bytes at a device address. A null buffer where no
/// bytes are wanted (a GRU's cell state) passes: cuDNN gets the null pointer and touches
/// nothing there.
fn check_buffer(name: &'static str, buffer: DeviceBuffer, bytes: usize) -> Result<()> {
    if bytes == 0 && buffer == NULL_BUFFER {
        return Ok(());
    }
    if buffer.ptr == 0 {
        return Err(CudnnRnnError::invalid(name, "a device address", "null"));
    }
    if buffer.bytes < bytes {
        return Err(CudnnRnnError::invalid(
            name,
            format!("{bytes} bytes"),
            format!("{} bytes", buffer.bytes),
        ));
    }
    Ok(())
}

fn ptr(buffer: DeviceBuffer) -> *const core::ffi::c_void {
    buffer.ptr as *const core::ffi::c_void
}

fn ptr_mut(buffer: DeviceBuffer) -> *mut core::ffi::c_void {
    buffer.ptr as *mut core::ffi::c_void
}
