//! Swap `burn::nn::Lstm` for `CudnnCompatibleLstm`: same outputs, one op per layer stack,
//! a checkpoint in PyTorch's layout, and a report of which kernel runs.
//!
//! `cargo run --example quickstart` (add `--release` for a fully optimised build)

use burn::backend::{Autodiff, Flex};
use burn::nn::LstmConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::tensor::{Distribution, Int, Tensor};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig};

type Backend = Autodiff<Flex>;

fn main() {
    let device = Default::default();

    // 1. An existing Burn LSTM converts with identical outputs.
    let burn_lstm = LstmConfig::new(8, 16, true).init::<Flex>(&device);
    let converted = CudnnCompatibleLstm::from_burn_lstm(&burn_lstm).expect("a standard nn::Lstm");
    let x = Tensor::<Flex, 3>::random([4, 12, 8], Distribution::Normal(0.0, 1.0), &device);
    let difference = (burn_lstm.forward(x.clone(), None).0 - converted.forward(x, None).0)
        .abs()
        .max()
        .into_scalar();
    println!("nn::Lstm vs CudnnCompatibleLstm: largest difference {difference:.2e}");

    // 2. Train a 2-layer bidirectional LSTM for a few steps to predict a shifted sine.
    let mut model = CudnnCompatibleLstmConfig::new(1, 32)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_dropout(0.1)
        .init::<Backend>(&device);
    let mut head = burn::nn::LinearConfig::new(64, 1).init::<Backend>(&device);
    println!("kernel: {}", model.kernel(&device, 16, 40));
    let mut optim = AdamConfig::new().init::<Backend, CudnnCompatibleLstm<Backend>>();
    let mut optim_head = AdamConfig::new().init::<Backend, burn::nn::Linear<Backend>>();
    let phase = Tensor::<Backend, 3>::random(
        [16, 1, 1],
        Distribution::Uniform(0.0, std::f64::consts::TAU),
        &device,
    );
    let t = Tensor::<Backend, 1, Int>::arange(0..41, &device)
        .float()
        .reshape([1, 41, 1])
        * 0.2;
    let wave = (t + phase).sin();
    let (input, target) = (
        wave.clone().slice([0..16, 0..40]),
        wave.slice([0..16, 1..41]),
    );
    for step in 0..30 {
        let (y, _) = model.forward(input.clone(), None);
        let loss = (head.forward(y) - target.clone()).powi_scalar(2).mean();
        if step % 10 == 0 || step == 29 {
            println!("step {step:2}: mse {:.4}", loss.clone().into_scalar());
        }
        let mut grads = loss.backward();
        let head_grads = GradientsParams::from_module(&mut grads, &head);
        let lstm_grads = GradientsParams::from_module(&mut grads, &model);
        model = optim.step(1e-2, model, lstm_grads);
        head = optim_head.step(1e-2, head, head_grads);
    }

    // 3. Export in PyTorch's state-dict layout (`torch.nn.LSTM(1, 32, 2, bidirectional=True)`).
    let path = std::env::temp_dir().join("quickstart_lstm.safetensors");
    model
        .save_pytorch_safetensors(&path)
        .expect("writable temp dir");
    println!("saved PyTorch-compatible weights to {}", path.display());
}
