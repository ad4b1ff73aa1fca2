//! A server's load on the fused CPU kernel: `--callers` threads share one model (each a
//! clone of it, as request handlers hold one) and call it back to back for `--seconds`,
//! each request of a random batch (1 to `--max-rows` rows) and length (1 to
//! `--max-steps` steps). Prints one JSON line: requests a second, latency percentiles,
//! and the threads each call may use. Compare `--threads 1` (each call on its caller's
//! thread, the callers filling the cores), the default (every core a call) and
//! `--shared` (every core shared by the calls running) on the same machine, as
//! `benchmarks/serve.sh` does in interleaved rounds.
//!
//! ```sh
//! cargo run --release -p lstm-bench --bin serve -- --callers 8 --threads 1
//! ```

#[path = "../stdout_line.rs"]
mod stdout_line;

use std::sync::Barrier;
use std::time::Instant;

use burn::backend::{Flex, NdArray};
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleGruConfig, CudnnCompatibleLstm, CudnnCompatibleLstmConfig,
    Int8Gru, Int8Lstm, RnnBackend,
};
use clap::{Parser, ValueEnum};
use serde_json::json;

/// Many callers sharing one model on the fused CPU kernel.
#[derive(Parser, Debug)]
#[command(name = "serve")]
struct Args {
    /// Threads calling the model at the same time.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    callers: u16,
    /// Threads the kernel may use per call (`burn_lstm::set_cpu_threads`); default:
    /// the library's (`BURN_LSTM_THREADS`, else every core).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
    /// Overlapping calls share the threads (`burn_lstm::set_cpu_threads_shared`): a call
    /// takes its part of them among the calls running as it starts.
    #[arg(long)]
    shared: bool,
    /// Seconds of timed requests, after each caller's warm-up requests: the requests a
    /// second count those finished within them.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The model's cell: a `CudnnCompatibleLstm` or a `CudnnCompatibleGru`.
    #[arg(long, value_enum, default_value_t = Cell::Lstm)]
    cell: Cell,
    /// Burn's CPU backend the model runs on (the fused CPU kernel on either).
    #[arg(long, value_enum, default_value_t = Backend::Flex)]
    backend: Backend,
    /// `int8`: the model's `quantized_int8()` copy serves.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// Input features of the model.
    #[arg(long, default_value_t = 64)]
    input: usize,
    /// Hidden units of each layer.
    #[arg(long, default_value_t = 256)]
    hidden: usize,
    /// Stacked layers (unidirectional).
    #[arg(long, default_value_t = 2)]
    layers: usize,
    /// A request's rows are drawn from 1 to this, uniformly.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    max_rows: u32,
    /// A request's steps are drawn from 1 to this, uniformly.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    max_steps: u32,
    /// Seed of the requests' sizes (caller `c` draws from `seed + c`).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Cell {
    Lstm,
    Gru,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    Flex,
    Ndarray,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Dtype {
    F32,
    Int8,
}

/// The model a request handler holds.
#[derive(Clone)]
enum Model<B: RnnBackend> {
    Lstm(CudnnCompatibleLstm<B>),
    Gru(CudnnCompatibleGru<B>),
    Int8Lstm(Int8Lstm<B>),
    Int8Gru(Int8Gru<B>),
}

impl<B: RnnBackend> Model<B> {
    fn new(args: &Args) -> Result<Self, String> {
        let device = Default::default();
        let lstm = || {
            CudnnCompatibleLstmConfig::new(args.input, args.hidden)
                .with_num_layers(args.layers)
                .init::<B>(&device)
        };
        let gru = || {
            CudnnCompatibleGruConfig::new(args.input, args.hidden)
                .with_num_layers(args.layers)
                .init::<B>(&device)
        };
        let int8 = |e: burn_lstm::RnnError| format!("quantized_int8: {e}");
        Ok(match (args.cell, args.dtype) {
            (Cell::Lstm, Dtype::F32) => Model::Lstm(lstm()),
            (Cell::Gru, Dtype::F32) => Model::Gru(gru()),
            (Cell::Lstm, Dtype::Int8) => Model::Int8Lstm(lstm().quantized_int8().map_err(int8)?),
            (Cell::Gru, Dtype::Int8) => Model::Int8Gru(gru().quantized_int8().map_err(int8)?),
        })
    }

