//! Rows of `A` and `C` laid out in evenly spaced groups ([`RowGroups`]).

/// Rows of `A` and `C` in equal groups, each group's rows evenly spaced: row `i` is row
/// `i % rows` of group `i / rows`, at `i / rows * a_group + i % rows * rs` in `A` and
/// `i / rows * c_group + i % rows * ldc` in `C`. The input projection of a batch-first
/// input reads it in place this way: a group is one batch row's steps of a chunk
/// (consecutive in the input, `batch` rows apart in the gates), where sequence-major
/// rows would need a copy of the whole input first (`forward/chunks.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowGroups {
    /// Rows in each group (at least 1).
    pub rows: usize,
    /// Distance in `A` from a group's first row to the next group's.
    pub a_group: usize,
    /// Distance in `C` from a group's first row to the next group's.
    pub c_group: usize,
}

impl RowGroups {
    /// Every row in one group: `A`'s rows `rs` apart, `C`'s `ldc` apart.
    pub(super) const ONE: Self = Self {
        rows: usize::MAX,
        a_group: 0,
        c_group: 0,
    };

    /// Offset of row `i` from row 0, where rows within a group are `stride` apart and
    /// groups `group` apart.
    pub(super) fn offset(&self, i: usize, stride: usize, group: usize) -> usize {
        (i / self.rows) * group + (i % self.rows) * stride
    }
}
