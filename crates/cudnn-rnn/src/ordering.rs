//! Ordering this crate's stream against every other stream of the context with events
//! instead of host synchronisation: the device orders the work, the host does not wait.
//!
//! - [`wait_for_context`]: the handle's stream waits for all work submitted so far to
//!   any stream of the context (`cuCtxRecordEvent` + `cuStreamWaitEvent`): what another
//!   library (CubeCL) queued before the call, the call's inputs included.
//! - [`context_waits_for`]: every stream of the context waits, for all work submitted
//!   to it afterwards, for the handle's stream's work so far (`cuEventRecord` +
//!   `cuCtxWaitEvent`): whatever reads the call's outputs later runs after the call.
//!
//! Both need CUDA 12.5 or newer (the driver entry points); on an older driver they fail
//! with the call named (`CUDA_ERROR_NOT_SUPPORTED`), and the caller synchronises
//! instead. The entry points are looked up before their first call: cudarc's dynamic
//! loading panics on a call to a symbol the driver lacks.

use std::sync::OnceLock;

use cudarc::driver::{DriverError, sys};

use crate::error::{CudnnRnnError, Result};
use crate::handle::CudnnHandle;

fn check(call: &'static str, status: sys::CUresult) -> Result<()> {
    status.result().map_err(|e| CudnnRnnError::driver(call, e))
}

/// The driver entry points this module calls beyond cudarc's safe layer.
const CONTEXT_EVENT_CALLS: [&str; 2] = ["cuCtxRecordEvent", "cuCtxWaitEvent"];

/// `Ok` where the loaded driver has `call` (both context-event entry points, looked up
/// once), else the named error the caller falls back on.
fn entry_point(call: &'static str) -> Result<()> {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    let available = *AVAILABLE.get_or_init(|| {
        CONTEXT_EVENT_CALLS.iter().all(|name| {
            // SAFETY: called only with a context made (the driver library is loaded,
            // so `culib` returns it, never panics); a symbol is looked up, not called,
            // and the placeholder type is never used to call it.
            unsafe { sys::culib().get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_ok()
        })
    });
    if available {
        Ok(())
    } else {
        Err(CudnnRnnError::driver(
            call,
            DriverError(sys::CUresult::CUDA_ERROR_NOT_SUPPORTED),
        ))
    }
}

/// Makes `handle`'s stream wait for all work submitted to its context so far, on every
/// stream. The host does not wait. Work must have been *submitted* (a library that queues
/// on the host, as CubeCL can, flushes first).
pub fn wait_for_context(handle: &CudnnHandle) -> Result<()> {
    entry_point("cuCtxRecordEvent")?;
    let stream = handle.stream();
    let context = stream.context();
    let event = context
        .new_event(None)
        .map_err(|e| CudnnRnnError::driver("cuEventCreate", e))?;
    // SAFETY: the context and the event are live (held by `stream` and `event` for the
    // whole call), the context is current (new_event bound it), and recording an event
    // or waiting on one touches no memory of ours.
    unsafe {
        check(
            "cuCtxRecordEvent",
            sys::cuCtxRecordEvent(context.cu_ctx(), event.cu_event()),
        )?;
    }
    stream
        .wait(&event)
        .map_err(|e| CudnnRnnError::driver("cuStreamWaitEvent", e))
}

/// Makes all work submitted to `handle`'s context after this call, on any stream, wait
/// for the work queued on `handle`'s stream so far. The host does not wait.
pub fn context_waits_for(handle: &CudnnHandle) -> Result<()> {
    entry_point("cuCtxWaitEvent")?;
    let stream = handle.stream();
    let context = stream.context();
    let event = stream
        .record_event(None)
        .map_err(|e| CudnnRnnError::driver("cuEventRecord", e))?;
    // SAFETY: as in `wait_for_context`: live context and event, no memory touched. The
    // event may be destroyed right after: a wait already enqueued keeps its dependency.
    unsafe {
        check(
            "cuCtxWaitEvent",
            sys::cuCtxWaitEvent(context.cu_ctx(), event.cu_event()),
        )
    }
}
