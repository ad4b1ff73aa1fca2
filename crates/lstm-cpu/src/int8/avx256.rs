//! The raw sums on 256-bit vectors, on panels of 8 rows (the `i32` lanes of a vector):
//! one 32-byte load of a panel holds four inputs of each of its rows, multiplied by four
//! activations of a row (broadcast to every lane) and added into 8 `i32` sums, one per
//! output; a tile of up to 6 rows and 2 panels keeps its 12 sums in registers (enough
//! independent chains to hide the multiply-add's latency; 4 rows, 8 sums, ran at 1.6
//! multiply-adds a cycle where two issue). Two
//! kernels share the loop (`kernel_256!`) and differ in that multiply-add:
//!
//! - [`avx_vnni`]: AVX-VNNI's `vpdpbusd` (VEX-encoded), exact for weights of the full
//!   range (±127);
//! - [`avx2`]: AVX2's `vpmaddubsw`, which adds neighbouring products into saturating
//!   `i16` lanes, then `vpmaddwd` by ones: exact only for weights in `-63..=63`
//!   (`QuantLevels::Reduced`: 2 · 255 · 63 = 32,130 fits `i16`).

/// Defines module `$name` with the kernel's `sums`, compiled with `$features`, whose
/// multiply-add of four activations `x` by a panel's group `v` into `acc` is `$mac`.
macro_rules! kernel_256 {
    ($(#[$doc:meta])* $name:ident, $features:literal, $what:literal, |$acc:ident, $x:ident, $v:ident| $mac:expr) => {
        $(#[$doc])*
        pub(crate) mod $name {
            #[allow(unused_imports)]
            use core::arch::x86_64::{
                __m256i, _mm256_add_epi32, _mm256_add_ps, _mm256_cmpgt_epi32,
                _mm256_cvtepi32_ps, _mm256_dpbusd_avx_epi32, _mm256_loadu_si256,
                _mm256_madd_epi16, _mm256_maddubs_epi16, _mm256_maskload_epi32,
                _mm256_maskload_ps, _mm256_maskstore_ps, _mm256_mul_ps, _mm256_set1_epi16,
                _mm256_set1_epi32, _mm256_set1_ps, _mm256_setr_epi32, _mm256_setzero_si256,
                _mm256_storeu_si256, _mm256_sub_epi32,
            };

            use crate::int8::panels::GROUP;
            use crate::int8::tile::{
                Output, Tile, TileOutputs, for_each_block, for_each_tile, group_of,
            };

            /// Rows of a panel: the `i32` lanes of a vector.
            const PANEL_ROWS: usize = 8;

            /// [`DotKernel::sums`](crate::int8::dot::DotKernel::sums) on this kernel.
            ///
            /// # Safety
            /// The CPU has the kernel's features, the tile's weights are in its range,
            /// and the tile's operands and `sums` are as long as `DotKernel::sums`
            /// checks (up to 6 rows and 2 panels).
            #[target_feature(enable = $features)]
            pub(crate) unsafe fn sums(tile: &Tile<'_>, sums: &mut [i32]) {
                // SAFETY: (every arm) the caller's promise, for the tile's own size.
                unsafe {
                    match (tile.rows, tile.panels) {
                        (1, 1) => tile_sums::<1, 1>(tile, sums),
                        (1, 2) => tile_sums::<1, 2>(tile, sums),
                        (2, 1) => tile_sums::<2, 1>(tile, sums),
                        (2, 2) => tile_sums::<2, 2>(tile, sums),
                        (3, 1) => tile_sums::<3, 1>(tile, sums),
                        (3, 2) => tile_sums::<3, 2>(tile, sums),
                        (4, 1) => tile_sums::<4, 1>(tile, sums),
                        (4, 2) => tile_sums::<4, 2>(tile, sums),
                        (5, 1) => tile_sums::<5, 1>(tile, sums),
                        (5, 2) => tile_sums::<5, 2>(tile, sums),
                        (6, 1) => tile_sums::<6, 1>(tile, sums),
                        (6, 2) => tile_sums::<6, 2>(tile, sums),
                        (rows, panels) => {
                            unreachable!("no {} tile of {rows} rows × {panels} panels", $what)
                        }
                    }
                }
            }

            /// `acc += x · v` for one group, as the kernel multiplies and adds.
            #[inline]
            #[target_feature(enable = $features)]
            fn mac($acc: __m256i, $x: __m256i, $v: __m256i) -> __m256i {
                $mac
            }

            /// Adds whole group `g` (inputs `4g..4g + 4`) of `R` activation rows
            /// (`depth` bytes each, from `a`) times `P` panels (`panel_len` bytes each,
            /// from `w`) to `acc`: the panels' weights first, then one row's
            /// activations at a time (`R · P` sums, `P` weights and one broadcast in
            /// registers: 15 of 16 at 6 × 2; broadcasting every row first would spill
            /// sums).
            ///
            /// # Safety
            /// The CPU has the kernel's features; `4g + 4 <= depth`, and the rows and
            /// panels lie within the tile's operands.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn add_group<const R: usize, const P: usize>(
                acc: &mut [[__m256i; P]; R],
                a: *const u8,
                w: *const i8,
                (depth, panel_len): (usize, usize),
                g: usize,
            ) {
                let v: [__m256i; P] = core::array::from_fn(|p| {
                    // SAFETY: group `g` of panel `p`: 32 bytes within `w`.
                    unsafe { _mm256_loadu_si256(w.add(p * panel_len + g * 32).cast()) }
                });
                for (r, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: bytes `4g..4g + 4` of row `r` lie within `a`.
                    let four = unsafe { a.add(r * depth + g * GROUP).cast::<i32>().read_unaligned() };
                    let x = _mm256_set1_epi32(four);
                    for (acc, &v) in acc.iter_mut().zip(&v) {
                        *acc = mac(*acc, x, v);
                    }
                }
            }

            /// The sums of groups `0..whole` of a tile of `R` rows and `P` panels, group
            /// `g` added to set `g % S` of the sums, the sets added up at the end.
            ///
            /// # Safety
            /// The CPU has the kernel's features; the groups lie within the tile's
            /// operands (`a`, `w`, of `operands`' row and panel lengths).
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn whole_groups<const R: usize, const P: usize, const S: usize>(
                a: *const u8,
                w: *const i8,
                operands: (usize, usize),
                whole: usize,
            ) -> [[__m256i; P]; R] {
                let mut sets = [[[_mm256_setzero_si256(); P]; R]; S];
                let rounds = whole / S;
                for round in 0..rounds {
                    for (s, set) in sets.iter_mut().enumerate() {
                        // SAFETY: group `S · round + s < whole`: a whole group.
                        unsafe { add_group(set, a, w, operands, S * round + s) };
                    }
                }
                for g in S * rounds..whole {
                    // SAFETY: group `g < whole`.
                    unsafe { add_group(&mut sets[0], a, w, operands, g) };
                }
                let mut acc = sets[0];
                for set in &sets[1..] {
                    for (acc, set) in acc.iter_mut().zip(set) {
                        for (acc, &set) in acc.iter_mut().zip(set) {
                            *acc = _mm256_add_epi32(*acc, set);
                        }
                    }
                }
                acc
            }

            /// The sums of a tile of `R` rows and `P` panels, in registers.
            ///
            /// # Safety
            /// As [`sums`], with `tile.rows == R` and `tile.panels == P`.
            #[inline]
            // `p` addresses both a panel's weights and its sums: an index reads better
            // than a zip.
            #[allow(clippy::needless_range_loop)]
            #[target_feature(enable = $features)]
            unsafe fn accumulate<const R: usize, const P: usize>(tile: &Tile<'_>) -> [[__m256i; P]; R] {
                let depth = tile.depth;
                let (a, w) = (tile.a.as_ptr(), tile.w.as_ptr());
                let operands = (depth, tile.panel_len);
                let whole = depth / GROUP;
                // A small tile (a row or two: a matrix-vector product) spreads the
                // groups over several sets of sums, so that consecutive multiply-adds
                // of one sum do not wait on each other: at least 8 chains (12 for a
                // tile of 3 rows, whose two sets still fit the registers).
                // SAFETY: (every arm) the tile's whole groups, within its operands.
                let mut acc = unsafe {
                    match R * P {
                        1 | 2 => whole_groups::<R, P, 4>(a, w, operands, whole),
                        3..=6 => whole_groups::<R, P, 2>(a, w, operands, whole),
                        _ => whole_groups::<R, P, 1>(a, w, operands, whole),
                    }
                };
                if whole * GROUP < depth {
                    let k = whole * GROUP;
                    let x: [__m256i; R] = core::array::from_fn(|r| {
                        _mm256_set1_epi32(group_of(&tile.a[r * depth..][..depth], k))
                    });
                    for p in 0..P {
                        let at = p * tile.panel_len + whole * 32;
                        // SAFETY: the last group of panel `p`, within `w`.
                        let v = unsafe { _mm256_loadu_si256(w.add(at).cast()) };
                        for r in 0..R {
                            acc[r][p] = mac(acc[r][p], x[r], v);
                        }
                    }
                }
                acc
            }

            /// The sums of a tile of `R` rows and `P` panels, stored.
            ///
            /// # Safety
            /// As [`sums`], with `tile.rows == R` and `tile.panels == P`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn tile_sums<const R: usize, const P: usize>(tile: &Tile<'_>, sums: &mut [i32]) {
                // SAFETY: the caller's promise.
                let acc = unsafe { accumulate::<R, P>(tile) };
                let width = P * PANEL_ROWS;
                for (r, acc) in acc.iter().enumerate() {
                    for (p, &acc) in acc.iter().enumerate() {
                        // SAFETY: 8 sums at `r · width + 8p`, within `sums`.
                        unsafe {
                            _mm256_storeu_si256(
                                sums.as_mut_ptr().add(r * width + p * PANEL_ROWS).cast(),
                                acc,
                            )
                        };
                    }
                }
            }

            /// [`DotKernel::part_outputs`](crate::int8::dot::DotKernel::part_outputs)
            /// on this kernel: the part's blocks of `tile_panels`, each block's rows in
            /// `tiles`.
            ///
            /// # Safety
            /// The CPU has the kernel's features; the part and `outputs` are as
            /// `DotKernel::part_outputs` checks and promises, `tile_panels` is at most
            /// 2, and `tiles` of up to 6 rows cover at most the part's rows.
            #[target_feature(enable = $features)]
            pub(crate) unsafe fn part_outputs(
                part: &Tile<'_>,
                outputs: &TileOutputs<'_>,
                tiles: [(usize, usize); 3],
                tile_panels: usize,
            ) {
                // SAFETY: (all three) the caller's promise, for each block of the part
                // and each tile of a block.
                unsafe {
                    for_each_block(part, outputs, (tile_panels, PANEL_ROWS), |block, out| {
                        for_each_tile(block, out, tiles, |tile, out| outputs_of(tile, out))
                    })
                }
            }

            /// One tile's outputs.
            ///
            /// # Safety
            /// As [`part_outputs`], for a tile of up to 6 rows and 2 panels.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn outputs_of(tile: &Tile<'_>, outputs: &TileOutputs<'_>) {
                // SAFETY: (every arm) the caller's promise, for the tile's own size.
                unsafe {
                    match (tile.rows, tile.panels) {
                        (1, 1) => tile_outputs::<1, 1>(tile, outputs),
                        (1, 2) => tile_outputs::<1, 2>(tile, outputs),
                        (2, 1) => tile_outputs::<2, 1>(tile, outputs),
                        (2, 2) => tile_outputs::<2, 2>(tile, outputs),
                        (3, 1) => tile_outputs::<3, 1>(tile, outputs),
                        (3, 2) => tile_outputs::<3, 2>(tile, outputs),
                        (4, 1) => tile_outputs::<4, 1>(tile, outputs),
                        (4, 2) => tile_outputs::<4, 2>(tile, outputs),
                        (5, 1) => tile_outputs::<5, 1>(tile, outputs),
                        (5, 2) => tile_outputs::<5, 2>(tile, outputs),
                        (6, 1) => tile_outputs::<6, 1>(tile, outputs),
                        (6, 2) => tile_outputs::<6, 2>(tile, outputs),
                        (rows, panels) => {
                            unreachable!("no {} tile of {rows} rows × {panels} panels", $what)
                        }
                    }
                }
            }

            /// The outputs of a tile of `R` rows and `P` panels, finished in registers:
            /// each sum less its zero-point share, converted to f32, times `a_scale ·
            /// w_scale`, plus the bias (or added to the output), the epilogue's
            /// operations in its order; the lanes past `outputs.cols` neither read nor
            /// written.
            ///
            /// # Safety
            /// As [`outputs_of`], with `tile.rows == R` and `tile.panels == P`.
            #[inline]
            #[target_feature(enable = $features)]
            unsafe fn tile_outputs<const R: usize, const P: usize>(
                tile: &Tile<'_>,
                outputs: &TileOutputs<'_>,
            ) {
                // SAFETY: the caller's promise.
                let acc = unsafe { accumulate::<R, P>(tile) };
                let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                for p in 0..P {
                    let first = p * PANEL_ROWS;
                    let lanes = outputs.cols.saturating_sub(first).min(PANEL_ROWS);
                    if lanes == 0 {
                        break;
                    }
                    // All ones in the lanes below `lanes`.
                    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), lane);
                    // SAFETY: `lanes` values from `first` lie within each slice (`first +
                    // lanes <= cols`, checked against the slices' lengths by
                    // `DotKernel::part_outputs`); masked lanes are not read.
                    let (zero, w_scale, bias) = unsafe {
                        (
                            _mm256_maskload_epi32(outputs.zero_point.as_ptr().add(first), mask),
                            _mm256_maskload_ps(outputs.w_scales.as_ptr().add(first), mask),
                            match outputs.output {
                                Output::Set(Some(bias)) => {
                                    Some(_mm256_maskload_ps(bias.as_ptr().add(first), mask))
                                }
                                _ => None,
                            },
                        )
                    };
                    for (r, acc) in acc.iter().enumerate() {
                        let scale = _mm256_mul_ps(_mm256_set1_ps(outputs.a_scales[r]), w_scale);
                        let value = _mm256_mul_ps(
                            scale,
                            _mm256_cvtepi32_ps(_mm256_sub_epi32(acc[p], zero)),
                        );
                        // SAFETY: `lanes` outputs of row `r` from column `first`: the
                        // caller's promise; masked lanes are neither read nor written.
                        unsafe {
                            let y = outputs.out.add(r * outputs.stride + first);
                            let y_out = match (outputs.output, bias) {
                                (Output::Add, _) => {
                                    _mm256_add_ps(_mm256_maskload_ps(y, mask), value)
                                }
                                (_, Some(bias)) => _mm256_add_ps(value, bias),
                                (_, None) => value,
                            };
                            _mm256_maskstore_ps(y, mask, y_out);
                        }
                    }
                }
            }
        }
    };
}

kernel_256!(
    /// AVX-VNNI: `vpdpbusd` on 256-bit vectors, weights of the full range.
    avx_vnni,
    "avx2,avxvnni",
    "AVX-VNNI",
    |acc, x, v| _mm256_dpbusd_avx_epi32(acc, x, v)
);

kernel_256!(
    /// AVX2: `vpmaddubsw`, then `vpmaddwd` by ones; weights in `-63..=63`.
    avx2,
    "avx2",
    "AVX2",
    |acc, x, v| _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(x, v), _mm256_set1_epi16(1)))
);
