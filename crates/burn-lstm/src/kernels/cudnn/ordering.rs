//! How a cuDNN call is ordered against CubeCL's work on the same GPU: events (the
//! default: the device orders both sides and the host waits for nothing, see
//! [`cudnn_events`]) or host synchronisation (`BURN_LSTM_CUDNN_EVENTS=0`: the host waits
//! for CubeCL before the call and for cuDNN after it).
//!
//! The order of one call: [`Ordering::before`] once the call's buffers are known, its
//! work queued, then [`Ordering::after`] with what `before` returned. An event step the
//! driver refuses (a driver older than CUDA 12.5) falls back to the host synchronisation
//! of that step and of the call's `after`, with the reason logged once.

use burn::tensor::backend::Backend;
use cudnn_rnn::{CudnnHandle, CudnnRnnError};

use crate::kernels::cudnn::device::log_fallback_once;
use crate::kernels::cudnn::settings::cudnn_events;
use crate::kernels::cudnn::types::{CudaBackend, CudaTensor};

/// How one call is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ordering {
    /// The host waits: for CubeCL before the call, for cuDNN's stream after it.
    HostSync,
    /// The device waits: cuDNN's stream for the context's earlier work, the context's
    /// later work for cuDNN's stream.
    Events,
}

impl Ordering {
    /// The ordering the settings ask for.
    pub fn of_settings() -> Self {
        if cudnn_events() {
            Self::Events
        } else {
            Self::HostSync
        }
    }

    /// The ordering of a call's `after` step, given the one asked for and how its
    /// `before` step went with events (`Err`: the driver refused them).
    pub fn resolved(self, events_before: Result<(), String>) -> (Self, Option<String>) {
        match (self, events_before) {
            (Self::HostSync, _) => (Self::HostSync, None),
            (Self::Events, Ok(())) => (Self::Events, None),
            (Self::Events, Err(reason)) => (
                Self::HostSync,
                Some(format!(
                    "cuDNN event ordering refused ({reason}); synchronising the host instead"
                )),
            ),
        }
    }

    /// Orders the call after every CubeCL write of `tensor`'s device queued so far.
    /// Returns the ordering the call's [`Self::after`] must use.
    pub fn before(self, tensor: &CudaTensor, handle: &CudnnHandle) -> Result<Self, String> {
        let events = match self {
            Self::HostSync => Err(String::new()),
            Self::Events => tensor
                .client
                .flush()
                .map_err(|e| format!("flushing CubeCL: {e:?}"))
                .and_then(|()| cudnn_rnn::wait_for_context(handle).map_err(|e| e.to_string())),
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
            Self::HostSync => handle.synchronize(),
            Self::Events => cudnn_rnn::context_waits_for(handle).or_else(|refused| {
                log_fallback_once(&format!(
                    "cuDNN event ordering refused ({refused}); synchronising the host instead"
                ));
                handle.synchronize()
            }),
        }
    }

    /// The trace's name of the `before` step.
    pub fn before_mark(self) -> &'static str {
        match self {
            Self::HostSync => "wait for CubeCL",
            Self::Events => "order after CubeCL (event)",
        }
    }

    /// The trace's name of the `after` step.
    pub fn after_mark(self) -> &'static str {
        match self {
            Self::HostSync => "wait for cuDNN",
            Self::Events => "order CubeCL after cuDNN (event)",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cudnn::settings::set_cudnn_events;

    #[test]
    fn events_are_asked_for_only_when_switched_on() {
        set_cudnn_events(false);
        assert_eq!(Ordering::of_settings(), Ordering::HostSync);
        set_cudnn_events(true);
        assert_eq!(Ordering::of_settings(), Ordering::Events);
        set_cudnn_events(false);
    }

    #[test]
    fn a_refused_event_step_makes_the_call_synchronise() {
        assert_eq!(
            Ordering::HostSync.resolved(Ok(())),
            (Ordering::HostSync, None)
        );
        assert_eq!(Ordering::Events.resolved(Ok(())), (Ordering::Events, None));
        let (after, reason) =
            Ordering::Events.resolved(Err("cuCtxRecordEvent: CUDA_ERROR_NOT_FOUND".into()));
        assert_eq!(after, Ordering::HostSync);
        let reason = reason.expect("a fallback names its reason");
        assert!(reason.contains("cuCtxRecordEvent"), "{reason}");
    }
}
