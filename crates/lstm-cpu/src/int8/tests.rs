//! The quantizers on hand-made matrices, the product against exact sums and the f32
//! product, and every dot kernel against the scalar one.

use crate::int8::dot::DotKernel;
use crate::int8::matmul::matmul_int8_on;
use crate::int8::panels::Panels;
use crate::int8::tile::Output;
use crate::int8::tile::{TILE_SUMS, Tile};
use crate::int8::{MAX_DEPTH, QuantLevels, QuantizedActivations, QuantizedMatrix, matmul_int8};

#[test]
fn weights_quantize_per_row_symmetric_rounding_half_away_from_zero() {
    // Scales of exactly 1 (a row's largest magnitude is the range's end): the ties
    // are exact.
    let w = [
        127.0f32, -63.5, 31.75, 0.0, /* row 2 */ 0.0, 0.0, 0.0, 0.0,
    ];
    let q = QuantizedMatrix::quantize(&w, 2, 4, QuantLevels::Full).unwrap();
    assert_eq!(q.to_row_major(), [127, -64, 32, 0, 0, 0, 0, 0]);
    assert_eq!(q.scales(), &[1.0, 0.0]);
    assert_eq!(q.zero_point_sums(), &[128 * 95, 0]);
    assert_eq!(q.dequantize()[4..], [0.0; 4], "a row of zeros stays zeros");
    let w = [63.0f32, -31.5, 15.75, 0.0];
    let reduced = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Reduced).unwrap();
    assert_eq!(reduced.to_row_major(), [63, -32, 16, 0]);
    assert_eq!(reduced.scales(), &[1.0]);
    // The same row at the full range: scale 63 / 127.
    let full = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Full).unwrap();
    assert_eq!(full.to_row_major(), [127, -64, 32, 0]);
}

#[test]
fn quantization_moves_each_value_by_at_most_half_a_step() {
    let (rows, cols) = (5, 37);
    let w: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1 + i % 3) as f32)
        .collect();
    for levels in [QuantLevels::Full, QuantLevels::Reduced] {
        let q = QuantizedMatrix::quantize(&w, rows, cols, levels).unwrap();
        for (n, (row, back)) in w.chunks(cols).zip(q.dequantize().chunks(cols)).enumerate() {
            let step = q.scales()[n];
            for (v, b) in row.iter().zip(back) {
                assert!(
                    (v - b).abs() <= step / 2.0 * 1.0001,
                    "{v} -> {b}, step {step}"
                );
            }
        }
    }
    let x = QuantizedActivations::quantize(&w, rows, cols).unwrap();
    for (r, (row, back)) in w.chunks(cols).zip(x.dequantize().chunks(cols)).enumerate() {
        for (v, b) in row.iter().zip(back) {
            assert!((v - b).abs() <= x.scales()[r] / 2.0 * 1.0001);
        }
    }
}

#[test]
fn extreme_and_bad_values() {
    let w = [f32::MAX, -f32::MAX, f32::MIN_POSITIVE, 1e-45];
    let q = QuantizedMatrix::quantize(&w, 1, 4, QuantLevels::Full).unwrap();
    assert_eq!(q.to_row_major(), [127, -127, 0, 0]);
    let x = QuantizedActivations::quantize(&w, 1, 4).unwrap();
    assert_eq!(x.values(), &[255, 1, 128, 128]);
    let err = QuantizedMatrix::quantize(&[1.0, f32::NAN], 1, 2, QuantLevels::Full).unwrap_err();
    assert_eq!(err.argument, "w");
    assert!(err.actual.contains("NaN at index 1"), "{err}");
    let err = QuantizedActivations::quantize(&[1.0; 5], 2, 3).unwrap_err();
    assert_eq!((err.argument, err.actual.as_str()), ("x", "5 values"));
    let err = QuantizedActivations::quantize(&[], 0, MAX_DEPTH + 1).unwrap_err();
    assert_eq!(err.argument, "cols");
}

