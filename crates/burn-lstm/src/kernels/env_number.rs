//! Process-wide sizes read from environment variables: the CPU and GPU weight caches'
//! limits and the CPU kernel's default thread count.

/// The whole number `variable` holds (whitespace around it ignored); `None` when it is
/// unset or not a number, where the caller's default applies.
pub(crate) fn usize_from_env(variable: &str) -> Option<usize> {
    std::env::var(variable)
        .ok()
        .and_then(|value| value.trim().parse().ok())
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
