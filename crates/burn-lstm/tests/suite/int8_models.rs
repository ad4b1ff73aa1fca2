//! `Int8Lstm` and `Int8Gru` (`quantized_int8()`): close to the f32 module on Flex and
//! NdArray in every layout (batch-first, lengths with an empty row, a given state,
//! projection, both directions), the kernel-choice API, a quarter of the weight bytes,
//! checkpoints (the f32 one, quantized after loading: the same int8 model), and the
//! errors: bad shapes, non-finite parameters, and training.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::{Distribution, Tensor, backend::Backend};
use burn_lstm::{
    CudnnCompatibleGruConfig, CudnnCompatibleLstmConfig, GruState, LstmState, RnnBackend, RnnKernel,
};
use common::{expect_invalid, to_f64};
use lstm_cpu::int8::QuantLevels;

fn random<Bk: Backend>(dims: [usize; 3], seed: u64) -> Tensor<Bk, 3> {
    Bk::seed(&Default::default(), seed);
    Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())
}

/// int8 against f32 on random weights of PyTorch's initialisation: every output moves
/// by the roundings of the products only. The ∞-norm error relative to the largest f32
/// value (`common::rel_err`, as docs/numerics.md's "int8 inference" measures it), with
/// weights on ±127 levels (the VNNI and scalar kernels: measured at most 1.3e-2 here,
/// 2026-11-28); twice that where the kernel runs ±63 levels (AVX2 without VNNI: 1.9e-2).
fn bound() -> f64 {
    match lstm_cpu::int8::fastest_levels() {
        QuantLevels::Full => 2e-2,
        QuantLevels::Reduced => 4e-2,
    }
}

/// Asserts that `got` (int8) is within [`bound`] of `want` (f32).
fn assert_close(got: Vec<f64>, want: Vec<f64>, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let error = common::rel_err(&got, &want);
    println!("int8 against f32, {what}: {error:.1e}");
    assert!(error < bound(), "{what}: relative error {error:.2e}");
}

fn lstm_matches_f32_on<Bk: RnnBackend>() {
    let device = Default::default();
    for batch_first in [false, true] {
        let model = CudnnCompatibleLstmConfig::new(6, 16)
            .with_num_layers(2)
            .with_bidirectional(true)
            .with_proj_size(8)
            .with_batch_first(batch_first)
            .init::<Bk>(&device);
        let int8 = model.quantized_int8().unwrap();
        let (batch, seq) = (4, 9);
        let dims = if batch_first {
            [batch, seq, 6]
        } else {
            [seq, batch, 6]
        };
        let x = random::<Bk>(dims, 1);
        let state = LstmState::new(
            random::<Bk>([4, batch, 8], 2),
            random::<Bk>([4, batch, 16], 3),
        );
        let lengths = [9, 0, 4, 7];
        let (y, s) = model.forward_with_lengths(x.clone(), &lengths, Some(state.clone()));
        let (qy, qs) = int8.forward_with_lengths(x.clone(), &lengths, Some(state));
        assert_eq!(qy.dims(), y.dims());
        let what = format!("batch_first {batch_first}");
        assert_close(to_f64(qy), to_f64(y), &format!("{what}: y"));
        assert_close(to_f64(qs.hidden), to_f64(s.hidden), &format!("{what}: h_n"));
        assert_close(to_f64(qs.cell), to_f64(s.cell), &format!("{what}: c_n"));
        // Without a state and lengths: zeros and full rows.
        let (y, s) = model.forward(x.clone(), None);
        let (qy, qs) = int8.forward(x, None);
        assert_close(to_f64(qy), to_f64(y), &format!("{what}: y, no state"));
        assert_close(
            to_f64(qs.hidden),
            to_f64(s.hidden),
            &format!("{what}: h_n, no state"),
        );
        assert_close(
            to_f64(qs.cell),
            to_f64(s.cell),
            &format!("{what}: c_n, no state"),
        );
    }
}

#[test]
fn int8_lstm_matches_the_f32_lstm_on_ndarray_and_flex() {
    lstm_matches_f32_on::<NdArray<f32>>();
    lstm_matches_f32_on::<Flex>();
}

#[test]
fn int8_gru_matches_the_f32_gru() {
    type B = NdArray<f32>;
    let device = Default::default();
    let model = CudnnCompatibleGruConfig::new(5, 12)
        .with_num_layers(2)
        .with_bidirectional(true)
        .init::<B>(&device);
    let int8 = model.quantized_int8().unwrap();
    let x = random::<B>([3, 7, 5], 4); // batch-first, the default
    let h0 = GruState::new(random::<B>([4, 3, 12], 5));
    let lengths = [7, 3, 0];
    let (y, s) = model.forward_with_lengths(x.clone(), &lengths, Some(h0.clone()));
    let (qy, qs) = int8.forward_with_lengths(x, &lengths, Some(h0));
    assert_close(to_f64(qy), to_f64(y), "GRU y");
    assert_close(to_f64(qs.hidden), to_f64(s.hidden), "GRU h_n");
    assert_eq!(int8.kernel().kernel, RnnKernel::FusedCpuInt8);
}

