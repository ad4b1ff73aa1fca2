//! cuDNN's inter-layer dropout: a descriptor plus the random-number-generator states it
//! keeps on the device. The states must outlive every call that uses the descriptor, so
//! both live in one value.

use cudarc::cudnn::sys;
use cudarc::driver::{CudaSlice, DevicePtrMut};

use crate::descriptor::DropoutDescriptor;
use crate::error::{CudnnRnnError, Result};
use crate::handle::CudnnHandle;
use crate::status::check;

/// A dropout descriptor with its generator states.
///
/// Creating one initialises the generator (a kernel over the whole state buffer: slow, do
/// it once per device and seed); [`DropoutState::set_probability`] changes the rate and
/// keeps the generator where it is.
#[derive(Debug)]
pub struct DropoutState {
    desc: DropoutDescriptor,
    states: CudaSlice<u8>,
    probability: f32,
    seed: u64,
}

impl DropoutState {
    /// A dropout of `probability` (in `[0, 1)`) whose generator starts from `seed`.
    pub fn new(handle: &CudnnHandle, probability: f32, seed: u64) -> Result<Self> {
        check_probability(probability)?;
        handle.bind_to_thread()?;
        let desc = DropoutDescriptor::new()?;
        let mut bytes = 0usize;
        // SAFETY: live handle, valid out-pointer.
        check("cudnnDropoutGetStatesSize", unsafe {
            sys::cudnnDropoutGetStatesSize(handle.raw(), &mut bytes)
        })?;
        let mut states = handle
            .stream()
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| CudnnRnnError::driver("cuMemAlloc (dropout states)", e))?;
        {
            let (ptr, _sync) = states.device_ptr_mut(handle.stream());
            // SAFETY: `states` holds `bytes` bytes on the handle's device and lives as long
            // as the descriptor (both are owned by the returned value).
            check("cudnnSetDropoutDescriptor", unsafe {
                sys::cudnnSetDropoutDescriptor(
                    desc.raw(),
                    handle.raw(),
                    probability,
                    ptr as *mut core::ffi::c_void,
                    bytes,
                    seed,
                )
            })?;
        }
        Ok(Self {
            desc,
            states,
            probability,
            seed,
        })
    }

    /// Changes the rate without re-initialising the generator
    /// (`cudnnRestoreDropoutDescriptor`).
    pub fn set_probability(&mut self, handle: &CudnnHandle, probability: f32) -> Result<()> {
        check_probability(probability)?;
        if probability == self.probability {
            return Ok(());
        }
        handle.bind_to_thread()?;
        let bytes = self.states.len();
        let (ptr, _sync) = self.states.device_ptr_mut(handle.stream());
        // SAFETY: the states were initialised by `new` with this handle's device.
        check("cudnnRestoreDropoutDescriptor", unsafe {
            sys::cudnnRestoreDropoutDescriptor(
                self.desc.raw(),
                handle.raw(),
                probability,
                ptr as *mut core::ffi::c_void,
                bytes,
                self.seed,
            )
        })?;
        self.probability = probability;
        Ok(())
    }

    /// The current rate.
    pub fn probability(&self) -> f32 {
        self.probability
    }

    /// The seed the generator started from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub(crate) fn raw(&self) -> sys::cudnnDropoutDescriptor_t {
        self.desc.raw()
    }
}

fn check_probability(probability: f32) -> Result<()> {
    if (0.0..1.0).contains(&probability) {
        Ok(())
    } else {
        Err(CudnnRnnError::invalid(
            "dropout",
            "a probability in [0, 1)",
            probability,
        ))
    }
}
