//! Command-line flags: the peer script's (`shared/peers/lstm_peers.py`), plus `--backend`.

use clap::{Parser, ValueEnum};

/// Times one LSTM implementation on one shape and prints one JSON line with the fields
/// of `shared/peers/lstm_peers.py` (`--impl list` lists the implementations).
#[derive(Parser, Clone, Debug)]
#[command(name = "lstm-bench")]
pub struct Args {
    /// Implementation to time, or `list`.
    #[arg(long = "impl")]
    pub implementation: String,
    /// The recurrent cell (the peer script's `--cell`).
    #[arg(long, default_value = "lstm")]
    pub cell: Cell,
    /// Where it runs.
    #[arg(long, default_value = "cpu")]
    pub device: Device,
    /// Burn's CPU backend for the implementations through Burn on `--device cpu`.
    #[arg(long, default_value = "flex")]
    pub backend: CpuBackend,
    /// Element type of the model and its data (the peer script's `--dtype`). f16 and
    /// bf16 run on Flex (the portable kernel, in f32 inside) and on Cuda (cuDNN, its
    /// half path switched on for the run); NdArray computes f32 only here.
    #[arg(long, default_value = "f32")]
    pub dtype: Dtype,
    /// Forward only, or forward plus the backward of `sum(y)`.
    #[arg(long, default_value = "infer")]
    pub mode: Mode,
    /// Batch rows.
    #[arg(long, value_parser = positive)]
    pub batch: usize,
    /// Time steps.
    #[arg(long, value_parser = positive)]
    pub seq: usize,
    /// Input features.
    #[arg(long, value_parser = positive)]
    pub input: usize,
    /// Hidden size.
    #[arg(long, value_parser = positive)]
    pub hidden: usize,
    /// Stacked layers.
    #[arg(long, value_parser = positive, default_value_t = 1)]
    pub layers: usize,
    /// Both directions.
    #[arg(long)]
    pub bidirectional: bool,
    /// Projected hidden size (LSTMP), 0 for none.
    #[arg(long, default_value_t = 0)]
    pub proj_size: usize,
    /// Dropout between stacked layers in training (the `dropout` of
    /// `CudnnCompatibleLstm`/`CudnnCompatibleGru`: `--impl cudnn`, `cudnn-plain`,
    /// `portable`, `fused-cpu`), 0 for none.
    #[arg(long, value_parser = probability, default_value_t = 0.0)]
    pub dropout: f64,
    /// Right-padded rows: `varied` gives row b `T - (b * 7919) % (T / 2 + 1)` valid
    /// steps (the formula of `benchmarks/lstm_variants.py`).
    #[arg(long, default_value = "none")]
    pub lengths: Lengths,
    /// CPU threads.
    #[arg(long, value_parser = positive, default_value_t = 2)]
    pub threads: usize,
    /// Timed calls (after 3 untimed ones); the median is reported.
    #[arg(long, value_parser = positive, default_value_t = 10)]
    pub iters: usize,
    /// Steps per wait for the device, for our layers (`--impl cudnn`, `cudnn-plain`,
    /// `portable`, `fused-cpu`): each call runs this many steps back to back and waits
    /// for the device after the last one only, as a training loop that reads a value
    /// every so many steps does. Every time reported is per step (a call's time divided
    /// by this); `--iters` counts calls, and the untimed ones are as many as make at
    /// least 3 steps. 1: every step waits.
    #[arg(long, value_parser = positive, default_value_t = 1)]
    pub sync_every: usize,
    /// Idle microseconds before each timed call (not timed), like a server's spaced
    /// requests: the kernel's worker threads fall asleep between calls (docs/fused-cpu.md,
    /// "Team placement"). 0: calls back to back.
    #[arg(long, default_value_t = 0)]
    pub gap_us: u64,
}

/// The device of `--device`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    /// The CPU.
    Cpu,
    /// An NVIDIA GPU (builds with feature `cuda`).
    Cuda,
}

/// The cell of `--cell`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cell {
    /// `CudnnCompatibleLstm`, Burn's `nn::Lstm`.
    Lstm,
    /// `CudnnCompatibleGru`, Burn's `nn::Gru`.
    Gru,
}

impl Cell {
    /// The kernel crate's cell.
    pub fn kind(self) -> lstm_cpu::CellKind {
        match self {
            Cell::Lstm => lstm_cpu::CellKind::Lstm,
            Cell::Gru => lstm_cpu::CellKind::Gru,
        }
    }
}

/// The Burn CPU backend of `--backend`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuBackend {
    /// Flex, Burn 0.21's recommended CPU backend.
    Flex,
    /// NdArray (Burn calls it legacy).
    Ndarray,
}

/// The element type of `--dtype`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// 32-bit float.
    F32,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    Bf16,
    /// int8 weights, quantized once, and int8 activations quantized per call: CPU
    /// inference with `--impl lstm-cpu` (`lstm_cpu::int8::QuantizedRnn`).
    Int8,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F16 => "f16",
            Dtype::Bf16 => "bf16",
            Dtype::Int8 => "int8",
        }
    }

    /// Burn's float type (`None` for int8, which runs without Burn).
    pub fn burn(self) -> Option<burn::tensor::FloatDType> {
        match self {
            Dtype::F32 => Some(burn::tensor::FloatDType::F32),
            Dtype::F16 => Some(burn::tensor::FloatDType::F16),
            Dtype::Bf16 => Some(burn::tensor::FloatDType::BF16),
            Dtype::Int8 => None,
        }
    }
}

