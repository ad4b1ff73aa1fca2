//! The cuDNN op (feature `cuda`).
//!
//! Without a GPU (this repository's CI): the kernel-choice API on Burn's Cuda backend
//! reports the portable fallback and why, and nothing panics for a missing libcuda or
//! libcudnn.
//!
//! With a GPU (`#[ignore]`d: they need an NVIDIA GPU, libcuda and cuDNN 9 on
//! `LD_LIBRARY_PATH`; run with `cargo test -p burn-lstm --features cuda --test cudnn --
//! --ignored`): every golden case (and `$LSTM_GOLDEN_DIR`) through cuDNN forward and
//! backward, on the plain and the fused Cuda backend, and one checkpoint giving the same
//! outputs on NdArray and on Cuda; the golden cases again in TF32; a larger bidirectional,
//! projected, right-padded stack against the fused CPU kernel; 10,000 training calls
//! with flat device memory; several host threads calling one module at once; cuDNN's
//! inter-layer dropout masks (rate, scaling, the backward using the forward's masks);
//! the golden cases with each cuDNN algorithm the policy can pick; evaluation between
//! training steps (the GPU weight caches never serve replaced parameters); and the paths
//! of the op's speed (event ordering, the GPU weight cache, the automatic algorithm) under
//! CubeCL work from several threads; the paths still off by default (the batch-major
//! layout, the flat parameter buffer as one fusion operation) switched on.
//!
//! The half-precision golden tests (f16, bf16) run in a child process each.
//!
//! The cuDNN math mode is process-wide, so the tests that depend on it take [`MATH`]
//! and set the mode they need.
#![cfg(feature = "cuda")]

mod common;

use burn::backend::cuda::CudaDevice;
use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::Module;
use burn::module::Param;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Distribution, Tensor, TensorData};
use burn_cubecl::CubeBackend;
use burn_lstm::{
    CudnnCompatibleLstm, CudnnCompatibleLstmConfig, CudnnMath, LstmState, RnnBackend, RnnKernel,
    RnnSpec, set_cudnn_empty_rows, set_cudnn_math,
};
use common::dropout_check::check_dropout_masks;
use common::empty_rows_check;
use common::golden_check::run_all;
use common::{ErrorReport, rel_err, to_f64};

/// Held by every test whose numbers depend on the process-wide cuDNN math mode.
static MATH: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Sets a process-wide setting back to a value when dropped (on a panic too): the
/// setter and the value.
struct Restore<T: Copy>(fn(T), T);

impl<T: Copy> Drop for Restore<T> {
    fn drop(&mut self) {
        (self.0)(self.1);
    }
}

/// Runs `f` with cuDNN in `mode`, restoring exact FP32 (FMA) afterwards.
fn with_math<T>(mode: CudnnMath, f: impl FnOnce() -> T) -> T {
    let _lock = MATH.lock().unwrap_or_else(|e| e.into_inner());
    let _restore = Restore(set_cudnn_math, CudnnMath::Fma);
    set_cudnn_math(mode);
    let result = f();
    assert_no_runtime_fallback();
    result
}

/// [`with_math`] in exact FP32 on the standard algorithm, the most exact one (the
/// persistent algorithms, the default's choice for small hidden sizes, are checked with
/// their own bound: `golden_cases_through_cudnn_with_each_algorithm`). The policy goes
/// back to its default after.
fn exact_f32<T>(f: impl FnOnce() -> T) -> T {
    use burn_lstm::{CudnnAlgo, set_cudnn_algo};
    with_math(CudnnMath::Fma, || {
        let _restore = Restore(set_cudnn_algo, CudnnAlgo::Auto);
        set_cudnn_algo(CudnnAlgo::Standard);
        f()
    })
}

/// A cuDNN call that fails at run time is answered by the portable kernel, with the
/// same numbers: a test of cuDNN must look at the record of such failures too.
fn assert_no_runtime_fallback() {
    let errors = burn_lstm::cudnn_runtime_errors();
    assert!(errors.is_empty(), "cuDNN failed at run time: {errors:#?}");
}

/// Burn's Cuda backend (fused), f32.
type Cuda = burn::backend::Cuda<f32, i32>;

/// Burn's Cuda backend without fusion, as the crate exports it.
type PlainCuda = burn_lstm::PlainCuda;

fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(5, 8)
        .with_num_layers(2)
        .with_bidirectional(true)
}

/// One call of `config` on a `[batch, seq_len]` input.
fn spec(config: &CudnnCompatibleLstmConfig, batch: usize, seq_len: usize) -> RnnSpec {
    RnnSpec {
        arch: config.arch(),
        seq_len,
        batch,
        lengths: None,
        dropout: 0.0,
        training: false,
        dropout_seed: None,
        kernel: None,
    }
}

fn gpu_usable() -> bool {
    // Asks the op itself: the cuDNN state of device 0 is created here.
    let choice = Cuda::rnn_kernel(&CudaDevice::default(), &spec(&config(), 2, 3));
    if choice.kernel != RnnKernel::Cudnn {
        eprintln!("cuDNN is not used: {choice}");
    }
    choice.kernel == RnnKernel::Cudnn
}

#[test]
fn without_a_gpu_the_choice_names_the_reason() {
    let spec = spec(&config(), 2, 3);
    for choice in [
        Cuda::rnn_kernel(&CudaDevice::default(), &spec),
        PlainCuda::rnn_kernel(&CudaDevice::default(), &spec),
        Autodiff::<Cuda>::rnn_kernel(&CudaDevice::default(), &spec),
    ] {
        if cudnn_rnn::driver_present() && cudnn_rnn::check_cudnn().is_ok() {
            // A machine with a driver and cuDNN: cuDNN runs where a handle on device 0
            // can be made; where it cannot, the fallback says why.
            match cudnn_rnn::CudnnHandle::for_device(0) {
                Ok(_) => assert_eq!(choice.kernel, RnnKernel::Cudnn, "{choice}"),
                Err(e) => {
                    assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
                    let reason = choice.fallback_reason.expect("a fallback names its reason");
                    assert!(
                        reason.contains("cuDNN is not usable on CUDA device 0"),
                        "{reason} (the handle: {e})"
                    );
                }
            }
        } else {
            assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
            let reason = choice.fallback_reason.expect("a fallback names its reason");
            assert!(
                reason.contains("cuDNN is not usable on CUDA device 0"),
                "{reason}"
            );
            assert!(
                reason.contains("libcuda") || reason.contains("libcudnn"),
                "{reason}"
            );
            // No cuDNN state, so nothing pooled to report.
            assert_eq!(burn_lstm::cudnn_pool_usage(0), None);
        }
    }
}

