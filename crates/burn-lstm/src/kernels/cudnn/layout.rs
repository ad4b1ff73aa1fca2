//! The row-major tensors cuDNN reads and writes, without a copy where the memory already
//! is row-major: a dimension of size 1 never moves the address, so its stride does not
//! matter (the transposed view of a batch of one, `[1, T, I]` as `[T, 1, I]`, is
//! row-major; CubeCL's `into_contiguous` would copy it).

use burn_cubecl::kernel::into_contiguous;

use crate::kernels::cudnn::types::CudaTensor;

/// Whether `strides` address the elements of `shape` exactly as the compact row-major
/// strides of `shape` do: every dimension larger than 1 has the row-major stride.
pub(crate) fn is_row_major(shape: &[usize], strides: &[usize]) -> bool {
    let mut expected = 1;
    for (&dim, &stride) in shape.iter().zip(strides).rev() {
        if dim == 1 {
            continue;
        }
        if stride != expected {
            return false;
        }
        expected *= dim;
    }
    true
}

/// `tensor` with compact row-major strides: the same buffer when its memory already is
/// row-major ([`is_row_major`]), else a copy.
pub(crate) fn row_major(tensor: CudaTensor) -> CudaTensor {
    if tensor.is_contiguous() {
        return tensor;
    }
    let same_memory =
        tensor.qparams.is_none() && is_row_major(tensor.meta.shape(), tensor.meta.strides());
    if same_memory {
        let shape = tensor.meta.shape().clone();
        return CudaTensor::new_contiguous(
            tensor.client,
            tensor.device,
            shape,
            tensor.handle,
            tensor.dtype,
        );
    }
    into_contiguous(tensor)
}

#[cfg(test)]
mod tests {
    use super::is_row_major;

    #[test]
    fn unit_dimensions_may_have_any_stride() {
        // `[1, 100, 128]` batch-first, seen sequence-major by `swap_dims(0, 1)`.
        assert!(is_row_major(&[100, 1, 128], &[128, 12_800, 1]));
        assert!(is_row_major(&[1, 1, 1], &[7, 0, 3]));
        assert!(is_row_major(&[4, 3], &[3, 1]));
    }

    #[test]
    fn a_real_transpose_or_broadcast_is_not_row_major() {
        // `[2, 100, 128]` swapped: rows of the batch interleave in memory.
        assert!(!is_row_major(&[100, 2, 128], &[128, 12_800, 1]));
        // A broadcast (stride 0) of a dimension larger than 1.
        assert!(!is_row_major(&[100, 4, 128], &[0, 128, 1]));
        assert!(!is_row_major(&[3, 4], &[1, 3]));
    }
}
