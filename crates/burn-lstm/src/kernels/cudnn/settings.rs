//! Process-wide cuDNN settings.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::kernels::switch::OptInSwitch;

use cudnn_rnn::{CallReuse, MathMode};

/// 0: unset (read `BURN_LSTM_CUDNN_TF32`), 1: FMA, 2: TF32.
static MATH: AtomicU8 = AtomicU8::new(0);

/// How cuDNN computes `f32` LSTMs: [`MathMode::Fma`] (exact `f32`, the numbers of the CPU
/// kernels; the default) or [`MathMode::Tf32`] (tensor cores, faster, about 1e-3 relative
/// error per product). The environment variable `BURN_LSTM_CUDNN_TF32=1` sets TF32 until
/// [`set_cudnn_math`] is called.
pub fn cudnn_math() -> MathMode {
    match MATH.load(Ordering::Relaxed) {
        1 => MathMode::Fma,
        2 => MathMode::Tf32,
        _ => {
            if std::env::var("BURN_LSTM_CUDNN_TF32").is_ok_and(|v| v == "1") {
                MathMode::Tf32
            } else {
                MathMode::Fma
            }
        }
    }
}

/// Sets the cuDNN math mode for calls that start after this one (see [`cudnn_math`]).
pub fn set_cudnn_math(mode: MathMode) {
    let value = match mode {
        MathMode::Fma => 1,
        MathMode::Tf32 => 2,
    };
    MATH.store(value, Ordering::Relaxed);
}

static EMPTY_ROWS: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_EMPTY_ROWS", true);

/// Whether a batch with rows of length 0 runs on cuDNN, those rows taken out before the
/// call and put back after (`kernels/empty_rows.rs`). On by default; switched off, such a
/// batch runs the portable kernel, and [`KernelChoice`](crate::KernelChoice) says why.
/// The environment variable `BURN_LSTM_CUDNN_EMPTY_ROWS` (`1` on, anything else off)
/// decides until [`set_cudnn_empty_rows`] is called (see docs/robustness.md).
pub fn cudnn_empty_rows() -> bool {
    EMPTY_ROWS.get()
}

/// Turns the cuDNN path for batches with empty rows on or off for calls that start
/// after this one (see [`cudnn_empty_rows`]).
pub fn set_cudnn_empty_rows(enabled: bool) {
    EMPTY_ROWS.set(enabled);
}

static GRU: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_GRU", true);

/// Whether a GRU (`CudnnCompatibleGru`) runs on cuDNN (`CUDNN_GRU`) on the Cuda backend.
/// On by default; switched off, a GRU there runs the portable kernel, and
/// [`KernelChoice`](crate::KernelChoice) says why. The environment variable
/// `BURN_LSTM_CUDNN_GRU` (`1` on, anything else off) decides until [`set_cudnn_gru`] is
/// called (docs/gru.md).
pub fn cudnn_gru() -> bool {
    GRU.get()
}

/// Turns the cuDNN path for GRUs on or off for calls that start after this one (see
/// [`cudnn_gru`]).
pub fn set_cudnn_gru(enabled: bool) {
    GRU.set(enabled);
}

static EVENTS: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_EVENTS", true);

/// Whether a cuDNN call is ordered against CubeCL's work with events instead of two host
/// synchronisations (before: wait for CubeCL; after: wait for cuDNN). With events the
/// host waits for nothing: cuDNN's stream waits for everything submitted to the GPU
/// context before the call (`cuCtxRecordEvent`), and everything submitted after it waits
/// for cuDNN's work (`cuCtxWaitEvent`); needs a CUDA 12.5 driver or newer (older: the
/// host synchronisations, with the reason logged once). On by default;
/// `BURN_LSTM_CUDNN_EVENTS` (`1` on, anything else off) decides until [`set_cudnn_events`]
/// is called.
pub fn cudnn_events() -> bool {
    EVENTS.get()
}

/// Turns event ordering of cuDNN calls on or off for calls that start after this one
/// (see [`cudnn_events`]).
pub fn set_cudnn_events(enabled: bool) {
    EVENTS.set(enabled);
}

static CONTEXT_WAIT: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_CONTEXT_WAIT", true);

/// With event ordering on ([`cudnn_events`]), whether CubeCL's later work is ordered
/// after a cuDNN call by the device too (`cuCtxWaitEvent`: everything submitted to the
/// context afterwards waits for cuDNN's stream). Off, the host waits for cuDNN's stream
/// after the call instead; the call still waits for CubeCL's earlier work by event. On by
/// default; `BURN_LSTM_CUDNN_CONTEXT_WAIT` (`1` on, anything else off) decides until
/// [`set_cudnn_context_wait`] is called.
pub fn cudnn_context_wait() -> bool {
    CONTEXT_WAIT.get()
}

/// Turns the device-side ordering of CubeCL's work after a cuDNN call on or off for calls
/// that start after this one (see [`cudnn_context_wait`]).
pub fn set_cudnn_context_wait(enabled: bool) {
    CONTEXT_WAIT.set(enabled);
}

static SKIP_FLUSH: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_SKIP_FLUSH", false);

/// With event ordering on ([`cudnn_events`]), whether a cuDNN call leaves out its flush of
/// CubeCL before recording the context's event. The flush is a second round trip to
/// CubeCL's device thread after the one that reads the call's buffer addresses, and it
/// makes the host wait for the GPU to reach CubeCL's previous flush (CubeCL 0.10 syncs
/// that fence in every flush). The address read already ran after every CubeCL task
/// queued before the call, so those launches have reached the driver when the event is
/// recorded. Off by default (the flush stays) until a GPU run verifies it;
/// `BURN_LSTM_CUDNN_SKIP_FLUSH` (`1` on, anything else off) decides until
/// [`set_cudnn_skip_flush`] is called.
pub fn cudnn_skip_flush() -> bool {
    SKIP_FLUSH.get()
}

