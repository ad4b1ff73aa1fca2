//! The cuDNN op on `CubeTensor<CudaRuntime>`.
//!
//! Interop with CubeCL: the tensors' device addresses come from CubeCL's resources
//! (`pinned.rs`). CubeCL's stream is not public, so the call is ordered against CubeCL's
//! work by `ordering.rs`: events on the GPU context (the default), or two host
//! synchronisations (`BURN_LSTM_CUDNN_EVENTS=0`).

use std::sync::Mutex;

use burn::tensor::Shape;
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use cubecl_common::device::Device as _;
use cudnn_rnn::{
    Attempt, AttemptError, BackwardBuffers, CudnnHandle, CudnnRnnError, DataType, ForwardBuffers,
    MathMode, ReserveSpace, RnnAlgo, RnnConfig, SeqLayout, SeqShape, first_accepted,
};

use crate::kernels::cubecl::flat_cache::gpu_weight_cache;
use crate::kernels::cubecl::keep_awake::{self, Runner, Stage};
use crate::kernels::cudnn::algo::{AlgoPick, cudnn_algo, pick};
use crate::kernels::cudnn::choice::data_type;
use crate::kernels::cudnn::device::{device, log_fallback_once, rnn_config};
use crate::kernels::cudnn::layout::{
    empty_in_layout, in_layout, input_layout, inputs_in_layout, row_major,
};
use crate::kernels::cudnn::ordering::Ordering;
use crate::kernels::cudnn::pinned::{Pinned, byte_len};
use crate::kernels::cudnn::settings::{cudnn_math, cudnn_skip_flush};
use crate::kernels::cudnn::test_refusal;
use crate::kernels::cudnn::trace::CallTrace;
use crate::kernels::cudnn::weights::WeightPlan;
use crate::op::fusion::executing_weights_id;
use crate::op::io::RnnInputs;
use crate::op::shapes::ResultShapes;
use crate::op::spec::RnnSpec;

pub(crate) use crate::kernels::cudnn::types::{CudaBackend, CudaInputs, CudaTensor};

/// What a training forward keeps in host memory for its backward: cuDNN's reserve space
/// (taken by the backward) and the settings the backward must configure cuDNN with,
/// the forward's algorithm included (the reserve space is laid out for it).
pub(crate) struct CudnnTape {
    reserve: Mutex<Option<ReserveSpace>>,
    data_type: DataType,
    math: MathMode,
    algo: RnnAlgo,
    probability: f32,
}

/// Results of a forward: `y`, `h_n`, `c_n` (an LSTM's), and for training the residual
/// tensors (`y` and the weight space) and the tape.
pub(crate) struct CudnnForward {
    pub outputs: [CudaTensor; 2],
    pub c_n: Option<CudaTensor>,
    pub saved: Option<(Vec<CudaTensor>, CudnnTape)>,
}

/// The upstream gradients of a backward; `dc_n` only for an LSTM.
pub(crate) struct UpstreamGrads {
    pub dy: CudaTensor,
    pub dh_n: CudaTensor,
    pub dc_n: Option<CudaTensor>,
}

/// Keeps CubeCL's device thread of `tensor`'s GPU polling for a while
/// (`BURN_LSTM_KEEP_AWAKE`, `kernels/cubecl/keep_awake.rs`).
fn keep_device_thread_awake(tensor: &CudaTensor) {
    let device = tensor.device.to_id();
    let runner = Runner {
        device,
        stage: Stage::Device,
    };
    keep_awake::note(runner, || {
        tensor
            .client
            .exclusive(keep_awake::device_thread_flusher(device))
            .ok()
    });
}

fn empty(like: &CudaTensor, shape: &[usize]) -> CudaTensor {
    empty_device_contiguous_dtype(
        like.client.clone(),
        like.device.clone(),
        Shape::from(shape.to_vec()),
        like.dtype,
    )
}

/// cuDNN's weight space for `canonical` (flat parameters or their gradient): `canonical`
/// itself when the layouts coincide, else a new buffer the plan copies into or out of.
fn weight_space(plan: &WeightPlan, canonical: &CudaTensor) -> CudaTensor {
    if plan.identity {
        canonical.clone()
    } else {
        empty(canonical, &[plan.space_len])
    }
}

/// Orders a call after CubeCL's earlier work on `x`'s device ([`Ordering::before`], the
/// settings read once for both the step and its trace mark), and marks the step in
/// `trace`. Returns the ordering the call's `after` step must use.
fn order_after_cubecl(
    addresses: &Pinned,
    x: &CudaTensor,
    handle: &CudnnHandle,
    trace: &mut CallTrace,
) -> Result<Ordering, String> {
    let skip_flush = cudnn_skip_flush();
    let ordering = Ordering::of_settings().before(addresses, x, handle, skip_flush)?;
    trace.mark(ordering.before_mark(skip_flush));
    Ok(ordering)
}

