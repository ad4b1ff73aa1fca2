//! One call of the fused CPU kernel on a [`HostTensors`] backend: the inputs copied to
//! (or taken as) host vectors, the kernel run, the outputs handed back as tensors that
//! own the kernel's vectors; a training call keeps its tape for the backward.

use std::sync::Arc;

use lstm_cpu::{InputStrides, OutputGrads, RnnCall, RnnOutputs, Tape};

use burn::tensor::ops::FloatTensor;

use super::host::{HostElement, HostTensors, device_tensor, recycle, to_host};
use super::threads::CallThreads;
use crate::kernels::portable::dropout_mask;
use crate::op::choice::RnnKernel;
use crate::op::io::{HostResiduals, RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::spec::RnnSpec;
use crate::op::tensor::primitive;

/// Host copies of one call's inputs (the dropout masks, which only the forward reads,
/// are not kept: the tape holds what the backward needs of them).
struct HostCall<T> {
    spec: RnnSpec,
    input: Vec<T>,
    /// `None` where the kernel reads the flat parameters elsewhere: in place in the flat
    /// buffer tensor a training call keeps for its backward ([`Self::with_weights`]), or
    /// packed by an earlier inference call.
    weights: Option<Vec<T>>,
    h0: Vec<T>,
    /// Empty for a cell without a cell state (the GRU).
    c0: Vec<T>,
}

impl<T: HostElement> HostCall<T> {
    /// Keeps the host copies' memory for the next call (lstm-cpu's buffer cache): the
    /// next call's copies then need no fresh pages.
    fn recycle(self) {
        for values in [
            self.input,
            self.weights.unwrap_or_default(),
            self.h0,
            self.c0,
        ] {
            lstm_cpu::recycle_vec(values);
        }
    }

    fn call<'a>(&'a self, weights: &'a [T], threads: &CallThreads) -> RnnCall<'a, T> {
        RnnCall {
            arch: &self.spec.arch,
            seq_len: self.spec.seq_len,
            batch: self.spec.batch,
            lengths: self.spec.lengths.as_deref(),
            input: &self.input,
            input_strides: None,
            weights,
            h0: &self.h0,
            c0: &self.c0,
            dropout_masks: &[],
            threads: threads.threads(),
        }
    }

    /// Runs `f` on the flat parameters: the host copy, or the values of `flat`, the flat
    /// buffer tensor, in place. A training call keeps that tensor for its backward
    /// anyway, so a host copy of it (the size of every parameter: 144 MB at 20×35×1500)
    /// would only double it.
    fn with_weights<B: HostTensors, R>(
        &self,
        flat: &FloatTensor<B>,
        f: impl FnOnce(&[T]) -> R,
    ) -> R {
        match &self.weights {
            Some(weights) => f(weights),
            None => B::with_values::<T, R>(flat, f)
                .expect("the flat buffer was readable in place when the call was made"),
        }
    }
}

struct Saved<T: HostElement> {
    host: HostCall<T>,
    tape: Tape<T>,
}

/// Forward through the fused kernel in `T` (`f32` or `f64`).
pub(crate) fn forward<B: HostTensors, T: HostElement>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    // Counted among the running calls from here (the host copies share its threads).
    let threads = CallThreads::start();
    let device = B::float_device(&inputs.input);
    // A training forward keeps its inputs for the backward; inference lets them go, so
    // a buffer built for this call alone moves to the host without a copy.
    let kept = save.then(|| inputs.clone());
    let RnnInputs {
        input: x,
        weights: w,
        h0,
        c0,
    } = inputs;
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
    // Inference on parameters packed by an earlier call (unchanged since: see
    // weights_cache.rs) needs no host copy of them.
    let packed = (!save)
        .then(|| super::weights_cache::packed::<B, T>(&w, arch))
        .flatten();
    let read_in_place =
        |kept: &RnnInputs<B>| B::with_values::<T, ()>(&kept.weights, |_| ()).is_some();
    // Inference reads the input where it is, through its strides: a batch-first input
    // (the module hands the op its transposed view) needs no sequence-major copy, nor
    // an input somebody else still holds. Padding is zeroed in a copy, and training
    // copies (parallel, here) what its tape keeps.
    // `x` is kept only when read in place: a copy may take its buffer instead.
    let (input, kept_x) = if input_in_place::<B, T>(&x, spec, save).is_some() {
        (Vec::new(), Some(x))
    } else {
        (zero_padding(to_host::<B, T, 3>(x), spec), None)
    };
    let x_view = kept_x
        .as_ref()
        .and_then(|x| input_in_place::<B, T>(x, spec, save));
    let host_call = HostCall {
        spec: spec.clone(),
        input,
        weights: match (&packed, &kept) {
            (Some(_), _) => None,
            (None, Some(kept)) if read_in_place(kept) => None,
            (None, _) => Some(to_host::<B, T, 1>(w)),
        },
        h0: to_host::<B, T, 3>(h0),
        c0: c0.map(to_host::<B, T, 3>).unwrap_or_default(),
    };
    let mask_refs: Vec<&[T]> = masks.iter().map(Vec::as_slice).collect();
    let expect = "the module validated the call";
    let (outputs, tape) = match (&kept, &packed) {
        (Some(kept), _) => host_call.with_weights::<B, _>(&kept.weights, |weights| {
            let call = RnnCall {
                dropout_masks: &mask_refs,
                ..host_call.call(weights, &threads)
            };
            let (outputs, tape) = lstm_cpu::forward_train(&call).expect(expect);
            (outputs, Some(tape))
        }),
        (None, Some(packed)) => {
            let call = RnnCall {
                dropout_masks: &mask_refs,
                ..reading(host_call.call(&[], &threads), x_view)
            };
            (lstm_cpu::forward_packed(&call, packed).expect(expect), None)
        }
        (None, None) => {
            let weights = host_call.weights.as_deref().expect("copied to the host");
            let call = RnnCall {
                dropout_masks: &mask_refs,
                ..reading(host_call.call(weights, &threads), x_view)
            };
            (lstm_cpu::forward(&call).expect(expect), None)
        }
    };
    drop(kept_x);
    let RnnOutputs { y, h_n, c_n } = outputs;
    let (t, b, cells) = (spec.seq_len, spec.batch, arch.cells());
    let output = RnnOutput {
        y: device_tensor::<B, T, 3>(y, [t, b, arch.dirs() * arch.output_size()], &device),
        h_n: device_tensor::<B, T, 3>(h_n, [cells, b, arch.output_size()], &device),
        // The kernel's `c_n` is empty for a cell without a cell state (the GRU).
        c_n: (arch.cell_state_size() > 0)
            .then(|| device_tensor::<B, T, 3>(c_n, [cells, b, arch.cell_state_size()], &device)),
    };
    masks.into_iter().for_each(lstm_cpu::recycle_vec);
    let Some(tape) = tape else {
        host_call.recycle();
        return (output, None);
    };
    let saved = RnnSaved {
        spec: spec.clone(),
        kernel: RnnKernel::FusedCpu,
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

/// The values and strides of `x`, `[T, B, I]`, when an inference call without padding
/// can read it where it is: a view whose features are consecutive (`None` for any
/// other, which is copied).
fn input_in_place<'t, B: HostTensors, T: HostElement>(
    x: &'t FloatTensor<B>,
    spec: &RnnSpec,
    save: bool,
) -> Option<(&'t [T], InputStrides)> {
    if save || spec.has_padding() {
        return None;
    }
    let view = B::view::<T>(x)?;
    let [step, row, feature] = view.strides[..] else {
        return None;
    };
    let shape = [spec.seq_len, spec.batch, spec.arch.input_size];
    (view.shape == shape && feature == 1).then_some((view.values, InputStrides { step, row }))
}

/// `call` reading its input from `input` (values and strides) instead of its host copy.
fn reading<'a, T>(call: RnnCall<'a, T>, input: Option<(&'a [T], InputStrides)>) -> RnnCall<'a, T> {
    match input {
        Some((values, strides)) => RnnCall {
            input: values,
            input_strides: Some(strides),
            ..call
        },
        None => call,
    }
}

/// `input` `[T, B, I]` with its padded steps set to zero (a copy the call owns): the
/// kernel's input products read them, and a NaN there would reach the gradient of
/// `weight_ih` through a multiplication by zero (PyTorch's packed sequences never read
/// padding). Nothing to do without padding.
fn zero_padding<T: HostElement>(mut input: Vec<T>, spec: &RnnSpec) -> Vec<T> {
    if let Some(lengths) = spec.lengths.as_deref().filter(|_| spec.has_padding()) {
        let row = input.len() / (spec.seq_len * spec.batch).max(1);
        for (at, step) in input.chunks_exact_mut(row).enumerate() {
            if at / spec.batch >= lengths[at % spec.batch] {
                step.fill(T::ZERO);
            }
        }
    }
    input
}

/// Backward of a [`forward`] with `save`.
pub(crate) fn backward<B: HostTensors, T: HostElement>(
    saved: RnnSaved<B>,
    grads: RnnOutputGrads<B>,
) -> RnnGrads<B> {
    let threads = CallThreads::start();
    let device = B::float_device(&saved.inputs.input);
    let inputs = saved.inputs;
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
        grads.dc_n.map(to_host::<B, T, 3>).unwrap_or_default(),
    );
    let computed = host.with_weights::<B, _>(&inputs.weights, |weights| {
        lstm_cpu::backward(
            &host.call(weights, &threads),
            tape,
            OutputGrads {
                dy: &dy,
                dh_n: &dh_n,
                dc_n: &dc_n,
                input_wanted: grads.input_required,
            },
        )
        .expect("the tape belongs to this call")
    });
    for values in [dy, dh_n, dc_n] {
        lstm_cpu::recycle_vec(values);
    }
    let spec = &host.spec;
    let arch = &spec.arch;
    let (t, b, cells) = (spec.seq_len, spec.batch, arch.cells());
    let grads = RnnGrads {
        input: grads
            .input_required
            .then(|| device_tensor::<B, T, 3>(computed.input, [t, b, arch.input_size], &device)),
        weights: device_tensor::<B, T, 1>(computed.weights, [arch.weight_count()], &device),
        h0: device_tensor::<B, T, 3>(computed.h0, [cells, b, arch.output_size()], &device),
        c0: (arch.cell_state_size() > 0).then(|| {
            device_tensor::<B, T, 3>(computed.c0, [cells, b, arch.cell_state_size()], &device)
        }),
    };
    host.recycle();
    // The call's own tensors (the flat parameter buffer, the transposed input) are held
    // by nobody else now: their memory serves the next call's buffers.
    recycle::<B, T>(
        [inputs.input, inputs.weights, inputs.h0]
            .into_iter()
            .chain(inputs.c0),
    );
    grads
}

/// A forward through the kernel [`super::choice`] picks for the input's dtype (which is
/// not always the backend's element type: Burn's device settings decide).
pub(crate) fn run<B: HostTensors>(
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    use burn::tensor::{DType, TensorMetadata};
    let dtype = inputs.input.dtype();
    match (super::choice(dtype, spec).kernel, dtype) {
        (RnnKernel::FusedCpu, DType::F64) => forward::<B, f64>(inputs, spec, save),
        (RnnKernel::FusedCpu, _) => forward::<B, f32>(inputs, spec, save),
        _ => crate::kernels::portable::forward::<B>(inputs, spec, save),
    }
}

/// The backward of a [`run`] with `save`, by the kernel that ran it.
pub(crate) fn run_backward<B: HostTensors>(
    saved: RnnSaved<B>,
    grads: RnnOutputGrads<B>,
) -> RnnGrads<B> {
    use burn::tensor::{DType, TensorMetadata};
    match (saved.kernel, saved.inputs.input.dtype()) {
        (RnnKernel::FusedCpu, DType::F64) => backward::<B, f64>(saved, grads),
        (RnnKernel::FusedCpu, _) => backward::<B, f32>(saved, grads),
        _ => crate::kernels::portable::backward::<B>(saved, grads),
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::{DType, Tensor, TensorData};
    use lstm_cpu::{CellKind, RnnArch};

    use super::*;
    use crate::op::tensor::tensor;

    fn spec(seq_len: usize, batch: usize, lengths: Option<Vec<usize>>) -> RnnSpec {
        RnnSpec {
            arch: RnnArch {
                cell: CellKind::Lstm,
                input_size: 6,
                hidden_size: 4,
                proj_size: 0,
                num_layers: 2,
                bidirectional: true,
                bias: true,
            },
            seq_len,
            batch,
            lengths: lengths.map(Into::into),
            dropout: 0.0,
            training: false,
            dropout_seed: None,
            kernel: None,
        }
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        (0..len)
            .map(|n| ((n as u64 * 2654435761 + seed * 97) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// Inference reads a batch-first input's transposed view, an input somebody else
    /// holds, and a view of some of a wider tensor's features where they are, with the
    /// outputs of the same values copied sequence-major; training, padding and a view
    /// whose features are not consecutive are copied.
    fn reads_inputs_in_place<B: HostTensors>(device: &B::Device) {
        // f32 whatever the device's float dtype (NdArray<f64> tests in this binary set
        // the shared NdArray device's to f64).
        let place = (device, DType::F32);
        let (t, b, i) = (7, 5, 6);
        let spec = spec(t, b, None);
        let batch_first: Tensor<B, 3> =
            Tensor::from_data(TensorData::new(values(b * t * i, 1), [b, t, i]), place);
        let x = batch_first.swap_dims(0, 1);
        let copied: Tensor<B, 3> = Tensor::from_data(x.to_data(), place);
        let wide: Tensor<B, 3> = Tensor::from_data(
            TensorData::new(values(t * b * (i + 3), 2), [t, b, i + 3]),
            place,
        );
        let features = wide.clone().slice([0..t, 0..b, 2..2 + i]);
        let strided_features = wide.clone().slice([0..t, 0..b, 0..i]).swap_dims(0, 1);

        let x_p = primitive(x.clone());
        let in_place = |x: &FloatTensor<B>, spec: &RnnSpec, save| {
            input_in_place::<B, f32>(x, spec, save).map(|(_, strides)| strides)
        };
        assert_eq!(
            in_place(&x_p, &spec, false),
            Some(InputStrides::batch_first(t, i))
        );
        assert_eq!(
            in_place(&primitive(copied.clone()), &spec, false),
            Some(InputStrides::seq_major(b, i))
        );
        // A view on Flex; Burn's NdArray slices into a copy.
        let features_strides = in_place(&primitive(features.clone()), &spec, false);
        assert!(
            [
                Some(InputStrides {
                    step: b * (i + 3),
                    row: i + 3,
                }),
                Some(InputStrides::seq_major(b, i)),
            ]
            .contains(&features_strides),
            "{features_strides:?}"
        );
        assert_eq!(in_place(&x_p, &spec, true), None, "training copies");
        let padded = super::tests::spec(t, b, Some(vec![7, 3, 7, 7, 1]));
        assert_eq!(
            in_place(&x_p, &padded, false),
            None,
            "padding is zeroed in a copy"
        );
        let full = super::tests::spec(t, b, Some(vec![t; b]));
        assert!(in_place(&x_p, &full, false).is_some(), "no row is padded");
        assert_eq!(
            in_place(&primitive(strided_features), &spec, false),
            None,
            "[B, T, I] is not [T, B, I]"
        );

        let arch = &spec.arch;
        let w: Tensor<B, 1> = Tensor::from_data(
            TensorData::new(values(arch.weight_count(), 3), [arch.weight_count()]),
            place,
        );
        let state = |seed| -> Tensor<B, 3> {
            let shape = [arch.cells(), b, arch.output_size()];
            Tensor::from_data(
                TensorData::new(values(shape.iter().product(), seed), shape),
                place,
            )
        };
        let (h0, c0) = (state(4), state(5));
        let run = |x: Tensor<B, 3>| {
            let inputs = RnnInputs {
                input: primitive(x),
                weights: primitive(w.clone()),
                h0: primitive(h0.clone()),
                c0: Some(primitive(c0.clone())),
            };
            let (out, _) = forward::<B, f32>(inputs, &spec, false);
            let c_n = out.c_n.expect("an LSTM returns c_n");
            [out.y, out.h_n, c_n].map(|o| tensor::<B, 3>(o).to_data().to_vec::<f32>().unwrap())
        };
        let contiguous_features: Tensor<B, 3> = Tensor::from_data(features.to_data(), place);
        for (got, want, what) in [
            (run(x), run(copied), "batch-first"),
            (
                run(features),
                run(contiguous_features),
                "features of a wider tensor",
            ),
        ] {
            for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                assert!(
                    (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                    "{what}: {g} against {w}"
                );
            }
        }
        // The tensor read in place is unchanged and still usable.
        let again: Tensor<B, 3> = wide.slice([0..t, 0..b, 2..2 + i]);
        assert_eq!(again.dims(), [t, b, i]);
        let built = values(t * b * (i + 3), 2);
        let expected: Vec<f32> = built
            .chunks(i + 3)
            .flat_map(|row| row[2..2 + i].to_vec())
            .collect();
        assert_eq!(again.to_data().to_vec::<f32>().unwrap(), expected);
    }

    #[test]
    fn flex_inference_reads_inputs_in_place() {
        reads_inputs_in_place::<burn_flex::Flex>(&Default::default());
    }

    #[test]
    fn ndarray_inference_reads_inputs_in_place() {
        reads_inputs_in_place::<burn_ndarray::NdArray<f32>>(&Default::default());
    }
}