/// Shapes whose values cannot be laid out are errors, not products that panic later: a
/// depth of 0 (no scales were made for its rows) and `rows · cols` past `usize` (which
/// wrapped to an empty matrix).
#[test]
fn no_depth_and_overflowing_shapes_are_errors() {
    let err = QuantizedMatrix::quantize(&[], 5, 0, QuantLevels::Full).unwrap_err();
    assert_eq!((err.argument, err.actual.as_str()), ("cols", "0"));
    let err = QuantizedActivations::quantize(&[], 1, 0).unwrap_err();
    assert_eq!(err.argument, "cols");
    let err = QuantizedMatrix::quantize(&[], 1 << 60, 1 << 14, QuantLevels::Full).unwrap_err();
    assert_eq!(err.argument, "rows", "{err}");
    let err = QuantizedActivations::quantize(&[], 1 << 60, 1 << 14).unwrap_err();
    assert_eq!(err.argument, "rows", "{err}");
}

/// The integer sum against a direct `i64` sum of `(a − 128) · w`, at the extremes
/// of both ranges and a depth where `Σ a · w` nears `i32`'s bound.
#[test]
fn integer_sums_are_exact_at_the_extremes() {
    let depth = MAX_DEPTH;
    for (a_value, w_value) in [(1.0f32, 1.0f32), (-1.0, 1.0), (1.0, -1.0), (-1.0, -1.0)] {
        let x = QuantizedActivations::quantize(&vec![a_value; depth], 1, depth).unwrap();
        let w =
            QuantizedMatrix::quantize(&vec![w_value; depth], 1, depth, QuantLevels::Full).unwrap();
        let mut y = [0.0f32];
        matmul_int8(&x, &w, None, &mut y).unwrap();
        let exact: i64 = x
            .values()
            .iter()
            .zip(w.to_row_major())
            .map(|(&a, v)| (i64::from(a) - 128) * i64::from(v))
            .sum();
        assert_eq!(exact.abs(), 127 * 127 * depth as i64);
        let expected = x.scales()[0] * w.scales()[0] * exact as f32;
        assert_eq!(y[0], expected, "a {a_value}, w {w_value}");
        assert!((y[0] - a_value * w_value * depth as f32).abs() < 1e-3 * depth as f32);
    }
}

/// Against the f32 product: within the bound the two roundings allow,
/// `Σ_k |x_k| δw + |w_k| δx + δx δw` (δ: half a step of each).
#[test]
fn products_are_within_the_rounding_bound_of_the_f32_product() {
    let (rows, depth, outs) = (3, 50, 4);
    let x: Vec<f32> = (0..rows * depth)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 13.0)
        .collect();
    let w: Vec<f32> = (0..outs * depth)
        .map(|i| ((i * 53 % 97) as f32 - 48.0) / 40.0)
        .collect();
    let bias = [0.5f32, -1.0, 0.0, 2.0];
    let qx = QuantizedActivations::quantize(&x, rows, depth).unwrap();
    let qw = QuantizedMatrix::quantize(&w, outs, depth, QuantLevels::Full).unwrap();
    let mut y = vec![0.0f32; rows * outs];
    matmul_int8(&qx, &qw, Some(&bias), &mut y).unwrap();
    for r in 0..rows {
        for n in 0..outs {
            let (xr, wn) = (&x[r * depth..][..depth], &w[n * depth..][..depth]);
            let exact: f64 = xr
                .iter()
                .zip(wn)
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum::<f64>()
                + f64::from(bias[n]);
            let (dx, dw) = (
                f64::from(qx.scales()[r]) / 2.0,
                f64::from(qw.scales()[n]) / 2.0,
            );
            let bound: f64 = xr
                .iter()
                .zip(wn)
                .map(|(&a, &b)| f64::from(a.abs()) * dw + f64::from(b.abs()) * dx + dx * dw)
                .sum();
            let err = (f64::from(y[r * outs + n]) - exact).abs();
            assert!(err <= bound * 1.001 + 1e-5, "({r}, {n}): {err} > {bound}");
            assert!(
                err > 0.0 || bound == 0.0,
                "quantization changed nothing at ({r}, {n})"
            );
        }
    }
    let err = matmul_int8(&qx, &qw, Some(&bias[..3]), &mut y).unwrap_err();
    assert_eq!((err.argument, err.actual.as_str()), ("bias", "3 values"));
    let wrong = QuantizedMatrix::quantize(&w[..outs * 10], outs, 10, QuantLevels::Full).unwrap();
    assert_eq!(
        matmul_int8(&qx, &wrong, None, &mut y).unwrap_err().argument,
        "w"
    );
    assert_eq!(
        matmul_int8(&qx, &qw, None, &mut y[..5])
            .unwrap_err()
            .argument,
        "out"
    );
}

