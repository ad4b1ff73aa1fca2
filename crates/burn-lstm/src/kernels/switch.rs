//! A process-wide on/off setting read from an environment variable until the API sets it
//! (the cuDNN paths, `cudnn/settings.rs`; the GPU weight cache, `cubecl/flat_cache.rs`;
//! the sharing of CPU threads between overlapping calls, `fused_cpu/threads.rs`).

use std::sync::atomic::{AtomicU8, Ordering};

/// A process-wide switch: its environment variable (`1` on, anything else off) decides
/// until [`OptInSwitch::set`] does; unset, `default_on`. A GPU path not yet verified on
/// a GPU is off by default; a GPU run that verifies it flips its `default_on` (one line
/// where its switch is declared).
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
        self.explicit().unwrap_or(self.default_on)
    }

    /// What the API or the environment variable asked for; `None` where neither did
    /// (the switch is at its default).
    pub(crate) fn explicit(&self) -> Option<bool> {
        match self.state.load(Ordering::Relaxed) {
            1 => Some(false),
            2 => Some(true),
            _ => std::env::var(self.variable).ok().map(|value| value == "1"),
        }
    }

    /// The switch's value where nothing asked for one.
    #[cfg_attr(not(feature = "cubecl"), allow(dead_code))]
    pub(crate) fn default_on(&self) -> bool {
        self.default_on
    }

    pub(crate) fn set(&self, enabled: bool) {
        self.state
            .store(if enabled { 2 } else { 1 }, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use crate::kernels::switch::OptInSwitch;

    #[test]
    fn the_api_overrides_the_default_and_says_it_did() {
        for default_on in [false, true] {
            let switch = OptInSwitch::new("BURN_LSTM_SWITCH_TEST_NEVER_SET", default_on);
            assert_eq!(switch.explicit(), None, "nothing asked");
            assert_eq!(switch.get(), default_on);
            assert_eq!(switch.default_on(), default_on);
            for asked in [!default_on, default_on] {
                switch.set(asked);
                assert_eq!(switch.explicit(), Some(asked));
                assert_eq!(switch.get(), asked);
            }
        }
    }
}