/// Turns the flush-free event ordering on or off for calls that start after this one
/// (see [`cudnn_skip_flush`]).
pub fn set_cudnn_skip_flush(enabled: bool) {
    SKIP_FLUSH.set(enabled);
}

static REUSE: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_REUSE", true);

/// Whether each GPU's cuDNN state keeps what a call can reuse (cudnn-rnn's
/// [`CallReuse`](cudnn_rnn::CallReuse): one grow-only work space per stream, call
/// descriptors and temp sizes cached per shape, no device copy of the row lengths when
/// every row is full, as PyTorch passes none). Read when a GPU's cuDNN state is created
/// (its first call). On by default; `BURN_LSTM_CUDNN_REUSE` (`1` on, anything else off)
/// decides until [`set_cudnn_reuse`] is called.
pub fn cudnn_reuse() -> bool {
    REUSE.get()
}

/// Turns call reuse on or off for GPUs whose cuDNN state is created after this call (see
/// [`cudnn_reuse`]).
pub fn set_cudnn_reuse(enabled: bool) {
    REUSE.set(enabled);
}

static RESERVE_POOL: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_RESERVE_POOL", false);

/// Whether each GPU's cuDNN state keeps the reserve spaces of finished training calls for
/// later ones (cudnn-rnn's [`CallReuse::reserve_pool`]: a training forward takes the
/// smallest idle one that is large enough, its backward's end gives it back, at most four
/// stay idle), instead of a device allocation per training forward and a free per
/// backward. Read when a GPU's cuDNN state is created (its first call). Off by default
/// until a GPU run verifies it; `BURN_LSTM_CUDNN_RESERVE_POOL` (`1` on, anything else
/// off) decides until [`set_cudnn_reserve_pool`] is called.
pub fn cudnn_reserve_pool() -> bool {
    RESERVE_POOL.get()
}

/// Turns the reserve-space pool on or off for GPUs whose cuDNN state is created after
/// this call (see [`cudnn_reserve_pool`]).
pub fn set_cudnn_reserve_pool(enabled: bool) {
    RESERVE_POOL.set(enabled);
}

/// The per-call reuse a GPU's cuDNN handle is created with: call reuse
/// ([`cudnn_reuse`]: work-space pool, descriptor cache, no device lengths for full rows)
/// and the reserve-space pool ([`cudnn_reserve_pool`]), each as its setting says now.
pub fn cudnn_call_reuse() -> CallReuse {
    call_reuse(cudnn_reuse(), cudnn_reserve_pool())
}

/// [`cudnn_call_reuse`] from the two settings' values.
fn call_reuse(reuse: bool, reserve_pool: bool) -> CallReuse {
    CallReuse {
        reserve_pool,
        ..CallReuse::all_if(reuse)
    }
}

static HALF: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_HALF", true);

/// Whether f16 and bf16 models (`Cuda<f16>`, `Cuda<bf16>`) run on cuDNN (half data,
/// f32 math on tensor cores, as PyTorch runs them). On by default; switched off, such a
/// model runs the portable kernel (in f32 inside, see docs/numerics.md), and
/// [`KernelChoice`](crate::KernelChoice) says why. The environment variable
/// `BURN_LSTM_CUDNN_HALF` (`1` on, anything else off) decides until [`set_cudnn_half`] is
/// called (docs/cudnn.md).
pub fn cudnn_half() -> bool {
    HALF.get()
}

/// Turns the cuDNN path for f16 and bf16 models on or off for calls that start after
/// this one (see [`cudnn_half`]).
pub fn set_cudnn_half(enabled: bool) {
    HALF.set(enabled);
}

static BATCH_MAJOR: OptInSwitch = OptInSwitch::new("BURN_LSTM_CUDNN_BATCH_MAJOR", true);

/// Whether a batch-first module's input reaches cuDNN in its own memory, batch-major
/// (`CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED`), instead of copied to sequence-major
/// first (as PyTorch copies it): the output and, in training, the gradients are then
/// written batch-major too, so a batch-first call with more than one row makes neither
/// the input's copy nor the output's. A call cuDNN refuses in that layout runs
/// sequence-major, with the reason logged once. On by default;
/// `BURN_LSTM_CUDNN_BATCH_MAJOR` (`1` on, anything else off) decides until
/// [`set_cudnn_batch_major`] is called.
pub fn cudnn_batch_major() -> bool {
    BATCH_MAJOR.get()
}

/// Turns the batch-major layout for batch-first input on or off for calls that start
/// after this one (see [`cudnn_batch_major`]).
pub fn set_cudnn_batch_major(enabled: bool) {
    BATCH_MAJOR.set(enabled);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_pool_is_its_own_switch() {
        let reuse_only = call_reuse(true, false);
        assert!(reuse_only.work_pool && reuse_only.descriptor_cache);
        assert!(reuse_only.null_dev_lengths && !reuse_only.reserve_pool);
        assert_eq!(call_reuse(true, true), CallReuse::ALL);
        assert_eq!(call_reuse(false, false), CallReuse::OFF);
        let pool_only = call_reuse(false, true);
        assert!(pool_only.reserve_pool);
        assert_eq!(
            pool_only,
            CallReuse {
                reserve_pool: true,
                ..CallReuse::OFF
            }
        );
    }
}
