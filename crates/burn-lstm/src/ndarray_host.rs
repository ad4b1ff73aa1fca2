//! NdArray tensors on the host side of the fused CPU kernel: reading them into plain
//! vectors (through their strides, or taking an unshared buffer without a copy), the
//! op's flat parameter buffer built in one copy, and its gradient split in place.
//! Burn 0.21's NdArray `into_data`, `reshape`, `slice` and `cat` copy (or walk element
//! by element) where these do not need to.

use std::any::Any;

use burn::tensor::{
    DType, Element, Tensor, TensorData, TensorMetadata, backend::Backend, ops::FloatTensor,
};
use burn_ndarray::{NdArrayTensor, SharedArray};
use lstm_cpu::Real;

use crate::portable::{primitive, tensor};

/// A host copy of a tensor in `T`. NdArray tensors are read through their strides:
/// Burn's `into_data` walks a shared (reference-counted) array element by element, about
/// 25 ns per value, which cost more than the whole kernel at small shapes.
pub(crate) fn to_host<B: Backend, T: Real + Element, const D: usize>(t: FloatTensor<B>) -> Vec<T> {
    let t = match take_unique_ndarray::<B, T>(t) {
        Ok(values) => return values,
        Err(t) => t,
    };
    // From lstm-cpu's buffer cache: a training call copies its (shared) flat parameters
    // here every call, 144 MB at 20×35×1500, and fresh pages cost more than the copy.
    let mut values = lstm_cpu::vec_with_capacity::<T>(t.shape().num_elements());
    if ndarray_append::<T>(&t, &mut values) {
        return values;
    }
    lstm_cpu::recycle_vec(values);
    tensor::<B, D>(t)
        .into_data()
        .convert::<T>()
        .into_vec::<T>()
        .expect("converted to the kernel's element type")
}

/// The values of an NdArray tensor nobody else holds, in row-major layout, without a copy
/// (the module's flat parameter buffer, built fresh by each inference call, is one: for a
/// large model a copy is a large share of the call).
fn take_unique_ndarray<B: Backend, T: 'static>(
    t: FloatTensor<B>,
) -> Result<Vec<T>, FloatTensor<B>> {
    let back = float_tensor::<B>;
    let tensor = ndarray_tensor::<B>(t)?;
    macro_rules! take {
        ($storage:expr) => {{
            let (mut values, offset) = $storage.into_owned().into_owned().into_raw_vec_and_offset();
            values.drain(..offset.unwrap_or(0));
            Box::new(values) as Box<dyn Any>
        }};
    }
    let wanted = core::any::TypeId::of::<T>();
    let taken = match tensor {
        NdArrayTensor::F32(s)
            if wanted == core::any::TypeId::of::<f32>()
                && s.is_unique()
                && s.view().is_standard_layout() =>
        {
            take!(s)
        }
        NdArrayTensor::F64(s)
            if wanted == core::any::TypeId::of::<f64>()
                && s.is_unique()
                && s.view().is_standard_layout() =>
        {
            take!(s)
        }
        other => return Err(back(other)),
    };
    Ok(*taken.downcast::<Vec<T>>().expect("checked element type"))
}

/// `t` as NdArray's tensor type, when `B` is an NdArray backend (`t` back otherwise).
fn ndarray_tensor<B: Backend>(t: FloatTensor<B>) -> Result<NdArrayTensor, FloatTensor<B>> {
    let boxed: Box<dyn Any> = Box::new(t);
    match boxed.downcast::<NdArrayTensor>() {
        Ok(tensor) => Ok(*tensor),
        Err(other) => Err(*other.downcast::<FloatTensor<B>>().expect("unchanged")),
    }
}

/// The inverse of [`ndarray_tensor`], for a `B` whose float tensor it returned.
fn float_tensor<B: Backend>(tensor: NdArrayTensor) -> FloatTensor<B> {
    let boxed: Box<dyn Any> = Box::new(tensor);
    *boxed
        .downcast::<FloatTensor<B>>()
        .expect("FloatTensor<B> is NdArrayTensor")
}

/// Runs `f` on the values of `t` in place, when `t` is an NdArray tensor of element type
/// `T` in row-major layout (`None` otherwise).
pub(crate) fn with_values<B: Backend, T: 'static, R>(
    t: &FloatTensor<B>,
    f: impl FnOnce(&[T]) -> R,
) -> Option<R> {
    let t: &dyn Any = t;
    let wanted = core::any::TypeId::of::<T>();
    let (ptr, len) = match t.downcast_ref::<NdArrayTensor>()? {
        NdArrayTensor::F32(s) if wanted == core::any::TypeId::of::<f32>() => {
            let v = s.view();
            let values = v.as_slice()?;
            (values.as_ptr() as *const T, values.len())
        }
        NdArrayTensor::F64(s) if wanted == core::any::TypeId::of::<f64>() => {
            let v = s.view();
            let values = v.as_slice()?;
            (values.as_ptr() as *const T, values.len())
        }
        _ => return None,
    };
    // SAFETY: `T` is the storage's element type (checked above) and the values are
    // contiguous; `t` (which owns or shares the storage) outlives the borrow.
    Some(f(unsafe { core::slice::from_raw_parts(ptr, len) }))
}

