//! A process-wide on/off setting read from an environment variable until the API sets it
//! (the cuDNN paths, `cudnn/settings.rs`; the GPU weight cache, `cubecl/flat_cache.rs`).

use std::sync::atomic::{AtomicU8, Ordering};

/// A process-wide switch for a GPU path: its environment variable (`1` on, anything else
/// off) decides until [`OptInSwitch::set`] does; unset, `default_on`. A path not yet
/// verified on a GPU is off by default; a GPU run that verifies it flips its
/// `default_on` (one line where its switch is declared).
pub(crate) struct OptInSwitch {
    /// 0: unset (read `variable`), 1: off, 2: on.
    state: AtomicU8,
    variable: &'static str,
    default_on: bool,
}

impl OptInSwitch {
    pub(crate) const fn new(variable: &'static str, default_on: bool) -> Self {
        Self {
            state: AtomicU8::new(0),
            variable,
            default_on,
        }
    }

    pub(crate) fn get(&self) -> bool {
        match self.state.load(Ordering::Relaxed) {
            1 => false,
            2 => true,
            _ => match std::env::var(self.variable) {
                Ok(value) => value == "1",
                Err(_) => self.default_on,
            },
        }
    }

    pub(crate) fn set(&self, enabled: bool) {
        self.state
            .store(if enabled { 2 } else { 1 }, Ordering::Relaxed);
    }
}
