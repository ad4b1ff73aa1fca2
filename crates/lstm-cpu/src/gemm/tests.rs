//! The GEMM against a direct product, on every instruction set this CPU has.

use crate::real::Real;
use crate::test_values::values;

use super::blocking::tile_rows;
use super::driver::{gemm, gemm_bias, gemm_bias_grouped};
use super::packing::PackedB;
use super::row_groups::RowGroups;
use super::threading::{Store, par_gemm};

fn reference(m: usize, k: usize, n: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    let mut c = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
        }
    }
    c
}

fn check<T: Real + Into<f64>>(m: usize, k: usize, n: usize, threads: usize, cast: fn(f64) -> T) {
    let a64 = values(m * k, 1);
    let b64 = values(k * n, 2);
    let expected = reference(m, k, n, &a64, &b64);
    let a: Vec<T> = a64.iter().map(|&v| cast(v)).collect();
    let b: Vec<T> = b64.iter().map(|&v| cast(v)).collect();
    // Pack B through its transpose's strides, as the kernel packs Wᵀ from W, in two
    // column ranges to exercise partial panels.
    let bt: Vec<T> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
    let split = n / 3;
    let packed = PackedB::pack(k, &[0..split, split..n], &bt, 1, k);
    // Gathered panels: two groups of interleaved ranges, each group's ranges packed
    // one after the other, so a panel can hold columns of two ranges.
    let (s1, s2, s3) = (n / 5, n / 2, n * 3 / 4);
    let gathered = PackedB::pack_groups(k, &[vec![0..s1, s2..s3], vec![s1..s2, s3..n]], &bt, 1, k);
    // Row-major A, and A read through transposed strides from Aᵀ.
    let at: Vec<T> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
    for ((src, rs, cs), b) in [(&a, k, 1), (&at, 1, m)]
        .into_iter()
        .flat_map(|a| [(a, &packed), (a, &gathered)])
    {
        let mut c = vec![cast(1.0); m * n];
        // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
        unsafe {
            par_gemm(
                threads,
                Store::Add,
                m,
                src.as_ptr(),
                rs,
                cs,
                b,
                c.as_mut_ptr(),
                n,
            )
        };
        let worst = c
            .iter()
            .zip(&expected)
            .map(|(&got, &want)| (got.into() - 1.0 - want).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-3, "{m}x{k}x{n} threads {threads}: error {worst}");
    }
}

#[test]
fn matches_reference_on_awkward_shapes() {
    for (m, k, n) in [
        (1, 1, 1),
        (1, 37, 50),
        (1, 600, 70),
        (7, 300, 33),
        (13, 5, 17),
        (200, 520, 40),
    ] {
        check::<f32>(m, k, n, 1, |v| v as f32);
        check::<f64>(m, k, n, 1, |v| v);
    }
    check::<f32>(400, 300, 64, 2, |v| v as f32);
    check::<f64>(400, 300, 64, 2, |v| v);
}

/// Products of 2-4 rows, which the micro-kernel computes over two panels at once
/// (`pair_rows`) or, 3 rows on AVX2, three (`triple_rows`); of full calls and two
/// rows (8, 14, 20), whose last two rows form a paired block of their own on AVX2;
/// and of full calls and a 3- or 4-row call (9, 10, 16), which stay in the panel loop;
/// on every instruction set the CPU has: a number of panels that leaves one or two
/// alone, partial and gathered panels, several depth blocks, and a `B` large enough
/// to be prefetched block by block (where AVX2 pairs the last two rows of 8, 14 and 20
/// inside the panel loop instead, and runs no three-panel call).
/// One-row products, which run their whole depth in one block (unless `A` is read
/// down its columns over several panels, then copied block by block): one depth block
/// and several, one panel and many, a `B` large enough to be prefetched, `A`'s row
/// contiguous and with its values `cs` apart; on every instruction set the CPU has.
#[test]
fn one_row_products_match_reference_at_any_depth() {
    crate::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "one_row_products_match_reference_at_any_depth",
    );
    // 259 and 1027: the last block's last k's run outside the four banks' loop.
    for (k, n) in [
        (40, 130),
        (259, 64),
        (300, 16),
        (600, 97),
        (600, 520),
        (1027, 70),
        (1100, 70),
    ] {
        check::<f32>(1, k, n, 1, |v| v as f32);
        check::<f64>(1, k, n, 1, |v| v);
        let bt: Vec<f64> = values(n * k, 6);
        let packed = PackedB::pack_all(k, n, &bt, 1, k);
        for cs in [1, 3] {
            let a: Vec<f64> = values(k * cs, 8);
            let expected: Vec<f64> = (0..n)
                .map(|j| (0..k).map(|p| a[p * cs] * bt[j * k + p]).sum())
                .collect();
            let mut c = vec![0.0; n];
            // SAFETY: A holds `k` values `cs` apart, C one row of `n`, B `k × n` packed.
            unsafe { gemm(1, a.as_ptr(), 1, cs, &packed, c.as_mut_ptr(), n) };
            for (j, (got, want)) in c.iter().zip(&expected).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-9 * (1.0 + want.abs()),
                    "1x{k}x{n}, A's values {cs} apart, column {j}: {got} vs {want}"
                );
            }
        }
    }
}

