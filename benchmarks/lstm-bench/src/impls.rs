//! The implementations a run can time, each built into a closure doing one call.

use burn::backend::{Autodiff, Flex, NdArray};
use burn::nn::{BiGru, BiGruConfig, BiLstm, BiLstmConfig, Gru, GruConfig, Lstm, LstmConfig};
use burn::tensor::{
    Distribution, Tensor,
    backend::{AutodiffBackend, Backend},
};
#[cfg(feature = "cuda")]
use burn_lstm::PlainCuda;
use burn_lstm::{RnnBackend, RnnKernel};

use crate::args::{Args, Cell, CpuBackend, Device, Dtype, Mode};
use crate::model::Layer;
use crate::timed::{Call, Lcg};

/// Implementations built into this binary.
#[cfg(not(feature = "cuda"))]
pub const NAMES: &[&str] = &["burn-lstm", "portable", "fused-cpu", "lstm-cpu"];
/// Implementations built into this binary.
#[cfg(feature = "cuda")]
pub const NAMES: &[&str] = &[
    "burn-lstm",
    "portable",
    "fused-cpu",
    "lstm-cpu",
    "cudnn",
    "cudnn-plain",
    "cudnn-raw",
];

pub fn build(args: &Args) -> Result<Call, String> {
    args.layer_flags_supported()?;
    if args.dtype == Dtype::Int8 {
        return match (args.device, args.implementation.as_str(), args.mode) {
            (Device::Cpu, "lstm-cpu", Mode::Infer) => Ok(kernel_int8(args)),
            _ => Err("--dtype int8: CPU inference with --impl lstm-cpu only".into()),
        };
    }
    let half = args.dtype != Dtype::F32;
    match args.device {
        Device::Cpu if half && args.implementation == "lstm-cpu" => {
            Err("--impl lstm-cpu: the kernel alone runs f32 (and f64) only".into())
        }
        Device::Cpu => match args.backend {
            CpuBackend::Flex => {
                use_dtype::<Flex>(args.dtype)?;
                build_cpu::<Flex>(args)
            }
            CpuBackend::Ndarray if half => {
                Err("--backend ndarray: NdArray computes f32 and f64, not f16 or bf16".into())
            }
            CpuBackend::Ndarray => build_cpu::<NdArray>(args),
        },
        Device::Cuda => build_cuda(args),
    }
}

/// Makes `dtype` the float type of `B`'s default device, before the first tensor on it
/// (Burn 0.21 keeps one per device for the whole process).
fn use_dtype<B: Backend>(dtype: Dtype) -> Result<(), String> {
    if dtype == Dtype::F32 {
        return Ok(());
    }
    let device = B::Device::default();
    let float = dtype
        .burn()
        .ok_or_else(|| format!("--dtype {}: not a float type of Burn", dtype.name()))?;
    burn::tensor::set_default_dtypes::<B>(&device, float, burn::tensor::IntDType::I32)
        .map_err(|e| format!("--dtype {}: {e:?}", dtype.name()))
}

/// The backend the JSON line names: Burn's backend for the implementations through
/// Burn, `none` for those without Burn.
pub fn backend_name(args: &Args) -> &'static str {
    match (args.device, args.implementation.as_str()) {
        (_, "lstm-cpu" | "cudnn-raw") => "none",
        (Device::Cuda, _) => "cuda",
        (Device::Cpu, _) => args.backend.name(),
    }
}

#[cfg(not(feature = "cuda"))]
fn build_cuda(_args: &Args) -> Result<Call, String> {
    Err("--device cuda: this build has no CUDA; build with `--features cuda`".into())
}