/// f16 and bf16 models run the portable kernel while the cuDNN half path is switched off,
/// and the choice says how to switch it on (checked before any GPU is looked for).
#[test]
fn half_models_on_cuda_name_the_switch() {
    use burn::tensor::{bf16, f16};
    burn_lstm::set_cudnn_half(false);
    let spec = spec(&config(), 2, 3);
    for choice in [
        burn::backend::Cuda::<f16, i32>::rnn_kernel(&CudaDevice::default(), &spec),
        CubeBackend::<cubecl_cuda::CudaRuntime, bf16, i32, u8>::rnn_kernel(
            &CudaDevice::default(),
            &spec,
        ),
    ] {
        assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
        let reason = choice.fallback_reason.expect("a fallback names its reason");
        assert!(reason.contains("BURN_LSTM_CUDNN_HALF=1"), "{reason}");
    }
    burn_lstm::set_cudnn_half(true);
}

/// Set in the child process of a half-precision GPU test: the Cuda device's float type.
const CUDA_FLOAT_VAR: &str = "BURN_LSTM_TEST_CUDA_FLOAT";

/// Every golden case through cuDNN on `Autodiff<Cuda<F>>`, in a child process whose
/// Cuda device computes in `F` (Burn keeps one float type per device and process), with
/// the half path switched on.
fn golden_cases_through_cudnn_in_half<F: burn_cubecl::FloatElement>(name: &str, test: &str) {
    use burn::tensor::{IntDType, set_default_dtypes};
    if lstm_cpu::reran_in_child(
        module_path!(),
        test,
        &[(CUDA_FLOAT_VAR, name), ("BURN_LSTM_CUDNN_HALF", "1")],
    ) {
        return;
    }
    type HalfCuda<F> = burn::backend::Cuda<F, i32>;
    let dtype = common::half_check::float_dtype(name);
    let device = CudaDevice::default();
    let _ = set_default_dtypes::<HalfCuda<F>>(&device, dtype, IntDType::I32);
    let choice = HalfCuda::<F>::rnn_kernel(&device, &spec(&config(), 2, 3));
    assert_eq!(choice.kernel, RnnKernel::Cudnn, "{choice}");
    common::half_check::run_all_half::<Autodiff<HalfCuda<F>>>(
        &device,
        dtype,
        (name, "cuda", "cudnn"),
        // cuDNN keeps its states in the half type between steps and layers.
        common::half_check::KernelBound::HalfStates,
    );
    assert_no_runtime_fallback();
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_in_f16() {
    golden_cases_through_cudnn_in_half::<burn::tensor::f16>(
        "f16",
        "golden_cases_through_cudnn_in_f16",
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN >= 9.13 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_in_bf16() {
    golden_cases_through_cudnn_in_half::<burn::tensor::bf16>(
        "bf16",
        "golden_cases_through_cudnn_in_bf16",
    );
}

#[test]
fn requests_and_unsupported_architectures_fall_back_with_reasons() {
    let device = CudaDevice::default();
    let mut asked = spec(&config(), 2, 3);
    asked.kernel = Some(RnnKernel::Portable);
    let choice = Cuda::rnn_kernel(&device, &asked);
    assert_eq!(choice.kernel, RnnKernel::Portable);
    assert!(
        choice
            .fallback_reason
            .unwrap()
            .contains("portable kernel was asked for")
    );

    asked.kernel = Some(RnnKernel::FusedCpu);
    let choice = Cuda::rnn_kernel(&device, &asked);
    assert!(
        choice
            .fallback_reason
            .unwrap()
            .contains("runs only on the CPU backends")
    );

    // cuDNN's LSTMP needs proj_size < hidden_size; the module accepts any proj_size.
    let lstmp = spec(
        &CudnnCompatibleLstmConfig::new(4, 3).with_proj_size(3),
        2,
        2,
    );
    let choice = Cuda::rnn_kernel(&device, &lstmp);
    assert_eq!(choice.kernel, RnnKernel::Portable);
    let reason = choice.fallback_reason.unwrap();
    assert!(reason.contains("proj_size"), "{reason}");

    // Half elements: `half_models_on_cuda_name_the_switch`.
}

/// Held by every test that depends on the process-wide switch of the cuDNN path for
/// rows of length 0.
static EMPTY_ROWS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn empty_rows_run_the_portable_kernel_when_switched_off() {
    let _lock = EMPTY_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    set_cudnn_empty_rows(false);
    let mut padded = spec(&config(), 3, 4);
    padded.lengths = Some(vec![4, 0, 2].into());
    for choice in [
        Cuda::rnn_kernel(&CudaDevice::default(), &padded),
        PlainCuda::rnn_kernel(&CudaDevice::default(), &padded),
    ] {
        assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
        let reason = choice.fallback_reason.expect("a fallback names its reason");
        assert!(reason.contains("length 0"), "{reason}");
        assert!(reason.contains("BURN_LSTM_CUDNN_EMPTY_ROWS"), "{reason}");
    }
    // The same batch without its empty row is not refused for that reason.
    padded.lengths = Some(vec![4, 1, 2].into());
    let choice = Cuda::rnn_kernel(&CudaDevice::default(), &padded);
    assert!(
        choice
            .fallback_reason
            .as_ref()
            .is_none_or(|r| !r.contains("length 0")),
        "{choice:?}"
    );
    set_cudnn_empty_rows(true);
}

/// The compacting path around cuDNN (on by default): the non-empty
/// rows of every golden case give PyTorch's numbers, the empty rows their exact values
/// (`common/empty_rows_check.rs`), and a batch of only empty rows runs no kernel.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn empty_rows_around_cudnn_when_switched_on() {
    assert!(gpu_usable(), "cuDNN does not run here");
    let _lock = EMPTY_ROWS.lock().unwrap_or_else(|e| e.into_inner());
    set_cudnn_empty_rows(true);
    exact_f32(|| {
        empty_rows_check::run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, 1e-4);
        empty_rows_check::run_all::<Autodiff<PlainCuda>>("cuda-plain", RnnKernel::Cudnn, 1e-4);
        empty_rows_check::only_empty_rows::<Autodiff<Cuda>>(RnnKernel::Cudnn);
    });
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_on_fused_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    exact_f32(|| run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32", 1e-4));
}

/// Every golden case (LSTM and GRU) with each algorithm the policy can pick: the
/// standard one, PyTorch's automatic choice (the default) and each persistent algorithm
/// forced. A call an algorithm refuses (cuDNN's own refusal included) runs on the
/// standard algorithm with the reason logged, never as an error: no runtime fallback to
/// the portable kernel is allowed.
///
/// The persistent algorithms are less exact in FP32 than the standard one. Measured on
/// an H100 (cuDNN 9.19, 2026-11-26), largest error relative to the largest value:
/// `medium` (LSTM) 4.2e-4 (grad.x; y 1.8e-4) where the standard algorithm gives 1.5e-5,
/// `gru_medium` 1.0e-3 (h_n) where it gives 6.2e-5; within 1e-4 on the other cases.
/// PyTorch runs the same algorithms on these shapes. Their bounds are about 2.5 and 3
/// times those (1e-3 LSTM, 3e-3 GRU; docs/numerics.md); the standard algorithm keeps the
/// f32 bounds of the CPU kernels.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_with_each_algorithm() {
    use burn_lstm::{CudnnAlgo, CudnnRnnAlgo, set_cudnn_algo};
    use common::gru_golden_check::run_all_gru;
    assert!(gpu_usable(), "cuDNN does not run here");
    let _lock = GRU.lock().unwrap_or_else(|e| e.into_inner());
    burn_lstm::set_cudnn_gru(true);
    for (policy, lstm_bound, gru_bound) in [
        (CudnnAlgo::Standard, 1e-4, 3e-4),
        (CudnnAlgo::Auto, 1e-3, 3e-3),
        (CudnnAlgo::Forced(CudnnRnnAlgo::PersistStatic), 1e-3, 3e-3),
        (
            CudnnAlgo::Forced(CudnnRnnAlgo::PersistStaticSmallH),
            1e-3,
            3e-3,
        ),
    ] {
        set_cudnn_algo(policy);
        let label = format!("f32-{policy:?}");
        with_math(CudnnMath::Fma, || {
            run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, &label, lstm_bound);
            run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, &label, gru_bound);
        });
    }
    set_cudnn_algo(CudnnAlgo::Auto);
    assert_no_runtime_fallback();
}

