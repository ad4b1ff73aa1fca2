//! Modules whose parameters Burn quantized (`Module::quantize_weights`): they compute
//! with the dequantized values, on every CPU kernel, and the CPU backends keep the
//! dequantized flat buffer while the quantized parameters are unchanged
//! (`kernels/fused_cpu/weights_cache.rs`), as they keep a float module's.

use burn::backend::{Flex, NdArray};
use burn::module::{Module, ModuleMapper, Param, Quantizer};
use burn::tensor::backend::Backend;
use burn::tensor::ops::QuantizedTensor;
use burn::tensor::quantization::{
    Calibration, QTensorPrimitive, QuantLevel, QuantParam, QuantValue,
};
use burn::tensor::{Distribution, ElementConversion, Tensor, TensorMetadata, TensorPrimitive};
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleGruConfig, CudnnCompatibleLstm, CudnnCompatibleLstmConfig,
    RnnBackend, RnnKernel,
};

/// Burn's 8-bit symmetric quantization, one scale per tensor or per block.
fn quantizer<B: Backend>(level: QuantLevel) -> Quantizer {
    quantizer_of::<B>(QuantValue::Q8S, level)
}

/// Burn's quantization to `value`s, in the backend's own storage (its default scheme's).
fn quantizer_of<B: Backend>(value: QuantValue, level: QuantLevel) -> Quantizer {
    Quantizer {
        calibration: Calibration::MinMax,
        scheme: <QuantizedTensor<B> as QTensorPrimitive>::default_scheme()
            .with_value(value)
            .with_level(level)
            .with_param(QuantParam::F32),
    }
}

/// Replaces every quantized parameter by its dequantized values (a float module).
struct Dequantize;

impl<B: Backend> ModuleMapper<B> for Dequantize {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        param.map(|t| t.dequantize())
    }
}

fn is_quantized<B: Backend, const D: usize>(t: Tensor<B, D>) -> bool {
    matches!(t.into_primitive(), TensorPrimitive::QFloat(_))
}

fn max_difference<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f32 {
    (a - b).abs().max().into_scalar().elem()
}

/// The quantized LSTM's outputs and states against the float module of its dequantized
/// values, twice (the second call from the cache), on `kernel`.
fn check_lstm<B: RnnBackend>(kernel: RnnKernel, mut quantizer: Quantizer, label: &str) {
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(8, 16)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(8);
    let quantized = config
        .init::<B>(&device)
        .with_kernel(Some(kernel))
        .quantize_weights(&mut quantizer);
    assert!(
        is_quantized(quantized.layers[0].forward.weight_ih.val()),
        "{label}: Burn quantized the weights"
    );
    let float: CudnnCompatibleLstm<B> = quantized.clone().map(&mut Dequantize);
    assert!(!is_quantized(float.layers[0].forward.weight_ih.val()));
    let x = Tensor::<B, 3>::random([3, 7, 8], Distribution::Default, &device);
    let lengths = [7, 4, 0];
    let (want, want_state) = float.forward_with_lengths(x.clone(), &lengths, None);
    for call in 0..2 {
        let (got, state) = quantized.forward_with_lengths(x.clone(), &lengths, None);
        for (name, got, want) in [
            ("output", got, want.clone()),
            ("h_n", state.hidden, want_state.hidden.clone()),
            ("c_n", state.cell, want_state.cell.clone()),
        ] {
            let diff = max_difference(got, want);
            assert!(diff <= 1e-6, "{label} call {call}: {name} off by {diff}");
        }
    }
}

/// [`check_lstm`] for a GRU.
fn check_gru<B: RnnBackend>(kernel: RnnKernel, mut quantizer: Quantizer, label: &str) {
    let device = Default::default();
    let quantized = CudnnCompatibleGruConfig::new(8, 8)
        .with_num_layers(2)
        .init::<B>(&device)
        .with_kernel(Some(kernel))
        .quantize_weights(&mut quantizer);
    let float: CudnnCompatibleGru<B> = quantized.clone().map(&mut Dequantize);
    let x = Tensor::<B, 3>::random([3, 7, 8], Distribution::Default, &device);
    let (want, want_state) = float.forward(x.clone(), None);
    for call in 0..2 {
        let (got, state) = quantized.forward(x.clone(), None);
        let diff = max_difference(got, want.clone());
        assert!(diff <= 1e-6, "{label} call {call}: output off by {diff}");
        let diff = max_difference(state.hidden, want_state.hidden.clone());
        assert!(diff <= 1e-6, "{label} call {call}: h_n off by {diff}");
    }
}

