//! How the fused CPU kernel reaches a backend's tensors on the host. Each CPU backend
//! implements [`HostTensors`] in its own folder (`kernels/ndarray`, `kernels/flex`);
//! everything else of the glue (the call, the weight cache, the flat buffer) is written
//! once, over this trait.
//!
//! The rule every implementation keeps: values are read in place or copied once, and a
//! buffer nobody else holds is taken without a copy. Burn's generic `into_data`,
//! `reshape`, `slice` and `cat` copy (or walk element by element) where these need not.

use burn::tensor::{
    Element, Shape, TensorMetadata,
    backend::Backend,
    ops::{FloatTensor, QuantizedTensor},
};
use lstm_cpu::Real;

use crate::op::flat_weights::FlatBufferOps;
use crate::op::tensor::tensor;

/// The element types the fused CPU kernel computes in: `f32` and `f64`.
pub(crate) trait HostElement: Real + Element + bytemuck::Pod {}

impl HostElement for f32 {}
impl HostElement for f64 {}

/// Identity of a tensor's values: where they are and how they are laid out (the weight
/// cache's key, see `weights_cache.rs`). Two tensors with equal keys hold the same
/// values while either is alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ValuesKey {
    /// Address of the first value.
    pub address: usize,
    /// Logical shape.
    pub shape: Vec<usize>,
    /// Strides in elements.
    pub strides: Vec<isize>,
    /// Element type (for quantized values, their scheme).
    pub dtype: burn::tensor::DType,
    /// Bits of the quantization scales of quantized values (empty for float values):
    /// with `dtype`'s scheme, what the stored integers mean.
    pub scales: Vec<u32>,
}

impl ValuesKey {
    /// The key of a view's values (`None` when it has none: an empty view's address is
    /// not its own).
    pub fn of_view<E>(
        data: *const E,
        shape: &[usize],
        strides: &[isize],
        dtype: burn::tensor::DType,
    ) -> Option<Self> {
        (shape.iter().product::<usize>() > 0).then(|| Self {
            address: data as usize,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            dtype,
            scales: Vec::new(),
        })
    }

    /// This key for quantized values whose scales are `scales`.
    pub fn with_scales(self, scales: impl IntoIterator<Item = f32>) -> Self {
        Self {
            scales: scales.into_iter().map(f32::to_bits).collect(),
            ..self
        }
    }
}

/// A tensor's values where they are: value `[i0, i1, ..]` of the tensor is
/// `values[i0 * strides[0] + i1 * strides[1] + ..]`. Only layouts without negative
/// strides, and not empty, so `values` runs from the first value to the last.
#[derive(Clone, Debug)]
pub(crate) struct HostView<'t, T> {
    pub values: &'t [T],
    pub shape: Vec<usize>,
    pub strides: Vec<usize>,
}

impl<'t, T> HostView<'t, T> {
    /// The view of `shape` at `strides` whose first value is `values[0]`, when its strides
    /// are not negative, it is not empty and `values` holds its last value.
    pub fn new(values: &'t [T], shape: &[usize], strides: &[isize]) -> Option<Self> {
        let len = Self::span(shape, strides)?;
        Some(Self {
            values: values.get(..len)?,
            shape: shape.to_vec(),
            strides: strides.iter().map(|&s| s as usize).collect(),
        })
    }

    /// Values from the first of a view of `shape` at `strides` to its last, when it is
    /// one [`Self::new`] takes (`None`: empty, or a negative stride).
    pub fn span(shape: &[usize], strides: &[isize]) -> Option<usize> {
        if shape.contains(&0) || strides.len() != shape.len() || strides.iter().any(|&s| s < 0) {
            return None;
        }
        let last: usize = shape
            .iter()
            .zip(strides)
            .map(|(&n, &s)| (n - 1) * s as usize)
            .sum();
        Some(last + 1)
    }
}

/// A CPU backend whose float tensors the fused kernel reads and writes directly.
///
/// Soundness of the weight cache rests on one property of the implementing backend:
/// it changes a tensor's values in place only when nobody else holds them (NdArray and
/// Flex are copy-on-write). A cache entry holds a clone of each parameter, so while it
/// lives every change makes new storage, with a new [`ValuesKey`].
pub(crate) trait HostTensors: Backend {
    /// The values of `t` without a copy, when they are row-major `T` held by nobody else
    /// (`t` back otherwise).
    fn take_unique<T: HostElement>(t: FloatTensor<Self>) -> Result<Vec<T>, FloatTensor<Self>>;