/// A one-row product 4096 deep (the backward's `dz · W_hh` at H = 1024) sums its banks
/// into the row every 256 k's: on constant inputs, where every rounding leans the same
/// way, within 1e-6 relative of the exact sum (5e-7 at most here). Banks that each sum
/// a quarter of the whole depth are off by 5.8e-6 to 1.35e-5 on these values.
#[test]
fn one_row_products_sum_deep_rows_in_blocks() {
    crate::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "one_row_products_sum_deep_rows_in_blocks",
    );
    let (k, n) = (4096, 40);
    for (a_value, b_value) in [
        (0.1f32, 0.1f32),
        (0.3, 0.7),
        (1.0 / 3.0, 1.0 / 3.0),
        (0.7, 0.9),
    ] {
        let a = vec![a_value; k];
        let bt = vec![b_value; n * k];
        let packed = PackedB::pack_all(k, n, &bt, 1, k);
        let mut c = vec![0f32; n];
        // SAFETY: A holds one row of `k` values, C one row of `n`, B `k × n` packed.
        unsafe { gemm(1, a.as_ptr(), k, 1, &packed, c.as_mut_ptr(), n) };
        let exact = f64::from(a_value) * f64::from(b_value) * k as f64;
        for (j, got) in c.iter().enumerate() {
            let error = (f64::from(*got) - exact).abs() / exact;
            assert!(
                error <= 1e-6,
                "{a_value} x {b_value}, 4096 deep, column {j}: relative error {error:e}"
            );
        }
    }
}

#[test]
fn matches_reference_on_few_rows_over_paired_panels() {
    crate::rerun_test_on_lower_instruction_sets(
        module_path!(),
        "matches_reference_on_few_rows_over_paired_panels",
    );
    for m in [2, 3, 4, 5, 8, 9, 10, 14, 16, 20] {
        for (k, n) in [(40, 130), (300, 97), (257, 64), (600, 520)] {
            check::<f32>(m, k, n, 1, |v| v as f32);
            check::<f64>(m, k, n, 1, |v| v);
        }
    }
}

/// Packing on a team writes the same panels as packing on one thread: both copies
/// (rows of `B` contiguous) and transposes, with a partial last panel, above the
/// size where the second thread joins.
#[test]
fn packing_on_a_team_equals_packing_alone() {
    for (depth, cols, rs, cs) in [(300, 400, 400, 1), (300, 400, 1, 300), (700, 150, 150, 1)] {
        let src: Vec<f32> = values(depth * cols, 7).iter().map(|&v| v as f32).collect();
        let alone = PackedB::pack_all(depth, cols, &src, rs, cs);
        assert!(alone.bytes() > 256 << 10, "large enough for two threads");
        for threads in [2, 3] {
            let team = PackedB::pack_all_on(threads, depth, cols, &src, rs, cs);
            assert_eq!(team.panels.len(), alone.panels.len());
            let bits = |b: &PackedB<f32>| b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&team),
                bits(&alone),
                "{depth}x{cols} threads {threads}"
            );
        }
    }
}

