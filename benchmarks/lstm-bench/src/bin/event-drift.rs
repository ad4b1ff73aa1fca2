//! Whether the op's ordering of its stream against the rest of the GPU context slows
//! later calls down over a long run, without Burn, CubeCL or cuDNN's RNN: the driver
//! calls of `cudnn_rnn::wait_for_context` and `cudnn_rnn::context_waits_for` (the
//! default event ordering) around a little work, call after call.
//!
//! Each call queues `--launches` kernels on a stream of its own (the work CubeCL queues
//! between two calls of the op), orders the cuDNN handle's stream after it, queues one
//! kernel there (the op's cuDNN work), and orders the context's later work after that,
//! as the variant says:
//!
//! - `context-events`: `cuCtxRecordEvent` + `cuStreamWaitEvent` before,
//!   `cuEventRecord` + `cuCtxWaitEvent` after (the op's default);
//! - `events-before`: the same before, a host synchronisation of the handle's stream
//!   after (`BURN_LSTM_CUDNN_CONTEXT_WAIT=0`);
//! - `host-sync`: host synchronisations before and after (`BURN_LSTM_CUDNN_EVENTS=0`);
//! - `unordered`: neither (the two streams' cost alone; not a correct ordering).
//!
//! `--idle-streams N` adds streams that never run anything: `cuCtxWaitEvent` makes every
//! stream of the context wait, those too.
//!
//! Every `--block` calls both streams are synchronised and the block's wall time and
//! the host time of its queueing are printed (one JSON line per block, then a summary
//! line with the first and the last block): a per-call time that grows from block to
//! block is a drift of the driver's, under that ordering. Run each variant in a process
//! of its own (context-wide state may outlive a variant).
//!
//! ```sh
//! cargo run --release -p lstm-bench --features cuda --bin event-drift -- --variant context-events
//! ```

#[path = "../stdout_line.rs"]
mod stdout_line;

use std::ffi::{CString, c_void};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, result, sys};
use cudnn_rnn::{CudnnHandle, context_waits_for, wait_for_context};
use serde_json::{Value, json};

/// A kernel that adds one to the first 32 floats of its argument: small enough that
/// a call's time is the queueing and the ordering, not the work.
const TOUCH_PTX: &str = "
.version 7.0
.target sm_52
.address_size 64

.visible .entry touch(
    .param .u64 touch_param_0
)
{
    .reg .b32 %r<2>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<5>;

    ld.param.u64 %rd1, [touch_param_0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    add.f32 %f2, %f1, 0f3F800000;
    st.global.f32 [%rd4], %f2;
    ret;
}
";

/// How a call's cuDNN-stream work is ordered against the other stream's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Variant {
    ContextEvents,
    EventsBefore,
    HostSync,
    Unordered,
}

/// A drift of the driver's under one ordering, over many calls.
#[derive(Parser, Debug)]
#[command(name = "event-drift")]
struct Args {
    /// The ordering.
    #[arg(long, value_enum)]
    variant: Variant,
    /// Calls in all.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    calls: u32,
    /// Calls per timed block.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    block: u32,
    /// Kernels queued on the other stream per call.
    #[arg(long, default_value_t = 16)]
    launches: u32,
    /// Streams created in the context and never given work (as CubeCL's collective and
    /// cleanup streams, or a thread's stream after its last call): whether each
    /// context-wide wait they receive stays pending and piles up.
    #[arg(long, default_value_t = 0)]
    idle_streams: u32,
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Something that queues the work of one kernel on a stream.
enum Work {
    /// The `touch` kernel, loaded from [`TOUCH_PTX`].
    Kernel(sys::CUfunction),
    /// A memset (where the driver refused the module), with the reason.
    Memset(String),
}

impl Work {
    fn load() -> Self {
        let ptx = CString::new(TOUCH_PTX).expect("no NUL in the PTX");
        // SAFETY: `ptx` is a NUL-terminated PTX image that outlives the call; the module
        // is never unloaded, so the function handle stays valid for the process.
        let loaded = unsafe {
            result::module::load_data(ptx.as_ptr() as *const c_void).and_then(|module| {
                result::module::get_function(module, CString::new("touch").expect("no NUL"))
            })
        };
        match loaded {
            Ok(function) => Self::Kernel(function),
            Err(e) => Self::Memset(format!("loading the PTX kernel: {e:?}")),
        }
    }

    fn name(&self) -> Value {
        match self {
            Self::Kernel(_) => json!("kernel"),
            Self::Memset(reason) => json!(format!("memset ({reason})")),
        }
    }