/// cuDNN refusing an algorithm at run time (made on purpose: `BURN_LSTM_CUDNN_TEST_REFUSE`
/// refuses `persist_static_small_h` after the call's weight copy is queued, in a child
/// process), with that algorithm forced: every golden case (LSTM and GRU, forward and
/// backward) runs on the standard algorithm within its bounds (1e-4 and 3e-4: the
/// persistent algorithm's errors reach 4.2e-4 and 1.0e-3, so a call that ran it would
/// fail them), no call falls back to the portable kernel, and the kernel choice's detail
/// names the forced pick before a call of a shape and the refusal, remembered, after.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn a_refused_algorithm_runs_the_standard_one_and_is_remembered() {
    use burn_lstm::{CudnnAlgo, CudnnRnnAlgo, set_cudnn_algo};
    use common::gru_golden_check::run_all_gru;
    const REFUSE: &str = "BURN_LSTM_CUDNN_TEST_REFUSE";
    if lstm_cpu::reran_in_child(
        module_path!(),
        "a_refused_algorithm_runs_the_standard_one_and_is_remembered",
        &[(REFUSE, "persist_static_small_h")],
    ) {
        return;
    }
    assert!(gpu_usable(), "cuDNN does not run here");
    burn_lstm::set_cudnn_gru(true);
    set_cudnn_algo(CudnnAlgo::Forced(CudnnRnnAlgo::PersistStaticSmallH));
    let device = CudaDevice::default();
    let model = config().init::<Cuda>(&device);
    let before = model.kernel(&device, 3, 2);
    assert!(
        before.detail.as_deref().unwrap_or("").contains("forced"),
        "before any call of this shape, the pick: {before}"
    );
    // Batch-first (the config's default): 3 rows of 2 steps.
    let x = tensor::<Cuda, 3>(
        &uniform(3 * 2 * config().input_size, 1.0, 5),
        [3, 2, config().input_size],
    );
    let (y, _) = model.forward(x, None);
    assert!(to_f64(y).iter().all(|v| v.is_finite()));
    let after = model.kernel(&device, 3, 2);
    let detail = after.detail.as_deref().unwrap_or("");
    assert!(
        detail.contains("standard: cuDNN refused persist_static_small_h")
            && detail.contains(REFUSE),
        "after a refused call of this shape: {after}"
    );
    with_math(CudnnMath::Fma, || {
        run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-small-h-refused", 1e-4);
        run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-small-h-refused", 3e-4);
    });
    set_cudnn_algo(CudnnAlgo::Auto);
    assert_no_runtime_fallback();
}

