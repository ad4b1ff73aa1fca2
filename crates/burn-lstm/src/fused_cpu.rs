//! NdArray runs the fused CPU kernel of the `lstm-cpu` crate (f32 and f64; other float
//! types run the portable kernel). Tensors are copied to and from host vectors once per
//! call, which is linear in their size and small next to the kernel's work.

use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use burn::tensor::{
    DType, Element, Tensor, TensorData, TensorMetadata, backend::Backend, ops::FloatTensor,
};
use burn_ndarray::NdArrayTensor;
use lstm_cpu::{LstmCall, LstmOutputs, OutputGrads, Real, Tape};

use crate::backend::{HostResiduals, LstmGrads, LstmOutput, LstmOutputGrads, LstmSaved};
use crate::kernel::{KernelChoice, LstmKernel};
use crate::portable::{dropout_mask, primitive, tensor};
use crate::spec::LstmSpec;

static THREADS: AtomicUsize = AtomicUsize::new(0);

/// Threads the fused CPU kernel uses per call: set by [`set_cpu_threads`], else the
/// `BURN_LSTM_THREADS` environment variable, else every core the process may use.
/// Small shapes use fewer (one thread below ~32 K multiply-adds per thread and step).
pub fn cpu_threads() -> usize {
    match THREADS.load(Ordering::Relaxed) {
        0 => {
            static FROM_ENV: OnceLock<usize> = OnceLock::new();
            *FROM_ENV.get_or_init(|| {
                std::env::var("BURN_LSTM_THREADS")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            })
        }
        n => n,
    }
}

/// Sets the threads of the fused CPU kernel for this process (`0` restores the default
/// of [`cpu_threads`]).
pub fn set_cpu_threads(threads: usize) {
    THREADS.store(threads, Ordering::Relaxed);
}

/// Returns the fused CPU kernel's cached scratch memory to the allocator. The kernel
/// keeps freed scratch buffers for the next call (up to `LSTM_CPU_BUFFER_CACHE_MIB`,
/// default 1024 MiB; see docs/fused-cpu.md); call this after a large model's last call
/// to give that memory back. Later calls work as before and fill the cache again.
pub fn release_cpu_buffers() {
    lstm_cpu::release_cached_buffers();
}

/// The kernel NdArray runs for `spec` with float type `dtype`.
pub(crate) fn choice(dtype: DType, spec: &LstmSpec) -> KernelChoice {
    let supported = matches!(dtype, DType::F32 | DType::F64);
    match spec.kernel {
        Some(LstmKernel::Portable) => KernelChoice::fallback(
            LstmKernel::Portable,
            "the portable kernel was asked for (the fused CPU kernel is faster)",
        ),
        _ if !supported => KernelChoice::fallback(
            LstmKernel::Portable,
            format!("the fused CPU kernel runs f32 and f64; this backend computes in {dtype:?}"),
        ),
        Some(LstmKernel::Cudnn) => KernelChoice::fallback(
            LstmKernel::FusedCpu,
            "the cudnn kernel was asked for but runs only on CUDA",
        ),
        None | Some(LstmKernel::FusedCpu) => KernelChoice::fastest(LstmKernel::FusedCpu),
    }
}

/// Host copies of one call's inputs (the dropout masks, which only the forward reads,
/// are not kept: the tape holds what the backward needs of them).
struct HostCall<T> {
    spec: LstmSpec,
    input: Vec<T>,
    weights: Vec<T>,
    h0: Vec<T>,
    c0: Vec<T>,
}

impl<T: Real> HostCall<T> {
    /// Keeps the host copies' memory for the next call (lstm-cpu's buffer cache): the
    /// next call's copies then need no fresh pages.
    fn recycle(self) {
        for values in [self.input, self.weights, self.h0, self.c0] {
            lstm_cpu::recycle_vec(values);
        }
    }

    fn call(&self) -> LstmCall<'_, T> {
        LstmCall {
            arch: &self.spec.arch,
            seq_len: self.spec.seq_len,
            batch: self.spec.batch,
            lengths: self.spec.lengths.as_deref(),
            input: &self.input,
            weights: &self.weights,
            h0: &self.h0,
            c0: &self.c0,
            dropout_masks: &[],
            threads: cpu_threads(),
        }
    }
}

struct Saved<T: Real> {
    host: HostCall<T>,
    tape: Tape<T>,
}