/// Everything on Burn's (fused) Cuda backend: `cudnn` (the cuDNN op), `portable` (our
/// portable kernel) and `burn-lstm` (Burn's `nn::Lstm`); `cudnn-plain` is the cuDNN op on
/// the plain (unfused) Cuda backend; `cudnn-raw` is cuDNN without Burn.
#[cfg(feature = "cuda")]
fn build_cuda(args: &Args) -> Result<Call, String> {
    use burn::backend::Cuda;
    burn_lstm::set_cudnn_math(
        if std::env::var("LSTM_BENCH_TF32").is_ok_and(|v| v == "1") {
            burn_lstm::CudnnMath::Tf32
        } else {
            burn_lstm::CudnnMath::Fma
        },
    );
    use burn::tensor::{bf16, f16};
    match (args.implementation.as_str(), args.dtype) {
        ("cudnn-raw", _) if args.cell == Cell::Gru => {
            Err("--impl cudnn-raw: LSTM only (--cell lstm)".into())
        }
        ("cudnn-raw", Dtype::F32) => crate::cudnn_raw::build(args),
        ("cudnn-raw", _) => Err("--impl cudnn-raw: f32 only".into()),
        ("cudnn-plain", Dtype::F32) => ours::<PlainCuda<f32>>(args, RnnKernel::Cudnn),
        ("cudnn-plain", Dtype::F16) => {
            use_dtype::<PlainCuda<f16>>(args.dtype)?;
            ours::<PlainCuda<f16>>(args, RnnKernel::Cudnn)
        }
        ("cudnn-plain", Dtype::Int8) => Err("--dtype int8: CPU inference only".into()),
        ("cudnn-plain", Dtype::Bf16) => {
            use_dtype::<PlainCuda<bf16>>(args.dtype)?;
            ours::<PlainCuda<bf16>>(args, RnnKernel::Cudnn)
        }
        (_, Dtype::F32) => cuda_impl::<Cuda<f32>>(args),
        (_, Dtype::F16) => {
            use_dtype::<Cuda<f16>>(args.dtype)?;
            cuda_impl::<Cuda<f16>>(args)
        }
        (_, Dtype::Bf16) => {
            use_dtype::<Cuda<bf16>>(args.dtype)?;
            cuda_impl::<Cuda<bf16>>(args)
        }
        (_, Dtype::Int8) => Err("--dtype int8: CPU inference only".into()),
    }
}

/// The implementations through Burn on one Cuda backend type.
#[cfg(feature = "cuda")]
fn cuda_impl<B: RnnBackend + 'static>(args: &Args) -> Result<Call, String> {
    match args.implementation.as_str() {
        "cudnn" => ours::<B>(args, RnnKernel::Cudnn),
        "portable" => ours::<B>(args, RnnKernel::Portable),
        "burn-lstm" => Ok(burn_nn::<B>(args)),
        other => Err(format!(
            "--impl {other} --device cuda: not available; on cuda: cudnn, cudnn-raw, portable, burn-lstm"
        )),
    }
}

/// The CPU implementations, through Burn on backend `B` (`Flex` or `NdArray`).
fn build_cpu<B: RnnBackend + 'static>(args: &Args) -> Result<Call, String> {
    if args.implementation == "burn-lstm" && (args.proj_size > 0 || args.row_lengths().is_some()) {
        return Err(
            "--impl burn-lstm: Burn's nn::Lstm and nn::Gru have no projection and no lengths"
                .into(),
        );
    }
    match args.implementation.as_str() {
        "portable" => ours::<B>(args, RnnKernel::Portable),
        "fused-cpu" => ours::<B>(args, RnnKernel::FusedCpu),
        "burn-lstm" => Ok(burn_nn::<B>(args)),
        "lstm-cpu" => Ok(kernel_alone(args, args.mode)),
        other => Err(format!(
            "--impl {other}: not built in; available: {}",
            NAMES.join(", ")
        )),
    }
}

/// Random normal input `[B, T, I]` (never zeros: zeros skip work in some kernels),
/// tracked on autodiff backends: PyTorch's peer asks for the input's gradient too, and
/// the fused CPU kernel skips it when nobody does.
fn input<B: Backend>(args: &Args) -> Tensor<B, 3> {
    Tensor::random(
        [args.batch, args.seq, args.input],
        Distribution::Normal(0.0, 1.0),
        &Default::default(),
    )
    .require_grad()
}

/// Inference ends with the output (as the peers' calls do): wait for the device.
fn infer_done<B: Backend>(y: Tensor<B, 3>) {
    B::sync(&y.device()).expect("device sync");
}

/// A training step ends with the backward of `sum(y)`, then waits for the device.
fn train_done<B: AutodiffBackend>(y: Tensor<B, 3>) {
    let device = y.device();
    let _gradients = y.sum().backward();
    B::sync(&device).expect("device sync");
}

/// `steps` calls of `step` (at least one), of which only the last goes to `done` (the
/// others' results are dropped, their work left queued): `--sync-every`.
fn steps_then<T>(steps: usize, step: impl Fn() -> T, done: impl Fn(T), drop_one: impl Fn(T)) {
    for _ in 1..steps {
        drop_one(step());
    }
    done(step());
}

