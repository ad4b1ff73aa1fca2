//! `--impl cudnn-raw`: the cuDNN LSTM through `cudnn-rnn` alone, on buffers allocated
//! once, with one stream synchronisation per timed call and nothing from Burn: the same
//! algorithm policy (`BURN_LSTM_CUDNN_ALGO`) and call reuse (`BURN_LSTM_CUDNN_REUSE`,
//! on by default) as the op. The gap between this and `--impl cudnn` (the op through
//! Burn's Cuda backend) is what the Burn binding costs per call: the buffer addresses,
//! the ordering against CubeCL's work, the parameter concatenation and Burn's own tensor
//! bookkeeping.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use cudnn_rnn::{
    AlgoCall, BackwardBuffers, CudnnHandle, DataType, DeviceBuffer, DeviceProps, DropoutState,
    ForwardBuffers, MathMode, Rnn, RnnAlgo, RnnConfig, SeqShape, choose_algo,
};

use crate::args::{Args, Mode};
use crate::timed::{Call, Lcg};

/// Device memory of `len` f32 values filled from a fixed pseudo-random sequence (never
/// zeros), kept alive by the returned slice.
fn random(stream: &Arc<CudaStream>, len: usize, scale: f32) -> Result<CudaSlice<f32>, String> {
    let mut values = Lcg(0x2545_F491_4F6C_DD1D);
    let host: Vec<f32> = (0..len.max(1)).map(|_| values.uniform(scale)).collect();
    stream
        .clone_htod(&host)
        .map_err(|e| format!("copying to the device: {e}"))
}

fn buffer(stream: &Arc<CudaStream>, slice: &CudaSlice<f32>) -> DeviceBuffer {
    DeviceBuffer {
        ptr: slice.device_ptr(stream).0,
        bytes: slice.len() * 4,
    }
}

/// One inference or training call (forward, backward data, backward weights) of the
/// shape in `args`, f32, on device 0.
pub fn build(args: &Args) -> Result<Call, String> {
    // The op's per-call reuse (work-space pool, cached descriptors, no device lengths
    // for full rows, the reserve-space pool when switched on), so that this stays the
    // floor the op can reach.
    let handle = CudnnHandle::for_device(0)
        .map_err(|e| e.to_string())?
        .with_call_reuse(burn_lstm::cudnn_call_reuse());
    let math = if std::env::var("LSTM_BENCH_TF32").is_ok_and(|v| v == "1") {
        MathMode::Tf32
    } else {
        MathMode::Fma
    };
    let mut config = RnnConfig {
        cell: cudnn_rnn::RnnCell::Lstm,
        input_size: args.input,
        hidden_size: args.hidden,
        proj_size: 0,
        num_layers: args.layers,
        bidirectional: args.bidirectional,
        bias: true,
        data_type: DataType::F32,
        math,
        algo: RnnAlgo::Standard,
    };
    let shape = SeqShape::full(args.seq, args.batch).map_err(|e| e.to_string())?;
    config.algo = algorithm(&handle, &config, &shape, matches!(args.mode, Mode::Train))?;
    let dropout = DropoutState::new(&handle, 0.0, 0).map_err(|e| e.to_string())?;
    let lstm = Rnn::new(&handle, config.clone(), &dropout).map_err(|e| e.to_string())?;
    let stream = handle.stream().clone();
    let (t, b) = (args.seq, args.batch);
    let y_len = t * b * config.dirs() * args.hidden;
    let state_len = config.pseudo_layers() * b * args.hidden;
    let bound = 1.0 / (args.hidden as f32).sqrt();
    let x = random(&stream, t * b * args.input, 1.7)?;
    let weights = random(&stream, lstm.weight_space_bytes() / 4, bound)?;
    let states: Vec<CudaSlice<f32>> = (0..4)
        .map(|_| random(&stream, state_len, 0.5))
        .collect::<Result<_, _>>()?;
    let y = random(&stream, y_len, 1.0)?;
    let dy = random(&stream, y_len, 1.0)?;
    let dx = random(&stream, t * b * args.input, 1.0)?;
    let dweights = random(&stream, lstm.weight_space_bytes() / 4, 1.0)?;
    let dstates: Vec<CudaSlice<f32>> = (0..4)
        .map(|_| random(&stream, state_len, 1.0))
        .collect::<Result<_, _>>()?;
    let forward = ForwardBuffers {
        x: buffer(&stream, &x),
        y: buffer(&stream, &y),
        hx: buffer(&stream, &states[0]),
        cx: buffer(&stream, &states[1]),
        hy: buffer(&stream, &states[2]),
        cy: buffer(&stream, &states[3]),
        weights: buffer(&stream, &weights),
    };
    let backward = BackwardBuffers {
        x: forward.x,
        y: forward.y,
        hx: forward.hx,
        cx: forward.cx,
        weights: forward.weights,
        dy: buffer(&stream, &dy),
        dhy: buffer(&stream, &dstates[0]),
        dcy: buffer(&stream, &dstates[1]),
        dx: buffer(&stream, &dx),
        dhx: buffer(&stream, &dstates[2]),
        dcx: buffer(&stream, &dstates[3]),
        dweights: buffer(&stream, &dweights),
    };
    let training = args.mode == Mode::Train;
    // The slices own the memory the buffers point at: moved into the closure with them.
    let owned = (x, weights, states, y, dy, dx, dweights, dstates, dropout);
    Ok(Box::new(move || {
        let _owned = &owned;
        // SAFETY: every buffer points into a slice of `owned`, allocated on the handle's
        // context and sized for this shape; only this stream uses them.
        unsafe {
            let reserve = lstm
                .forward(&handle, &shape, &forward, training)
                .expect("cudnnRNNForward");
            if let Some(mut reserve) = reserve {
                lstm.backward(&handle, &mut reserve, &backward)
                    .expect("cudnnRNNBackward");
            }
        }
        handle.synchronize().expect("stream synchronisation");
    }))
}

/// The algorithm the op through Burn would run (same variable, same rules):
/// `BURN_LSTM_CUDNN_ALGO` = `auto` or unset (PyTorch's choice, the op's default),
/// `standard`, or an algorithm's name. The choice is printed to stderr.
fn algorithm(
    handle: &CudnnHandle,
    config: &RnnConfig,
    shape: &SeqShape,
    training: bool,
) -> Result<RnnAlgo, String> {
    let policy = std::env::var("BURN_LSTM_CUDNN_ALGO").unwrap_or_default();
    let algo = match policy.trim() {
        "standard" => RnnAlgo::Standard,
        "" | "auto" => {
            let props = DeviceProps::of(handle).map_err(|e| e.to_string())?;
            let choice = choose_algo(&AlgoCall::new(config, shape, training, props));
            eprintln!("cudnn-raw: algorithm {}", choice.reason);
            choice.algo
        }
        name => name.parse::<RnnAlgo>().map_err(|e| e.to_string())?,
    };
    Ok(algo)
}
