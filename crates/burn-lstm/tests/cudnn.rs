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
//! outputs on NdArray and on Cuda.
#![cfg(feature = "cuda")]

mod common;

use burn::backend::cuda::CudaDevice;
use burn::backend::{Autodiff, NdArray};
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::{Distribution, Tensor};
use burn_cubecl::CubeBackend;
use burn_lstm::{CudnnCompatibleLstmConfig, LstmBackend, LstmKernel, LstmSpec, LstmState};
use common::golden_check::run_all;
use common::{rel_err, to_f64};

/// Burn's Cuda backend (fused), f32.
type Cuda = burn::backend::Cuda<f32, i32>;

/// Burn's Cuda backend without fusion.
type PlainCuda = CubeBackend<cubecl_cuda::CudaRuntime, f32, i32, u8>;

fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(5, 8)
        .with_num_layers(2)
        .with_bidirectional(true)
}

/// One call of `config` on a `[batch, seq_len]` input.
fn spec(config: &CudnnCompatibleLstmConfig, batch: usize, seq_len: usize) -> LstmSpec {
    LstmSpec {
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
    Cuda::lstm_kernel(&CudaDevice::default(), &spec(&config(), 2, 3)).kernel == LstmKernel::Cudnn
}

#[test]
fn without_a_gpu_the_choice_names_the_reason() {
    let spec = spec(&config(), 2, 3);
    for choice in [
        Cuda::lstm_kernel(&CudaDevice::default(), &spec),
        PlainCuda::lstm_kernel(&CudaDevice::default(), &spec),
        Autodiff::<Cuda>::lstm_kernel(&CudaDevice::default(), &spec),
    ] {
        if cudnn_rnn::driver_present() && cudnn_rnn::check_cudnn().is_ok() {
            // A machine with a driver and cuDNN: either it runs, or it says why not.
            assert!(
                choice.kernel == LstmKernel::Cudnn || choice.fallback_reason.is_some(),
                "{choice}"
            );
        } else {
            assert_eq!(choice.kernel, LstmKernel::Portable, "{choice}");
            let reason = choice.fallback_reason.expect("a fallback names its reason");
            assert!(
                reason.contains("cuDNN is not usable on CUDA device 0"),
                "{reason}"
            );
            assert!(
                reason.contains("libcuda") || reason.contains("libcudnn"),
                "{reason}"
            );
        }
    }
}

#[test]
fn requests_and_unsupported_architectures_fall_back_with_reasons() {
    let device = CudaDevice::default();
    let mut asked = spec(&config(), 2, 3);
    asked.kernel = Some(LstmKernel::Portable);
    let choice = Cuda::lstm_kernel(&device, &asked);
    assert_eq!(choice.kernel, LstmKernel::Portable);
    assert!(
        choice
            .fallback_reason
            .unwrap()
            .contains("portable kernel was asked for")
    );

    asked.kernel = Some(LstmKernel::FusedCpu);
    let choice = Cuda::lstm_kernel(&device, &asked);
    assert!(
        choice
            .fallback_reason
            .unwrap()
            .contains("runs only on NdArray")
    );

    // cuDNN's LSTMP needs proj_size < hidden_size; the module accepts any proj_size.
    let lstmp = spec(
        &CudnnCompatibleLstmConfig::new(4, 3).with_proj_size(3),
        2,
        2,
    );
    let choice = Cuda::lstm_kernel(&device, &lstmp);
    assert_eq!(choice.kernel, LstmKernel::Portable);
    let reason = choice.fallback_reason.unwrap();
    assert!(reason.contains("proj_size"), "{reason}");

    // Burn's Cuda with f16 elements: not a cuDNN type this op runs.
    let choice =
        burn::backend::Cuda::<half::f16, i32>::lstm_kernel(&device, &spec(&config(), 2, 2));
    assert!(choice.fallback_reason.unwrap().contains("runs f32 and f64"));
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_on_fused_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    run_all::<Autodiff<Cuda>>(LstmKernel::Cudnn, "f32", 1e-4);
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_cudnn_on_plain_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    run_all::<Autodiff<PlainCuda>>(LstmKernel::Cudnn, "f32", 1e-4);
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn golden_cases_through_the_portable_kernel_on_cuda() {
    run_all::<Autodiff<Cuda>>(LstmKernel::Portable, "f32", 1e-4);
}

#[test]
#[ignore = "needs an NVIDIA GPU, libcuda and cuDNN 9 on LD_LIBRARY_PATH"]
fn one_checkpoint_gives_the_same_outputs_on_ndarray_and_cuda() {
    assert!(gpu_usable(), "cuDNN does not run here");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let dir = std::env::temp_dir().join(format!("burn-lstm-cudnn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model");
    let config = config().with_proj_size(3);

    // Trained (here: initialised) on CUDA, saved, loaded on CPU.
    let cuda = CudaDevice::default();
    let on_cuda = config.init::<Autodiff<Cuda>>(&cuda);
    on_cuda
        .clone()
        .save_file(&path, &recorder)
        .expect("save on CUDA");
    let cpu = Default::default();
    let on_cpu = config
        .load_checkpoint::<NdArray<f32>, _>(&path, &recorder, &cpu)
        .expect("load on CPU");

    let x_cpu = Tensor::<NdArray<f32>, 3>::random([3, 7, 5], Distribution::Normal(0.0, 1.0), &cpu);
    let x_cuda = Tensor::<Cuda, 3>::from_data(x_cpu.to_data(), &cuda);
    let on_cuda = config
        .load_checkpoint::<Cuda, _>(&path, &recorder, &cuda)
        .expect("load on CUDA");
    assert_eq!(on_cuda.kernel(&cuda, 3, 7).kernel, LstmKernel::Cudnn);
    let (y_cpu, s_cpu): (_, LstmState<NdArray<f32>>) = on_cpu.forward(x_cpu, None);
    let (y_gpu, s_gpu) = on_cuda.forward(x_cuda, None);
    for (name, a, b) in [
        ("y", to_f64(y_cpu), to_f64(y_gpu)),
        ("h_n", to_f64(s_cpu.hidden), to_f64(s_gpu.hidden)),
        ("c_n", to_f64(s_cpu.cell), to_f64(s_gpu.cell)),
    ] {
        let err = rel_err(&b, &a);
        println!("checkpoint NdArray vs Cuda {name}: {err:.2e}");
        assert!(err < 1e-5, "{name}: {err}");
    }
}