/// TF32 rounds every product's inputs to a 10-bit mantissa (relative 2^-11, about 5e-4).
/// Measured on an H100 (cuDNN 9.19): at most 1.4e-3 of the largest value on the small
/// cases, 2.4e-2 on `medium` (20 steps, 2 layers, hidden 128: sums of 192 rounded
/// products, carried through the recurrence). The bound is 5e-2; the printed lines give
/// the real errors.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_in_tf32() {
    assert!(gpu_usable(), "cuDNN does not run here");
    with_math(CudnnMath::Tf32, || {
        run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-tf32", 5e-2)
    });
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_on_plain_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    exact_f32(|| run_all::<Autodiff<PlainCuda>>("cuda-plain", RnnKernel::Cudnn, "f32", 1e-4));
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_the_portable_kernel_on_cuda() {
    // Burn 0.21's CubeCL matmul runs f32 on TF32 tensor cores on an H100: measured there,
    // the portable kernel's errors are TF32's (2.1e-2 on `medium`, 9.9e-4 on
    // `no_initial_state`, the same as cuDNN in TF32), not f32's. Hence TF32's bound. Slow
    // on a fresh machine: CubeCL autotunes every new matmul shape (minutes for all cases).
    run_all::<Autodiff<Cuda>>(
        "cuda",
        RnnKernel::Portable,
        "f32 (CubeCL matmul: TF32)",
        5e-2,
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn one_checkpoint_gives_the_same_outputs_on_ndarray_flex_and_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-cudnn-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("model");
    let config = config().with_proj_size(3);

    // Trained (here: initialised) on CUDA, saved, loaded on CPU.
    let cuda = CudaDevice::default();
    let on_cuda = config.init::<Autodiff<Cuda>>(&cuda);
    on_cuda
        .clone()
        .save_file(&path, &recorder)
        .expect("save on CUDA");
    let _math = MATH.lock().unwrap_or_else(|e| e.into_inner());
    let cpu = Default::default();
    let on_cpu = config
        .load_checkpoint::<NdArray<f32>, _>(&path, &recorder, &cpu)
        .expect("load on CPU");

    let x_cpu = Tensor::<NdArray<f32>, 3>::random([3, 7, 5], Distribution::Normal(0.0, 1.0), &cpu);
    let x_cuda = Tensor::<Cuda, 3>::from_data(x_cpu.to_data(), &cuda);
    let on_cuda = config
        .load_checkpoint::<Cuda, _>(&path, &recorder, &cuda)
        .expect("load on CUDA");
    assert_eq!(on_cuda.kernel(&cuda, 3, 7).kernel, RnnKernel::Cudnn);
    let on_flex = config
        .load_checkpoint::<Flex, _>(&path, &recorder, &Default::default())
        .expect("load on Flex");
    let x_flex = Tensor::<Flex, 3>::from_data(x_cpu.to_data(), &Default::default());
    let (y_flex, s_flex) = on_flex.forward(x_flex, None);
    let (y_cpu, s_cpu): (_, LstmState<NdArray<f32>>) = on_cpu.forward(x_cpu, None);
    let (y_gpu, s_gpu) = on_cuda.forward(x_cuda, None);
    for (name, a, b, c) in [
        ("y", to_f64(y_cpu), to_f64(y_gpu), to_f64(y_flex)),
        (
            "h_n",
            to_f64(s_cpu.hidden),
            to_f64(s_gpu.hidden),
            to_f64(s_flex.hidden),
        ),
        (
            "c_n",
            to_f64(s_cpu.cell),
            to_f64(s_gpu.cell),
            to_f64(s_flex.cell),
        ),
    ] {
        let err = rel_err(&b, &a);
        println!("checkpoint NdArray vs Cuda {name}: {err:.2e}");
        assert!(err < 1e-5, "{name}: {err}");
        assert_eq!(c, a, "{name}: Flex and NdArray run the same kernel");
    }
    assert_no_runtime_fallback();
}

/// Deterministic values in [-scale, scale) (a 64-bit LCG), the same on every backend.
fn uniform(len: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn tensor<B: burn::tensor::backend::Backend, const D: usize>(
    values: &[f32],
    shape: [usize; D],
) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), &Default::default())
}

/// The gradients of every parameter of `model`, in the canonical flat order.
fn parameter_grads<B: AutodiffBackend>(
    model: &CudnnCompatibleLstm<B>,
    grads: &B::Gradients,
) -> Vec<f64> {
    fn g<B: AutodiffBackend, const D: usize>(
        p: &Param<Tensor<B, D>>,
        grads: &B::Gradients,
    ) -> Vec<f64> {
        to_f64(p.grad(grads).expect("parameter has a gradient"))
    }
    let mut all = Vec::new();
    for cell in model.directions() {
        all.extend(g(&cell.weight_ih, grads));
        all.extend(g(&cell.weight_hh, grads));
        all.extend(
            cell.bias_ih
                .as_ref()
                .map(|b| g(b, grads))
                .unwrap_or_default(),
        );
        all.extend(
            cell.bias_hh
                .as_ref()
                .map(|b| g(b, grads))
                .unwrap_or_default(),
        );
        all.extend(
            cell.weight_hr
                .as_ref()
                .map(|w| g(w, grads))
                .unwrap_or_default(),
        );
    }
    all
}

/// Outputs, final states and every gradient of one training call of the module stored
/// at `path` (PyTorch names), with `kernel`, on `B`.
fn outputs_and_grads<B: AutodiffBackend + RnnBackend>(
    config: &CudnnCompatibleLstmConfig,
    path: &std::path::Path,
    kernel: RnnKernel,
    [batch, seq, input]: [usize; 3],
    lengths: &[usize],
) -> Vec<(&'static str, Vec<f64>)> {
    let device = Default::default();
    let model = config
        .load_pytorch_safetensors::<B>(path, &device)
        .expect("parameters load")
        .with_kernel(Some(kernel));
    assert_eq!(model.kernel(&device, batch, seq).kernel, kernel);
    let arch = config.arch();
    let (cells, out) = (arch.cells(), arch.output_size());
    let x =
        tensor::<B, 3>(&uniform(batch * seq * input, 1.5, 1), [batch, seq, input]).require_grad();
    let h0 =
        tensor::<B, 3>(&uniform(cells * batch * out, 0.5, 2), [cells, batch, out]).require_grad();
    let c0 = tensor::<B, 3>(
        &uniform(cells * batch * config.hidden_size, 0.5, 3),
        [cells, batch, config.hidden_size],
    )
    .require_grad();
    let (y, state) = model
        .try_forward(
            x.clone(),
            Some(LstmState::new(h0.clone(), c0.clone())),
            Some(lengths),
        )
        .expect("valid input");
    let dy = tensor::<B, 3>(&uniform(y.shape().num_elements(), 1.0, 4), y.dims());
    let dh = tensor::<B, 3>(&uniform(cells * batch * out, 1.0, 5), [cells, batch, out]);
    let loss =
        (y.clone() * dy).sum() + (state.hidden.clone() * dh).sum() + state.cell.clone().sum();
    let y_values = to_f64(y.clone());
    eprintln!("  forward ran on {}", std::any::type_name::<B>());
    assert_no_runtime_fallback();
    let grads = loss.backward();
    let grad_x = to_f64(x.grad(&grads).unwrap());
    eprintln!("  backward ran");
    assert_no_runtime_fallback();
    vec![
        ("y", y_values),
        ("h_n", to_f64(state.hidden)),
        ("c_n", to_f64(state.cell)),
        ("grad.x", grad_x),
        ("grad.h0", to_f64(h0.grad(&grads).unwrap())),
        ("grad.c0", to_f64(c0.grad(&grads).unwrap())),
        ("grad.parameters", parameter_grads(&model, &grads)),
    ]
}