/// The raw sums of every row of `a` (`depth` each) against the `n × depth` weights `w`,
/// tile by tile through `kernel` on `w` packed in its panels.
fn tiled_sums(kernel: DotKernel, a: &[u8], depth: usize, w: &[i8], n: usize) -> Vec<i64> {
    let panels = Panels::pack(w, n, depth, kernel.panel_rows());
    let rows = a.len() / depth;
    let mut all = vec![0i64; rows * n];
    let mut sums = [i32::MIN; TILE_SUMS];
    for first_panel in (0..panels.count()).step_by(kernel.tile_panels()) {
        let tile_panels = kernel.tile_panels().min(panels.count() - first_panel);
        let width = tile_panels * panels.panel_rows();
        for first_row in (0..rows).step_by(kernel.tile_rows()) {
            let tile_rows = kernel.tile_rows().min(rows - first_row);
            let tile = Tile {
                a: &a[first_row * depth..][..tile_rows * depth],
                rows: tile_rows,
                w: &panels.bytes()[first_panel * panels.panel_len()..],
                panels: tile_panels,
                depth,
                panel_len: panels.panel_len(),
            };
            kernel.sums(&tile, &mut sums);
            for r in 0..tile_rows {
                for j in 0..width.min(n - first_panel * panels.panel_rows()) {
                    let col = first_panel * panels.panel_rows() + j;
                    all[(first_row + r) * n + col] = i64::from(sums[r * width + j]);
                }
            }
        }
    }
    all
}

/// `Σ_k a[r, k] · w[n, k]` in `i64`, row-major `rows × n`.
fn direct_sums(a: &[u8], depth: usize, w: &[i8]) -> Vec<i64> {
    a.chunks(depth)
        .flat_map(|row| {
            w.chunks(depth).map(move |weights| {
                row.iter()
                    .zip(weights)
                    .map(|(&x, &v)| i64::from(x) * i64::from(v))
                    .sum::<i64>()
            })
        })
        .collect()
}

/// Every kernel this CPU runs gives the exact sums, to the last bit, on weights of its
/// range: depths around the groups of four and the vector widths (tails of every
/// kind), output counts around the panels and tiles, activation rows around the tile's,
/// and the extremes of both ranges at the deepest product allowed.
#[test]
fn every_dot_kernel_gives_the_exact_sums() {
    let kernels = DotKernel::available();
    assert_eq!(kernels[0], DotKernel::Scalar);
    eprintln!("int8 dot kernels checked: {kernels:?}");
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for &kernel in &kernels {
        let max = kernel.levels().max();
        let mut cases: Vec<(usize, usize, Vec<u8>, Vec<i8>)> = Vec::new();
        for depth in [1, 3, 4, 5, 31, 32, 33, 64, 65, 127, 200] {
            for (rows, n) in [
                (1, 1),
                (1, 64),
                (2, 9),
                (3, 16),
                (4, 17),
                (5, 40),
                (6, 24),
                (9, 65),
                (13, 17),
            ] {
                let a = (0..rows * depth).map(|_| next() as u8).collect();
                let w = (0..n * depth)
                    .map(|_| ((next() % (2 * max as u64 + 1)) as i32 - max) as i8)
                    .collect();
                cases.push((depth, n, a, w));
            }
        }
        for (a, v) in [(255u8, max), (255, -max), (0, max), (1, -max)] {
            cases.push((
                MAX_DEPTH,
                17,
                vec![a; 5 * MAX_DEPTH],
                vec![v as i8; 17 * MAX_DEPTH],
            ));
        }
        for (depth, n, a, w) in &cases {
            assert_eq!(
                tiled_sums(kernel, a, *depth, w, *n),
                direct_sums(a, *depth, w),
                "{kernel:?}, depth {depth}, {} rows, {n} outputs",
                a.len() / depth
            );
        }
    }
    for levels in [QuantLevels::Full, QuantLevels::Reduced] {
        let name = crate::int8::kernel_name(levels);
        assert!(
            kernels
                .iter()
                .any(|k| k.name() == name && k.levels().max() >= levels.max()),
            "{name} runs weights of {levels:?} exactly"
        );
    }
}