/// Appends the values of `t` to `out` when `t` is an NdArray tensor of element type `T`
/// (returns whether it was).
// A `Vec`, not a slice: it grows, and is downcast to the tensor's element type.
#[allow(clippy::ptr_arg)]
fn ndarray_append<T: 'static>(t: &dyn Any, out: &mut Vec<T>) -> bool {
    let out: &mut dyn Any = out;
    match t.downcast_ref::<NdArrayTensor>() {
        Some(NdArrayTensor::F32(storage)) => out.downcast_mut::<Vec<f32>>().is_some_and(|out| {
            let view = storage.view();
            gather_into(out, view.as_ptr(), view.shape(), view.strides());
            true
        }),
        Some(NdArrayTensor::F64(storage)) => out.downcast_mut::<Vec<f64>>().is_some_and(|out| {
            let view = storage.view();
            gather_into(out, view.as_ptr(), view.shape(), view.strides());
            true
        }),
        _ => false,
    }
}

/// Appends the values of a strided array to `out` in row-major order, copying whole
/// rows when the last axis is contiguous.
fn gather_into<E: Copy>(out: &mut Vec<E>, ptr: *const E, shape: &[usize], strides: &[isize]) {
    let len = shape.iter().product::<usize>();
    out.reserve(len);
    if len == 0 {
        return;
    }
    let (rows_shape, last) = shape.split_at(shape.len().saturating_sub(1));
    let (row_len, row_stride) = match last {
        [n] => (*n, strides[shape.len() - 1]),
        _ => (1, 1),
    };
    let mut index = vec![0usize; rows_shape.len()];
    loop {
        let offset: isize = index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i as isize * s)
            .sum();
        // SAFETY: every index is inside the view's shape, so the offsets stay inside
        // the array the view borrows.
        unsafe {
            let row = ptr.offset(offset);
            if row_stride == 1 {
                out.extend_from_slice(core::slice::from_raw_parts(row, row_len));
            } else {
                out.extend((0..row_len).map(|j| *row.offset(j as isize * row_stride)));
            }
        }
        // Next row index, last axis fastest.
        let mut axis = index.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            if index[axis] < rows_shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// The op's flat parameter buffer from NdArray parameters (canonical order, each as
/// stored): one buffer, each value copied once, whole rows at a time. Burn's `reshape`
/// and `cat` on NdArray copy every value three times into three fresh allocations,
/// which cost more than the kernel for small models. Other tensors go through `cat`.
pub(crate) fn flatten<B: Backend>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    flatten_into_capacity::<B>(parts, 0)
}

/// [`flatten`] into a buffer with room for `capacity` values (the whole flat buffer when
/// autodiff appends the parameters one at a time).
pub(crate) fn flatten_into_capacity<B: Backend>(
    parts: Vec<FloatTensor<B>>,
    capacity: usize,
) -> FloatTensor<B> {
    match parts.first().map(|p| p.dtype()) {
        Some(DType::F32) => flatten_as::<B, f32>(parts, capacity),
        Some(DType::F64) => flatten_as::<B, f64>(parts, capacity),
        _ => crate::flat_weights::concatenate::<B>(parts),
    }
}

/// Gives the memory of NdArray tensors nobody else holds (a training call's inputs, once
/// its backward has run) to lstm-cpu's buffer cache, for the next call's buffers.
pub(crate) fn recycle<B: Backend, T: Real>(tensors: impl IntoIterator<Item = FloatTensor<B>>) {
    for t in tensors {
        if let Ok(values) = take_unique_ndarray::<B, T>(t) {
            lstm_cpu::recycle_vec(values);
        }
    }
}

fn flatten_as<B: Backend, T: Real + Element>(
    parts: Vec<FloatTensor<B>>,
    capacity: usize,
) -> FloatTensor<B> {
    if !parts.iter().all(|p| is_ndarray_of::<T>(p)) {
        return crate::flat_weights::concatenate::<B>(parts);
    }
    let device = B::float_device(&parts[0]);
    let len: usize = parts.iter().map(|p| p.shape().num_elements()).sum();
    let capacity = capacity.max(len);
    let mut parts = parts.into_iter();
    let first = parts.next().expect("flatten has at least one part");
    // A first part nobody else holds (the buffer built so far, when autodiff appends
    // parameters one at a time) is extended in place; otherwise every part is copied.
    // A buffer too small for `capacity` moves once into a cached one that is not (so
    // the appends that follow neither reallocate nor fault in fresh pages).
    let (mut values, first) = match take_unique_ndarray::<B, T>(first) {
        Ok(values) if values.capacity() >= capacity => (values, None),
        Ok(small) => {
            let mut values = lstm_cpu::vec_with_capacity::<T>(capacity);
            values.extend_from_slice(&small);
            lstm_cpu::recycle_vec(small);
            (values, None)
        }
        Err(first) => (lstm_cpu::vec_with_capacity::<T>(capacity), Some(first)),
    };
    for part in first.into_iter().chain(parts) {
        let appended = ndarray_append::<T>(&part, &mut values);
        assert!(
            appended,
            "every part was checked to be an NdArray tensor of T"
        );
    }
    device_tensor::<B, T, 1>(values, [len], &device)
}