/// Golden cases are small; cuDNN picks other algorithms (persistent kernels, bigger
/// tiles) for bigger stacks. This one: 3 layers, bidirectional, LSTMP, right-padded rows
/// of every length class, against the fused CPU kernel in f32 (both exact FP32: the bound
/// is the f32 golden bound).
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn a_larger_padded_stack_matches_the_fused_cpu_kernel() {
    assert!(gpu_usable(), "cuDNN does not run here");
    larger_stack_against_the_fused_cpu_kernel::<Autodiff<Cuda>>(
        &larger_stack(),
        24,
        40,
        true,
        1e-4,
    );
}

/// A batch-first module's input given to cuDNN in its own memory, batch-major
/// (`BURN_LSTM_CUDNN_BATCH_MAJOR`), against the fused CPU kernel: outputs, states and
/// every gradient (the input's and `y`'s gradients are batch-major too). The larger
/// padded stack on fused and plain Cuda (standard algorithm: projection, varied
/// lengths), and a full-length two-layer stack of hidden 128 whose training call the
/// automatic policy gives `PERSIST_STATIC_SMALL_H` (its FP32 bound, see
/// `golden_cases_through_cudnn_with_each_algorithm`). A layout cuDNN refused would run
/// sequence-major, logged, with the same numbers: the trace of `gpu-run.sh ab` shows
/// which layout ran.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn batch_first_stacks_in_the_batch_major_layout_match_the_fused_cpu_kernel() {
    assert!(gpu_usable(), "cuDNN does not run here");
    with_switch_on(
        burn_lstm::cudnn_batch_major,
        burn_lstm::set_cudnn_batch_major,
        || {
            let config = larger_stack();
            larger_stack_against_the_fused_cpu_kernel::<Autodiff<Cuda>>(
                &config, 24, 40, true, 1e-4,
            );
            larger_stack_against_the_fused_cpu_kernel::<Autodiff<PlainCuda>>(
                &config, 24, 40, true, 1e-4,
            );
            let persistent = CudnnCompatibleLstmConfig::new(64, 128)
                .with_num_layers(2)
                .with_batch_first(true);
            larger_stack_against_the_fused_cpu_kernel::<Autodiff<Cuda>>(
                &persistent,
                16,
                30,
                false,
                1e-3,
            );
        },
    );
}

/// The flat parameter buffer and its gradient as one fusion operation each way
/// (`BURN_LSTM_FUSION_FLAT_JOIN`, on by default, switched on here whatever the
/// environment says): every LSTM and GRU golden case through cuDNN on the fused backend,
/// outputs and every gradient, and a 4-layer bidirectional LSTMP (40 parameters: two join
/// operations, the second taking the buffer of the first) against the fused CPU kernel.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_and_a_deep_stack_with_the_flat_buffer_as_one_operation() {
    use common::gru_golden_check::run_all_gru;
    assert!(gpu_usable(), "cuDNN does not run here");
    with_switch_on(
        burn_lstm::fusion_flat_join,
        burn_lstm::set_fusion_flat_join,
        || {
            exact_f32(|| {
                run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-flat-join", 1e-4);
                run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-flat-join", 3e-4);
            });
            let deep = larger_stack().with_num_layers(4);
            larger_stack_against_the_fused_cpu_kernel::<Autodiff<Cuda>>(&deep, 24, 40, true, 1e-4);
        },
    );
    assert_no_runtime_fallback();
}

/// Runs `f` with a path's switch on (its getter `get` and setter `set`), and puts the
/// switch back as it was after, on a panic too.
fn with_switch_on(get: fn() -> bool, set: fn(bool), f: impl FnOnce()) {
    let _restore = Restore(set, get());
    set(true);
    f();
}

/// 3 layers, bidirectional, LSTMP, input 96, hidden 256, batch-first.
fn larger_stack() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(96, 256)
        .with_num_layers(3)
        .with_bidirectional(true)
        .with_proj_size(128)
        .with_batch_first(true)
}

/// One training call of a module of `config` (batch-first) on `B` through cuDNN
/// against the fused CPU kernel in f32, at `batch` rows of `seq` steps: right-padded to
/// lengths of every class on the standard algorithm in exact FP32 where `padded` (the f32
/// golden bound holds), full rows on the automatic policy's pick in FP32 otherwise.
fn larger_stack_against_the_fused_cpu_kernel<B: AutodiffBackend + RnnBackend>(
    config: &CudnnCompatibleLstmConfig,
    batch: usize,
    seq: usize,
    padded: bool,
    bound: f64,
) {
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-large-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(format!(
        "large-{}-{}.safetensors",
        config.hidden_size, config.num_layers
    ));
    config
        .init::<NdArray<f32>>(&Default::default())
        .save_pytorch_safetensors(&path)
        .expect("export");
    let lengths: Vec<usize> = (0..batch)
        .map(|r| if padded { 1 + (r * 7) % seq } else { seq })
        .collect();
    let shape = [batch, seq, config.input_size];
    eprintln!("  {} lengths {lengths:?}", std::any::type_name::<B>());
    let cpu = outputs_and_grads::<Autodiff<NdArray<f32>>>(
        config,
        &path,
        RnnKernel::FusedCpu,
        shape,
        &lengths,
    );
    let run = || outputs_and_grads::<B>(config, &path, RnnKernel::Cudnn, shape, &lengths);
    let gpu = if padded {
        exact_f32(run)
    } else {
        with_math(CudnnMath::Fma, run)
    };
    let mut report = ErrorReport::new("larger stack cuDNN vs fused CPU", bound);
    for ((name, expected), (_, actual)) in cpu.iter().zip(&gpu) {
        report.check(name, actual, expected);
    }
    report.finish().unwrap();
}

/// 10,000 training calls (forward and backward) on one module: the device memory in use
/// after the first 100 (CubeCL's pools and cuDNN's scratch have reached their sizes) must
/// stay where it is. Prints the readings.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn device_memory_stays_flat_over_10000_training_calls() {
    assert!(gpu_usable(), "cuDNN does not run here");
    device_memory_stays_flat(10_000);
}