    /// One request: `x` batch-first, from a zero state; the output read to the host, as
    /// a handler that answers with it does.
    fn call(&self, x: Tensor<B, 3>) -> TensorData {
        let y = match self {
            Model::Lstm(m) => m.forward(x, None).0,
            Model::Gru(m) => m.forward(x, None).0,
            Model::Int8Lstm(m) => m.forward(x, None).0,
            Model::Int8Gru(m) => m.forward(x, None).0,
        };
        y.into_data()
    }
}

/// xorshift64*: the requests' sizes and values, the same for every run of a seed.
struct Draws(u64);

impl Draws {
    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `1..=max`.
    fn size(&mut self, max: u32) -> usize {
        (self.next() % u64::from(max)) as usize + 1
    }
}

/// The requests one caller finished within the timed window (one still running at its
/// end is left out, so that every caller's count covers the same window).
struct CallerRun {
    latencies: Vec<f64>,
    row_steps: usize,
}

fn caller<B: RnnBackend>(model: Model<B>, args: &Args, id: u64, start: &Barrier) -> CallerRun {
    let device = Default::default();
    let mut draws = Draws::new(args.seed.wrapping_add(id));
    let most = args.max_rows as usize * args.max_steps as usize * args.input;
    let values: Vec<f32> = (0..most)
        .map(|_| (draws.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0)
        .collect();
    let request = |draws: &mut Draws| {
        let (rows, steps) = (draws.size(args.max_rows), draws.size(args.max_steps));
        let data = TensorData::new(
            values[..rows * steps * args.input].to_vec(),
            [rows, steps, args.input],
        );
        let x = Tensor::<B, 3>::from_data(data, &device);
        let began = Instant::now();
        model.call(x);
        (began.elapsed().as_secs_f64(), rows * steps)
    };
    for _ in 0..3 {
        request(&mut draws);
    }
    start.wait();
    let window = Instant::now();
    let mut run = CallerRun {
        latencies: Vec::new(),
        row_steps: 0,
    };
    loop {
        let (latency, row_steps) = request(&mut draws);
        if window.elapsed().as_secs_f64() > args.seconds {
            return run;
        }
        run.latencies.push(latency);
        run.row_steps += row_steps;
    }
}

/// The `q`-quantile of `sorted` (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn serve<B: RnnBackend>(args: &Args) -> Result<serde_json::Value, String> {
    let model = Model::<B>::new(args)?;
    let start = Barrier::new(args.callers as usize + 1);
    let runs: Vec<CallerRun> = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..args.callers)
            .map(|id| {
                let (model, start) = (model.clone(), &start);
                scope.spawn(move || caller(model, args, u64::from(id), start))
            })
            .collect();
        start.wait();
        callers
            .into_iter()
            .map(|c| c.join().expect("a caller panicked"))
            .collect()
    });
    let mut latencies: Vec<f64> = runs
        .iter()
        .flat_map(|r| r.latencies.iter().copied())
        .collect();
    latencies.sort_by(f64::total_cmp);
    if latencies.is_empty() {
        return Err("no request finished: raise --seconds".into());
    }
    let seconds = args.seconds;
    // Milliseconds to the microsecond.
    let ms = |q: f64| (quantile(&latencies, q) * 1e6).round() / 1e3;
    Ok(json!({
        "what": "serve",
        "cell": format!("{:?}", args.cell).to_lowercase(),
        "backend": format!("{:?}", args.backend).to_lowercase(),
        "dtype": format!("{:?}", args.dtype).to_lowercase(),
        "input": args.input,
        "hidden": args.hidden,
        "layers": args.layers,
        "max_rows": args.max_rows,
        "max_steps": args.max_steps,
        "callers": args.callers,
        "threads_max": burn_lstm::cpu_threads(),
        "threads_set": args.threads,
        "threads_shared": burn_lstm::cpu_threads_shared(),
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "seconds": seconds,
        "requests": latencies.len(),
        "requests_per_s": (latencies.len() as f64 / seconds * 10.0).round() / 10.0,
        "row_steps_per_s": (runs.iter().map(|r| r.row_steps).sum::<usize>() as f64 / seconds).round(),
        "p50_ms": ms(0.5),
        "p90_ms": ms(0.9),
        "p99_ms": ms(0.99),
        "max_ms": ms(1.0),
    }))
}

fn main() {
    let args = Args::parse();
    if !(args.seconds > 0.0 && args.seconds.is_finite()) {
        eprintln!(
            "serve: --seconds must be a positive number, got {}",
            args.seconds
        );
        std::process::exit(2);
    }
    if let Some(threads) = args.threads {
        burn_lstm::set_cpu_threads(usize::from(threads));
    }
    if args.shared {
        burn_lstm::set_cpu_threads_shared(true);
    }
    let line = match args.backend {
        Backend::Flex => serve::<Flex>(&args),
        Backend::Ndarray => serve::<NdArray>(&args),
    };
    match line {
        Ok(line) => stdout_line::print_line_or_end(line),
        Err(message) => {
            eprintln!("serve: {message}");
            std::process::exit(2);
        }
    }
}