fn check_backend<B: RnnBackend>(label: &str, values: &[QuantValue]) {
    for kernel in [RnnKernel::FusedCpu, RnnKernel::Portable] {
        for &value in values {
            for level in [QuantLevel::Tensor, QuantLevel::block([8])] {
                let q = || quantizer_of::<B>(value, level);
                let label = format!("{label} {kernel:?} {value:?} {level:?}");
                check_lstm::<B>(kernel, q(), &format!("LSTM {label}"));
                check_gru::<B>(kernel, q(), &format!("GRU {label}"));
            }
        }
    }
}

#[test]
fn burn_quantized_modules_compute_with_the_dequantized_values_on_ndarray() {
    // Burn 0.21's NdArray quantizes to 8 bits only.
    check_backend::<NdArray<f32>>("ndarray", &[QuantValue::Q8S]);
}

#[test]
fn burn_quantized_modules_compute_with_the_dequantized_values_on_flex() {
    check_backend::<Flex>("flex", &[QuantValue::Q8S, QuantValue::Q4S, QuantValue::Q2S]);
}

/// A quantized parameter that shares its stored values with a cached one but not its
/// scales (a tensor built on the same storage) is never served the cached
/// one's dequantized values.
#[test]
fn shared_quantized_values_with_other_scales_are_never_served_stale() {
    use burn::tensor::quantization::QParams;
    use burn_flex::FlexQTensor;
    use burn_ndarray::NdArrayQTensor;

    /// `model` with its first weight rebuilt by `rebuild` on the same stored values,
    /// against the module of its dequantized values, the original's entry still kept.
    fn check<B: RnnBackend>(
        label: &str,
        rebuild: impl Fn(QuantizedTensor<B>) -> QuantizedTensor<B>,
    ) {
        let device = Default::default();
        let quantized = CudnnCompatibleLstmConfig::new(4, 8)
            .init::<B>(&device)
            .quantize_weights(&mut quantizer::<B>(QuantLevel::Tensor));
        let cached = quantized.flat_weights();
        let mut other = quantized.clone();
        let TensorPrimitive::QFloat(weight) =
            other.layers[0].forward.weight_ih.val().into_primitive()
        else {
            panic!("{label}: a quantized weight");
        };
        let rebuilt = Tensor::from_primitive(TensorPrimitive::QFloat(rebuild(weight)));
        other.layers[0].forward.weight_ih = Param::from_tensor(rebuilt);
        let float: CudnnCompatibleLstm<B> = other.clone().map(&mut Dequantize);
        let got = other.flat_weights();
        assert_eq!(
            max_difference(got.clone(), float.flat_weights()),
            0.0,
            "{label}"
        );
        assert!(max_difference(got, cached) > 0.0, "{label}: other values");
    }
    check::<NdArray<f32>>("ndarray, scales doubled", |w: NdArrayQTensor| {
        NdArrayQTensor {
            qtensor: w.qtensor.clone(),
            scheme: w.scheme,
            qparams: w
                .qparams
                .iter()
                .map(|p| QParams {
                    scales: p.scales * 2.0,
                })
                .collect(),
        }
    });
    check::<Flex>("flex, scales doubled", |w: FlexQTensor| {
        let scales = w.scales().iter().map(|s| s * 2.0).collect();
        FlexQTensor::new(w.tensor().clone(), *w.scheme(), scales)
    });
}

/// `quantized_int8()` of a module Burn quantized: the int8 kernel's error against the
/// dequantized float module, relative to the largest output (int8_models.rs's bound).
#[test]
fn int8_copies_of_burn_quantized_modules_track_their_values() {
    let device = Default::default();
    let quantized = CudnnCompatibleLstmConfig::new(16, 32)
        .with_num_layers(2)
        .init::<Flex>(&device)
        .quantize_weights(&mut quantizer::<Flex>(QuantLevel::Tensor));
    let float: CudnnCompatibleLstm<Flex> = quantized.clone().map(&mut Dequantize);
    let int8 = quantized.quantized_int8().expect("a valid module");
    let x = Tensor::<Flex, 3>::random([4, 9, 16], Distribution::Default, &device);
    let (want, _) = float.forward(x.clone(), None);
    let (got, _) = int8.forward(x, None);
    let scale: f32 = want.clone().abs().max().into_scalar();
    let diff = max_difference(got, want);
    assert!(
        diff <= 2e-2 * scale,
        "int8 off by {diff} (largest output {scale})"
    );
}