    /// Appends the values of `t` to `out` in row-major order (through its strides) when
    /// they are of type `T`; returns whether they were.
    fn append_values<T: HostElement>(t: &FloatTensor<Self>, out: &mut Vec<T>) -> bool;

    /// Runs `f` on the values of `t` in place when they are row-major `T` (`None`
    /// otherwise).
    fn with_values<T: HostElement, R>(
        t: &FloatTensor<Self>,
        f: impl FnOnce(&[T]) -> R,
    ) -> Option<R>;

    /// The values of `t` where they are, through its layout, when they are `T` (`None`
    /// otherwise, or for a layout [`HostView`] does not take).
    fn view<T: HostElement>(t: &FloatTensor<Self>) -> Option<HostView<'_, T>>;

    /// A tensor that owns `values` (no copy).
    fn from_host<T: HostElement>(
        values: Vec<T>,
        shape: &[usize],
        device: &Self::Device,
    ) -> FloatTensor<Self>;

    /// The identity of `t`'s values, `None` when they cannot be cached (empty, or not
    /// f32/f64).
    fn values_key(t: &FloatTensor<Self>) -> Option<ValuesKey>;

    /// Whether no other tensor shares `t`'s values: whoever holds `t` holds the last
    /// reference to them (`false` where that cannot be known, as for borrowed values).
    fn sole_holder(t: &FloatTensor<Self>) -> bool;

    /// [`Self::values_key`] of a tensor quantized by Burn: its stored integers' place
    /// and layout, its scheme and its scales (`None` for a storage not keyed).
    fn quantized_values_key(t: &QuantizedTensor<Self>) -> Option<ValuesKey>;

    /// [`Self::sole_holder`] of a quantized tensor's stored integers.
    fn quantized_sole_holder(t: &QuantizedTensor<Self>) -> bool;

    /// Splits the gradient of a flat buffer `[before + part]` (see
    /// [`FlatBufferOps::split_gradient`]). The default uses Burn's `slice` and `reshape`,
    /// which are views on backends that have them (Flex).
    fn split_flat_gradient(
        grad: FloatTensor<Self>,
        before: usize,
        part_shape: Shape,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        split_by_slices::<Self>(grad, before, part_shape)
    }
}

/// A flat buffer's gradient split by Burn's `slice` and `reshape` (the default of
/// [`HostTensors::split_flat_gradient`], and the fallback of the backends' own splits).
pub(crate) fn split_by_slices<B: Backend>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: Shape,
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

/// A host copy of `t` in `T`: its own buffer when nobody else holds it, else one copy
/// into a block of lstm-cpu's buffer cache (a training call copies its inputs every
/// call, and fresh pages cost more than the copy), else Burn's `into_data`.
pub(crate) fn to_host<B: HostTensors, T: HostElement, const D: usize>(t: FloatTensor<B>) -> Vec<T> {
    let t = match B::take_unique::<T>(t) {
        Ok(values) => return values,
        Err(t) => t,
    };
    let mut values = lstm_cpu::vec_with_capacity::<T>(t.shape().num_elements());
    if B::append_values::<T>(&t, &mut values) {
        return values;
    }
    lstm_cpu::recycle_vec(values);
    tensor::<B, D>(t)
        .into_data()
        .convert::<T>()
        .into_vec::<T>()
        .expect("converted to the kernel's element type")
}

/// A tensor of `shape` owning `values`.
pub(crate) fn device_tensor<B: HostTensors, T: HostElement, const D: usize>(
    values: Vec<T>,
    shape: [usize; D],
    device: &B::Device,
) -> FloatTensor<B> {
    B::from_host(values, &shape, device)
}

/// Gives the memory of tensors nobody else holds (a training call's inputs, once its
/// backward has run) to lstm-cpu's buffer cache, for the next call's buffers.
pub(crate) fn recycle<B: HostTensors, T: HostElement>(
    tensors: impl IntoIterator<Item = FloatTensor<B>>,
) {
    for t in tensors {
        if let Ok(values) = B::take_unique::<T>(t) {
            lstm_cpu::recycle_vec(values);
        }
    }
}

/// The op's flat parameter buffer (canonical order, each part as stored): one buffer,
/// each value copied once, whole rows at a time. Other dtypes go through Burn's `cat`.
pub(crate) fn flatten<B: HostTensors>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    flatten_into_capacity::<B>(parts, 0)
}