/// `calls` training calls of the memory test's stack (2 layers, bidirectional, dropout
/// 0.1, 16 padded batch-first rows) on one module: the device memory in use must grow by
/// less than 16 MiB from call 100 to the last. Prints the readings (after calls 100,
/// 1,000, 2,000, 5,000 and the last) with what the op's cuDNN state pools.
fn device_memory_stays_flat(calls: usize) {
    let probe = cudnn_rnn::CudnnHandle::for_device(0).expect("a handle on device 0");
    let used = || {
        let (free, total) = probe.memory_info().expect("cuMemGetInfo");
        (total - free) as f64 / (1024.0 * 1024.0)
    };
    let device = CudaDevice::default();
    let config = CudnnCompatibleLstmConfig::new(32, 64)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_dropout(0.1)
        .with_batch_first(true);
    let model = config.init::<Autodiff<Cuda>>(&device);
    assert_eq!(model.kernel(&device, 16, 20).kernel, RnnKernel::Cudnn);
    let x =
        Tensor::<Autodiff<Cuda>, 3>::random([16, 20, 32], Distribution::Normal(0.0, 1.0), &device);
    let lengths: Vec<usize> = (0..16).map(|r| 20 - r).collect();
    let mut readings = Vec::new();
    let started = std::time::Instant::now();
    for step in 1..=calls {
        let (y, _) = model
            .try_forward(x.clone().require_grad(), None, Some(&lengths))
            .expect("valid input");
        let grads = y.sum().backward();
        let grad = model.layers[0]
            .forward
            .weight_hh
            .grad(&grads)
            .expect("a gradient");
        if step % 1000 == 0 {
            eprintln!("  {step} calls, {:.1} s", started.elapsed().as_secs_f64());
        }
        if step == calls || matches!(step, 100 | 1000 | 2000 | 5000) {
            assert!(grad.into_data().iter::<f32>().all(f32::is_finite));
            let mib = used();
            // As they come: a run cut short by a time limit still shows them.
            println!(
                "device memory in use after {step} training calls: {mib:.1} MiB ({:?})",
                burn_lstm::cudnn_pool_usage(0)
            );
            readings.push((step, mib));
        }
    }
    assert_no_runtime_fallback();
    let growth = readings.last().unwrap().1 - readings[0].1;
    assert!(
        growth < 16.0,
        "device memory grew by {growth:.1} MiB from call 100 to {calls}"
    );
}

/// `y` and the input's gradient (of `Σ y·y`) of one training call of `model` on `x`.
fn y_and_input_grad(
    model: &CudnnCompatibleLstm<Autodiff<Cuda>>,
    x: &[f32],
    shape: [usize; 3],
) -> (Vec<f64>, Vec<f64>) {
    let x = tensor::<Autodiff<Cuda>, 3>(x, shape).require_grad();
    let (y, _) = model.forward(x.clone(), None);
    let grads = (y.clone() * y.clone()).sum().backward();
    let dx = x.grad(&grads).expect("input gradient");
    (to_f64(y), to_f64(dx))
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn several_host_threads_calling_one_module_get_the_answers_of_one() {
    assert!(gpu_usable(), "cuDNN does not run here");
    let _math = MATH.lock().unwrap_or_else(|e| e.into_inner());
    let config = CudnnCompatibleLstmConfig::new(16, 32)
        .with_num_layers(2)
        .with_bidirectional(true);
    let device = CudaDevice::default();
    let model = config.init::<Autodiff<Cuda>>(&device);
    let shape = [8, 20, 16];
    let inputs: Vec<Vec<f32>> = (0..4)
        .map(|thread| uniform(shape.iter().product(), 1.5, 100 + thread))
        .collect();
    // One thread first (this also materialises the lazily initialised parameters, so
    // that the clones below share them).
    let expected: Vec<_> = inputs
        .iter()
        .map(|x| y_and_input_grad(&model, x, shape))
        .collect();
    std::thread::scope(|scope| {
        for (x, (y_ref, dx_ref)) in inputs.iter().zip(&expected) {
            let model = model.clone();
            scope.spawn(move || {
                for call in 0..25 {
                    let (y, dx) = y_and_input_grad(&model, x, shape);
                    let (ey, edx) = (rel_err(&y, y_ref), rel_err(&dx, dx_ref));
                    assert!(ey < 1e-6 && edx < 1e-6, "call {call}: y {ey:e}, dx {edx:e}");
                }
            });
        }
    });
    println!("4 threads x 25 training calls at once: every y and dx as with one thread");
    assert_no_runtime_fallback();
}

/// cuDNN draws its own dropout masks (no reference has them): the shared check reads them
/// off a second layer built to show them (`common/dropout_check.rs`).
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn cudnn_drops_with_rate_p_and_backpropagates_through_the_same_masks() {
    assert!(gpu_usable(), "cuDNN does not run here");
    exact_f32(|| {
        check_dropout_masks::<Autodiff<Cuda>>(RnnKernel::Cudnn, &CudaDevice::default(), 1e-4)
    });
}

/// Held by every test that depends on the process-wide switch of the cuDNN GRU path.
static GRU: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A GRU on Cuda runs the portable kernel while the `CUDNN_GRU` path is switched off, and
/// the choice says how to switch it on (checked before any GPU is looked for).
#[test]
fn a_gru_on_cuda_names_the_switch() {
    let _lock = GRU.lock().unwrap_or_else(|e| e.into_inner());
    burn_lstm::set_cudnn_gru(false);
    let mut gru = spec(&config(), 2, 3);
    gru.arch.cell = burn_lstm::CellKind::Gru;
    for choice in [
        Cuda::rnn_kernel(&CudaDevice::default(), &gru),
        PlainCuda::rnn_kernel(&CudaDevice::default(), &gru),
        Autodiff::<Cuda>::rnn_kernel(&CudaDevice::default(), &gru),
    ] {
        assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
        let reason = choice.fallback_reason.expect("a fallback names its reason");
        assert!(reason.contains("BURN_LSTM_CUDNN_GRU=1"), "{reason}");
    }
    burn_lstm::set_cudnn_gru(true);
}

/// The `CUDNN_GRU` path (on by default): every GRU golden case through cuDNN forward and backward on the fused and the
/// plain Cuda backend. f32 bound as on the CPU kernels (`suite/gru_golden_f32.rs`).
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn gru_golden_cases_through_cudnn_when_switched_on() {
    use common::gru_golden_check::run_all_gru;
    assert!(gpu_usable(), "cuDNN does not run here");
    let _lock = GRU.lock().unwrap_or_else(|e| e.into_inner());
    burn_lstm::set_cudnn_gru(true);
    exact_f32(|| {
        run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32", 3e-4);
        run_all_gru::<Autodiff<PlainCuda>>("cuda-plain", RnnKernel::Cudnn, "f32", 3e-4);
    });
    assert_no_runtime_fallback();
}

/// The paths of the op's speed, all on (event ordering, the GPU weight cache, the
/// automatic algorithm, call reuse; the defaults), under load: several host threads, each writing the op's input
/// with a CubeCL kernel right before the call and reading its results with another right
/// after, inference on the fused backend (the weight cache's path) and training every
/// fifth call; every value is checked against the fused CPU kernel on the same input.
/// The settings are their defaults after.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn cubecl_work_around_the_op_from_several_threads_sees_every_value_with_the_new_paths_on() {
    // Read when the GPU's cuDNN state is created: first, in this test's own process
    // (gpu-run.sh runs each test alone).
    burn_lstm::set_cudnn_reuse(true);
    assert!(gpu_usable(), "cuDNN does not run here");
    cubecl_work_around_the_op_from_several_threads();
}

