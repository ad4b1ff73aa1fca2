//! How a row split's batch rows go between its members ([`RowShares`]): evenly for the
//! first chunk of steps, then, at the start of each chunk, in proportion to the pace
//! each member kept over the chunk before. A member on a CPU that others' work slows
//! down (a shared machine's vCPU) gets fewer rows, where an even split would keep every
//! other member waiting for it at the end of the call.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::team::aligned_part;

/// A smaller gain than this (predicted time of the slowest member, relative) leaves the
/// rows where they are: one chunk's timing is noisy, and moving rows costs their state a
/// trip between caches.
const MIN_GAIN: f64 = 0.05;

/// Which batch rows each member of a row split runs: contiguous ranges, in member
/// order, each of at least `min_rows` rows, covering the batch once.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RowShares {
    /// The first row of each member, then the batch size: `members + 1` values.
    bounds: Vec<usize>,
    min_rows: usize,
}

impl RowShares {
    /// `batch` rows split evenly between `members` (`members · min_rows <= batch`), as
    /// `team::aligned_part` splits them.
    pub(super) fn even(batch: usize, members: usize, min_rows: usize) -> Self {
        debug_assert!(members > 0 && members * min_rows <= batch);
        let bounds = (0..members)
            .map(|m| aligned_part(batch, members, 1, m).start)
            .chain([batch])
            .collect();
        Self { bounds, min_rows }
    }

    /// Member `member`'s rows.
    pub(super) fn rows(&self, member: usize) -> Range<usize> {
        self.bounds[member]..self.bounds[member + 1]
    }

    /// Rows of every member, in member order.
    fn counts(&self) -> Vec<usize> {
        self.bounds.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The shares for the next chunk, from the seconds each member took over the last
    /// one with its current rows: rows handed out one at a time to the member that would
    /// finish them soonest at its measured pace (each keeping `min_rows`), kept only
    /// where the slowest member's predicted time drops by [`MIN_GAIN`] or more. Every
    /// member calls this with the same `seconds` and gets the same shares. Timings that
    /// are not positive and finite leave the shares as they are.
    pub(super) fn rebalance(&mut self, seconds: &[f64]) {
        let counts = self.counts();
        if seconds.len() != counts.len() || !seconds.iter().all(|s| s.is_finite() && *s > 0.0) {
            return;
        }
        // Seconds per row of each member over the last chunk.
        let per_row: Vec<f64> = seconds
            .iter()
            .zip(&counts)
            .map(|(s, &rows)| s / rows as f64)
            .collect();
        let batch = *self.bounds.last().unwrap_or(&0);
        let mut next = vec![self.min_rows; counts.len()];
        for _ in counts.len() * self.min_rows..batch {
            let soonest = (0..next.len())
                .min_by(|&a, &b| {
                    let finish = |m: usize| (next[m] + 1) as f64 * per_row[m];
                    finish(a).total_cmp(&finish(b))
                })
                .unwrap_or(0);
            next[soonest] += 1;
        }
        let slowest = |rows: &[usize]| {
            rows.iter()
                .zip(&per_row)
                .map(|(&r, t)| r as f64 * t)
                .fold(0.0, f64::max)
        };
        if slowest(&next) <= (1.0 - MIN_GAIN) * slowest(&counts) {
            let mut start = 0;
            self.bounds = std::iter::once(0)
                .chain(next.iter().map(|rows| {
                    start += rows;
                    start
                }))
                .collect();
        }
    }
}

/// Each member's seconds over a chunk of steps, stored by each member at the chunk's end
/// and read by all after the barrier that follows. Two slots, by the chunk's parity: a
/// member stores the next chunk's only after every member has read these (the barrier
/// at the next chunk's start comes between).
pub(super) struct ChunkSeconds(Vec<[AtomicU64; 2]>);

impl ChunkSeconds {
    /// Slots for `members` members.
    pub(super) fn new(members: usize) -> Self {
        Self(
            (0..members)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect(),
        )
    }

    /// `member`'s `seconds` over chunk `chunk`.
    pub(super) fn store(&self, member: usize, chunk: usize, seconds: f64) {
        self.0[member][chunk % 2].store(seconds.to_bits(), Ordering::Relaxed);
    }

