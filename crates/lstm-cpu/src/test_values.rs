//! Deterministic pseudo-random values for the unit tests (a 64-bit linear congruential
//! generator): the same `seed` gives the same values on every machine.

/// `len` values in `[-0.5, 0.5)`.
pub(crate) fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut state = seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) as f64 / (1u64 << 31) as f64) - 0.5
        })
        .collect()
}
