//! Command-line flags, the same as the peer script's.

pub const USAGE: &str = "usage: lstm-bench --impl NAME|list [--device cpu|cuda] [--mode infer|train] \
--batch B --seq T --input I --hidden H [--layers L] [--bidirectional] [--threads N] [--iters K]";

/// Forward only, or forward plus backward of `sum(y)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// Parsed flags.
#[derive(Clone, Debug)]
pub struct Args {
    pub implementation: String,
    pub device: String,
    pub mode: Mode,
    pub batch: usize,
    pub seq: usize,
    pub input: usize,
    pub hidden: usize,
    pub layers: usize,
    pub bidirectional: bool,
    pub threads: usize,
    pub iters: usize,
}

impl Args {
    pub fn parse(mut it: impl Iterator<Item = String>) -> Result<Self, String> {
        let mut implementation = None;
        let (mut device, mut mode) = ("cpu".to_string(), Mode::Infer);
        let (mut batch, mut seq, mut input, mut hidden) = (None, None, None, None);
        let (mut layers, mut bidirectional, mut threads, mut iters) = (1, false, 2, 10);
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            let mut number = |name: &str| -> Result<usize, String> {
                let v = value()?;
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{name}: expected a positive integer, got `{v}`"))
            };
            match flag.as_str() {
                "--impl" => implementation = Some(value()?),
                "--device" => device = value()?,
                "--mode" => {
                    mode = match value()?.as_str() {
                        "infer" => Mode::Infer,
                        "train" => Mode::Train,
                        other => {
                            return Err(format!("--mode: expected infer or train, got `{other}`"));
                        }
                    }
                }
                "--batch" => batch = Some(number("--batch")?),
                "--seq" => seq = Some(number("--seq")?),
                "--input" => input = Some(number("--input")?),
                "--hidden" => hidden = Some(number("--hidden")?),
                "--layers" => layers = number("--layers")?,
                "--threads" => threads = number("--threads")?,
                "--iters" => iters = number("--iters")?,
                "--bidirectional" => bidirectional = true,
                other => return Err(format!("unknown flag `{other}`")),
            }
        }
        let implementation = implementation.ok_or("--impl is required")?;
        if implementation == "list" {
            return Ok(Self {
                implementation,
                device,
                mode,
                batch: 1,
                seq: 1,
                input: 1,
                hidden: 1,
                layers,
                bidirectional,
                threads,
                iters,
            });
        }
        let need = |v: Option<usize>, name: &str| v.ok_or_else(|| format!("{name} is required"));
        Ok(Self {
            implementation,
            device,
            mode,
            batch: need(batch, "--batch")?,
            seq: need(seq, "--seq")?,
            input: need(input, "--input")?,
            hidden: need(hidden, "--hidden")?,
            layers,
            bidirectional,
            threads,
            iters,
        })
    }
}