/// [`flatten`] into a buffer with room for `capacity` values (the whole flat buffer when
/// autodiff appends the parameters one at a time).
fn flatten_into_capacity<B: HostTensors>(
    parts: Vec<FloatTensor<B>>,
    capacity: usize,
) -> FloatTensor<B> {
    match parts.first().map(|p| p.dtype()) {
        Some(burn::tensor::DType::F32) => flatten_as::<B, f32>(parts, capacity),
        Some(burn::tensor::DType::F64) => flatten_as::<B, f64>(parts, capacity),
        _ => crate::op::flat_weights::concatenate::<B>(parts),
    }
}

fn flatten_as<B: HostTensors, T: HostElement>(
    parts: Vec<FloatTensor<B>>,
    capacity: usize,
) -> FloatTensor<B> {
    if !parts.iter().all(|p| p.dtype() == T::dtype()) {
        return crate::op::flat_weights::concatenate::<B>(parts);
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
    let (mut values, first) = match B::take_unique::<T>(first) {
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
        let appended = B::append_values::<T>(&part, &mut values);
        assert!(appended, "every part was checked to hold T values");
    }
    B::from_host(values, &[len], &device)
}

/// The [`FlatBufferOps`] of a [`HostTensors`] backend: appends extend a buffer nobody
/// else holds in place (each value is copied once), the gradient is split by the
/// backend's [`HostTensors::split_flat_gradient`].
pub(crate) fn flat_buffer_ops<B: HostTensors>() -> FlatBufferOps<B> {
    FlatBufferOps {
        append: |buffer, part, capacity| flatten_into_capacity::<B>(vec![buffer, part], capacity),
        split_gradient: B::split_flat_gradient,
    }
}

/// Arrays of at least this many bytes are gathered by several threads
/// ([`gather_into`]).
const PARALLEL_GATHER_BYTES: usize = 256 << 10;

/// Appends the values of a strided array to `out` in row-major order, copying whole
/// rows when the last axis is contiguous. Large arrays (a batch-first input, which the
/// module hands over as a transposed view) are split by their first axis over the fused
/// kernel's threads: copied by the calling thread alone it was 4-5 % of an inference
/// call at 16×50×512 → 128 (perf) while the kernel's worker waited.
///
/// # Safety
/// `ptr` with `shape` and `strides` (in elements) must describe values inside one live
/// allocation of `E`s.
pub(crate) unsafe fn gather_into<E: Copy + Send + Sync>(
    out: &mut Vec<E>,
    ptr: *const E,
    shape: &[usize],
    strides: &[isize],
) {
    let len = shape.iter().product::<usize>();
    let threads = if len * core::mem::size_of::<E>() >= PARALLEL_GATHER_BYTES {
        super::threads::threads_now()
    } else {
        1
    };
    // SAFETY: the caller's contract.
    unsafe { gather_into_on(threads, out, ptr, shape, strides) }
}

use part_pointer::PartPointer;

mod part_pointer {
    /// A pointer that may cross to the threads of [`lstm_cpu::run_parts`]: they read
    /// disjoint parts of the source and write disjoint parts of the destination. Made only
    /// by the `unsafe` [`PartPointer::new`], which states that promise; it hands out
    /// pointers, never references.
    #[derive(Clone, Copy)]
    pub(super) struct PartPointer<E>(*mut E);
    // SAFETY: made only by `PartPointer::new`, whose caller promises that the threads
    // touch disjoint parts through it; every use states which part it touches.
    unsafe impl<E: Send> Send for PartPointer<E> {}
    // SAFETY: as for `Send`: shared references only copy the pointer.
    unsafe impl<E: Send> Sync for PartPointer<E> {}

    impl<E> PartPointer<E> {
        /// `ptr`, for the threads of one `run_parts` call.
        ///
        /// # Safety
        /// Until the call ends, the threads read or write disjoint parts through it (a
        /// part read by several is written by none).
        pub(super) unsafe fn new(ptr: *mut E) -> Self {
            Self(ptr)
        }

        /// The pointer `count` values further on (a method, so that closures capture the
        /// whole `PartPointer` and not its raw field).
        ///
        /// # Safety
        /// As `pointer::offset`.
        pub(super) unsafe fn offset(self, count: isize) -> *mut E {
            // SAFETY: the caller's promise (`pointer::offset`'s contract).
            unsafe { self.0.offset(count) }
        }
    }
}

/// [`gather_into`] on up to `threads` threads.
///
/// # Safety
/// As [`gather_into`].
unsafe fn gather_into_on<E: Copy + Send + Sync>(
    threads: usize,
    out: &mut Vec<E>,
    ptr: *const E,
    shape: &[usize],
    strides: &[isize],
) {
    let len = shape.iter().product::<usize>();
    out.reserve(len);
    if len == 0 {
        return;
    }
    let start = out.len();
    // SAFETY: each part writes its own rows of the reserved capacity and only reads the
    // source (below).
    let (dst, src) = unsafe {
        (
            PartPointer::new(out.spare_capacity_mut().as_mut_ptr() as *mut E),
            PartPointer::new(ptr as *mut E),
        )
    };
    // Parts of the first axis (a 0-D or 1-D array is one part).
    let (outer, outer_stride, inner_shape, inner_strides) = match shape {
        [] | [_] => (1, 0, shape, strides),
        _ => (shape[0], strides[0], &shape[1..], &strides[1..]),
    };
    let inner_len = len / outer;
    let parts = threads.clamp(1, outer);
    lstm_cpu::run_parts(parts, parts, |part| {
        let rows = (outer * part / parts)..(outer * (part + 1) / parts);
        for i in rows {
            // SAFETY: index `i` of the first axis is inside the view (the caller's
            // contract), and its values land in this part's own `inner_len` slots of
            // the reserved capacity.
            unsafe {
                gather_rows(
                    dst.offset((i * inner_len) as isize),
                    src.offset(i as isize * outer_stride),
                    inner_shape,
                    inner_strides,
                )
            };
        }
    });
    // SAFETY: every one of the `len` values after `start` was written above.
    unsafe { out.set_len(start + len) };
}

/// Writes the values of a strided array to `dst` in row-major order.
///
/// # Safety
/// As [`gather_into`]; the array is not empty and `dst` has room for every value of it.
unsafe fn gather_rows<E: Copy>(mut dst: *mut E, ptr: *const E, shape: &[usize], strides: &[isize]) {
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
        // the allocation (the caller's contract), and `dst` has room for the row.
        unsafe {
            let row = ptr.offset(offset);
            if row_stride == 1 {
                core::ptr::copy_nonoverlapping(row, dst, row_len);
            } else {
                for j in 0..row_len {
                    *dst.add(j) = *row.offset(j as isize * row_stride);
                }
            }
            dst = dst.add(row_len);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The value at `index` of the view (`shape`, `strides`) over `base`.
    fn at(base: &[f32], strides: &[isize], index: &[usize]) -> f32 {
        let offset: isize = index
            .iter()
            .zip(strides)
            .map(|(&i, &s)| i as isize * s)
            .sum();
        base[offset as usize]
    }

    /// Row-major values of the view, one index at a time.
    fn reference(base: &[f32], shape: &[usize], strides: &[isize]) -> Vec<f32> {
        let len: usize = shape.iter().product();
        (0..len)
            .map(|mut flat| {
                let mut index = vec![0; shape.len()];
                for axis in (0..shape.len()).rev() {
                    index[axis] = flat % shape[axis];
                    flat /= shape[axis];
                }
                at(base, strides, &index)
            })
            .collect()
    }

    /// A batch-first input seen time-major (the module's transposed view), a view whose
    /// last axis is strided, and a 1-D one: the same values in the same order on one
    /// thread and on several (more threads than rows of the first axis too), appended
    /// after what `out` held.
    #[test]
    fn gathering_on_several_threads_equals_one_index_at_a_time() {
        let (b, t, f) = (4, 300, 70);
        let base: Vec<f32> = (0..b * t * f).map(|v| v as f32 * 0.5).collect();
        let views: [(&[usize], &[isize]); 3] = [
            (&[t, b, f], &[f as isize, (t * f) as isize, 1]),
            (&[b, f, t], &[(t * f) as isize, 1, f as isize]),
            (&[b * t * f], &[1]),
        ];
        for (shape, strides) in views {
            let expected = reference(&base, shape, strides);
            for threads in [1, 2, 3, 1000] {
                let mut out = vec![-1.0f32; 3];
                // SAFETY: every view's largest offset is inside `base`.
                unsafe { gather_into_on(threads, &mut out, base.as_ptr(), shape, strides) };
                assert_eq!(&out[..3], &[-1.0; 3], "{shape:?} threads {threads}");
                assert!(out[3..] == expected[..], "{shape:?} threads {threads}");
            }
        }
        let mut scalar = Vec::<f32>::new();
        // SAFETY: a 0-D view reads one value, inside `base`.
        unsafe { gather_into_on(2, &mut scalar, base[7..].as_ptr(), &[], &[]) };
        assert_eq!(scalar, [base[7]], "a 0-D view");
        let mut empty = Vec::<f32>::new();
        // SAFETY: an empty view reads nothing.
        unsafe { gather_into_on(2, &mut empty, base.as_ptr(), &[0, 5], &[5, 1]) };
        assert!(empty.is_empty());
    }
}