/// Orders CubeCL's later work after what a call `queued` on cuDNN's stream
/// ([`Ordering::after`]), whether the queueing succeeded or failed part-way: a failed
/// call's buffers go back to CubeCL, and the copies, memsets or kernels it queued on
/// them before the failure must come first. The queueing's error comes first.
fn ordered<T>(
    queued: Result<T, CudnnRnnError>,
    ordering: Ordering,
    handle: &CudnnHandle,
    trace: &mut CallTrace,
) -> Result<T, CudnnRnnError> {
    let after = ordering.after(handle);
    trace.mark(ordering.after_mark());
    first_error(queued, after)
}

/// `queued`'s value if both steps succeeded, else the first step's error.
fn first_error<T, E>(queued: Result<T, E>, after: Result<(), E>) -> Result<T, E> {
    let value = queued?;
    after.map(|()| value)
}

/// Forward through cuDNN; `save` keeps what [`backward`] needs. The algorithm is the
/// policy's pick ([`cudnn_algo`]), the layout the input's ([`input_layout`]); where cuDNN
/// refuses them, the call runs again sequence-major, then on the standard algorithm
/// ([`first_accepted`]), the reason is logged once, and the refusal is remembered for
/// the device, configuration and shape, so that later such calls start where they run.
pub(crate) fn forward(
    inputs: CudaInputs,
    spec: &RnnSpec,
    save: bool,
) -> Result<CudnnForward, String> {
    let layout = input_layout(&inputs.input);
    let data_type = data_type(inputs.input.dtype)
        .ok_or_else(|| format!("cuDNN cannot run {:?}", inputs.input.dtype))?;
    let shape = SeqShape::new(spec.seq_len, spec.batch, spec.lengths.as_deref())
        .map_err(|e| e.to_string())?
        .with_layout(layout);
    let (props, refusals) = {
        let device = device(inputs.input.device.index)?;
        let device = device.lock().unwrap_or_else(|e| e.into_inner());
        (device.props(), device.refusals.clone())
    };
    let config = rnn_config(&spec.arch, data_type, cudnn_math());
    let pick = pick(cudnn_algo(), &config, &shape, save, props);
    let picked = RnnConfig {
        algo: pick.algo,
        ..config
    };
    let run = |attempt: Attempt| {
        let pick = match attempt.after {
            None => pick.clone(),
            Some((refused_algo, refused_layout, refusal)) => {
                let fallback = AlgoPick {
                    algo: attempt.algo,
                    reason: format!(
                        "{} ({}): cuDNN refused {refused_algo} ({}): {refusal}",
                        attempt.algo,
                        attempt.layout.name(),
                        refused_layout.name()
                    ),
                };
                log_fallback_once(&format!("cuDNN algorithm {}", fallback.reason));
                fallback
            }
        };
        forward_with(inputs.clone(), spec, save, &pick, attempt.layout)
    };
    first_accepted(&picked, &shape, save, &refusals, run).map_err(String::from)
}