/// The event ordering without its flush of CubeCL (`BURN_LSTM_CUDNN_SKIP_FLUSH`, off by
/// default, switched on here): [`a_new_path_keeps_every_value`].
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn the_event_ordering_without_a_flush_of_cubecl_keeps_every_value() {
    a_new_path_keeps_every_value(
        burn_lstm::cudnn_skip_flush,
        burn_lstm::set_cudnn_skip_flush,
        "f32-no-flush",
    );
}

/// The runner threads kept awake (`BURN_LSTM_KEEP_AWAKE`, on by default on machines with
/// 8 hardware threads or more, switched on here on any machine: Burn's fusion thread and
/// CubeCL's device thread get their queues flushed every 50 µs while the op is called):
/// [`a_new_path_keeps_every_value`].
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn the_runner_threads_kept_awake_keep_every_value() {
    a_new_path_keeps_every_value(
        burn_lstm::keep_awake,
        burn_lstm::set_keep_awake,
        "f32-keep-awake",
    );
}

/// With a path's switch on (its getter `get` and setter `set`; `label` names the golden
/// runs): the several-threads load of
/// `cubecl_work_around_the_op_from_several_threads_sees_every_value_with_the_new_paths_on`,
/// then every LSTM and GRU golden case through cuDNN on the fused backend (outputs,
/// final states, every gradient) and 200 training calls of the memory test's stack on
/// two inputs in turn, each call's gradient against its input's alone.
fn a_new_path_keeps_every_value(get: fn() -> bool, set: fn(bool), label: &str) {
    use common::gru_golden_check::run_all_gru;
    burn_lstm::set_cudnn_reuse(true);
    assert!(gpu_usable(), "cuDNN does not run here");
    with_switch_on(get, set, || {
        cubecl_work_around_the_op_from_several_threads();
        exact_f32(|| {
            run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, label, 1e-4);
            run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, label, 3e-4);
        });
        repeated_training_calls_keep_their_gradient(200);
    });
    assert_no_runtime_fallback();
}

/// The reserve-space pool (`BURN_LSTM_CUDNN_RESERVE_POOL`, off by default; switched on
/// here before this process's first cuDNN call, which reads it): every LSTM and GRU
/// golden case through cuDNN on the fused backend (each backward reads a reserve space
/// the pool lent), 200 training calls on two inputs in turn, each call's gradient against
/// its input's alone (a reserve space lent to the next forward before the backward
/// reading it had finished would show), the several-threads load, the device memory
/// flat over 2,000 training calls of the memory test's stack, the pool within its bound,
/// and `release_gpu_buffers` giving every pool back.
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn the_reserve_space_pool_keeps_every_value_and_the_memory_flat() {
    use common::gru_golden_check::run_all_gru;
    burn_lstm::set_cudnn_reuse(true);
    with_switch_on(
        burn_lstm::cudnn_reserve_pool,
        burn_lstm::set_cudnn_reserve_pool,
        || {
            assert!(gpu_usable(), "cuDNN does not run here");
            exact_f32(|| {
                run_all::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-reserve-pool", 1e-4);
                run_all_gru::<Autodiff<Cuda>>("cuda", RnnKernel::Cudnn, "f32-reserve-pool", 3e-4);
            });
            let pooled = || burn_lstm::cudnn_pool_usage(0).expect("device 0's cuDNN state");
            let usage = pooled();
            assert!(
                usage.reserve_pool,
                "this process's cuDNN state was made without the reserve pool (run this test \
                 in its own process): {usage:?}"
            );
            let bound = 1..=cudnn_rnn::RESERVE_POOL_MAX_IDLE;
            assert!(bound.contains(&usage.idle_reserve_spaces), "{usage:?}");
            repeated_training_calls_keep_their_gradient(200);
            cubecl_work_around_the_op_from_several_threads();
            device_memory_stays_flat(2_000);
            let usage = pooled();
            assert!(bound.contains(&usage.idle_reserve_spaces), "{usage:?}");
            release_gives_back_the_pools_and_the_weight_spaces();
        },
    );
    assert_no_runtime_fallback();
}

/// Inference of a 2-layer bidirectional stack on the fused backend, twice (the second
/// call reuses the weight space where cuDNN's layout needs one), after training calls
/// (idle reserve spaces), then `release_gpu_buffers`: the work space, the idle reserve
/// spaces and the weight spaces are all given back, and the calls after it give the
/// same outputs and gradients as before. Needs the work-space and reserve pools on.
/// Where cuDNN's weight space is laid out as the flat buffer (no copy, so no weight space
/// is kept) the weight spaces are 0 before too: the line printed says which.
fn release_gives_back_the_pools_and_the_weight_spaces() {
    let pooled = || burn_lstm::cudnn_pool_usage(0).expect("device 0's cuDNN state");
    let device = CudaDevice::default();
    let model = CudnnCompatibleLstmConfig::new(32, 64)
        .with_num_layers(2)
        .with_bidirectional(true)
        .init::<Cuda>(&device);
    let x = tensor::<Cuda, 3>(&uniform(20 * 16 * 32, 1.0, 13), [20, 16, 32]);
    let infer = || to_f64(model.forward(x.clone(), None).0);
    let first = infer();
    assert_eq!(infer(), first, "the second call, on the kept weight space");
    let usage = pooled();
    println!("before release_gpu_buffers: {usage:?}");
    assert!(
        usage.work_space_bytes > 0 && usage.idle_reserve_spaces > 0,
        "{usage:?}"
    );
    burn_lstm::release_gpu_buffers();
    let usage = pooled();
    assert_eq!(
        (
            usage.work_space_bytes,
            usage.idle_reserve_spaces,
            usage.idle_reserve_bytes,
            usage.weight_spaces,
            usage.weight_space_bytes
        ),
        (0, 0, 0, 0, 0),
        "{usage:?}"
    );
    assert_eq!(infer(), first, "after the release");
    repeated_training_calls_keep_their_gradient(20);
}