/// `Store::Overwrite` stores `A·B` over whatever C held (NaN here), bit for bit what
/// adding to zeros gives: one depth block or several, partial panels, one thread or
/// two, and no depth at all.
#[test]
fn overwriting_products_equal_zeroed_then_added() {
    for (m, k, n, threads) in [
        (7, 300, 33, 1),
        (400, 600, 70, 2),
        (1, 37, 50, 2),
        (5, 0, 40, 1),
    ] {
        let a: Vec<f32> = values(m * k, 8).iter().map(|&v| v as f32).collect();
        let bt: Vec<f32> = values(n * k, 9).iter().map(|&v| v as f32).collect();
        let packed = PackedB::pack(k, &[0..n / 3, n / 3..n], &bt, 1, k);
        let run = |store, start: f32| {
            let mut c = vec![start; m * n];
            // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
            unsafe {
                par_gemm(
                    threads,
                    store,
                    m,
                    a.as_ptr(),
                    k,
                    1,
                    &packed,
                    c.as_mut_ptr(),
                    n,
                )
            };
            c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        };
        assert_eq!(
            run(Store::Overwrite, f32::NAN),
            run(Store::Add, 0.0),
            "{m}x{k}x{n}"
        );
    }
}

#[test]
fn rows_are_tiled_in_full_calls_and_two_even_last_ones() {
    for max in [6, 8] {
        for rows in 1..=40 {
            let mut tiles = Vec::new();
            let mut left = rows;
            while left > 0 {
                let r = tile_rows(left, max);
                assert!((1..=max).contains(&r), "{rows} rows, max {max}: tile {r}");
                tiles.push(r);
                left -= r;
            }
            assert_eq!(tiles.len(), rows.div_ceil(max), "{rows} rows, max {max}");
            // All full but the last two, which differ by one row at most unless the
            // last is at most two short of full.
            let last_two = tiles.len().saturating_sub(2);
            assert!(
                tiles[..last_two].iter().all(|&r| r == max),
                "{rows}: {tiles:?}"
            );
            let tail = &tiles[last_two..];
            let (least, most) = (tail.iter().min().unwrap(), tail.iter().max().unwrap());
            assert!(
                most - least <= 1 || least + 2 >= max,
                "{rows}, {max}: {tiles:?}"
            );
        }
    }
    let tiling = |mut left: usize, max: usize| {
        let mut tiles = Vec::new();
        while left > 0 {
            tiles.push(tile_rows(left, max));
            left -= tiles.last().unwrap();
        }
        tiles
    };
    assert_eq!(tiling(8, 6), [4, 4]);
    assert_eq!(tiling(16, 6), [6, 6, 4]);
    assert_eq!(tiling(32, 6), [6, 6, 6, 6, 4, 4]);
    assert_eq!(tiling(11, 6), [6, 5]);
    assert_eq!(tiling(10, 8), [5, 5]);
    assert_eq!(tiling(20, 8), [8, 6, 6]);
}

/// `gemm_bias` stores `bias + A·B` over whatever C held, bit for bit what copying the
/// bias into C and accumulating with `gemm` gives: one depth block or several, full
/// and partial panels, one row or many, and no depth at all.
fn check_bias<T: Real + Into<f64>>(m: usize, k: usize, n: usize, cast: fn(f64) -> T) {
    let a: Vec<T> = values(m * k, 3).into_iter().map(cast).collect();
    let bt: Vec<T> = values(n * k, 4).into_iter().map(cast).collect();
    let bias: Vec<T> = values(n, 5).into_iter().map(cast).collect();
    let split = n / 3;
    let packed = PackedB::pack(k, &[0..split, split..n], &bt, 1, k);
    let gathered = PackedB::pack_groups(k, &[vec![0..split / 2, split..n - 3]], &bt, 1, k);
    let rest = PackedB::pack_groups(k, &[vec![split / 2..split, n - 3..n]], &bt, 1, k);
    let mut expected: Vec<T> = (0..m * n).map(|i| bias[i % n]).collect();
    // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
    unsafe { gemm(m, a.as_ptr(), k, 1, &packed, expected.as_mut_ptr(), n) };
    let bits = |v: &[T]| v.iter().map(|&x| x.into().to_bits()).collect::<Vec<_>>();
    let mut got = vec![cast(f64::NAN); m * n];
    // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
    unsafe { gemm_bias(m, a.as_ptr(), k, 1, &packed, &bias, got.as_mut_ptr(), n) };
    assert_eq!(bits(&got), bits(&expected), "{m}x{k}x{n}");
    // Gathered panels store each piece where it belongs, and only there.
    let mut got = vec![cast(f64::NAN); m * n];
    for b in [&gathered, &rest] {
        // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
        unsafe { gemm_bias(m, a.as_ptr(), k, 1, b, &bias, got.as_mut_ptr(), n) };
    }
    assert_eq!(bits(&got), bits(&expected), "{m}x{k}x{n} gathered");
}

