//! NdArray tensors on the host side of the fused CPU kernel. An `NdArrayTensor` is an
//! enum of `ndarray` arrays per element type, shared by reference count (or borrowed,
//! for a zero-copy load): values are read through the array's strides, taken without a
//! copy when nobody else holds them, and a flat buffer's gradient is cut into views.
//! Burn 0.21's NdArray `into_data` walks a shared array element by element (about
//! 25 ns per value, more than the whole kernel at small shapes), and its `reshape`,
//! `slice` and `cat` copy.

use std::any::{Any, TypeId};

use burn::tensor::quantization::QTensorPrimitive;
use burn::tensor::{DType, Shape};
use burn_ndarray::{
    FloatNdArrayElement, IntNdArrayElement, NdArray, NdArrayQTensor, NdArrayTensor, QuantElement,
    SharedArray,
};

use crate::kernels::fused_cpu::host::{
    HostElement, HostTensors, HostView, ValuesKey, gather_into, split_by_slices,
};

impl<E: FloatNdArrayElement, I: IntNdArrayElement, Q: QuantElement> HostTensors for NdArray<E, I, Q>
where
    NdArrayTensor: From<SharedArray<E>>,
    NdArrayTensor: From<SharedArray<I>>,
{
    fn take_unique<T: HostElement>(t: NdArrayTensor) -> Result<Vec<T>, NdArrayTensor> {
        macro_rules! take {
            ($storage:expr) => {{
                let (mut values, offset) =
                    $storage.into_owned().into_owned().into_raw_vec_and_offset();
                values.drain(..offset.unwrap_or(0));
                Box::new(values) as Box<dyn Any>
            }};
        }
        let wanted = TypeId::of::<T>();
        let taken = match t {
            NdArrayTensor::F32(s)
                if wanted == TypeId::of::<f32>()
                    && s.is_unique()
                    && s.view().is_standard_layout() =>
            {
                take!(s)
            }
            NdArrayTensor::F64(s)
                if wanted == TypeId::of::<f64>()
                    && s.is_unique()
                    && s.view().is_standard_layout() =>
            {
                take!(s)
            }
            other => return Err(other),
        };
        Ok(*taken.downcast::<Vec<T>>().expect("checked element type"))
    }

    fn append_values<T: HostElement>(t: &NdArrayTensor, out: &mut Vec<T>) -> bool {
        let out: &mut dyn Any = out;
        match t {
            NdArrayTensor::F32(storage) => out.downcast_mut::<Vec<f32>>().is_some_and(|out| {
                let view = storage.view();
                // SAFETY: the view describes values of the array it borrows.
                unsafe { gather_into(out, view.as_ptr(), view.shape(), view.strides()) };
                true
            }),
            NdArrayTensor::F64(storage) => out.downcast_mut::<Vec<f64>>().is_some_and(|out| {
                let view = storage.view();
                // SAFETY: the view describes values of the array it borrows.
                unsafe { gather_into(out, view.as_ptr(), view.shape(), view.strides()) };
                true
            }),
            _ => false,
        }
    }

    fn with_values<T: HostElement, R>(t: &NdArrayTensor, f: impl FnOnce(&[T]) -> R) -> Option<R> {
        let wanted = TypeId::of::<T>();
        let (ptr, len) = match t {
            NdArrayTensor::F32(s) if wanted == TypeId::of::<f32>() => {
                let v = s.view();
                let values = v.as_slice()?;
                (values.as_ptr() as *const T, values.len())
            }
            NdArrayTensor::F64(s) if wanted == TypeId::of::<f64>() => {
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

    fn view<T: HostElement>(t: &NdArrayTensor) -> Option<HostView<'_, T>> {
        let wanted = TypeId::of::<T>();
        let (first, shape, strides) = match t {
            NdArrayTensor::F32(s) if wanted == TypeId::of::<f32>() => {
                let v = s.view();
                (
                    v.as_ptr() as *const T,
                    v.shape().to_vec(),
                    v.strides().to_vec(),
                )
            }
            NdArrayTensor::F64(s) if wanted == TypeId::of::<f64>() => {
                let v = s.view();
                (
                    v.as_ptr() as *const T,
                    v.shape().to_vec(),
                    v.strides().to_vec(),
                )
            }
            _ => return None,
        };
        let len = HostView::<T>::span(&shape, &strides)?;
        // SAFETY: `T` is the storage's element type (checked above); with no negative
        // stride, every value from the view's first to its last lies in the array's
        // storage, which `t` owns or shares and which outlives the borrow.
        let values = unsafe { core::slice::from_raw_parts(first, len) };
        HostView::new(values, &shape, &strides)
    }

    fn from_host<T: HostElement>(
        values: Vec<T>,
        shape: &[usize],
        _device: &Self::Device,
    ) -> NdArrayTensor {
        let shape = ndarray::IxDyn(shape);
        let values: Box<dyn Any> = Box::new(values);
        let tensor = match values.downcast::<Vec<f32>>() {
            Ok(v) => SharedArray::from_shape_vec(shape, *v).map(NdArrayTensor::from),
            Err(values) => {
                let v = values
                    .downcast::<Vec<f64>>()
                    .expect("HostElement is f32 or f64");
                SharedArray::from_shape_vec(shape, *v).map(NdArrayTensor::from)
            }
        };
        tensor.expect("the kernel's outputs have their shape's length")
    }

    fn sole_holder(t: &NdArrayTensor) -> bool {
        match t {
            NdArrayTensor::F32(s) => s.is_unique(),
            NdArrayTensor::F64(s) => s.is_unique(),
            _ => false,
        }
    }

    fn quantized_values_key(t: &NdArrayQTensor) -> Option<ValuesKey> {
        let NdArrayTensor::I8(s) = &t.qtensor else {
            return None;
        };
        let v = s.view();
        let dtype = DType::QFloat(*t.scheme());
        ValuesKey::of_view(v.as_ptr(), v.shape(), v.strides(), dtype)
            .map(|key| key.with_scales(t.qparams.iter().map(|p| p.scales)))
    }

    fn quantized_sole_holder(t: &NdArrayQTensor) -> bool {
        matches!(&t.qtensor, NdArrayTensor::I8(s) if s.is_unique())
    }

    fn values_key(t: &NdArrayTensor) -> Option<ValuesKey> {
        match t {
            NdArrayTensor::F32(s) => {
                let v = s.view();
                ValuesKey::of_view(v.as_ptr(), v.shape(), v.strides(), DType::F32)
            }
            NdArrayTensor::F64(s) => {
                let v = s.view();
                ValuesKey::of_view(v.as_ptr(), v.shape(), v.strides(), DType::F64)
            }
            _ => None,
        }
    }

    /// Both parts are views of the gradient's storage (nothing is copied; every
    /// parameter's gradient then shares the one buffer the kernel wrote, which lives
    /// while any of them does), where Burn 0.21's `slice` and `reshape` would each copy.
    fn split_flat_gradient(
        grad: NdArrayTensor,
        before: usize,
        part_shape: Shape,
    ) -> (NdArrayTensor, NdArrayTensor) {
        match split_views(grad, before, &part_shape) {
            Ok(split) => split,
            Err(grad) => split_by_slices::<Self>(grad, before, part_shape),
        }
    }
}

/// The split of a one-dimensional gradient stored in memory it owns, as two views.
fn split_views(
    grad: NdArrayTensor,
    before: usize,
    part_shape: &Shape,
) -> Result<(NdArrayTensor, NdArrayTensor), NdArrayTensor> {
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
    let shape = part_shape.as_slice();
    // Borrowed storage (a zero-copy load) would be copied by `into_shared`.
    match grad {
        NdArrayTensor::F32(s) if s.is_owned() => match split(s.into_shared(), before, shape) {
            Ok((prefix, part)) => Ok((prefix.into(), part.into())),
            Err(whole) => Err(whole.into()),
        },
        NdArrayTensor::F64(s) if s.is_owned() => match split(s.into_shared(), before, shape) {
            Ok((prefix, part)) => Ok((prefix.into(), part.into())),
            Err(whole) => Err(whole.into()),
        },
        other => Err(other),
    }
}
