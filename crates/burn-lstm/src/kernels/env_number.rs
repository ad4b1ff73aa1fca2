//! Process-wide sizes read from environment variables: the CPU and GPU weight caches'
//! limits and the CPU kernel's default thread count.

use std::sync::OnceLock;

/// The whole number `variable` holds (whitespace around it ignored); `None` when it is
/// unset or not a number, where the caller's default applies.
pub(crate) fn usize_from_env(variable: &str) -> Option<usize> {
    std::env::var(variable)
        .ok()
        .and_then(|value| value.trim().parse().ok())
}

/// Most bytes each weight cache keeps (the CPU kernel's packed copies, the GPU backends'
/// flat buffers): `BURN_LSTM_WEIGHT_CACHE_MIB` (read once), else 512 MiB.
pub(crate) fn weight_cache_limit_bytes() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        usize_from_env("BURN_LSTM_WEIGHT_CACHE_MIB")
            .unwrap_or(512)
            .saturating_mul(1 << 20)
    })
}

#[cfg(test)]
mod tests {
    use super::usize_from_env;

    #[test]
    fn unset_and_unparsable_values_are_none() {
        // Variables no test or user sets.
        assert_eq!(
            usize_from_env("BURN_LSTM_TEST_NUMBER_THAT_IS_NEVER_SET"),
            None
        );
        assert_eq!(usize_from_env("PATH"), None);
    }
}
