//! Flex tensors on the host side of the fused CPU kernel. A `FlexTensor` is typed bytes
//! behind an `Arc` with a layout (shape, strides, offset) and a run-time dtype; Flex is
//! copy-on-write (it writes a tensor's bytes only through `Arc::make_mut` or
//! `Arc::get_mut`), and its `slice`, `swap_dims` and contiguous `reshape` are views. So
//! values are read in place, a tensor nobody else holds gives up its buffer without a
//! copy (`into_data` then `into_vec`), and outputs own the kernel's vectors.

use burn::tensor::quantization::QTensorPrimitive;
use burn::tensor::{DType, Shape, TensorData};
use burn_flex::{Flex, FlexQTensor, FlexTensor, Layout};

use crate::kernels::fused_cpu::host::{
    HostElement, HostTensors, HostView, ValuesKey, gather_into, split_by_slices,
};

impl HostTensors for Flex {
    fn take_unique<T: HostElement>(t: FlexTensor) -> Result<Vec<T>, FlexTensor> {
        let whole_buffer = t.bytes().len() == t.layout().num_elements() * size_of::<T>();
        let takeable = t.dtype() == T::dtype()
            && t.is_unique()
            && t.is_contiguous()
            && t.layout().start_offset() == 0
            && whole_buffer;
        if !takeable {
            return Err(t);
        }
        // No copy: the bytes move out of the `Arc` and back into the vector they were
        // made from (a copy only if their alignment is not `T`'s, which Flex's own
        // outputs and ours never have).
        Ok(t.into_data()
            .into_vec::<T>()
            .expect("the tensor's dtype is T"))
    }

    fn append_values<T: HostElement>(t: &FlexTensor, out: &mut Vec<T>) -> bool {
        if t.dtype() != T::dtype() {
            return false;
        }
        if let Some(values) = t.as_slice::<T>() {
            out.extend_from_slice(values);
            return true;
        }
        let layout = t.layout();
        let storage = t.storage::<T>();
        // SAFETY: a Flex layout's offset and strides address values inside its storage.
        unsafe {
            let first = storage.as_ptr().add(layout.start_offset());
            gather_into(out, first, layout.shape().as_slice(), layout.strides());
        }
        true
    }

    fn with_values<T: HostElement, R>(t: &FlexTensor, f: impl FnOnce(&[T]) -> R) -> Option<R> {
        t.as_slice::<T>().map(f)
    }

    fn view<T: HostElement>(t: &FlexTensor) -> Option<HostView<'_, T>> {
        if t.dtype() != T::dtype() {
            return None;
        }
        let layout = t.layout();
        let values = t.storage::<T>().get(layout.start_offset()..)?;
        HostView::new(values, layout.shape().as_slice(), layout.strides())
    }

    fn from_host<T: HostElement>(
        values: Vec<T>,
        shape: &[usize],
        _device: &Self::Device,
    ) -> FlexTensor {
        FlexTensor::from_data(TensorData::new(values, shape.to_vec()))
    }

    fn sole_holder(t: &FlexTensor) -> bool {
        t.is_unique()
    }

    fn quantized_values_key(t: &FlexQTensor) -> Option<ValuesKey> {
        let stored = t.tensor();
        let layout = stored.layout();
        // A quantized tensor's storage is i8 (`FlexQTensor::new` asserts it).
        let first = stored
            .storage::<i8>()
            .as_ptr()
            .wrapping_add(layout.start_offset());
        let dtype = DType::QFloat(*t.scheme());
        ValuesKey::of_view(first, layout.shape().as_slice(), layout.strides(), dtype)
            .map(|key| key.with_scales(t.scales().iter().copied()))
    }

    fn quantized_sole_holder(t: &FlexQTensor) -> bool {
        t.tensor().is_unique()
    }

    fn values_key(t: &FlexTensor) -> Option<ValuesKey> {
        let layout = t.layout();
        let first = match t.dtype() {
            DType::F32 => t
                .storage::<f32>()
                .as_ptr()
                .wrapping_add(layout.start_offset()) as *const u8,
            DType::F64 => t
                .storage::<f64>()
                .as_ptr()
                .wrapping_add(layout.start_offset()) as *const u8,
            _ => return None,
        };
        ValuesKey::of_view(
            first,
            layout.shape().as_slice(),
            layout.strides(),
            t.dtype(),
        )
    }

    /// Both parts are views of the gradient's bytes. Burn's `slice` is a view on Flex,
    /// but its `reshape` of a view that does not start at offset 0 copies.
    fn split_flat_gradient(
        grad: FlexTensor,
        before: usize,
        part_shape: Shape,
    ) -> (FlexTensor, FlexTensor) {
        let layout = grad.layout();
        let contiguous_run = layout.num_dims() == 1
            && layout.strides() == [1]
            && layout.num_elements() == before + part_shape.num_elements();
        if !contiguous_run {
            return split_by_slices::<Self>(grad, before, part_shape);
        }
        let offset = layout.start_offset();
        let dtype = grad.dtype();
        let prefix = Layout::new(Shape::new([before]), vec![1], offset);
        let part = Layout::contiguous(part_shape);
        let part = Layout::new(
            part.shape().clone(),
            part.strides().to_vec(),
            offset + before,
        );
        (
            FlexTensor::from_arc(grad.data_arc(), prefix, dtype),
            FlexTensor::from_arc(grad.data_arc(), part, dtype),
        )
    }
}
