//! Load PyTorch `nn.LSTM` weights and check that the outputs match PyTorch's.
//!
//! `cargo run --release --example pytorch_weights [-- WEIGHTS IO.json]`
//!
//! The default files in `examples/data/` come from `examples/pytorch/make_weights.py`
//! (a 2-layer bidirectional `nn.LSTM`, its state dict in safetensors, and an input with
//! PyTorch's output and final state in JSON). Run that script to regenerate them.
//! WEIGHTS may also be the state dict saved by `torch.save(lstm.state_dict(), path)`:
//! `load_pytorch` reads either.

use std::path::PathBuf;
use std::process::ExitCode;

use burn::backend::Flex;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::CudnnCompatibleLstmConfig;
use clap::Parser;

/// A tensor of the JSON file: shape and row-major values.
#[derive(serde::Deserialize)]
struct Stored {
    shape: Vec<usize>,
    values: Vec<f32>,
}

#[derive(serde::Deserialize)]
struct TorchConfig {
    input_size: usize,
    hidden_size: usize,
    num_layers: usize,
    bidirectional: bool,
    batch_first: bool,
}

#[derive(serde::Deserialize)]
struct Io {
    config: TorchConfig,
    torch_version: String,
    x: Stored,
    y: Stored,
    h_n: Stored,
    c_n: Stored,
}

fn largest_difference(ours: Tensor<Flex, 3>, theirs: &Stored) -> Result<f32, String> {
    if ours.dims().as_slice() != theirs.shape.as_slice() {
        return Err(format!(
            "shape {:?} where PyTorch has {:?}",
            ours.dims(),
            theirs.shape
        ));
    }
    let ours: Vec<f32> = ours
        .into_data()
        .convert::<f32>()
        .to_vec()
        .expect("f32 values");
    Ok(ours
        .iter()
        .zip(&theirs.values)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max))
}

/// Loads PyTorch `nn.LSTM` weights (safetensors) and checks the outputs against PyTorch's.
#[derive(Parser, Debug)]
#[command(name = "pytorch_weights")]
struct Args {
    /// The state dict in safetensors (default: `examples/data/pytorch_lstm.safetensors`).
    weights: Option<PathBuf>,
    /// The input and PyTorch's outputs in JSON (default: `examples/data/pytorch_lstm_io.json`).
    io: Option<PathBuf>,
}

fn run(args: Args) -> Result<(), String> {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data");
    let weights = args
        .weights
        .unwrap_or_else(|| data.join("pytorch_lstm.safetensors"));
    let io_path = args.io.unwrap_or_else(|| data.join("pytorch_lstm_io.json"));
    let io_text = std::fs::read_to_string(&io_path)
        .map_err(|e| format!("cannot read {}: {e}", io_path.display()))?;
    let io: Io = serde_json::from_str(&io_text)
        .map_err(|e| format!("{} is not the script's JSON: {e}", io_path.display()))?;

    // The input's shape, checked before anything reads it.
    let shape: [usize; 3] = io.x.shape.clone().try_into().map_err(|_| {
        format!(
            "{}: x.shape: expected 3 sizes, got {:?}",
            io_path.display(),
            io.x.shape
        )
    })?;
    if Some(io.x.values.len()) != shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        return Err(format!(
            "{}: x.values: expected the product of {:?} values, got {}",
            io_path.display(),
            shape,
            io.x.values.len()
        ));
    }

    let c = &io.config;
    let config = CudnnCompatibleLstmConfig::new(c.input_size, c.hidden_size)
        .with_num_layers(c.num_layers)
        .with_bidirectional(c.bidirectional)
        .with_batch_first(c.batch_first);
    let device = Default::default();
    // Every tensor is checked against the config: a file of another shape is an error
    // that names the tensor, not a silently different model.
    let model = config
        .load_pytorch::<Flex>(&weights, &device)
        .map_err(|e| e.to_string())?;
    println!(
        "loaded {} (PyTorch {}), kernel: {}",
        weights.display(),
        io.torch_version,
        model.kernel(&device, shape[0], shape[1])
    );

    let x = Tensor::<Flex, 3>::from_data(TensorData::new(io.x.values.clone(), shape), &device);
    let (y, state) = model
        .try_forward(x, None, None)
        .map_err(|e| e.to_string())?;
    let differences = [
        ("y", largest_difference(y, &io.y)?),
        ("h_n", largest_difference(state.hidden, &io.h_n)?),
        ("c_n", largest_difference(state.cell, &io.c_n)?),
    ];
    for (name, difference) in differences {
        println!("{name:>3}: largest difference from PyTorch {difference:.2e}");
    }
    // f32 on both sides, different summation orders: a few ulp of the values (< 1).
    let worst = differences.iter().map(|d| d.1).fold(0.0, f32::max);
    if worst > 1e-5 {
        return Err(format!("outputs differ from PyTorch's by {worst:e}"));
    }
    println!("outputs match PyTorch's nn.LSTM");
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pytorch_weights: {message}");
            ExitCode::FAILURE
        }
    }
}
