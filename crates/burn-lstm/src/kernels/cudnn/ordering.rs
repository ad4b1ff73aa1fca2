//! How a cuDNN call is ordered against CubeCL's work on the same GPU: events (the
//! default: the device orders both sides and the host waits for nothing, see
//! [`cudnn_events`]), events before the call only (`BURN_LSTM_CUDNN_CONTEXT_WAIT=0`: the
//! host waits for cuDNN after it, see [`cudnn_context_wait`]) or host synchronisation
//! (`BURN_LSTM_CUDNN_EVENTS=0`: the host waits for CubeCL before the call and for cuDNN
//! after it).
//!
//! The order of one call: [`Ordering::before`] once the call's buffer addresses are read
//! ([`Pinned`]), its work queued, then [`Ordering::after`] with what `before` returned.
//! An event step the driver refuses (a driver older than CUDA 12.5) falls back to the
//! host synchronisation of that step and of the call's `after`, with the reason logged
//! once.
//!
//! The event before a call captures only work already submitted to the driver. CubeCL
//! submits a launch when its device thread runs the task; the address read is a blocking
//! task that runs after every task queued before it, so by then the call's inputs have
//! been submitted. [`Ordering::before`] flushes CubeCL all the same unless the setting
//! `cudnn_skip_flush` (`settings.rs`) is on ([`Ordering::flushes`]).

use burn::tensor::backend::Backend;
use cudnn_rnn::{CudnnHandle, CudnnRnnError};

use crate::kernels::cudnn::device::log_fallback_once;
use crate::kernels::cudnn::pinned::Pinned;
use crate::kernels::cudnn::settings::{cudnn_context_wait, cudnn_events};
use crate::kernels::cudnn::types::{CudaBackend, CudaTensor};

/// How one call is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ordering {
    /// The host waits: for CubeCL before the call, for cuDNN's stream after it.
    HostSync,
    /// The device waits: cuDNN's stream for the context's earlier work, the context's
    /// later work for cuDNN's stream.
    Events,
    /// The device waits before the call (cuDNN's stream for the context's earlier work),
    /// the host after it (for cuDNN's stream).
    EventsBefore,
}

impl Ordering {
    /// The ordering the settings ask for.
    pub fn of_settings() -> Self {
        Self::of(cudnn_events(), cudnn_context_wait())
    }

    /// The ordering of the settings [`cudnn_events`] and [`cudnn_context_wait`].
    pub fn of(events: bool, context_wait: bool) -> Self {
        match (events, context_wait) {
            (false, _) => Self::HostSync,
            (true, true) => Self::Events,
            (true, false) => Self::EventsBefore,
        }
    }

    /// The ordering of a call's `after` step, given the one asked for and how its
    /// `before` step went with events (`Err`: the driver refused them).
    pub fn resolved(self, events_before: Result<(), String>) -> (Self, Option<String>) {
        match (self, events_before) {
            (Self::HostSync, _) => (Self::HostSync, None),
            (ordering, Ok(())) => (ordering, None),
            (_, Err(reason)) => (
                Self::HostSync,
                Some(format!(
                    "cuDNN event ordering refused ({reason}); synchronising the host instead"
                )),
            ),
        }
    }

    /// Whether the `before` step flushes CubeCL first, `skip_flush` being
    /// `cudnn_skip_flush`: with events, unless skipped (the address read has already
    /// brought CubeCL's earlier launches to the driver); never on the host
    /// synchronisation, which waits for all of CubeCL's work itself.
    pub fn flushes(self, skip_flush: bool) -> bool {
        match self {
            Self::HostSync => false,
            Self::Events | Self::EventsBefore => !skip_flush,
        }
    }

    /// Orders the call after every CubeCL write of `tensor`'s device queued so far.
    /// `_addresses`, the call's buffers read from CubeCL, is the proof that those writes
    /// have been submitted to the driver (the module's doc); `skip_flush` is
    /// `cudnn_skip_flush`, read once per call (the trace's [`Self::before_mark`] takes
    /// the same). Returns the ordering the call's [`Self::after`] must use.
    pub fn before(
        self,
        _addresses: &Pinned,
        tensor: &CudaTensor,
        handle: &CudnnHandle,
        skip_flush: bool,
    ) -> Result<Self, String> {
        let events = match self {
            Self::HostSync => Err(String::new()),
            Self::Events | Self::EventsBefore => {
                let flushed = if self.flushes(skip_flush) {
                    tensor
                        .client
                        .flush()
                        .map_err(|e| format!("flushing CubeCL: {e:?}"))
                } else {
                    Ok(())
                };
                flushed
                    .and_then(|()| cudnn_rnn::wait_for_context(handle).map_err(|e| e.to_string()))
            }
        };
        let (after, fallback) = self.resolved(events.clone().map_err(|e| e.to_string()));
        if let Some(reason) = fallback {
            log_fallback_once(&reason);
        }
        if after == Self::HostSync {
            <CudaBackend as Backend>::sync(&tensor.device)
                .map_err(|e| format!("synchronising CubeCL before cuDNN: {e:?}"))?;
        }
        Ok(after)
    }

