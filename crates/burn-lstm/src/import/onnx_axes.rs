//! ONNX's index rules, shared by the graph readers: an axis counted from the back, a
//! bound clamped to a dimension (`Shape`, `Slice`), a permutation of axes
//! (`Transpose`).

/// The axis `axis` of a tensor of rank `rank`, counted from the front (a negative one
/// counts from the back); `None` out of range.
pub(crate) fn axis(axis: i64, rank: usize) -> Option<usize> {
    let rank_i = i64::try_from(rank).ok()?;
    let axis = if axis < 0 { axis + rank_i } else { axis };
    usize::try_from(axis).ok().filter(|&a| a < rank)
}

/// A bound on a dimension of `len` (`Shape`'s start and end, `Slice`'s): negative from
/// the end, clamped to `0..=len`.
pub(crate) fn clamp(index: i64, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let index = if index < 0 {
        index.saturating_add(len_i)
    } else {
        index
    };
    usize::try_from(index.clamp(0, len_i)).unwrap_or(len)
}

/// `perm` as axes when it is a permutation of `0..rank`.
pub(crate) fn permutation(perm: &[i64], rank: usize) -> Option<Vec<usize>> {
    let mut seen = vec![false; rank];
    let axes: Vec<usize> = perm
        .iter()
        .map(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < rank && !std::mem::replace(&mut seen[p], true))
        })
        .collect::<Option<_>>()?;
    (axes.len() == rank).then_some(axes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_count_from_the_end_and_clamp() {
        assert_eq!(clamp(-1, 4), 3);
        assert_eq!(clamp(-9, 4), 0);
        assert_eq!(clamp(9, 4), 4);
        assert_eq!(clamp(i64::MIN, 4), 0);
        assert_eq!(clamp(i64::MAX, 4), 4);
        assert_eq!(axis(-1, 3), Some(2));
        assert_eq!(
            (axis(3, 3), axis(-4, 3), axis(i64::MIN, 3)),
            (None, None, None)
        );
    }

    #[test]
    fn permutations_name_every_axis_once() {
        assert_eq!(permutation(&[1, 0, 2], 3), Some(vec![1, 0, 2]));
        for perm in [
            &[0, 0, 2][..],
            &[0, 1],
            &[0, 1, 3],
            &[-1, 0, 1],
            &[0, 1, 2, 3],
        ] {
            assert_eq!(permutation(perm, 3), None, "{perm:?}");
        }
    }
}