/// Rows in groups (a batch-first input's rows: a group's rows consecutive in `A`,
/// with a gap between groups; interleaved in `C`) give what the plain product gives
/// on the same rows gathered, for the whole range or part of it, and
/// write nothing outside their rows. Groups of one row, of fewer rows than a tile, of
/// several tiles; one depth block or two.
#[test]
fn grouped_rows_equal_the_rows_gathered() {
    for (groups, per_group, k, n) in [(3, 16, 300, 70), (4, 5, 40, 33), (6, 1, 17, 40)] {
        let rows = groups * per_group;
        let (a_group, c_group, ldc) = ((per_group + 1) * k, n, groups * n);
        let stored: Vec<f32> = values(groups * a_group, 11)
            .iter()
            .map(|&v| v as f32)
            .collect();
        let bt: Vec<f32> = values(n * k, 12).iter().map(|&v| v as f32).collect();
        let bias: Vec<f32> = values(n, 13).iter().map(|&v| v as f32).collect();
        let packed = PackedB::pack(k, &[0..n / 2, n / 2..n], &bt, 1, k);
        let layout = RowGroups {
            rows: per_group,
            a_group,
            c_group,
        };
        // Row i: group i / per_group, row i % per_group of it.
        let a_at = |i: usize| (i / per_group) * a_group + (i % per_group) * k;
        let c_at = |i: usize| (i % per_group) * ldc + (i / per_group) * c_group;
        let gathered: Vec<f32> = (0..rows)
            .flat_map(|i| stored[a_at(i)..a_at(i) + k].iter().copied())
            .collect();
        let mut plain = vec![f32::NAN; rows * n];
        // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
        unsafe {
            gemm_bias(
                rows,
                gathered.as_ptr(),
                k,
                1,
                &packed,
                &bias,
                plain.as_mut_ptr(),
                n,
            )
        };
        for range in [0..rows, 1..rows - 1, rows / 2..rows / 2 + 1] {
            let mut got = vec![f32::NAN; per_group * ldc];
            let at = got.as_mut_ptr();
            // SAFETY: the test's A, B and C are vectors of exactly the shapes passed.
            unsafe {
                gemm_bias_grouped(
                    range.clone(),
                    layout,
                    stored.as_ptr(),
                    k,
                    1,
                    &packed,
                    &bias,
                    at,
                    ldc,
                )
            };
            for i in 0..rows {
                let row = &got[c_at(i)..c_at(i) + n];
                if range.contains(&i) {
                    let want = &plain[i * n..(i + 1) * n];
                    // A tile of other rows may sum in another order (the one-row
                    // kernel splits its depth over several accumulators).
                    for (g, w) in row.iter().zip(want) {
                        assert!(
                            (g - w).abs() <= 1e-5 * (1.0 + w.abs()),
                            "{groups}x{per_group} {range:?} row {i}: {g} vs {w}"
                        );
                    }
                } else {
                    assert!(
                        row.iter().all(|v| v.is_nan()),
                        "row {i} outside {range:?} written"
                    );
                }
            }
        }
    }
}

#[test]
fn bias_initialised_products_equal_bias_copied_then_accumulated() {
    for (m, k, n) in [
        (1, 37, 50),
        (1, 600, 70),
        (1, 515, 40),
        (9, 300, 70),
        (16, 256, 64),
        (3, 600, 33),
        (5, 0, 40),
    ] {
        check_bias::<f32>(m, k, n, |v| v as f32);
        check_bias::<f64>(m, k, n, |v| v);
    }
}