/// Whether rows are right-padded.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lengths {
    /// Every row has all steps.
    None,
    /// Rows of varied lengths (at least half the steps).
    Varied,
}

impl Args {
    /// Valid steps of each row, `None` when every row is full.
    pub fn row_lengths(&self) -> Option<Vec<usize>> {
        (self.lengths == Lengths::Varied).then(|| {
            (0..self.batch)
                .map(|b| self.seq - (b * 7919) % (self.seq / 2 + 1))
                .collect()
        })
    }

    /// `Err` naming the flag and the implementation when `--dropout` or `--sync-every`
    /// is asked of one that is not a layer of ours (Burn's `nn::Lstm`, the kernel alone,
    /// cuDNN without Burn).
    pub fn layer_flags_supported(&self) -> Result<(), String> {
        let ours = ["cudnn", "cudnn-plain", "portable", "fused-cpu"];
        if ours.contains(&self.implementation.as_str()) {
            return Ok(());
        }
        let asked = [
            ("--dropout", self.dropout.to_string(), self.dropout != 0.0),
            (
                "--sync-every",
                self.sync_every.to_string(),
                self.sync_every != 1,
            ),
        ];
        match asked.into_iter().find(|(_, _, asked)| *asked) {
            None => Ok(()),
            Some((flag, value, _)) => Err(format!(
                "{flag} {value}: only for our layers ({}), not --impl {}",
                ours.join(", "),
                self.implementation
            )),
        }
    }

    /// Untimed calls before the timed ones: enough for at least 3 steps.
    pub fn warmup_calls(&self) -> usize {
        3usize.div_ceil(self.sync_every)
    }

    /// `--lengths`'s name.
    pub fn lengths_name(&self) -> &'static str {
        match self.lengths {
            Lengths::None => "none",
            Lengths::Varied => "varied",
        }
    }
}

/// Forward only, or forward plus backward.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Inference forward.
    Infer,
    /// Training step: forward and backward.
    Train,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Infer => "infer",
            Mode::Train => "train",
        }
    }
}

impl Device {
    pub fn name(self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Cuda => "cuda",
        }
    }
}

impl CpuBackend {
    pub fn name(self) -> &'static str {
        match self {
            CpuBackend::Flex => "flex",
            CpuBackend::Ndarray => "ndarray",
        }
    }
}

fn positive(value: &str) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("expected a positive integer, got `{value}`"))
}

fn probability(value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..1.0).contains(p))
        .ok_or_else(|| format!("expected a dropout probability in [0, 1), got `{value}`"))
}

/// Whether the command line asks for the list of implementations (`--impl list`, which
/// needs no shape flags).
pub fn wants_list() -> bool {
    let argv: Vec<String> = std::env::args().collect();
    argv.windows(2).any(|w| w[0] == "--impl" && w[1] == "list")
        || argv.iter().any(|a| a == "--impl=list")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropout_is_a_probability_below_one() {
        assert_eq!(probability("0"), Ok(0.0));
        assert_eq!(probability("0.1"), Ok(0.1));
        for bad in ["1", "1.5", "-0.1", "NaN", "x"] {
            let error = probability(bad).unwrap_err();
            assert!(error.contains("[0, 1)") && error.contains(bad), "{error}");
        }
    }

    /// The flags of `implementation` on a small stack, with `extra` after them.
    fn args(implementation: &str, extra: &[&str]) -> Args {
        let flags = [
            "lstm-bench",
            "--impl",
            implementation,
            "--batch",
            "2",
            "--seq",
            "3",
            "--input",
            "4",
            "--hidden",
            "5",
            "--layers",
            "2",
        ];
        Args::try_parse_from(flags.iter().chain(extra)).expect("valid flags")
    }

    #[test]
    fn layer_flags_are_refused_where_no_layer_of_ours_runs() {
        for (extra, flag) in [
            (["--dropout", "0.1"], "--dropout 0.1"),
            (["--sync-every", "250"], "--sync-every 250"),
        ] {
            for implementation in ["burn-lstm", "lstm-cpu", "cudnn-raw"] {
                let error = args(implementation, &extra)
                    .layer_flags_supported()
                    .unwrap_err();
                assert!(
                    error.contains(flag) && error.contains(implementation),
                    "{error}"
                );
            }
            for implementation in ["cudnn", "cudnn-plain", "portable", "fused-cpu"] {
                assert_eq!(args(implementation, &extra).layer_flags_supported(), Ok(()));
            }
        }
        // Their defaults are for every implementation.
        assert_eq!(args("burn-lstm", &[]).layer_flags_supported(), Ok(()));
    }

    #[test]
    fn sync_every_is_positive_and_sets_the_untimed_calls() {
        assert_eq!(args("cudnn", &[]).sync_every, 1);
        assert_eq!(args("cudnn", &[]).warmup_calls(), 3);
        assert_eq!(args("cudnn", &["--sync-every", "2"]).warmup_calls(), 2);
        assert_eq!(args("cudnn", &["--sync-every", "250"]).warmup_calls(), 1);
        let flags = [
            "lstm-bench",
            "--impl",
            "cudnn",
            "--batch",
            "1",
            "--seq",
            "1",
        ];
        let more = ["--input", "1", "--hidden", "1", "--sync-every", "0"];
        assert!(Args::try_parse_from(flags.iter().chain(&more)).is_err());
    }
}