    /// Orders every later CubeCL read of the call's results after the call's work on
    /// `handle`'s stream.
    pub fn after(self, handle: &CudnnHandle) -> Result<(), CudnnRnnError> {
        match self {
            Self::HostSync | Self::EventsBefore => handle.synchronize(),
            Self::Events => cudnn_rnn::context_waits_for(handle).or_else(|refused| {
                log_fallback_once(&format!(
                    "cuDNN event ordering refused ({refused}); synchronising the host instead"
                ));
                handle.synchronize()
            }),
        }
    }

    /// The trace's name of the `before` step, `skip_flush` being `cudnn_skip_flush`.
    pub fn before_mark(self, skip_flush: bool) -> &'static str {
        match (self, self.flushes(skip_flush)) {
            (Self::HostSync, _) => "wait for CubeCL",
            (Self::Events | Self::EventsBefore, true) => "order after CubeCL (event)",
            (Self::Events | Self::EventsBefore, false) => "order after CubeCL (event, no flush)",
        }
    }

    /// The trace's name of the `after` step.
    pub fn after_mark(self) -> &'static str {
        match self {
            Self::HostSync | Self::EventsBefore => "wait for cuDNN",
            Self::Events => "order CubeCL after cuDNN (event)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_pick_the_ordering() {
        assert_eq!(Ordering::of(false, true), Ordering::HostSync);
        assert_eq!(Ordering::of(false, false), Ordering::HostSync);
        assert_eq!(Ordering::of(true, true), Ordering::Events);
        assert_eq!(Ordering::of(true, false), Ordering::EventsBefore);
    }

    #[test]
    fn a_refused_event_step_makes_the_call_synchronise() {
        assert_eq!(
            Ordering::HostSync.resolved(Ok(())),
            (Ordering::HostSync, None)
        );
        assert_eq!(Ordering::Events.resolved(Ok(())), (Ordering::Events, None));
        assert_eq!(
            Ordering::EventsBefore.resolved(Ok(())),
            (Ordering::EventsBefore, None)
        );
        for asked in [Ordering::Events, Ordering::EventsBefore] {
            let (after, reason) =
                asked.resolved(Err("cuCtxRecordEvent: CUDA_ERROR_NOT_FOUND".into()));
            assert_eq!(after, Ordering::HostSync);
            let reason = reason.expect("a fallback names its reason");
            assert!(reason.contains("cuCtxRecordEvent"), "{reason}");
        }
    }

    #[test]
    fn only_full_event_ordering_leaves_the_after_step_to_the_device() {
        assert_eq!(
            Ordering::Events.after_mark(),
            "order CubeCL after cuDNN (event)"
        );
        assert_eq!(Ordering::EventsBefore.after_mark(), "wait for cuDNN");
        assert_eq!(
            Ordering::EventsBefore.before_mark(false),
            "order after CubeCL (event)"
        );
        assert_eq!(Ordering::HostSync.before_mark(false), "wait for CubeCL");
    }

    #[test]
    fn only_event_ordering_flushes_cubecl_and_only_unless_skipped() {
        for skip_flush in [false, true] {
            assert!(!Ordering::HostSync.flushes(skip_flush));
            assert_eq!(
                Ordering::HostSync.before_mark(skip_flush),
                "wait for CubeCL"
            );
        }
        for ordering in [Ordering::Events, Ordering::EventsBefore] {
            assert!(ordering.flushes(false), "{ordering:?}");
            assert!(!ordering.flushes(true), "{ordering:?}");
            // The trace says which: the default's mark is the one earlier traces carry.
            assert_eq!(ordering.before_mark(false), "order after CubeCL (event)");
            assert_eq!(
                ordering.before_mark(true),
                "order after CubeCL (event, no flush)"
            );
        }
    }
}