    /// Every member's seconds over chunk `chunk`, in member order.
    pub(super) fn of_chunk(&self, chunk: usize) -> Vec<f64> {
        self.0
            .iter()
            .map(|slots| f64::from_bits(slots[chunk % 2].load(Ordering::Relaxed)))
            .collect()
    }
}

/// Test hooks: while [`SKEWED`](test_skew::SKEWED) is set when a row split starts, the
/// timings reach [`RowShares::rebalance`] skewed ([`test_skew::skewed`]), so that rows
/// change hands at every chunk; [`MOVES`](test_skew::MOVES) counts the chunks at which
/// they did. A split reads [`SKEWED`](test_skew::SKEWED) once, before its members start:
/// every member must rebalance from the same timings, and a test that sets or clears the
/// flag while another test's split runs would otherwise give its members different shares
/// (rows run twice or not at all).
#[cfg(test)]
pub(crate) mod test_skew {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    pub(crate) static SKEWED: AtomicBool = AtomicBool::new(false);
    pub(crate) static MOVES: AtomicUsize = AtomicUsize::new(0);

    /// Whether a row split starting now runs skewed.
    pub(crate) fn now() -> bool {
        SKEWED.load(Ordering::Relaxed)
    }

    /// `seconds` as measured, or, for a split that runs skewed (`on`, read by [`now`] when
    /// it started), replaced at the start of the `chunk`-th chunk by fixed timings: 1 s
    /// for every member but `chunk % members`, 4 s for it. Fixed, not scaled: a loaded
    /// machine's real timings can differ by more than any factor, and the rows must
    /// change hands whatever the load.
    pub(crate) fn skewed(mut seconds: Vec<f64>, chunk: usize, on: bool) -> Vec<f64> {
        if on {
            let members = seconds.len();
            seconds.fill(1.0);
            seconds[chunk % members] = 4.0;
        }
        seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_even_split_covers_the_batch_once_in_member_order() {
        let shares = RowShares::even(16, 2, 3);
        assert_eq!((shares.rows(0), shares.rows(1)), (0..8, 8..16));
        let shares = RowShares::even(10, 3, 3);
        assert_eq!(
            (shares.rows(0), shares.rows(1), shares.rows(2)),
            (0..3, 3..7, 7..10)
        );
    }

    #[test]
    fn a_slower_member_gets_fewer_rows_in_proportion_to_its_pace() {
        let mut shares = RowShares::even(16, 2, 3);
        // Member 1 took twice as long for its 8 rows: 16 rows at paces 1 : 1/2 go 11 : 5
        // (11 and 10 row-times), not 10 : 6 (10 and 12).
        shares.rebalance(&[1.0, 2.0]);
        assert_eq!((shares.rows(0), shares.rows(1)), (0..11, 11..16));
        // Measured again at the new shares with the same paces: nothing to gain.
        let before = shares.clone();
        shares.rebalance(&[11.0 / 8.0, 10.0 / 8.0]);
        assert_eq!(shares, before);
    }

    #[test]
    fn every_member_keeps_its_minimum_of_rows() {
        let mut shares = RowShares::even(8, 2, 3);
        shares.rebalance(&[1.0, 100.0]);
        assert_eq!((shares.rows(0), shares.rows(1)), (0..5, 5..8));
    }

    #[test]
    fn small_differences_and_bad_timings_leave_the_rows_where_they_are() {
        let even = RowShares::even(16, 2, 3);
        for seconds in [
            [1.0, 1.04],
            [1.0, 0.0],
            [f64::NAN, 1.0],
            [1.0, f64::INFINITY],
            [-1.0, 1.0],
        ] {
            let mut shares = even.clone();
            shares.rebalance(&seconds);
            assert_eq!(shares, even, "{seconds:?}");
        }
        let mut shares = even.clone();
        shares.rebalance(&[1.0]);
        assert_eq!(shares, even, "one timing for two members");
    }

    #[test]
    fn rows_come_back_when_the_slow_member_recovers() {
        let mut shares = RowShares::even(16, 2, 3);
        shares.rebalance(&[1.0, 2.0]);
        assert_eq!(shares.rows(1), 11..16);
        // Now member 1 runs its 5 rows in the time member 0 runs 11 in: as fast a row.
        shares.rebalance(&[1.0, 5.0 / 11.0]);
        assert_eq!((shares.rows(0), shares.rows(1)), (0..8, 8..16));
    }
}