/// Whether `t` is an NdArray tensor holding `T` values.
fn is_ndarray_of<T: 'static>(t: &dyn Any) -> bool {
    let wanted = core::any::TypeId::of::<T>();
    match t.downcast_ref::<NdArrayTensor>() {
        Some(NdArrayTensor::F32(_)) => wanted == core::any::TypeId::of::<f32>(),
        Some(NdArrayTensor::F64(_)) => wanted == core::any::TypeId::of::<f64>(),
        _ => false,
    }
}

/// The gradient of a flat buffer `[before + part]` split into the buffer's first
/// `before` values and the last part, reshaped to `part_shape`. On NdArray both are views
/// of the gradient's storage (nothing is copied; every parameter's gradient then shares
/// the one buffer the kernel wrote, which lives while any of them does), where Burn
/// 0.21's `slice` and `reshape` would each copy.
pub(crate) fn split_gradient<B: Backend>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: burn::tensor::Shape,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let grad = match split_views::<B>(grad, before, &part_shape) {
        Ok(split) => return split,
        Err(grad) => grad,
    };
    split_by_slices::<B>(grad, before, part_shape)
}

/// [`split_gradient`] for a one-dimensional NdArray gradient stored in memory it owns.
fn split_views<B: Backend>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: &burn::tensor::Shape,
) -> Result<(FloatTensor<B>, FloatTensor<B>), FloatTensor<B>> {
    use ndarray::{Axis, IxDyn, Slice};
    type Split<E> = Result<(SharedArray<E>, SharedArray<E>), SharedArray<E>>;
    fn split<E: Clone>(array: SharedArray<E>, before: usize, part_shape: &[usize]) -> Split<E> {
        let part_len: usize = part_shape.iter().product();
        // Contiguous values only: a strided run would not take the part's shape.
        if array.ndim() != 1 || array.len() != before + part_len || array.strides() != [1] {
            return Err(array);
        }
        let mut part = array.clone();
        part.slice_axis_inplace(Axis(0), Slice::from(before..));
        let Ok(part) = part.into_shape_with_order(IxDyn(part_shape)) else {
            return Err(array);
        };
        let mut prefix = array;
        prefix.slice_axis_inplace(Axis(0), Slice::from(..before));
        Ok((prefix, part))
    }
    let back = float_tensor::<B>;
    let tensor = ndarray_tensor::<B>(grad)?;
    let shape = part_shape.as_slice();
    // Borrowed storage (a zero-copy load) would be copied by `into_shared`.
    match tensor {
        NdArrayTensor::F32(s) if s.is_owned() => match split(s.into_shared(), before, shape) {
            Ok((prefix, part)) => Ok((back(prefix.into()), back(part.into()))),
            Err(whole) => Err(back(whole.into())),
        },
        NdArrayTensor::F64(s) if s.is_owned() => match split(s.into_shared(), before, shape) {
            Ok((prefix, part)) => Ok((back(prefix.into()), back(part.into()))),
            Err(whole) => Err(back(whole.into())),
        },
        other => Err(back(other)),
    }
}

fn split_by_slices<B: Backend>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: burn::tensor::Shape,
) -> (FloatTensor<B>, FloatTensor<B>) {
    use burn::tensor::Slice;
    let end = before + part_shape.num_elements();
    let part = B::float_slice(
        grad.clone(),
        &[Slice::new(before as isize, Some(end as isize), 1)],
    );
    let prefix = B::float_slice(grad, &[Slice::new(0, Some(before as isize), 1)]);
    (prefix, B::float_reshape(part, part_shape))
}

/// Whether [`flatten`] on `B` extends a buffer nobody else holds in place (NdArray's
/// primitive), so that appending parameters one at a time costs one copy of each.
pub(crate) fn appends_in_place<B: Backend>() -> bool {
    core::any::TypeId::of::<FloatTensor<B>>() == core::any::TypeId::of::<NdArrayTensor>()
}

pub(crate) fn device_tensor<B: Backend, T: Element, const D: usize>(
    values: Vec<T>,
    shape: [usize; D],
    device: &B::Device,
) -> FloatTensor<B> {
    let data = TensorData::new(values, shape);
    primitive(Tensor::<B, D>::from_data(data, (device, T::dtype())))
}
