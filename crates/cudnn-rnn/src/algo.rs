//! Which cuDNN RNN algorithm a call runs with, chosen as PyTorch chooses it: `get_algo`,
//! `use_rnn_persist_small_h`, `use_persist_common_heuristics` and
//! `use_persist_device_heuristics` in PyTorch's `aten/src/ATen/native/cudnn/RNN.cpp`,
//! as a pure function of the call and the device ([`choose_algo`]).
//!
//! PyTorch's rules, in its order:
//!
//! 1. A projection (`proj_size > 0`) runs on the standard algorithm.
//! 2. Packed input (lengths that may vary across the batch) runs on the standard algorithm:
//!    the persistent kernels refuse variable sequence lengths
//!    (`CUDNN_STATUS_NOT_SUPPORTED`).
//! 3. Not double precision, compute capability >= 6, an LSTM or a GRU, and hidden <= 192
//!    for a forward (<= 128 for a backward): `CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H`.
//!    Layers, direction, input size and batch do not matter.
//! 4. f16 (not bf16, not f32), one unidirectional layer, hidden <= 1024, hidden and input
//!    multiples of 128, and the device rule: compute capability 7.0/7.2 (not 7.5) with
//!    PyTorch's batch and sequence-length table, or compute capability >= 8 (not x.6)
//!    with at least 98 SMs, an LSTM (not a GRU), batch a multiple of 8 and <= 128:
//!    `CUDNN_RNN_ALGO_PERSIST_STATIC`.
//! 5. Otherwise the standard algorithm.
//!
//! One difference: PyTorch chooses the forward's algorithm with the forward limit and the
//! backward's with the backward limit, so a training forward with hidden 129..=192 runs
//! `PERSIST_STATIC_SMALL_H` and its backward runs the standard algorithm over that
//! forward's reserve space. Here an [`Rnn`](crate::Rnn) holds one RNN descriptor, and
//! the backward that reads a forward's reserve space runs with the descriptor (and so the
//! algorithm) of that forward; a training call therefore takes the algorithm valid for
//! both, the backward limit (hidden <= 128).

use core::fmt;

use cudarc::driver::sys::CUdevice_attribute;

use crate::config::{DataType, RnnCell, RnnConfig};
use crate::error::{CudnnRnnError, Result};
use crate::handle::CudnnHandle;
use crate::rnn_algo::RnnAlgo;
use crate::shape::{SeqLayout, SeqShape};

/// Hidden size up to which PyTorch runs a forward of an LSTM or GRU on
/// [`RnnAlgo::PersistStaticSmallH`].
pub const SMALL_H_FORWARD_MAX_HIDDEN: usize = 192;

/// Hidden size up to which PyTorch runs a backward of an LSTM or GRU on
/// [`RnnAlgo::PersistStaticSmallH`]; the limit of a training call here.
pub const SMALL_H_BACKWARD_MAX_HIDDEN: usize = 128;

impl RnnAlgo {
    /// Refuses a call whose row lengths vary on a persistent algorithm (they refuse
    /// variable sequence lengths with `CUDNN_STATUS_NOT_SUPPORTED`, which is why PyTorch
    /// runs them on unpacked input only). Called by [`Rnn::forward`](crate::Rnn::forward)
    /// before cuDNN sees the call.
    pub fn check_shape(self, shape: &SeqShape) -> Result<()> {
        if self.is_persistent() && lengths_vary(shape) {
            let lengths = shape.lengths();
            let (min, max) = (
                lengths.iter().min().copied().unwrap_or(0),
                lengths.iter().max().copied().unwrap_or(0),
            );
            return Err(CudnnRnnError::invalid(
                "lengths",
                format!(
                    "equal lengths for algo {self} (persistent algorithms refuse variable sequence lengths; use standard)"
                ),
                format!("lengths from {min} to {max}"),
            ));
        }
        Ok(())
    }
}

/// What PyTorch's algorithm choice reads of the device (`cudaDeviceProp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceProps {
    /// Compute capability, major (9 on an H100).
    pub major: u32,
    /// Compute capability, minor (0 on an H100).
    pub minor: u32,
    /// Streaming multiprocessors (132 on an H100 SXM).
    pub sm_count: u32,
}

