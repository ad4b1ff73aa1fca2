//! What a run's timed calls took: the median, and the medians of the first and the last
//! tenth of the calls (whether calls slow down over a long run).

/// What the timed calls took, in seconds.
pub struct Timings {
    /// The median call.
    pub median: f64,
    /// The median of the first tenth of the calls (at least one call), in call order.
    pub first_tenth: f64,
    /// The median of the last tenth: beside `first_tenth`, whether calls slow down (or
    /// speed up) over a long run.
    pub last_tenth: f64,
}

impl Timings {
    /// The timings of `times`, one entry per call in call order (not empty).
    pub fn of(times: &[f64]) -> Self {
        let tenth = (times.len() / 10).max(1);
        Self {
            median: median(times),
            first_tenth: median(&times[..tenth]),
            last_tenth: median(&times[times.len() - tenth..]),
        }
    }
}

/// The median of `values` (not empty).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tenths_are_the_first_and_last_calls_in_call_order() {
        // 20 calls slowing down: 1 s, 2 s, ... 20 s.
        let times: Vec<f64> = (1..=20).map(f64::from).collect();
        let timings = Timings::of(&times);
        assert_eq!(timings.median, 11.0);
        assert_eq!(timings.first_tenth, 2.0);
        assert_eq!(timings.last_tenth, 20.0);
    }

    #[test]
    fn fewer_than_ten_calls_give_one_call_per_tenth() {
        let timings = Timings::of(&[3.0, 1.0, 2.0]);
        assert_eq!(timings.median, 2.0);
        assert_eq!(timings.first_tenth, 3.0);
        assert_eq!(timings.last_tenth, 2.0);
    }
}