/// [`forward`] on the algorithm of `pick`, its sequence tensors in `layout`.
fn forward_with(
    inputs: CudaInputs,
    spec: &RnnSpec,
    save: bool,
    pick: &AlgoPick,
    layout: SeqLayout,
) -> Result<CudnnForward, AttemptError> {
    let mut trace = CallTrace::start(if save {
        "forward (training)"
    } else {
        "forward"
    });
    let RnnInputs {
        input: x,
        weights,
        h0,
        c0,
    } = inputs_in_layout(inputs, layout);
    keep_device_thread_awake(&x);
    let data_type = data_type(x.dtype).ok_or_else(|| format!("cuDNN cannot run {:?}", x.dtype))?;
    let elem = data_type.size();
    let arch = &spec.arch;
    let shape = SeqShape::new(spec.seq_len, spec.batch, spec.lengths.as_deref())
        .map_err(|e| e.to_string())?
        .with_layout(layout);
    let shapes = ResultShapes::of(spec);
    let y = empty_in_layout(&x, &shapes.y, layout);
    let h_n = empty(&x, &shapes.h_n);
    let c_n = shapes.c_n.map(|shape| empty(&x, &shape));
    let probability = if spec.dropout_active() {
        spec.dropout as f32
    } else {
        0.0
    };
    let math = cudnn_math();
    trace.mark("allocate outputs");

    let device = device(x.device.index)?;
    let mut device = device.lock().unwrap_or_else(|e| e.into_inner());
    // Inference on a flat buffer whose weight space an earlier call copied (the GPU
    // weight cache, on the fused backend) skips the copy. With the cache off, the spaces
    // kept while it was on go (`set_gpu_weight_cache(false)` empties it).
    let cache_on = gpu_weight_cache();
    if cache_on {
        // An entry whose flat buffer only it holds is dead: the flat-buffer cache let go
        // of that buffer, so its id never comes again. Its two buffers go now.
        device.spaces.retain(|(flat, _)| !flat.can_mut());
    } else {
        device.spaces.clear();
    }
    let space_key = (!save && cache_on)
        .then(executing_weights_id)
        .flatten()
        .map(|id| {
            let config = RnnConfig {
                algo: pick.algo,
                ..rnn_config(arch, data_type, math)
            };
            (id, config)
        });
    let cached_space = space_key
        .as_ref()
        .and_then(|key| device.spaces.get(key))
        .map(|(_, space)| space.clone());
    let (handle, prepared) = device.lstm(
        arch,
        data_type,
        math,
        pick.algo,
        probability,
        spec.dropout_seed,
    )?;
    let plan = &prepared.plan;
    let copy_weights = !plan.identity && cached_space.is_none();
    let space = cached_space.unwrap_or_else(|| weight_space(plan, &weights));
    trace.mark("cuDNN state");

    let cell_state = match (&c0, &c_n) {
        (Some(c0), Some(c_n)) => Some([c0, c_n]),
        (None, None) => None,
        _ => return Err(String::from("an LSTM's forward needs c0 (a GRU has none)").into()),
    };
    let (pinned, [x_at, y_at, hx_at, hy_at, space_at, canonical], [cx_at, cy_at]) =
        Pinned::addresses([&x, &y, &h0, &h_n, &space, &weights], cell_state)?;
    let buffers = ForwardBuffers {
        x: x_at,
        y: y_at,
        hx: hx_at,
        cx: cx_at,
        hy: hy_at,
        cy: cy_at,
        weights: space_at,
    };
    trace.mark("buffer addresses");
    let ordering = order_after_cubecl(&pinned, &x, handle, &mut trace)?;
    let queued = (|| {
        // SAFETY: every buffer is a live CubeCL allocation of this device (kept alive by
        // `pinned` until the call's work is ordered) whose CubeCL writes come first
        // (`ordering.before`: the host waited for them, or cuDNN's stream waits for
        // them), and whatever CubeCL queues on them later comes after this call's work
        // (`ordering.after`, below, also when the work failed part-way). The RNN's
        // dropout state is its device's, alive while the device is locked for this
        // call (`DeviceCudnn::lstm` points every cached RNN at the current one before
        // handing it out).
        unsafe {
            if copy_weights {
                if plan.has_gaps {
                    handle.zero(buffers.weights)?;
                }
                plan.to_cudnn
                    .copy(handle.stream(), canonical.ptr, buffers.weights.ptr, elem)?;
            }
            trace.mark(if copy_weights {
                "queue weight copy"
            } else {
                "weight space reused"
            });
            test_refusal::refuse(pick.algo)?;
            let reserve = prepared.lstm.forward(handle, &shape, &buffers, save)?;
            trace.mark("queue cuDNN");
            Ok::<_, CudnnRnnError>(reserve)
        }
    })();
    let reserve = ordered(queued, ordering, handle, &mut trace)?;
    drop(pinned);
    // The window runs from the end of cuDNN's host work, up to the next call.
    keep_device_thread_awake(&x);
    trace.finish(plan, &pick.reason, layout);
    if let (Some(key), true) = (space_key, copy_weights) {
        // The flat buffer the entry holds counts in the flat-buffer cache's budget (and
        // the entry goes once that cache lets go of it, above).
        let bytes = byte_len(&space);
        device
            .spaces
            .insert(key, (weights.clone(), space.clone()), bytes);
    }

    let saved = reserve.map(|reserve| {
        (
            vec![y.clone(), space],
            CudnnTape {
                reserve: Mutex::new(Some(reserve)),
                data_type,
                math,
                algo: pick.algo,
                probability,
            },
        )
    });
    Ok(CudnnForward {
        outputs: [y, h_n],
        c_n,
        saved,
    })
}