impl DeviceProps {
    /// The properties of the device `handle` runs on (`cuDeviceGetAttribute`).
    pub fn of(handle: &CudnnHandle) -> Result<Self> {
        let context = handle.stream().context();
        let (major, minor) = context
            .compute_capability()
            .map_err(|e| CudnnRnnError::driver("cuDeviceGetAttribute (compute capability)", e))?;
        let sm_count = context
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(|e| CudnnRnnError::driver("cuDeviceGetAttribute (SM count)", e))?;
        Ok(Self {
            major: major.max(0) as u32,
            minor: minor.max(0) as u32,
            sm_count: sm_count.max(0) as u32,
        })
    }
}

/// One call, as far as the choice of algorithm depends on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AlgoCall {
    /// The cell.
    pub cell: RnnCell,
    /// Element type of the call's tensors.
    pub data_type: DataType,
    /// Features per input step.
    pub input_size: usize,
    /// Cell size `H`.
    pub hidden_size: usize,
    /// Projected size (LSTMP); 0 for none.
    pub proj_size: usize,
    /// Stacked layers.
    pub num_layers: usize,
    /// Whether each layer also runs backwards in time.
    pub bidirectional: bool,
    /// Rows of the batch.
    pub batch: usize,
    /// Steps of the longest row (PyTorch's `seq_length`; read on compute capability 7.0
    /// only).
    pub max_seq_len: usize,
    /// Whether the rows' lengths differ (PyTorch's packed input).
    pub lengths_vary: bool,
    /// Whether this is a training call: a forward whose reserve space feeds a backward,
    /// which then runs with the same algorithm.
    pub training: bool,
    /// The device.
    pub device: DeviceProps,
}

impl AlgoCall {
    /// The call of `config` on `shape` on `device`.
    pub fn new(config: &RnnConfig, shape: &SeqShape, training: bool, device: DeviceProps) -> Self {
        Self {
            cell: config.cell,
            data_type: config.data_type,
            input_size: config.input_size,
            hidden_size: config.hidden_size,
            proj_size: config.proj_size,
            num_layers: config.num_layers,
            bidirectional: config.bidirectional,
            batch: shape.batch(),
            max_seq_len: shape.max_seq_len(),
            lengths_vary: lengths_vary(shape),
            training,
            device,
        }
    }
}

/// An algorithm and, in words, why.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AlgoChoice {
    /// The algorithm.
    pub algo: RnnAlgo,
    /// Why: the algorithm's name, then the facts that decided it.
    pub reason: String,
}

impl fmt::Display for AlgoChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The algorithm PyTorch's `get_algo` runs `call` with, with the reason (see the module
/// documentation for the rules and the one difference: a training call keeps
/// [`RnnAlgo::PersistStaticSmallH`] to hidden <= [`SMALL_H_BACKWARD_MAX_HIDDEN`], the
/// limit PyTorch applies to the backward, because here the backward runs the forward's
/// algorithm).
pub fn choose_algo(call: &AlgoCall) -> AlgoChoice {
    if call.proj_size != 0 {
        return standard(format!(
            "projection, proj_size {} (PyTorch uses the standard algorithm with proj_size)",
            call.proj_size
        ));
    }
    if call.lengths_vary {
        return standard(
            "lengths vary across the batch (persistent algorithms refuse variable sequence lengths; PyTorch uses them on unpacked input only)"
                .to_string(),
        );
    }
    if call.data_type == DataType::F64 {
        return standard(
            "F64 (PyTorch uses no persistent algorithm in double precision)".to_string(),
        );
    }
    let small_h = match small_h(call) {
        Ok(why) => return choice(RnnAlgo::PersistStaticSmallH, why),
        Err(why_not) => why_not,
    };
    match persist_static(call) {
        Ok(why) => choice(RnnAlgo::PersistStatic, why),
        Err(why_not) => standard(format!("{small_h}; {why_not}")),
    }
}