/// A host copy of a tensor in `T`. NdArray tensors are read through their strides:
/// Burn's `into_data` walks a shared (reference-counted) array element by element, about
/// 25 ns per value, which cost more than the whole kernel at small shapes.
fn to_host<B: Backend, T: Element, const D: usize>(t: FloatTensor<B>) -> Vec<T> {
    let t = match take_unique_ndarray::<B, T>(t) {
        Ok(values) => return values,
        Err(t) => t,
    };
    let mut values = Vec::new();
    if ndarray_append::<T>(&t, &mut values) {
        return values;
    }
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
    let back = |tensor: NdArrayTensor| {
        let boxed: Box<dyn Any> = Box::new(tensor);
        *boxed
            .downcast::<FloatTensor<B>>()
            .expect("FloatTensor<B> is NdArrayTensor")
    };
    let boxed: Box<dyn Any> = Box::new(t);
    let tensor = match boxed.downcast::<NdArrayTensor>() {
        Ok(tensor) => *tensor,
        Err(other) => return Err(*other.downcast::<FloatTensor<B>>().expect("unchanged")),
    };
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
    match parts.first().map(|p| p.dtype()) {
        Some(DType::F32) => flatten_as::<B, f32>(parts),
        Some(DType::F64) => flatten_as::<B, f64>(parts),
        _ => crate::flat_weights::concatenate::<B>(parts),
    }
}

fn flatten_as<B: Backend, T: Real + Element>(parts: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    let device = B::float_device(&parts[0]);
    let len: usize = parts.iter().map(|p| p.shape().num_elements()).sum();
    let mut parts = parts.into_iter();
    let first = parts.next().expect("flatten has at least one part");
    let first_len = first.shape().num_elements();
    // A first part nobody else holds (the buffer built so far, when autodiff appends
    // parameters one at a time) is extended in place; otherwise every part is copied.
    let (mut values, first) = match take_unique_ndarray::<B, T>(first) {
        Ok(values) => (values, None),
        Err(first) => (lstm_cpu::vec_with_capacity::<T>(len), Some(first)),
    };
    let taken = values.len();
    values.reserve(len - taken);
    let rest: Vec<FloatTensor<B>> = first.into_iter().chain(parts).collect();
    if rest.iter().all(|p| ndarray_append::<T>(p, &mut values)) {
        return device_tensor::<B, T, 1>(values, [len], &device);
    }
    // A part of another kind: concatenate with Burn's ops, the taken first part as a
    // tensor again (its values are the first `taken` of `values`).
    let mut all = Vec::with_capacity(rest.len() + 1);
    if taken > 0 {
        values.truncate(taken);
        all.push(device_tensor::<B, T, 1>(values, [first_len], &device));
    } else {
        lstm_cpu::recycle_vec(values);
    }
    all.extend(rest);
    crate::flat_weights::concatenate::<B>(all)
}

/// The gradient of a flat buffer `[before + part]` split into the buffer's first
/// `before` values and the last part, reshaped to `part_shape`. A gradient nobody else
/// holds (the usual case) is cut in place on NdArray: only the part is copied, where
/// NdArray's `slice` would copy both (Burn 0.21 slices by copying).
pub(crate) fn split_gradient<B: Backend>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: burn::tensor::Shape,
) -> (FloatTensor<B>, FloatTensor<B>) {
    match grad.dtype() {
        DType::F32 => split_as::<B, f32>(grad, before, part_shape),
        DType::F64 => split_as::<B, f64>(grad, before, part_shape),
        _ => split_by_slices::<B>(grad, before, part_shape),
    }
}

