//! What a bench times (one call, as a closure) and the inputs of the benches that
//! bypass Burn.

/// One timed call.
pub type Call = Box<dyn FnMut()>;

/// A 64-bit linear congruential generator: the same pseudo-random inputs in every run,
/// without a random-number crate (the inputs of the benches that bypass Burn).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value, uniform in `[-scale, scale)`.
    pub fn uniform(&mut self, scale: f32) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }
}