#[test]
fn a_products_rows_go_in_tiles_of_the_kernel_s_sizes_once_each() {
    let kernels = [
        DotKernel::Scalar,
        DotKernel::Avx2,
        DotKernel::AvxVnni,
        DotKernel::Avx512Vnni,
    ];
    for kernel in kernels {
        assert_eq!(kernel.row_tiles(0, 256).iter().count(), 0, "{kernel:?}");
        let most = kernel.tile_rows();
        for rows in 1..=300 {
            let tiles: Vec<_> = kernel.row_tiles(rows, 256).iter().collect();
            let what = format!("{kernel:?}, {rows} rows: {tiles:?}");
            assert_eq!(tiles.first().map(|t| t.start), Some(0), "{what}");
            assert_eq!(tiles.last().map(|t| t.end), Some(rows), "{what}");
            assert!(tiles.windows(2).all(|t| t[0].end == t[1].start), "{what}");
            assert!(
                tiles.iter().all(|t| (1..=most).contains(&t.len())),
                "{what}"
            );
            // AVX-VNNI's 4 rows (of 128 inputs or more) go in 3 and 1.
            let four = kernel == DotKernel::AvxVnni && rows == 4;
            assert_eq!(
                tiles.len(),
                rows.div_ceil(most) + usize::from(four),
                "{what}"
            );
            if kernel == DotKernel::AvxVnni && rows > most {
                // No latency-bound tile of 4 or 2 rows: 8 rows go in 5 and 3.
                assert!(tiles.iter().all(|t| ![2, 4].contains(&t.len())), "{what}");
            } else if !four {
                // Evened out: 10 rows in tiles of 4 go in 4, 3 and 3.
                let (min, max) = tiles
                    .iter()
                    .fold((most, 0), |(lo, hi), t| (lo.min(t.len()), hi.max(t.len())));
                assert!(max - min <= 1, "{what}");
            }
        }
    }
    let avx_vnni = |rows, depth| {
        DotKernel::AvxVnni
            .row_tiles(rows, depth)
            .iter()
            .map(|t| t.len())
            .collect::<Vec<_>>()
    };
    assert_eq!(avx_vnni(8, 256), [5, 3]);
    assert_eq!(avx_vnni(16, 256), [6, 5, 5]);
    assert_eq!(avx_vnni(4, 256), [3, 1]);
    assert_eq!(avx_vnni(4, 96), [4]);
}

/// The whole product on every kernel's panels, on one thread and on a team, equals the
/// scalar kernel's to the last bit: the same sums, then the same f32 operations.
#[test]
fn every_kernel_and_team_split_gives_the_scalar_product() {
    // One row and several: tiles of every size, finished in the kernel's registers (the
    // vector kernels) or through the epilogue loop (the scalar reference); 8 and 10 rows
    // in AVX-VNNI's tails of 5 and 3, and of 5 and 5 rows, 4 rows in its 3 and 1.
    for rows in [1, 4, 7, 8, 10] {
        product_on_every_kernel(rows);
    }
}