fn split_as<B: Backend, T: Real + Element>(
    grad: FloatTensor<B>,
    before: usize,
    part_shape: burn::tensor::Shape,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let device = B::float_device(&grad);
    match take_unique_ndarray::<B, T>(grad) {
        Ok(mut values) => {
            let part = TensorData::new(values[before..].to_vec(), part_shape);
            values.truncate(before);
            // Any rank: the backend op, not `Tensor::<B, D>::from_data`.
            let part = B::float_from_data(part, &device);
            (device_tensor::<B, T, 1>(values, [before], &device), part)
        }
        Err(grad) => split_by_slices::<B>(grad, before, part_shape),
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

fn device_tensor<B: Backend, T: Element, const D: usize>(
    values: Vec<T>,
    shape: [usize; D],
    device: &B::Device,
) -> FloatTensor<B> {
    let data = TensorData::new(values, shape);
    primitive(Tensor::<B, D>::from_data(data, (device, T::dtype())))
}

/// Forward through the fused kernel in `T` (`f32` or `f64`).
pub(crate) fn forward<B: Backend, T: Real + Element>(
    inputs: [FloatTensor<B>; 4],
    spec: &LstmSpec,
    save: bool,
) -> (LstmOutput<B>, Option<LstmSaved<B>>) {
    let device = B::float_device(&inputs[0]);
    // A training forward keeps its inputs for the backward; inference lets them go, so
    // a buffer built for this call alone moves to the host without a copy.
    let kept = save.then(|| inputs.clone());
    let [x, w, h0, c0] = inputs;
    let arch = &spec.arch;
    let masks: Vec<Vec<T>> = if spec.dropout_active() {
        let shape = [spec.seq_len, spec.batch, arch.dirs() * arch.output_size()];
        (1..arch.num_layers)
            .map(|layer| {
                let place = (&device, T::dtype());
                let mask = dropout_mask::<B>(shape, spec.dropout, spec.dropout_seed, layer, place);
                to_host::<B, T, 3>(primitive(mask))
            })
            .collect()
    } else {
        Vec::new()
    };
    let host_call = HostCall {
        spec: spec.clone(),
        input: to_host::<B, T, 3>(x),
        weights: to_host::<B, T, 1>(w),
        h0: to_host::<B, T, 3>(h0),
        c0: to_host::<B, T, 3>(c0),
    };
    let mask_refs: Vec<&[T]> = masks.iter().map(Vec::as_slice).collect();
    let call = LstmCall {
        dropout_masks: &mask_refs,
        ..host_call.call()
    };
    let expect = "the module validated the call";
    let (outputs, tape) = if save {
        let (outputs, tape) = lstm_cpu::forward_train(&call).expect(expect);
        (outputs, Some(tape))
    } else {
        (lstm_cpu::forward(&call).expect(expect), None)
    };
    let LstmOutputs { y, h_n, c_n } = outputs;
    let (t, b, cells) = (spec.seq_len, spec.batch, arch.cells());
    let output = LstmOutput {
        y: device_tensor::<B, T, 3>(y, [t, b, arch.dirs() * arch.output_size()], &device),
        h_n: device_tensor::<B, T, 3>(h_n, [cells, b, arch.output_size()], &device),
        c_n: device_tensor::<B, T, 3>(c_n, [cells, b, arch.hidden_size], &device),
    };
    masks.into_iter().for_each(lstm_cpu::recycle_vec);
    let Some(tape) = tape else {
        host_call.recycle();
        return (output, None);
    };
    let saved = LstmSaved {
        spec: spec.clone(),
        kernel: LstmKernel::FusedCpu,
        inputs: kept.expect("a training forward keeps its inputs"),
        residuals: Vec::new(),
        host: Some(HostResiduals(Arc::new(std::sync::Mutex::new(Some(
            Saved {
                host: host_call,
                tape,
            },
        ))))),
    };
    (output, Some(saved))
}

/// Backward of a [`forward`] with `save`.
pub(crate) fn backward<B: Backend, T: Real + Element>(
    saved: LstmSaved<B>,
    grads: LstmOutputGrads<B>,
) -> LstmGrads<B> {
    let device = B::float_device(&saved.inputs[0]);
    let residuals = saved
        .host
        .expect("the fused CPU forward keeps its tape")
        .0
        .downcast::<std::sync::Mutex<Option<Saved<T>>>>()
        .unwrap_or_else(|_| panic!("the fused CPU tape has the backward's element type"));
    let Saved { host, tape } = residuals
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .take()
        .expect("an LSTM backward runs once per forward");
    let (dy, dh_n, dc_n) = (
        to_host::<B, T, 3>(grads.dy),
        to_host::<B, T, 3>(grads.dh_n),
        to_host::<B, T, 3>(grads.dc_n),
    );
    let call = host.call();
    let computed = lstm_cpu::backward(
        &call,
        tape,
        OutputGrads {
            dy: &dy,
            dh_n: &dh_n,
            dc_n: &dc_n,
        },
    )
    .expect("the tape belongs to this call");
    for values in [dy, dh_n, dc_n] {
        lstm_cpu::recycle_vec(values);
    }
    let spec = &host.spec;
    let arch = &spec.arch;
    let (t, b, cells) = (spec.seq_len, spec.batch, arch.cells());
    let grads = LstmGrads {
        input: device_tensor::<B, T, 3>(computed.input, [t, b, arch.input_size], &device),
        weights: device_tensor::<B, T, 1>(computed.weights, [arch.weight_count()], &device),
        h0: device_tensor::<B, T, 3>(computed.h0, [cells, b, arch.output_size()], &device),
        c0: device_tensor::<B, T, 3>(computed.c0, [cells, b, arch.hidden_size], &device),
    };
    host.recycle();
    grads
}
