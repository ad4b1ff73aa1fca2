//! The implementations a run can time, each built into a closure doing one call.

use burn::backend::{Autodiff, NdArray};
use burn::nn::{BiLstm, BiLstmConfig, Lstm, LstmConfig};
use burn::tensor::{Distribution, Tensor, backend::Backend};
use burn_lstm::{CudnnCompatibleLstmConfig, LstmBackend, LstmKernel};

use crate::args::{Args, Mode};

/// Implementations built into this binary.
pub const NAMES: &[&str] = &["burn-lstm", "portable", "fused-cpu"];

/// One timed call.
pub type Call = Box<dyn FnMut()>;

pub fn build(args: &Args) -> Result<Call, String> {
    if args.device != "cpu" {
        return Err(format!(
            "--device {}: this build runs on cpu only (the cuda device comes with the `cuda` feature)",
            args.device
        ));
    }
    match (args.implementation.as_str(), args.mode) {
        ("portable", Mode::Infer) => Ok(ours::<NdArray>(args, LstmKernel::Portable)),
        ("portable", Mode::Train) => Ok(ours::<Autodiff<NdArray>>(args, LstmKernel::Portable)),
        ("fused-cpu", Mode::Infer) => Ok(ours::<NdArray>(args, LstmKernel::FusedCpu)),
        ("fused-cpu", Mode::Train) => Ok(ours::<Autodiff<NdArray>>(args, LstmKernel::FusedCpu)),
        ("burn-lstm", Mode::Infer) => Ok(burn_nn::<NdArray>(args)),
        ("burn-lstm", Mode::Train) => Ok(burn_nn::<Autodiff<NdArray>>(args)),
        (other, _) => Err(format!(
            "--impl {other}: not built in; available: {}",
            NAMES.join(", ")
        )),
    }
}

/// Random normal input `[B, T, I]` (never zeros: zeros skip work in some kernels).
fn input<B: Backend>(args: &Args) -> Tensor<B, 3> {
    Tensor::random(
        [args.batch, args.seq, args.input],
        Distribution::Normal(0.0, 1.0),
        &Default::default(),
    )
}

/// Forward, and with autodiff the backward of `sum(y)`, then wait for the device.
fn finish<B: Backend>(y: Tensor<B, 3>) {
    let loss = y.sum();
    let device = loss.device();
    backward_hook::<B>(loss);
    B::sync(&device).expect("device sync");
}

/// `CudnnCompatibleLstm` with `kernel` asked for (refused if another would run).
fn ours<B: LstmBackend + 'static>(args: &Args, kernel: LstmKernel) -> Call {
    let device = Default::default();
    burn_lstm::set_cpu_threads(args.threads);
    let model = CudnnCompatibleLstmConfig::new(args.input, args.hidden)
        .with_num_layers(args.layers)
        .with_bidirectional(args.bidirectional)
        .init::<B>(&device)
        .with_kernel(Some(kernel));
    let choice = model.kernel(&device, args.batch, args.seq);
    assert_eq!(choice.kernel, kernel, "--impl {kernel} would run {choice}");
    let x = input::<B>(args);
    Box::new(move || finish(model.forward(x.clone(), None).0))
}

enum BurnLayer<B: Backend> {
    Uni(Box<Lstm<B>>),
    Bi(Box<BiLstm<B>>),
}

fn burn_nn<B: Backend + 'static>(args: &Args) -> Call {
    let device = Default::default();
    let dirs = if args.bidirectional { 2 } else { 1 };
    let layers: Vec<BurnLayer<B>> = (0..args.layers)
        .map(|l| {
            let d_input = if l == 0 {
                args.input
            } else {
                dirs * args.hidden
            };
            if args.bidirectional {
                BurnLayer::Bi(Box::new(
                    BiLstmConfig::new(d_input, args.hidden, true).init(&device),
                ))
            } else {
                BurnLayer::Uni(Box::new(
                    LstmConfig::new(d_input, args.hidden, true).init(&device),
                ))
            }
        })
        .collect();
    let x = input::<B>(args);
    Box::new(move || {
        let mut h = x.clone();
        for layer in &layers {
            h = match layer {
                BurnLayer::Uni(l) => l.forward(h, None).0,
                BurnLayer::Bi(l) => l.forward(h, None).0,
            };
        }
        finish(h)
    })
}

/// Runs the backward when `B` is `Autodiff<NdArray>`, the training backend here
/// (`backward` exists only on autodiff backends, and the closures are generic).
fn backward_hook<B: Backend>(loss: Tensor<B, 1>) {
    use std::any::Any;
    let any: Box<dyn Any> = Box::new(loss);
    if let Ok(loss) = any.downcast::<Tensor<Autodiff<NdArray>, 1>>() {
        loss.backward();
    }
}
