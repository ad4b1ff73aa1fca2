//! The zero tensors every call needs (the initial state of calls given none, autodiff's
//! one-element markers of the op's node), one per backend, device, element type and
//! shape, kept for the calls after: a backend never writes a tensor in place while
//! another holder exists, so one zero tensor serves them all where a fill per call would
//! cost a kernel launch each (the host time of a small call on a GPU).

use std::any::Any;
use std::sync::Mutex;

use burn::tensor::{DType, Tensor, backend::Backend};

/// Most zero tensors kept (the least recently used goes first).
const MAX_ENTRIES: usize = 16;

/// Largest zero tensor kept, in bytes; a larger one is filled per call, where the fill is
/// small beside the call's own work.
const MAX_BYTES: usize = 1 << 20;

/// One kept zero tensor.
struct Entry<B: Backend, const D: usize> {
    device: B::Device,
    dtype: DType,
    shape: [usize; D],
    zeros: Tensor<B, D>,
}

static ENTRIES: Mutex<Vec<Box<dyn Any + Send + Sync>>> = Mutex::new(Vec::new());

/// Drops every kept zero tensor (at most [`MAX_ENTRIES`] of [`MAX_BYTES`] each); later
/// calls fill and keep them again.
#[cfg_attr(not(feature = "cubecl"), allow(dead_code))]
pub(crate) fn release() {
    ENTRIES.lock().unwrap_or_else(|e| e.into_inner()).clear();
}

/// A tensor of zeros of `shape` and `dtype` on `device`: the one an earlier call got when
/// it is small enough to keep.
pub(crate) fn zeros<B: Backend, const D: usize>(
    shape: [usize; D],
    (device, dtype): (&B::Device, DType),
) -> Tensor<B, D> {
    let bytes = shape.iter().product::<usize>() * dtype.size();
    if bytes > MAX_BYTES {
        return Tensor::zeros(shape, (device, dtype));
    }
    let mut entries = ENTRIES.lock().unwrap_or_else(|e| e.into_inner());
    let found = entries.iter().position(|entry| {
        entry.downcast_ref::<Entry<B, D>>().is_some_and(|entry| {
            entry.shape == shape && entry.dtype == dtype && entry.device == *device
        })
    });
    if let Some(at) = found {
        let entry = entries.remove(at);
        let zeros = entry
            .downcast_ref::<Entry<B, D>>()
            .map(|entry| entry.zeros.clone());
        entries.insert(0, entry);
        if let Some(zeros) = zeros {
            return zeros;
        }
    }
    let zeros = Tensor::<B, D>::zeros(shape, (device, dtype));
    entries.insert(
        0,
        Box::new(Entry::<B, D> {
            device: device.clone(),
            dtype,
            shape,
            zeros: zeros.clone(),
        }),
    );
    entries.truncate(MAX_ENTRIES);
    zeros
}

#[cfg(test)]
mod tests {
    use burn::backend::{Flex, NdArray};
    use burn::tensor::{DType, Tensor};

    use crate::op::zero_state::{ENTRIES, Entry, MAX_BYTES, release, zeros};

    /// Whether a zero tensor of `shape` on NdArray is kept.
    fn kept(shape: [usize; 3]) -> bool {
        ENTRIES.lock().unwrap().iter().any(|entry| {
            entry
                .downcast_ref::<Entry<NdArray, 3>>()
                .is_some_and(|entry| entry.shape == shape)
        })
    }

    #[test]
    fn release_drops_the_kept_zeros() {
        // A shape no other test uses (the list is shared by the tests running at once).
        let shape = [7, 5, 3];
        let device = Default::default();
        zeros::<NdArray, 3>(shape, (&device, DType::F32));
        assert!(kept(shape));
        release();
        assert!(!kept(shape));
        assert_eq!(
            values(zeros::<NdArray, 3>(shape, (&device, DType::F32))),
            vec![0.0; 105]
        );
    }

    /// The values of `tensor` as f64, whatever element type it has.
    fn values<B: burn::tensor::backend::Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f64> {
        tensor.into_data().convert::<f64>().to_vec::<f64>().unwrap()
    }

    #[test]
    fn a_kept_zero_state_stays_zero_after_in_place_candidates() {
        let device = Default::default();
        let first = zeros::<NdArray, 3>([1, 3, 4], (&device, DType::F32));
        // An op that may write its unshared input in place: the kept tensor is shared.
        assert_eq!(values(first + 5.0), vec![5.0; 12]);
        let again = zeros::<NdArray, 3>([1, 3, 4], (&device, DType::F32));
        assert_eq!(again.dtype(), DType::F32);
        assert_eq!(values(again), vec![0.0; 12]);
    }

    #[test]
    fn shapes_backends_and_large_states_each_get_their_own_zeros() {
        let device = Default::default();
        assert_eq!(
            zeros::<NdArray, 3>([2, 3, 4], (&device, DType::F32)).dims(),
            [2, 3, 4]
        );
        assert_eq!(
            zeros::<NdArray, 3>([1, 3, 4], (&device, DType::F32)).dims(),
            [1, 3, 4]
        );
        let flex = zeros::<Flex, 3>([2, 3, 4], (&Default::default(), DType::F32));
        assert_eq!(flex.dims(), [2, 3, 4]);
        let marker = zeros::<NdArray, 1>([1], (&device, DType::F32));
        assert_eq!(values(marker), vec![0.0]);
        let rows = MAX_BYTES / 4 / 8 + 1;
        let large = zeros::<NdArray, 3>([1, rows, 8], (&device, DType::F32));
        assert_eq!(large.dims(), [1, rows, 8]);
        assert!(values(large).iter().all(|&v| v == 0.0));
    }
}