/// PyTorch's `use_rnn_persist_small_h`: `Ok(why)` or `Err(why not)`.
fn small_h(call: &AlgoCall) -> core::result::Result<String, String> {
    let DeviceProps { major, minor, .. } = call.device;
    if major < 6 {
        return Err(format!(
            "compute capability {major}.{minor} < 6.0 (persistent algorithms need sm_60 or newer)"
        ));
    }
    let (limit, which) = if call.training {
        (
            SMALL_H_BACKWARD_MAX_HIDDEN,
            "backward limit: a training forward's reserve space feeds the backward, which runs the same algorithm",
        )
    } else {
        (SMALL_H_FORWARD_MAX_HIDDEN, "forward limit, inference call")
    };
    let hidden = call.hidden_size;
    if hidden <= limit {
        Ok(format!(
            "hidden {hidden} <= {limit} ({which}), {:?} {:?}, unpacked input (PyTorch's get_algo)",
            call.data_type, call.cell
        ))
    } else {
        Err(format!(
            "hidden {hidden} > {limit} (persist_static_small_h {which})"
        ))
    }
}

/// PyTorch's half-precision test, `use_persist_common_heuristics` and
/// `use_persist_device_heuristics`: `Ok(why)` or `Err(why not)`.
fn persist_static(call: &AlgoCall) -> core::result::Result<String, String> {
    if call.data_type != DataType::F16 {
        return Err(format!(
            "{:?} (PyTorch runs persist_static for F16 only)",
            call.data_type
        ));
    }
    let (hidden, input) = (call.hidden_size, call.input_size);
    if call.num_layers != 1 {
        return Err(format!(
            "{} layers (persist_static: PyTorch wants 1 layer)",
            call.num_layers
        ));
    }
    if hidden > 1024 {
        return Err(format!(
            "hidden {hidden} > 1024 (persist_static: PyTorch's limit)"
        ));
    }
    if call.bidirectional {
        return Err("bidirectional (persist_static: PyTorch wants one direction)".to_string());
    }
    if hidden % 128 != 0 {
        return Err(format!(
            "hidden {hidden} is not a multiple of 128 (persist_static)"
        ));
    }
    if input % 128 != 0 {
        return Err(format!(
            "input {input} is not a multiple of 128 (persist_static)"
        ));
    }
    let device = device_rule(call)?;
    Ok(format!(
        "F16 {:?}, 1 unidirectional layer, hidden {hidden} <= 1024 and input {input} multiples of 128, {device} (PyTorch's get_algo)",
        call.cell
    ))
}

/// PyTorch's `use_persist_device_heuristics`: `Ok(what passed)` or `Err(why not)`.
fn device_rule(call: &AlgoCall) -> core::result::Result<String, String> {
    let DeviceProps {
        major,
        minor,
        sm_count,
    } = call.device;
    let (batch, seq) = (call.batch, call.max_seq_len);
    let cc = format!("compute capability {major}.{minor}");
    if major == 7 {
        if minor == 5 {
            return Err(format!("{cc} (persist_static: PyTorch excludes Turing)"));
        }
        // PyTorch: "technically, batch size should be multiple of 8, but there are quite
        // a few multiple-of-8 batch sizes that give bad perf, weed them out".
        let batch_ok = (batch % 16 == 0 && batch != 80 && batch != 112) || batch == 8;
        let seq_ok =
            (seq >= 40 && batch <= 128) || (seq >= 20 && batch <= 96) || (seq >= 10 && batch <= 32);
        return if batch_ok && seq_ok {
            Ok(format!(
                "batch {batch} and sequence length {seq} in PyTorch's {cc} table"
            ))
        } else {
            Err(format!(
                "batch {batch} with sequence length {seq} is outside PyTorch's persist_static table for {cc} (batch 8 or a multiple of 16 other than 80 and 112; sequence length >= 40 with batch <= 128, >= 20 with batch <= 96, or >= 10 with batch <= 32)"
            ))
        };
    }
    if major < 8 {
        return Err(format!(
            "{cc} (PyTorch's persist_static heuristics cover compute capability 7.0, 7.2 and >= 8.0 only)"
        ));
    }
    if sm_count < 98 {
        return Err(format!(
            "{sm_count} SMs < 98 on {cc} (persist_static: PyTorch excludes A30/A40-class parts)"
        ));
    }
    if minor == 6 {
        return Err(format!(
            "{cc} (persist_static: PyTorch excludes sm_86 parts)"
        ));
    }
    if call.cell == RnnCell::Gru {
        return Err(format!(
            "Gru on {cc} (persist_static: PyTorch finds persistent GRUs flaky and excludes them)"
        ));
    }
    if batch % 8 != 0 {
        return Err(format!(
            "batch {batch} is not a multiple of 8 (persist_static)"
        ));
    }
    if batch > 128 {
        return Err(format!(
            "batch {batch} > 128 (persist_static: PyTorch's limit)"
        ));
    }
    Ok(format!(
        "batch {batch} a multiple of 8 and <= 128 on {cc} with {sm_count} SMs"
    ))
}

