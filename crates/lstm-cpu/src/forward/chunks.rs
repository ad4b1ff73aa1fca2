//! The chunks of a forward's input projection: how many steps a chunk holds, how its
//! rows group for the GEMM, and which of them each team member projects.

use core::ops::Range;

use crate::call::InputStrides;
use crate::gemm::{RowGroups, tile_calls};
use crate::team::aligned_part;

/// The rows of a chunk's input projection (`steps` steps of `batch` rows, gates `gate_cols`
/// values a row, sequence-major) as the GEMM's [`RowGroups`], with the distance between
/// rows within a group in the input and in the gates. Sequence-major input rows are one
/// group. Otherwise the groups are a batch row's steps or a step's batch rows: the one
/// with more rows per micro-kernel call ([`tile_calls`]), and of two alike, the one
/// whose rows are closer together in the input (a batch-first input's steps,
/// consecutive).
pub(super) fn chunk_row_groups(
    strides: InputStrides,
    steps: usize,
    batch: usize,
    gate_cols: usize,
) -> (RowGroups, usize, usize) {
    if strides.steps_follow_rows(batch) || steps == 1 {
        let one = RowGroups {
            rows: steps * batch,
            a_group: 0,
            c_group: 0,
        };
        return (one, strides.row, gate_cols);
    }
    // A tile never spans two groups: groups of 8 rows tile as 4 + 4 where the kernel
    // takes 6 (AVX2), and a 4-row tile runs slower than a 6-row one (`tile_rows`). So
    // the grouping with more rows per tile on average wins: `steps / calls(steps)`
    // against `batch / calls(batch)`.
    let (step_calls, row_calls) = (tile_calls(steps), tile_calls(batch));
    let by_batch_row = match (steps * row_calls).cmp(&(batch * step_calls)) {
        core::cmp::Ordering::Greater => true,
        core::cmp::Ordering::Less => false,
        core::cmp::Ordering::Equal => strides.step <= strides.row,
    };
    if by_batch_row {
        let groups = RowGroups {
            rows: steps,
            a_group: strides.row,
            c_group: gate_cols,
        };
        (groups, strides.step, batch * gate_cols)
    } else {
        let groups = RowGroups {
            rows: batch,
            a_group: strides.step,
            c_group: batch * gate_cols,
        };
        (groups, strides.row, gate_cols)
    }
}

/// Member `id`'s rows (of `rows`, in `groups`) of a chunk's projection split by rows over
/// `members`: whole row groups to every member where they share out evenly (a tile never
/// spans two groups: a group cut in two ends in a short tile on each side), else as even
/// a split as there is. Split into multiples of the micro-kernel's rows instead, 256 rows
/// went 132 + 124 on AVX2 (6 rows a call): one member waited 6 % of every chunk's
/// projection at the barrier.
pub(super) fn member_rows(
    groups: RowGroups,
    rows: usize,
    members: usize,
    id: usize,
) -> Range<usize> {
    let group = groups.rows.min(rows).max(1);
    let align = if (rows / group).is_multiple_of(members) {
        group
    } else {
        1
    };
    aligned_part(rows, members, align, id)
}

/// Time steps whose input projection is computed at once: enough rows for an efficient
/// GEMM, few enough that the pre-activations are still in cache when their steps run.
pub(super) fn chunk_steps(seq: usize, batch: usize) -> usize {
    (256 / batch).clamp(1, seq)
}

#[cfg(test)]
mod tests {
    // Named in full: the layout test reads `super::` as the parent folder's module.
    use crate::call::InputStrides;
    use crate::forward::chunks::{chunk_row_groups, member_rows};
    use crate::gemm::{RowGroups, tile_calls};

    /// The grouping with more rows per micro-kernel call wins, and of two alike the one
    /// whose rows lie closer together in the input; on every instruction set the CPU
    /// has (AVX2 calls take 6 rows, AVX-512 8).
    #[test]
    fn projection_groups_favour_fuller_calls() {
        crate::rerun_test_on_lower_instruction_sets(
            module_path!(),
            "projection_groups_favour_fuller_calls",
        );
        let per_call = |rows: usize| rows as f64 / tile_calls(rows) as f64;
        for (seq, steps, batch) in [
            (50, 8, 32),
            (100, 16, 16),
            (50, 32, 8),
            (9, 4, 64),
            (7, 7, 5),
        ] {
            let input = 24;
            let batch_first = InputStrides::batch_first(seq, input);
            let (groups, rs, ldc) = chunk_row_groups(batch_first, steps, batch, 4);
            let (chosen, other) = if groups.rows == steps {
                assert_eq!((rs, ldc), (input, batch * 4), "a batch row's steps");
                (steps, batch)
            } else {
                assert_eq!(groups.rows, batch, "{steps} steps of {batch} rows");
                assert_eq!((rs, ldc), (seq * input, 4), "a step's batch rows");
                (batch, steps)
            };
            assert!(
                per_call(chosen) >= per_call(other),
                "{steps} steps of {batch} rows: groups of {chosen} ({} a call) over {other} ({})",
                per_call(chosen),
                per_call(other)
            );
            if per_call(chosen) == per_call(other) {
                assert_eq!(chosen, steps, "a tie goes to the consecutive steps");
            }
        }
        // Sequence-major rows are one group.
        let (groups, _, _) = chunk_row_groups(InputStrides::seq_major(32, 24), 8, 32, 4);
        assert_eq!(groups.rows, 256);
        // Batch 32 in chunks of 8 steps: by batch row on AVX-512 (one 8-row call per
        // group), by step on AVX2 (8 rows would be 4 + 4 there).
        let (groups, _, _) = chunk_row_groups(InputStrides::batch_first(50, 24), 8, 32, 4);
        let expected = if crate::gemm::kernel_rows() == 8 {
            8
        } else {
            32
        };
        assert_eq!(groups.rows, expected);
    }

    /// A row-split projection hands out whole groups where they share out evenly, else
    /// an even split, and covers every row once.
    #[test]
    fn projection_rows_split_evenly_in_whole_groups() {
        let groups = |rows| RowGroups {
            rows,
            a_group: 0,
            c_group: 0,
        };
        let parts = |g: RowGroups, rows: usize, members: usize| {
            (0..members)
                .map(|id| member_rows(g, rows, members, id))
                .collect::<Vec<_>>()
        };
        // 8 groups of 32 on 2 members: 4 each.
        assert_eq!(parts(groups(32), 256, 2), [0..128, 128..256]);
        // One group (sequence-major) of 256: 128 each, not 132 + 124.
        assert_eq!(parts(groups(256), 256, 2), [0..128, 128..256]);
        // 3 groups of 32 on 2 members would go 64 + 32: rows split evenly instead.
        assert_eq!(parts(groups(32), 96, 2), [0..48, 48..96]);
        for (group, rows, members) in [(32, 256, 3), (5, 35, 2), (256, 100, 3), (1, 7, 4)] {
            let got = parts(groups(group), rows, members);
            let covered: Vec<usize> = got.iter().flat_map(|r| r.clone()).collect();
            assert_eq!(
                covered,
                (0..rows).collect::<Vec<_>>(),
                "{group} {rows} {members}"
            );
        }
    }
}
