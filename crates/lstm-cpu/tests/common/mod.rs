//! Helpers shared by the integration tests.

/// `len` values uniform in `[-scale, scale)` from a fixed generator (`seed` picks the
/// sequence): the same inputs on every run and every machine.
pub fn uniform(len: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}