/// The configurations a call tries, in order, until cuDNN accepts one: `algo` in
/// `layout`, then `algo` sequence-major (the layout every algorithm documents), then the
/// standard algorithm sequence-major (which runs every configuration cuDNN has). Each
/// appears once.
pub fn refusal_fallbacks(algo: RnnAlgo, layout: SeqLayout) -> Vec<(RnnAlgo, SeqLayout)> {
    let mut order = vec![(algo, layout)];
    for next in [
        (algo, SeqLayout::SeqMajor),
        (RnnAlgo::Standard, SeqLayout::SeqMajor),
    ] {
        if !order.contains(&next) {
            order.push(next);
        }
    }
    order
}

fn choice(algo: RnnAlgo, why: String) -> AlgoChoice {
    AlgoChoice {
        algo,
        reason: format!("{algo}: {why}"),
    }
}

fn standard(why: String) -> AlgoChoice {
    choice(RnnAlgo::Standard, why)
}

fn lengths_vary(shape: &SeqShape) -> bool {
    shape.lengths().windows(2).any(|pair| pair[0] != pair[1])
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_refused_call_drops_the_layout_before_the_algorithm() {
        use super::{RnnAlgo, SeqLayout, refusal_fallbacks};
        use RnnAlgo::{PersistStatic, Standard};
        use SeqLayout::{BatchMajor, SeqMajor};
        assert_eq!(
            refusal_fallbacks(PersistStatic, BatchMajor),
            [
                (PersistStatic, BatchMajor),
                (PersistStatic, SeqMajor),
                (Standard, SeqMajor)
            ]
        );
        assert_eq!(
            refusal_fallbacks(PersistStatic, SeqMajor),
            [(PersistStatic, SeqMajor), (Standard, SeqMajor)]
        );
        assert_eq!(
            refusal_fallbacks(Standard, BatchMajor),
            [(Standard, BatchMajor), (Standard, SeqMajor)]
        );
        assert_eq!(
            refusal_fallbacks(Standard, SeqMajor),
            [(Standard, SeqMajor)]
        );
    }

    use super::*;
    use crate::config::MathMode;

    const H100: DeviceProps = DeviceProps {
        major: 9,
        minor: 0,
        sm_count: 132,
    };

    /// f16 LSTM, input 256, hidden 512, one unidirectional layer, batch 64 of 100 equal
    /// steps, inference, on an H100: PyTorch's persist_static case.
    fn base() -> AlgoCall {
        AlgoCall {
            cell: RnnCell::Lstm,
            data_type: DataType::F16,
            input_size: 256,
            hidden_size: 512,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            batch: 64,
            max_seq_len: 100,
            lengths_vary: false,
            training: false,
            device: H100,
        }
    }

    fn device(major: u32, minor: u32, sm_count: u32) -> DeviceProps {
        DeviceProps {
            major,
            minor,
            sm_count,
        }
    }

    struct Case {
        name: &'static str,
        call: AlgoCall,
        algo: RnnAlgo,
        /// Substrings the reason must contain: the deciding facts.
        facts: &'static [&'static str],
    }

    fn cases() -> Vec<Case> {
        use RnnAlgo::{PersistStatic, PersistStaticSmallH, Standard};
        let f32_h = |hidden| AlgoCall {
            data_type: DataType::F32,
            hidden_size: hidden,
            ..base()
        };
        vec![
            Case {
                name: "f32 hidden 128, inference",
                call: f32_h(128),
                algo: PersistStaticSmallH,
                facts: &["hidden 128 <= 192", "forward limit", "unpacked input"],
            },
            Case {
                name: "f32 hidden 192, inference: PyTorch's forward limit",
                call: f32_h(192),
                algo: PersistStaticSmallH,
                facts: &["hidden 192 <= 192"],
            },
            Case {
                name: "f32 hidden 193, inference",
                call: f32_h(193),
                algo: Standard,
                facts: &[
                    "hidden 193 > 192",
                    "F32 (PyTorch runs persist_static for F16 only)",
                ],
            },
            Case {
                name: "f32 hidden 192, training: the backward limit applies",
                call: AlgoCall {
                    training: true,
                    ..f32_h(192)
                },
                algo: Standard,
                facts: &["hidden 192 > 128", "backward limit"],
            },
            Case {
                name: "f32 hidden 128, training",
                call: AlgoCall {
                    training: true,
                    ..f32_h(128)
                },
                algo: PersistStaticSmallH,
                facts: &["hidden 128 <= 128", "backward limit"],
            },
            Case {
                name: "bf16 GRU hidden 64, 2 bidirectional layers: small_h ignores both",
                call: AlgoCall {
                    cell: RnnCell::Gru,
                    data_type: DataType::Bf16,
                    hidden_size: 64,
                    input_size: 30,
                    num_layers: 2,
                    bidirectional: true,
                    batch: 129,
                    ..base()
                },
                algo: PersistStaticSmallH,
                facts: &["hidden 64 <= 192", "Bf16 Gru"],
            },
            Case {
                name: "f16 hidden 128: small_h before persist_static, as in PyTorch",
                call: AlgoCall {
                    hidden_size: 128,
                    ..base()
                },
                algo: PersistStaticSmallH,
                facts: &["hidden 128 <= 192", "F16 Lstm"],
            },
            Case {
                name: "f64 hidden 128",
                call: AlgoCall {
                    data_type: DataType::F64,
                    hidden_size: 128,
                    ..base()
                },
                algo: Standard,
                facts: &["F64", "double precision"],
            },
            Case {
                name: "projection",
                call: AlgoCall {
                    proj_size: 256,
                    ..base()
                },
                algo: Standard,
                facts: &["projection, proj_size 256"],
            },
            Case {
                name: "varying lengths, f32 hidden 128",
                call: AlgoCall {
                    lengths_vary: true,
                    ..f32_h(128)
                },
                algo: Standard,
                facts: &["lengths vary", "unpacked input only"],
            },
            Case {
                name: "f16 hidden 512, batch 64, H100",
                call: base(),
                algo: PersistStatic,
                facts: &[
                    "hidden 512 <= 1024",
                    "input 256 multiples of 128",
                    "batch 64 a multiple of 8 and <= 128",
                    "compute capability 9.0 with 132 SMs",
                ],
            },
            Case {
                name: "f16 hidden 1024, batch 128, A100, training",
                call: AlgoCall {
                    hidden_size: 1024,
                    batch: 128,
                    training: true,
                    device: device(8, 0, 108),
                    ..base()
                },
                algo: PersistStatic,
                facts: &["hidden 1024 <= 1024", "batch 128", "compute capability 8.0"],
            },
            Case {
                name: "f16 hidden 1024, batch 129",
                call: AlgoCall {
                    hidden_size: 1024,
                    batch: 129,
                    ..base()
                },
                algo: Standard,
                facts: &["hidden 1024 > 192", "batch 129 is not a multiple of 8"],
            },
            Case {
                name: "f16 hidden 512, batch 136",
                call: AlgoCall {
                    batch: 136,
                    ..base()
                },
                algo: Standard,
                facts: &["batch 136 > 128"],
            },
            Case {
                name: "f16 hidden 512, batch 60",
                call: AlgoCall {
                    batch: 60,
                    ..base()
                },
                algo: Standard,
                facts: &["batch 60 is not a multiple of 8"],
            },
            Case {
                name: "f16 hidden 512 on 80 SMs (compute capability 8.0)",
                call: AlgoCall {
                    device: device(8, 0, 80),
                    ..base()
                },
                algo: Standard,
                facts: &["80 SMs < 98"],
            },
            Case {
                name: "f16 hidden 512 on compute capability 8.6",
                call: AlgoCall {
                    device: device(8, 6, 112),
                    ..base()
                },
                algo: Standard,
                facts: &["compute capability 8.6", "sm_86"],
            },
            Case {
                name: "f16 hidden 512 bidirectional",
                call: AlgoCall {
                    bidirectional: true,
                    ..base()
                },
                algo: Standard,
                facts: &["bidirectional"],
            },
            Case {
                name: "f16 hidden 512, 2 layers",
                call: AlgoCall {
                    num_layers: 2,
                    ..base()
                },
                algo: Standard,
                facts: &["2 layers"],
            },
            Case {
                name: "f16 GRU hidden 512 on an H100",
                call: AlgoCall {
                    cell: RnnCell::Gru,
                    ..base()
                },
                algo: Standard,
                facts: &["Gru on compute capability 9.0", "GRUs"],
            },
            Case {
                name: "bf16 LSTM hidden 512",
                call: AlgoCall {
                    data_type: DataType::Bf16,
                    ..base()
                },
                algo: Standard,
                facts: &[
                    "hidden 512 > 192",
                    "Bf16 (PyTorch runs persist_static for F16 only)",
                ],
            },
            Case {
                name: "f16 hidden 1280",
                call: AlgoCall {
                    hidden_size: 1280,
                    ..base()
                },
                algo: Standard,
                facts: &["hidden 1280 > 1024"],
            },
            Case {
                name: "f16 hidden 320",
                call: AlgoCall {
                    hidden_size: 320,
                    ..base()
                },
                algo: Standard,
                facts: &["hidden 320 is not a multiple of 128"],
            },
            Case {
                name: "f16 input 300",
                call: AlgoCall {
                    input_size: 300,
                    ..base()
                },
                algo: Standard,
                facts: &["input 300 is not a multiple of 128"],
            },
            Case {
                name: "f16 on a V100 (7.0), batch 64 over 100 steps",
                call: AlgoCall {
                    device: device(7, 0, 80),
                    ..base()
                },
                algo: PersistStatic,
                facts: &["batch 64 and sequence length 100", "compute capability 7.0"],
            },
            Case {
                name: "f16 on a V100 (7.0), batch 64 over 15 steps",
                call: AlgoCall {
                    max_seq_len: 15,
                    device: device(7, 0, 80),
                    ..base()
                },
                algo: Standard,
                facts: &["batch 64 with sequence length 15"],
            },
            Case {
                name: "f16 on a V100 (7.0), batch 80",
                call: AlgoCall {
                    batch: 80,
                    device: device(7, 0, 80),
                    ..base()
                },
                algo: Standard,
                facts: &["batch 80 with sequence length 100", "other than 80 and 112"],
            },
            Case {
                name: "f16 on Turing (7.5)",
                call: AlgoCall {
                    device: device(7, 5, 68),
                    ..base()
                },
                algo: Standard,
                facts: &["compute capability 7.5", "Turing"],
            },
            Case {
                name: "f16 on Pascal (6.0)",
                call: AlgoCall {
                    device: device(6, 0, 56),
                    ..base()
                },
                algo: Standard,
                facts: &["compute capability 6.0", "7.0, 7.2 and >= 8.0 only"],
            },
            Case {
                name: "f32 hidden 128 on Maxwell (5.2)",
                call: AlgoCall {
                    device: device(5, 2, 24),
                    ..f32_h(128)
                },
                algo: Standard,
                facts: &["compute capability 5.2 < 6.0"],
            },
        ]
    }

    #[test]
    fn choice_table_follows_pytorch() {
        let cases = cases();
        assert!(cases.len() >= 15);
        for case in cases {
            let choice = choose_algo(&case.call);
            assert_eq!(choice.algo, case.algo, "{}: {}", case.name, choice.reason);
            assert!(
                choice.reason.starts_with(&format!("{}: ", case.algo)),
                "{}: {}",
                case.name,
                choice.reason
            );
            for fact in case.facts {
                assert!(
                    choice.reason.contains(fact),
                    "{}: reason {:?} lacks {fact:?}",
                    case.name,
                    choice.reason
                );
            }
            assert_eq!(choice.to_string(), choice.reason);
        }
    }

    #[test]
    fn names_round_trip_and_map_to_cudnn() {
        use cudarc::cudnn::sys::cudnnRNNAlgo_t as A;
        let cudnn = [
            A::CUDNN_RNN_ALGO_STANDARD,
            A::CUDNN_RNN_ALGO_PERSIST_STATIC,
            A::CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H,
        ];
        for ((algo, name), raw) in RnnAlgo::ALL.into_iter().zip(RnnAlgo::NAMES).zip(cudnn) {
            assert_eq!(algo.to_string(), name);
            assert_eq!(name.parse::<RnnAlgo>().unwrap(), algo);
            assert_eq!(
                format!(" {} ", name.to_uppercase())
                    .parse::<RnnAlgo>()
                    .unwrap(),
                algo
            );
            assert_eq!(algo.cudnn(), raw);
            assert_eq!(algo.is_persistent(), algo != RnnAlgo::Standard);
        }
        assert_eq!(RnnAlgo::default(), RnnAlgo::Standard);
        let err = "persist_dynamic".parse::<RnnAlgo>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "algo: expected one of \"standard\", \"persist_static\", \"persist_static_small_h\", got \"persist_dynamic\""
        );
    }

    fn config(algo: RnnAlgo) -> RnnConfig {
        RnnConfig {
            cell: RnnCell::Lstm,
            input_size: 8,
            hidden_size: 16,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
            data_type: DataType::F32,
            math: MathMode::Fma,
            algo,
        }
    }

    #[test]
    fn persistent_algorithms_refuse_projection_and_small_h_refuses_f64() {
        for algo in [RnnAlgo::PersistStatic, RnnAlgo::PersistStaticSmallH] {
            assert!(config(algo).validate().is_ok());
            let err = RnnConfig {
                proj_size: 4,
                ..config(algo)
            }
            .validate()
            .unwrap_err()
            .to_string();
            assert_eq!(
                err,
                format!(
                    "algo: expected standard with proj_size 4 (cuDNN runs the LSTM projection on the standard algorithm only), got {algo}"
                )
            );
        }
        let f64 = |algo| RnnConfig {
            data_type: DataType::F64,
            ..config(algo)
        };
        let err = f64(RnnAlgo::PersistStaticSmallH)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("algo: expected standard or persist_static for F64"),
            "{err}"
        );
        assert!(err.ends_with("got persist_static_small_h"), "{err}");
        assert!(f64(RnnAlgo::PersistStatic).validate().is_ok());
        assert!(f64(RnnAlgo::Standard).validate().is_ok());
        assert!(
            RnnConfig {
                proj_size: 4,
                ..config(RnnAlgo::Standard)
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn persistent_algorithms_refuse_varying_lengths() {
        let varying = SeqShape::new(5, 3, Some(&[5, 2, 4])).unwrap();
        let full = SeqShape::full(5, 3).unwrap();
        assert!(RnnAlgo::Standard.check_shape(&varying).is_ok());
        for algo in [RnnAlgo::PersistStatic, RnnAlgo::PersistStaticSmallH] {
            assert!(algo.check_shape(&full).is_ok());
            let err = algo.check_shape(&varying).unwrap_err().to_string();
            assert_eq!(
                err,
                format!(
                    "lengths: expected equal lengths for algo {algo} (persistent algorithms refuse variable sequence lengths; use standard), got lengths from 2 to 5"
                )
            );
        }
    }

    #[test]
    fn a_call_reads_config_and_shape() {
        let config = RnnConfig {
            hidden_size: 128,
            ..config(RnnAlgo::Standard)
        };
        let varying = SeqShape::new(7, 2, Some(&[7, 3])).unwrap();
        let call = AlgoCall::new(&config, &varying, true, H100);
        assert_eq!((call.batch, call.max_seq_len), (2, 7));
        assert!(call.lengths_vary && call.training);
        assert_eq!((call.hidden_size, call.input_size), (128, 8));
        assert_eq!(choose_algo(&call).algo, RnnAlgo::Standard);
        let full = SeqShape::new(7, 2, Some(&[7, 7])).unwrap();
        let call = AlgoCall::new(&config, &full, true, H100);
        assert!(!call.lengths_vary);
        assert_eq!(choose_algo(&call).algo, RnnAlgo::PersistStaticSmallH);
    }
}