/// `CudnnCompatibleLstm` or `CudnnCompatibleGru` (`--cell`) on `B` (on `Autodiff<B>` for
/// `--mode train`) with `kernel` asked for (refused if another would run).
fn ours<B: RnnBackend + 'static>(args: &Args, kernel: RnnKernel) -> Result<Call, String> {
    burn_lstm::set_cpu_threads(args.threads);
    let lengths = args.row_lengths();
    match args.mode {
        Mode::Infer => {
            let model = Layer::<B>::new(args, kernel)?;
            check_kernel(model.kernel(args), kernel)?;
            let x = input::<B>(args);
            let steps = args.sync_every;
            Ok(Box::new(move || {
                let step = || model.forward(x.clone(), lengths.as_deref());
                steps_then(steps, step, infer_done, drop);
            }))
        }
        Mode::Train => {
            let model = Layer::<Autodiff<B>>::new(args, kernel)?;
            check_kernel(model.kernel(args), kernel)?;
            let x = input::<Autodiff<B>>(args);
            let steps = args.sync_every;
            Ok(Box::new(move || {
                let step = || model.forward(x.clone(), lengths.as_deref());
                let backward = |y: Tensor<Autodiff<B>, 3>| drop(y.sum().backward());
                steps_then(steps, step, train_done, backward);
            }))
        }
    }
}

fn check_kernel(choice: burn_lstm::KernelChoice, kernel: RnnKernel) -> Result<(), String> {
    if choice.kernel == kernel {
        Ok(())
    } else {
        Err(format!("--impl {kernel} would run {choice}"))
    }
}

enum BurnLayer<B: Backend> {
    Uni(Box<Lstm<B>>),
    Bi(Box<BiLstm<B>>),
    UniGru(Box<Gru<B>>),
    BiGru(Box<BiGru<B>>),
}

/// Burn's `nn::Lstm` / `nn::BiLstm` (or, `--cell gru`, `nn::Gru` / `nn::BiGru`) stack on
/// `B` (on `Autodiff<B>` for training). It has no projection and no lengths: those flags
/// are refused in `build`.
fn burn_nn<B: Backend + 'static>(args: &Args) -> Call {
    match args.mode {
        Mode::Infer => {
            let forward = burn_nn_forward::<B>(args);
            Box::new(move || infer_done(forward()))
        }
        Mode::Train => {
            let forward = burn_nn_forward::<Autodiff<B>>(args);
            Box::new(move || train_done(forward()))
        }
    }
}

fn burn_nn_forward<B: Backend + 'static>(args: &Args) -> impl Fn() -> Tensor<B, 3> + 'static {
    let device = Default::default();
    let dirs = if args.bidirectional { 2 } else { 1 };
    let layers: Vec<BurnLayer<B>> = (0..args.layers)
        .map(|l| {
            let d_input = if l == 0 {
                args.input
            } else {
                dirs * args.hidden
            };
            match (args.cell, args.bidirectional) {
                (Cell::Lstm, true) => BurnLayer::Bi(Box::new(
                    BiLstmConfig::new(d_input, args.hidden, true).init(&device),
                )),
                (Cell::Lstm, false) => BurnLayer::Uni(Box::new(
                    LstmConfig::new(d_input, args.hidden, true).init(&device),
                )),
                (Cell::Gru, true) => BurnLayer::BiGru(Box::new(
                    BiGruConfig::new(d_input, args.hidden, true).init(&device),
                )),
                (Cell::Gru, false) => BurnLayer::UniGru(Box::new(
                    GruConfig::new(d_input, args.hidden, true).init(&device),
                )),
            }
        })
        .collect();
    let x = input::<B>(args);
    move || {
        let mut h = x.clone();
        for layer in &layers {
            h = match layer {
                BurnLayer::Uni(l) => l.forward(h, None).0,
                BurnLayer::Bi(l) => l.forward(h, None).0,
                BurnLayer::UniGru(l) => l.forward(h, None),
                BurnLayer::BiGru(l) => l.forward(h, None).0,
            };
        }
        h
    }
}