/// Backward through cuDNN from a training forward's `inputs`, `residuals` (`[y, weight
/// space]`), `tape`, and the upstream gradients. Returns the gradient of each input.
pub(crate) fn backward(
    inputs: CudaInputs,
    residuals: [CudaTensor; 2],
    tape: &CudnnTape,
    upstream: UpstreamGrads,
    spec: &RnnSpec,
) -> Result<CudaInputs, String> {
    let mut trace = CallTrace::start("backward");
    let mut reserve = tape
        .reserve
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .ok_or("the cuDNN reserve space was already consumed (a second backward)")?;
    // The sequence tensors in the forward's layout, which its reserve space was made for.
    let layout = reserve.shape().layout();
    let RnnInputs {
        input: x,
        weights,
        h0,
        c0,
    } = inputs_in_layout(inputs, layout);
    let [y, space] = residuals;
    let (y, space) = (in_layout(y, layout), row_major(space));
    let dy = in_layout(upstream.dy, layout);
    let dh_n = row_major(upstream.dh_n);
    let dc_n = upstream.dc_n.map(row_major);
    keep_device_thread_awake(&x);
    let elem = tape.data_type.size();
    let dx = empty_in_layout(&x, x.meta.shape(), layout);
    let dh0 = empty(&h0, h0.meta.shape());
    let dc0 = c0.as_ref().map(|c0| empty(c0, c0.meta.shape()));
    let cell_state = match (&c0, &dc_n, &dc0) {
        (Some(c0), Some(dc_n), Some(dc0)) => Some([c0, dc_n, dc0]),
        (None, None, None) => None,
        _ => return Err("an LSTM's backward needs c0 and dc_n (a GRU neither)".into()),
    };
    let dweights = empty(&weights, weights.meta.shape());
    trace.mark("allocate gradients");

    let device = device(x.device.index)?;
    let mut device = device.lock().unwrap_or_else(|e| e.into_inner());
    let (handle, prepared) = device.lstm(
        &spec.arch,
        tape.data_type,
        tape.math,
        tape.algo,
        tape.probability,
        None,
    )?;
    let plan = &prepared.plan;
    let dspace = weight_space(plan, &dweights);
    trace.mark("cuDNN state");

    let (
        pinned,
        [
            x_at,
            y_at,
            hx_at,
            space_at,
            dy_at,
            dhy_at,
            dx_at,
            dhx_at,
            dspace_at,
            canonical_grad,
        ],
        [cx_at, dcy_at, dcx_at],
    ) = Pinned::addresses(
        [
            &x, &y, &h0, &space, &dy, &dh_n, &dx, &dh0, &dspace, &dweights,
        ],
        cell_state,
    )?;
    let buffers = BackwardBuffers {
        x: x_at,
        y: y_at,
        hx: hx_at,
        cx: cx_at,
        weights: space_at,
        dy: dy_at,
        dhy: dhy_at,
        dcy: dcy_at,
        dx: dx_at,
        dhx: dhx_at,
        dcx: dcx_at,
        dweights: dspace_at,
    };
    trace.mark("buffer addresses");
    let ordering = order_after_cubecl(&pinned, &x, handle, &mut trace)?;
    let queued = (|| {
        // SAFETY: as in `forward`.
        unsafe {
            prepared.lstm.backward(handle, &mut reserve, &buffers)?;
            trace.mark("queue cuDNN");
            if !plan.identity {
                plan.from_cudnn.copy(
                    handle.stream(),
                    buffers.dweights.ptr,
                    canonical_grad.ptr,
                    elem,
                )?;
            }
            trace.mark("queue weight copy");
            Ok::<_, CudnnRnnError>(())
        }
    })();
    ordered(queued, ordering, handle, &mut trace).map_err(|e| e.to_string())?;
    drop(pinned);
    // The window runs from the end of cuDNN's host work, up to the next call.
    keep_device_thread_awake(&x);
    trace.finish(plan, tape.algo.name(), layout);
    Ok(RnnInputs {
        input: dx,
        weights: dweights,
        h0: dh0,
        c0: dc0,
    })
}

#[cfg(test)]
mod tests {
    use super::first_error;

    /// A call's queueing error wins over its ordering's; the ordering's is the call's
    /// error only where the queueing succeeded.
    #[test]
    fn the_queueing_error_comes_first() {
        assert_eq!(first_error::<u8, &str>(Ok(3), Ok(())), Ok(3));
        assert_eq!(
            first_error::<u8, &str>(Err("queue"), Err("order")),
            Err("queue")
        );
        assert_eq!(first_error::<u8, &str>(Err("queue"), Ok(())), Err("queue"));
        assert_eq!(first_error::<u8, &str>(Ok(3), Err("order")), Err("order"));
    }
}