#[test]
fn the_kernel_choice_reports_int8_and_the_f32_module_falls_back() {
    type B = Flex;
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(6, 16).init::<B>(&device);
    let choice = model.quantized_int8().unwrap().kernel();
    assert_eq!(choice.kernel, RnnKernel::FusedCpuInt8, "{choice}");
    assert_eq!(choice.fallback_reason, None);
    let detail = choice.detail.clone().unwrap();
    assert!(
        ["avx512-vnni", "avx-vnni", "avx2", "scalar"]
            .iter()
            .any(|k| detail.starts_with(k)),
        "{detail}"
    );
    assert!(
        choice.to_string().starts_with("fused-cpu-int8 ["),
        "{choice}"
    );
    let choice = model
        .with_kernel(Some(RnnKernel::FusedCpuInt8))
        .kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
    assert!(choice.fallback_reason.unwrap().contains("quantized_int8()"));
}

#[test]
fn int8_weights_take_about_a_quarter_of_the_f32_bytes() {
    let model = CudnnCompatibleLstmConfig::new(64, 128)
        .with_num_layers(2)
        .init::<NdArray<f32>>(&Default::default());
    let f32_bytes = 4 * model.arch().weight_count();
    let int8 = model.quantized_int8().unwrap();
    let ratio = int8.weight_bytes() as f64 / f32_bytes as f64;
    // int8 values (a quarter) plus one f32 scale per output row and the f32 biases.
    assert!((0.25..0.27).contains(&ratio), "{ratio}");
    assert_eq!(int8.arch(), &model.arch());
}

#[test]
fn a_loaded_f32_checkpoint_quantizes_to_the_same_int8_model() {
    type B = NdArray<f32>;
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(6, 16).with_num_layers(2);
    let model = config.init::<B>(&device);
    let x = random::<B>([3, 5, 6], 6);
    let (y, s) = model.quantized_int8().unwrap().forward(x.clone(), None);
    let dir = tempfile::Builder::new()
        .prefix("burn-int8-test-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("model");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    model.save_file(&path, &recorder).unwrap();
    let loaded = config
        .load_checkpoint::<B, _>(path.with_extension("mpk"), &recorder, &device)
        .unwrap();
    let (ly, ls) = loaded.quantized_int8().unwrap().forward(x, None);
    assert_eq!(to_f64(ly), to_f64(y));
    assert_eq!(to_f64(ls.hidden), to_f64(s.hidden));
    assert_eq!(to_f64(ls.cell), to_f64(s.cell));
}

#[test]
fn bad_calls_non_finite_weights_and_training_are_named_errors() {
    type B = NdArray<f32>;
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(6, 16).init::<B>(&device);
    let int8 = model.quantized_int8().unwrap();
    // Batch-first (the default): 3 rows of 5 steps.
    expect_invalid(
        int8.try_forward(random::<B>([3, 5, 7], 7), None, None),
        "input",
        &["7"],
    );
    let state = LstmState::new(random::<B>([1, 2, 16], 8), random::<B>([1, 3, 16], 9));
    expect_invalid(
        int8.try_forward(random::<B>([3, 5, 6], 7), Some(state), None),
        "state.hidden",
        &["[1, 3, 16]", "[1, 2, 16]"],
    );
    expect_invalid(
        int8.try_forward(random::<B>([3, 5, 6], 7), None, Some(&[5, 9, 1])),
        "lengths[1]",
        &["9"],
    );
    // A NaN in the user's batch-first input is placed in the user's [B, T, I] tensor:
    // row 2, step 1, feature 4 is index (2 · 5 + 1) · 6 + 4 = 70.
    let mut values = vec![0.5f32; 3 * 5 * 6];
    values[70] = f32::NAN;
    let x = Tensor::<B, 3>::from_data(burn::tensor::TensorData::new(values, [3, 5, 6]), &device);
    expect_invalid(
        int8.try_forward(x, None, None),
        "input",
        &["NaN at index 70 (step 1, row 2, feature 4)"],
    );
    let mut broken = model.clone();
    let w = broken.layers[0].forward.weight_hh.val();
    let nan = Tensor::<B, 2>::full(w.dims(), f32::NAN, &device);
    broken.layers[0].forward.weight_hh = burn::module::Param::from_tensor(nan);
    // weight_hh of layer 0 starts after weight_ih's 64 × 6 values.
    expect_invalid(
        broken.quantized_int8(),
        "weights",
        &[
            "finite",
            "weight_hh of layer 0, direction 0",
            "index 384 of the flat buffer",
        ],
    );
    // A product deeper than the i32 accumulator holds names the size and the matrix.
    let deep = CudnnCompatibleLstmConfig::new(70_000, 2).init::<B>(&device);
    expect_invalid(
        deep.quantized_int8(),
        "arch",
        &[
            "i32 accumulator",
            "70000 (weight_ih of layer 0, direction 0: its columns)",
        ],
    );
    // Training: an input tracked for gradients is refused.
    type AD = Autodiff<B>;
    let trained = CudnnCompatibleLstmConfig::new(6, 16).init::<AD>(&device);
    let int8 = trained.quantized_int8().unwrap();
    let x = random::<AD>([3, 5, 6], 10).require_grad();
    expect_invalid(
        int8.try_forward(x, None, None),
        "input",
        &["inference only"],
    );
}