    /// Queues one unit of work on `stream`, on the 32 floats at `ptr`.
    fn queue(&self, stream: &Arc<CudaStream>, ptr: sys::CUdeviceptr) -> Result<(), String> {
        match self {
            Self::Kernel(function) => {
                let mut arg = ptr;
                let mut params = [&mut arg as *mut sys::CUdeviceptr as *mut c_void];
                // SAFETY: `function` takes one pointer to 32 floats; `ptr` is a live
                // allocation of 32 floats until both streams are synchronised (`run`).
                unsafe {
                    result::launch_kernel(
                        *function,
                        (1, 1, 1),
                        (32, 1, 1),
                        0,
                        stream.cu_stream(),
                        &mut params,
                    )
                }
                .map_err(|e| format!("cuLaunchKernel: {e:?}"))
            }
            // SAFETY: the 128 bytes at `ptr`, an allocation that outlives the work.
            Self::Memset(_) => unsafe {
                result::memset_d8_async(ptr, 0, 128, stream.cu_stream())
                    .map_err(|e| format!("cuMemsetD8Async: {e:?}"))
            },
        }
    }
}

/// One call: the other stream's work, the ordering, the handle's work.
fn call(
    args: &Args,
    work: &Work,
    handle: &CudnnHandle,
    other: &Arc<CudaStream>,
    [theirs, ours]: [sys::CUdeviceptr; 2],
) -> Result<(), String> {
    for _ in 0..args.launches {
        work.queue(other, theirs)?;
    }
    match args.variant {
        Variant::ContextEvents | Variant::EventsBefore => {
            wait_for_context(handle).map_err(|e| e.to_string())?
        }
        Variant::HostSync => other.synchronize().map_err(|e| format!("{e:?}"))?,
        Variant::Unordered => {}
    }
    work.queue(handle.stream(), ours)?;
    match args.variant {
        Variant::ContextEvents => context_waits_for(handle).map_err(|e| e.to_string()),
        Variant::EventsBefore | Variant::HostSync => {
            handle.synchronize().map_err(|e| e.to_string())
        }
        Variant::Unordered => Ok(()),
    }
}

/// The variant's name on the command line.
fn variant_name(variant: Variant) -> String {
    variant.to_possible_value().map_or_else(
        || format!("{variant:?}"),
        |value| value.get_name().to_owned(),
    )
}

/// Microseconds per call of `calls` calls taking `time`.
fn per_call_us(time: Duration, calls: u32) -> f64 {
    time.as_secs_f64() * 1e6 / f64::from(calls)
}

fn run(args: &Args) -> Result<(), String> {
    let handle = CudnnHandle::for_device(args.device).map_err(|e| e.to_string())?;
    let other = handle
        .stream()
        .context()
        .new_stream()
        .map_err(|e| format!("cuStreamCreate: {e:?}"))?;
    // Held to the end of the run: created, never used.
    let idle: Vec<Arc<CudaStream>> = (0..args.idle_streams)
        .map(|_| handle.stream().context().new_stream())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("cuStreamCreate (idle): {e:?}"))?;
    let work = Work::load();
    let zeros = |stream: &Arc<CudaStream>| -> Result<CudaSlice<f32>, String> {
        stream.alloc_zeros::<f32>(32).map_err(|e| format!("{e:?}"))
    };
    let buffers = [zeros(&other)?, zeros(handle.stream())?];
    other.synchronize().map_err(|e| format!("{e:?}"))?;
    handle.synchronize().map_err(|e| e.to_string())?;
    let pointers = [
        buffers[0].device_ptr(&other).0,
        buffers[1].device_ptr(handle.stream()).0,
    ];
    let variant = variant_name(args.variant);
    let mut blocks = Vec::new();
    let mut done = 0;
    while done < args.calls {
        let calls = args.block.min(args.calls - done);
        let mut host = Duration::ZERO;
        let start = Instant::now();
        for _ in 0..calls {
            let queued = Instant::now();
            call(args, &work, &handle, &other, pointers)?;
            host += queued.elapsed();
        }
        other.synchronize().map_err(|e| format!("{e:?}"))?;
        handle.synchronize().map_err(|e| e.to_string())?;
        let wall_us = per_call_us(start.elapsed(), calls);
        let host_us = per_call_us(host, calls);
        stdout_line::print_line_or_end(json!({
            "what": "event-drift", "variant": variant, "work": work.name(),
            "launches": args.launches, "idle_streams": idle.len(), "first_call": done, "calls": calls,
            "wall_us_per_call": wall_us, "host_us_per_call": host_us,
        }));
        blocks.push(wall_us);
        done += calls;
    }
    let (first, last) = (blocks[0], blocks[blocks.len() - 1]);
    stdout_line::print_line_or_end(json!({
        "what": "event-drift-summary", "variant": variant, "work": work.name(),
        "launches": args.launches, "idle_streams": idle.len(), "calls": args.calls, "block": args.block,
        "first_block_us_per_call": first, "last_block_us_per_call": last,
        "last_over_first": last / first,
    }));
    Ok(())
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        stdout_line::print_line_or_end(
            json!({"what": "event-drift", "variant": variant_name(args.variant), "error": e}),
        );
        std::process::exit(1);
    }
}