/// Evaluation between SGD steps, as a training loop runs it, with the op's default
/// settings: inference on fused Cuda keeps the flat buffer and cuDNN's weight space of
/// unchanged parameters (`kernels/cubecl/flat_cache.rs`, `kernels/cudnn/weights.rs`).
/// Each evaluation matches NdArray on that step's parameters, a module kept from before
/// a step its own, and `release_gpu_buffers` changes no value
/// (`common::eval_between_steps_check`); on the plain backend too. The bound is the
/// automatic algorithm's (its persistent picks are less exact than the standard one).
#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn evaluation_between_training_steps_sees_each_steps_parameters() {
    use common::eval_between_steps_check::check_evaluation_between_steps;
    with_math(CudnnMath::Fma, || {
        let device = CudaDevice::default();
        let release = burn_lstm::release_gpu_buffers;
        check_evaluation_between_steps::<Autodiff<Cuda>>(
            &device,
            4,
            RnnKernel::Cudnn,
            1e-3,
            release,
        );
        check_evaluation_between_steps::<Autodiff<PlainCuda>>(
            &device,
            4,
            RnnKernel::Cudnn,
            1e-3,
            release,
        );
    });
}

/// `calls` training calls of the memory test's stack (2 layers, bidirectional, 16 padded
/// batch-first rows, no dropout) on two inputs in turn, nothing read back until the
/// last: every call's gradient of the first recurrent weight is the one its input gave
/// when computed alone. Alternating inputs make a stale read visible (a buffer still
/// holding the other input's values).
fn repeated_training_calls_keep_their_gradient(calls: usize) {
    let device = CudaDevice::default();
    let model = CudnnCompatibleLstmConfig::new(32, 64)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_batch_first(true)
        .init::<Autodiff<Cuda>>(&device);
    let shape = [16, 20, 32];
    let inputs =
        [11, 12].map(|seed| tensor::<Autodiff<Cuda>, 3>(&uniform(16 * 20 * 32, 1.0, seed), shape));
    let lengths: Vec<usize> = (0..16).map(|r| 20 - r).collect();
    let gradient = |x: &Tensor<Autodiff<Cuda>, 3>| {
        let (y, _) = model
            .try_forward(x.clone().require_grad(), None, Some(&lengths))
            .expect("valid input");
        let grads = (y.clone() * y).sum().backward();
        model.layers[0]
            .forward
            .weight_hh
            .grad(&grads)
            .expect("a gradient")
    };
    let alone = inputs.clone().map(|x| to_f64(gradient(&x)));
    let in_turn: Vec<_> = (0..calls).map(|call| gradient(&inputs[call % 2])).collect();
    for (call, grad) in in_turn.into_iter().enumerate() {
        let error = rel_err(&to_f64(grad), &alone[call % 2]);
        assert!(
            error < 1e-5,
            "call {call}'s gradient differs from its input's alone: {error:e}"
        );
    }
}

/// The body of the several-threads test: CubeCL kernels writing the op's input right
/// before each call and reading its results right after, from 4 threads.
fn cubecl_work_around_the_op_from_several_threads() {
    use burn_lstm::{
        CudnnAlgo, set_cudnn_algo, set_cudnn_events, set_cudnn_reuse, set_gpu_weight_cache,
    };
    let _math = MATH.lock().unwrap_or_else(|e| e.into_inner());
    set_cudnn_math(CudnnMath::Fma);
    set_cudnn_events(true);
    set_gpu_weight_cache(true);
    set_cudnn_algo(CudnnAlgo::Auto);

    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-stress-")
        .tempdir()
        .unwrap();
    let path = dir.path().join("model");
    let config = CudnnCompatibleLstmConfig::new(16, 64).with_num_layers(2);
    config
        .init::<Flex>(&Default::default())
        .save_file(&path, &recorder)
        .expect("save");
    let cuda = CudaDevice::default();
    let on_cuda = config
        .load_checkpoint::<Cuda, _>(&path, &recorder, &cuda)
        .expect("load on CUDA");
    let training = config
        .load_checkpoint::<Autodiff<Cuda>, _>(&path, &recorder, &cuda)
        .expect("load on CUDA for training");
    let on_flex = config
        .load_checkpoint::<Flex, _>(&path, &recorder, &Default::default())
        .expect("load on Flex");
    let shape = [4, 12, 16];
    let base = uniform(shape.iter().product(), 1.0, 7);
    // What CubeCL computes around the op, and the same on the CPU.
    let scale = |call: usize| 0.5 + (call % 7) as f32 * 0.25;
    let reference = |call: usize| {
        let k = scale(call);
        let x = tensor::<Flex, 3>(&base, shape) * k + k;
        let (y, state) = on_flex.forward(x, None);
        (to_f64(y * 2.0 - 1.0), to_f64(state.hidden))
    };
    let expected: Vec<_> = (0..7).map(reference).collect();
    let training_expected = y_and_input_grad(&training, &base, shape);
    std::thread::scope(|scope| {
        for thread in 0..4 {
            let (model, training, base, expected, training_expected) = (
                on_cuda.clone(),
                training.clone(),
                &base,
                &expected,
                &training_expected,
            );
            scope.spawn(move || {
                for call in 0..40 {
                    let id = thread * 1000 + call;
                    if call % 5 == 4 {
                        let (y, dx) = y_and_input_grad(&training, base, shape);
                        let errors = (
                            rel_err(&y, &training_expected.0),
                            rel_err(&dx, &training_expected.1),
                        );
                        assert!(
                            errors.0 < 1e-4 && errors.1 < 1e-4,
                            "call {id}: training {errors:?}"
                        );
                        continue;
                    }
                    let k = scale(call);
                    let x = tensor::<Cuda, 3>(base, shape) * k + k;
                    let (y, state) = model.forward(x, None);
                    let (y, h_n) = (to_f64(y * 2.0 - 1.0), to_f64(state.hidden));
                    let (y_ref, h_ref) = &expected[call % 7];
                    let errors = (rel_err(&y, y_ref), rel_err(&h_n, h_ref));
                    assert!(errors.0 < 1e-4 && errors.1 < 1e-4, "call {id}: {errors:?}");
                }
            });
        }
    });
    set_cudnn_events(true);
    set_gpu_weight_cache(true);
    set_cudnn_algo(CudnnAlgo::Auto);
    set_cudnn_reuse(true);
    assert_no_runtime_fallback();
}