/// Set in the child process that runs
/// [`the_dequantized_buffer_is_kept_while_its_module_lives`] (it reads the process-wide
/// cache, which other tests change).
const CACHE_CHILD: &str = "BURN_LSTM_QUANTIZED_CACHE_TEST_CHILD";

/// Where a flat buffer's first value is.
trait FlatAddress: RnnBackend {
    fn address(flat: &Tensor<Self, 1>) -> usize;
}

impl FlatAddress for NdArray<f32> {
    fn address(flat: &Tensor<Self, 1>) -> usize {
        match flat.clone().into_primitive().tensor() {
            burn_ndarray::NdArrayTensor::F32(values) => values.view().as_ptr() as usize,
            other => panic!("an f32 flat buffer, not {:?}", other.dtype()),
        }
    }
}

impl FlatAddress for Flex {
    fn address(flat: &Tensor<Self, 1>) -> usize {
        let flat = flat.clone().into_primitive().tensor();
        let offset = flat.layout().start_offset();
        flat.storage::<f32>()[offset..].as_ptr() as usize
    }
}

/// A quantized module's calls share one dequantized buffer (built by the first), and the
/// buffer goes at the next miss once the module is dropped.
#[test]
fn the_dequantized_buffer_is_kept_while_its_module_lives() {
    if lstm_cpu::reran_in_child(
        module_path!(),
        "the_dequantized_buffer_is_kept_while_its_module_lives",
        &[(CACHE_CHILD, "1")],
    ) {
        return;
    }
    fn check<B: FlatAddress>(label: &str) {
        burn_lstm::release_cpu_buffers();
        let device = Default::default();
        let config = CudnnCompatibleLstmConfig::new(4, 8).with_num_layers(2);
        let quantize = |model: CudnnCompatibleLstm<B>| {
            model.quantize_weights(&mut quantizer::<B>(QuantLevel::Tensor))
        };
        let quantized = quantize(config.init::<B>(&device));
        let (first, second) = (quantized.flat_weights(), quantized.flat_weights());
        assert_eq!(
            B::address(&first),
            B::address(&second),
            "{label}: the second call reads the first call's buffer"
        );
        let float: CudnnCompatibleLstm<B> = quantized.clone().map(&mut Dequantize);
        let diff = max_difference(second, float.flat_weights());
        assert_eq!(
            diff, 0.0,
            "{label}: the buffer holds the dequantized values"
        );
        drop((first, quantized, float));
        let other = quantize(config.init::<B>(&device));
        let _ = other.flat_weights();
        let usage = burn_lstm::cpu_cache_usage();
        assert_eq!(
            usage.weight_entries, 1,
            "{label}: the dropped module's entry went at the other's miss ({usage:?})"
        );
    }
    check::<NdArray<f32>>("ndarray");
    check::<Flex>("flex");
}

/// A quantized module saved with Burn's recorder loads through the checked loader still
/// quantized (the record holds the 8-bit values and scales) and computes the same.
#[test]
fn a_quantized_module_round_trips_through_a_checked_checkpoint() {
    fn check<B: RnnBackend>(label: &str) {
        use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
        let device = Default::default();
        let config = CudnnCompatibleLstmConfig::new(16, 32).with_num_layers(2);
        let quantized = config
            .init::<B>(&device)
            .quantize_weights(&mut quantizer::<B>(QuantLevel::block([8])));
        let dir = tempfile::tempdir().expect("a scratch directory");
        let (path, recorder) = (
            dir.path().join("model"),
            NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
        );
        quantized
            .clone()
            .save_file(&path, &recorder)
            .expect("the record is written");
        let loaded = config
            .load_checkpoint::<B, _>(&path, &recorder, &device)
            .expect("the quantized record passes the checks");
        assert!(
            is_quantized(loaded.layers[1].forward.weight_hh.val()),
            "{label}"
        );
        let x = Tensor::<B, 3>::random([2, 5, 16], Distribution::Default, &device);
        let diff = max_difference(
            loaded.forward(x.clone(), None).0,
            quantized.forward(x, None).0,
        );
        assert_eq!(
            diff, 0.0,
            "{label}: the loaded module computes as the saved one"
        );
    }
    check::<NdArray<f32>>("ndarray");
    check::<Flex>("flex");
}