/// The fused CPU kernel on plain slices, without Burn (no tensor copies, no parameter
/// concatenation): what the kernel itself costs. Inference packs the weights once, before
/// the timed calls (`forward_packed`, as a server would and as the module does while its
/// parameters are unchanged). Training runs `forward_train` and `backward` with `dy = 1`
/// (the gradient of `sum(y)`).
fn kernel_alone(args: &Args, mode: Mode) -> Call {
    let inputs = kernel_inputs(args);
    let arch = &inputs.arch;
    let dy = vec![1.0f32; args.seq * args.batch * arch.dirs() * arch.output_size()];
    let packed = lstm_cpu::PackedWeights::new(arch, &inputs.weights).expect("valid weights");
    Box::new(move || {
        let call = inputs.call();
        match mode {
            Mode::Infer => {
                let outputs = lstm_cpu::forward_packed(&call, &packed).expect("valid call");
                std::hint::black_box(outputs);
            }
            Mode::Train => {
                let (_, tape) = lstm_cpu::forward_train(&call).expect("valid call");
                // The input's gradient too, as PyTorch's peer computes it.
                let grads = lstm_cpu::OutputGrads {
                    dy: &dy,
                    dh_n: &inputs.zeros[..inputs.h_len],
                    dc_n: &inputs.zeros[..inputs.c_len],
                    input_wanted: true,
                };
                std::hint::black_box(lstm_cpu::backward(&call, tape, grads).expect("valid"));
            }
        }
    })
}

/// The int8 path of the kernel alone (`lstm_cpu::int8::QuantizedRnn`, inference): the
/// weights quantized once, before the timed calls, as a server quantizes a model on
/// loading, to the range this CPU's fastest int8 kernel runs (±63 where AVX2 is the
/// widest, `LSTM_CPU_ISA=avx2` included); the activations quantized in every call. The
/// inputs are those of [`kernel_alone`].
fn kernel_int8(args: &Args) -> Call {
    let inputs = kernel_inputs(args);
    let model = lstm_cpu::int8::QuantizedRnn::quantize(
        &inputs.arch,
        &inputs.weights,
        lstm_cpu::int8::fastest_levels(),
    )
    .expect("valid weights");
    Box::new(move || {
        // The call's f32 weights are not read: the model's int8 ones are.
        std::hint::black_box(model.forward(&inputs.call()).expect("valid call"));
    })
}

/// What the kernel-alone benches call with: the architecture and shape of `args`,
/// weights uniform in `±1/√H`, the input in `±1.7`, zeros for the initial states (and
/// `h_len`, `c_len`: their lengths; a GRU's `c0` is empty).
struct KernelInputs {
    arch: lstm_cpu::RnnArch,
    weights: Vec<f32>,
    input: Vec<f32>,
    zeros: Vec<f32>,
    h_len: usize,
    c_len: usize,
    lengths: Option<Vec<usize>>,
    seq_len: usize,
    batch: usize,
    threads: usize,
}

impl KernelInputs {
    /// The call on these inputs (sequence-major input, zero initial states).
    fn call(&self) -> lstm_cpu::RnnCall<'_, f32> {
        lstm_cpu::RnnCall {
            arch: &self.arch,
            seq_len: self.seq_len,
            batch: self.batch,
            lengths: self.lengths.as_deref(),
            input: &self.input,
            input_strides: None,
            weights: &self.weights,
            h0: &self.zeros[..self.h_len],
            c0: &self.zeros[..self.c_len],
            dropout_masks: &[],
            threads: self.threads,
        }
    }
}

fn kernel_inputs(args: &Args) -> KernelInputs {
    let arch = lstm_cpu::RnnArch {
        cell: args.cell.kind(),
        input_size: args.input,
        hidden_size: args.hidden,
        proj_size: args.proj_size,
        num_layers: args.layers,
        bidirectional: args.bidirectional,
        bias: true,
    };
    let mut values = Lcg(0x9E37_79B9_7F4A_7C15);
    let mut uniform = |scale: f32| values.uniform(scale);
    let bound = 1.0 / (args.hidden as f32).sqrt();
    let weights: Vec<f32> = (0..arch.weight_count()).map(|_| uniform(bound)).collect();
    let input: Vec<f32> = (0..args.seq * args.batch * args.input)
        .map(|_| uniform(1.7))
        .collect();
    let (c_len, h_len) = (
        arch.cells() * args.batch * arch.cell_state_size(),
        arch.cells() * args.batch * arch.output_size(),
    );
    KernelInputs {
        arch,
        weights,
        input,
        zeros: vec![0.0f32; c_len.max(h_len)],
        h_len,
        c_len,
        lengths: args.row_lengths(),
        seq_len: args.seq,
        batch: args.batch,
        threads: args.threads,
    }
}