fn product_on_every_kernel(rows: usize) {
    let (depth, outs) = (301, 203);
    let f32s = |len, seed| -> Vec<f32> {
        let values = crate::test_values::values(len, seed);
        values.into_iter().map(|v| v as f32).collect()
    };
    let (x, w, bias) = (
        f32s(rows * depth, 11),
        f32s(outs * depth, 12),
        f32s(outs, 13),
    );
    // What `Output::Add` adds to (the gates an LSTM's recurrent product goes into).
    let before = f32s(rows * outs, 14);
    let qx = QuantizedActivations::quantize(&x, rows, depth).unwrap();
    for levels in [QuantLevels::Full, QuantLevels::Reduced] {
        let product = |kernel: DotKernel, threads: usize, output: Output<'_>| {
            let qw = QuantizedMatrix::quantize_for(kernel, &w, outs, depth, levels).unwrap();
            let mut y = match output {
                Output::Add => before.clone(),
                Output::Set(_) => vec![f32::NAN; rows * outs],
            };
            matmul_int8_on(threads, qx.all_rows(), &qw, output, &mut y).unwrap();
            y
        };
        for output in [Output::Set(None), Output::Set(Some(&bias[..])), Output::Add] {
            let reference = product(DotKernel::Scalar, 1, output);
            assert!(reference.iter().all(|v| v.is_finite()));
            for kernel in DotKernel::available() {
                if kernel.levels().max() < levels.max() {
                    continue;
                }
                for threads in [1, 2, 3] {
                    let y = product(kernel, threads, output);
                    let same = y
                        .iter()
                        .zip(&reference)
                        .all(|(a, b)| a.to_bits() == b.to_bits());
                    let mode = match output {
                        Output::Set(bias) => format!("set, bias {}", bias.is_some()),
                        Output::Add => "add".into(),
                    };
                    assert!(
                        same,
                        "{kernel:?}, {rows} rows, {threads} threads, {levels:?}, {mode}"
                    );
                }
            }
        }
    }
}

/// Activations quantized by a team equal those quantized by one thread, and a
/// non-finite value is named whichever path runs.
#[test]
fn activations_quantize_the_same_on_any_number_of_threads() {
    let (rows, cols) = (301, 130);
    let x: Vec<f32> = crate::test_values::values(rows * cols, 21)
        .into_iter()
        .map(|v| v as f32 * 3.0)
        .collect();
    let one = QuantizedActivations::quantize(&x, rows, cols).unwrap();
    for threads in [1, 2, 3] {
        let team = QuantizedActivations::quantize_on(threads, &x, rows, cols).unwrap();
        assert_eq!(team, one, "{threads} threads");
    }
    let mut bad = x.clone();
    bad[rows * cols - 1] = f32::INFINITY;
    let err = QuantizedActivations::quantize_on(2, &bad, rows, cols).unwrap_err();
    assert_eq!(err.argument, "x");
    assert!(
        err.actual
            .contains(&format!("at index {}", rows * cols - 1)),
        "{err}"
    );
}

/// The vectorized rounding equals `f32::round` (half away from zero) on every tie and
/// on values next to the ties, at a scale of exactly 1.
#[test]
fn rounding_is_half_away_from_zero_on_every_tie_and_its_neighbours() {
    let mut row = vec![127.0f32];
    for k in -127..127 {
        let tie = k as f32 + 0.5;
        row.extend([
            tie,
            tie.next_up(),
            tie.next_down(),
            k as f32,
            (k as f32).next_up(),
        ]);
    }
    row.extend([0.49999997, -0.49999997, -0.0, 1e-30, -1e-30]);
    let expected: Vec<i8> = row
        .iter()
        .map(|v| v.round().clamp(-127.0, 127.0) as i8)
        .collect();
    let q = QuantizedMatrix::quantize(&row, 1, row.len(), QuantLevels::Full).unwrap();
    assert_eq!(q.scales(), &[1.0]);
    assert_eq!(q.to_row_major(), expected);
    let x = QuantizedActivations::quantize(&row, 1, row.len()).unwrap();
    let shifted: Vec<u8> = expected
        .iter()
        .map(|&q| (i32::from(q) + 128) as u8)
        .collect();
    assert_eq!(x.values(), shifted);
}
