//! The device addresses of a call's CubeCL tensors, their memory kept allocated while
//! cuDNN's stream uses it ([`Pinned`]).
//!
//! Reading them is one blocking round trip to CubeCL's device thread, which runs a task
//! only after every task queued before it (CubeCL 0.10's device channel is one FIFO
//! queue for all threads, and a blocking task flushes it): once [`Pinned::addresses`]
//! returns, every CubeCL launch queued before the call has been submitted to the driver.
//! [`Ordering::before`](crate::kernels::cudnn::ordering::Ordering::before) takes a
//! `Pinned` for that reason.

use cudnn_rnn::DeviceBuffer;

use crate::kernels::cudnn::types::CudaTensor;

/// The buffer addresses of the cell-state tensors of a call, which exist for an LSTM
/// only. A GRU has none (no CubeCL buffer of zero elements is ever made) and cudnn-rnn
/// hands cuDNN null pointers in their place.
const NO_CELL_STATE: DeviceBuffer = DeviceBuffer { ptr: 0, bytes: 0 };

/// The bytes of `tensor`'s elements.
pub(crate) fn byte_len(tensor: &CudaTensor) -> usize {
    tensor.meta.shape().num_elements() * tensor.dtype.size()
}

/// CubeCL resources whose memory must stay allocated until cuDNN's stream has finished
/// with it (dropping a resource lets CubeCL reuse the memory).
pub(crate) struct Pinned {
    _resources: Vec<Box<dyn core::any::Any>>,
}

impl Pinned {
    /// The device addresses and sizes of `tensors` (contiguous, one device), kept alive
    /// by the returned `Pinned`. Each `get_resource` is a round trip to CubeCL's device
    /// thread (~50 µs on the H100 machine, 0.3-0.5 ms for a call's 8 to 13 buffers);
    /// inside `exclusive`, which runs the closure on that thread, they run inline: one
    /// round trip for all of them, after every CubeCL task queued before it.
    ///
    /// `tensors` are the `N` a call always has, then `cell_state`, the `M` of an LSTM's
    /// cell state (`None` for a GRU, whose addresses are then [`NO_CELL_STATE`]).
    pub(crate) fn addresses<const N: usize, const M: usize>(
        tensors: [&CudaTensor; N],
        cell_state: Option<[&CudaTensor; M]>,
    ) -> Result<(Self, [DeviceBuffer; N], [DeviceBuffer; M]), String> {
        let tensors: Vec<&CudaTensor> = tensors
            .into_iter()
            .chain(cell_state.into_iter().flatten())
            .collect();
        let client = &tensors[0].client;
        let handles: Vec<_> = tensors.iter().map(|t| t.handle.clone()).collect();
        let resources = client
            .exclusive(|| {
                handles
                    .into_iter()
                    .map(|handle| client.get_resource(handle))
                    .collect::<Vec<_>>()
            })
            .map_err(|e| format!("reaching CubeCL's device thread: {e:?}"))?;
        let mut pinned = Vec::with_capacity(tensors.len());
        let mut buffers = [NO_CELL_STATE; N];
        let mut cell_buffers = [NO_CELL_STATE; M];
        let slots = buffers.iter_mut().chain(&mut cell_buffers);
        for ((resource, tensor), buffer) in resources.into_iter().zip(tensors).zip(slots) {
            let resource =
                resource.map_err(|e| format!("reading a CubeCL buffer's address: {e:?}"))?;
            *buffer = DeviceBuffer {
                ptr: resource.resource().ptr,
                bytes: byte_len(tensor),
            };
            pinned.push(Box::new(resource) as Box<dyn core::any::Any>);
        }
        Ok((Self { _resources: pinned }, buffers, cell_buffers))
    }
}
