//! The raw sums on AVX-512 VNNI: one 64-byte load of a weight panel holds four inputs
//! of each of its 16 rows, and `vpdpbusd` adds their products with four activations of
//! a row (broadcast to every lane) into 16 `i32` sums, one per output: no horizontal
//! sums, no saturation (exact up to `MAX_DEPTH` inputs). A tile of up to 4 rows and 4
//! panels keeps its 16 sums in registers; each weight load serves every row of the tile.

use core::arch::x86_64::{
    __m512i, __mmask16, _mm512_add_epi32, _mm512_add_ps, _mm512_cvtepi32_ps, _mm512_dpbusd_epi32,
    _mm512_loadu_si512, _mm512_mask_storeu_ps, _mm512_maskz_loadu_epi32, _mm512_maskz_loadu_ps,
    _mm512_mul_ps, _mm512_set1_epi32, _mm512_set1_ps, _mm512_setzero_si512, _mm512_storeu_si512,
    _mm512_sub_epi32,
};

use crate::int8::panels::GROUP;
use crate::int8::tile::{Output, Tile, TileOutputs, for_each_block, for_each_tile, group_of};

/// Rows of a panel: the `i32` lanes of a vector.
const PANEL_ROWS: usize = 16;

/// [`DotKernel::sums`](crate::int8::dot::DotKernel::sums) on AVX-512 VNNI.
///
/// # Safety
/// The CPU has avx512f, avx512bw and avx512vnni, and the tile's operands and `sums` are
/// as long as `DotKernel::sums` checks (up to 4 rows and 4 panels).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn sums(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: (every arm) the caller's promise, for the tile's own size.
    unsafe {
        match (tile.rows, tile.panels) {
            (1, 1) => tile_sums::<1, 1>(tile, sums),
            (1, 2) => tile_sums::<1, 2>(tile, sums),
            (1, 3) => tile_sums::<1, 3>(tile, sums),
            (1, 4) => tile_sums::<1, 4>(tile, sums),
            (2, 1) => tile_sums::<2, 1>(tile, sums),
            (2, 2) => tile_sums::<2, 2>(tile, sums),
            (2, 3) => tile_sums::<2, 3>(tile, sums),
            (2, 4) => tile_sums::<2, 4>(tile, sums),
            (3, 1) => tile_sums::<3, 1>(tile, sums),
            (3, 2) => tile_sums::<3, 2>(tile, sums),
            (3, 3) => tile_sums::<3, 3>(tile, sums),
            (3, 4) => tile_sums::<3, 4>(tile, sums),
            (4, 1) => tile_sums::<4, 1>(tile, sums),
            (4, 2) => tile_sums::<4, 2>(tile, sums),
            (4, 3) => tile_sums::<4, 3>(tile, sums),
            (4, 4) => tile_sums::<4, 4>(tile, sums),
            (rows, panels) => unreachable!("no VNNI tile of {rows} rows × {panels} panels"),
        }
    }
}

/// Adds whole group `g` (inputs `4g..4g + 4`) of `R` activation rows (`depth` bytes
/// each, from `a`) times `P` panels (`panel_len` bytes each, from `w`) to `acc`.
///
/// # Safety
/// The CPU has avx512f and avx512vnni; `4g + 4 <= depth`, and the rows and panels lie
/// within the tile's operands.
#[inline]
// `p` addresses both a panel's weights and its sums: an index reads better than a zip.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn add_group<const R: usize, const P: usize>(
    acc: &mut [[__m512i; P]; R],
    a: *const u8,
    w: *const i8,
    (depth, panel_len): (usize, usize),
    g: usize,
) {
    let mut x = [_mm512_setzero_si512(); R];
    for (r, x) in x.iter_mut().enumerate() {
        // SAFETY: bytes `4g..4g + 4` of row `r` lie within the rows (`4g + 4 <= depth`).
        let four = unsafe { a.add(r * depth + g * GROUP).cast::<i32>().read_unaligned() };
        *x = _mm512_set1_epi32(four);
    }
    for p in 0..P {
        // SAFETY: group `g` of panel `p`: 64 bytes within the panels.
        let v = unsafe { _mm512_loadu_si512(w.add(p * panel_len + g * 64).cast()) };
        for r in 0..R {
            acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], x[r], v);
        }
    }
}

/// The sums of a tile of `R` rows and `P` panels.
///
/// # Safety
/// As [`sums`], with `tile.rows == R` and `tile.panels == P`.
#[inline]
// `p` addresses both a panel's weights and its sums: an index reads better than a zip.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_sums<const R: usize, const P: usize>(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: the caller's promise.
    let acc = unsafe { accumulate::<R, P>(tile) };
    let width = P * PANEL_ROWS;
    for (r, acc) in acc.iter().enumerate() {
        for (p, &acc) in acc.iter().enumerate() {
            // SAFETY: 16 sums at `r · width + 16p`, within `sums` (`r < R`, `p < P`).
            unsafe {
                _mm512_storeu_si512(
                    sums.as_mut_ptr().add(r * width + p * PANEL_ROWS).cast(),
                    acc,
                )
            };
        }
    }
}

/// The outputs of a tile of `R` rows and `P` panels, finished in registers: each sum
/// less its zero-point share, converted to f32, times `a_scale · w_scale`, plus the
/// bias (or added to the output), the epilogue's operations in its order; the lanes
/// past `outputs.cols` neither read nor written.
///
/// # Safety
/// As [`outputs_of`], with `tile.rows == R` and `tile.panels == P`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn tile_outputs<const R: usize, const P: usize>(tile: &Tile<'_>, outputs: &TileOutputs<'_>) {
    // SAFETY: the caller's promise.
    let acc = unsafe { accumulate::<R, P>(tile) };
    for p in 0..P {
        let first = p * PANEL_ROWS;
        let lanes = outputs.cols.saturating_sub(first).min(PANEL_ROWS);
        if lanes == 0 {
            break;
        }
        let mask: __mmask16 = (1u32 << lanes).wrapping_sub(1) as __mmask16;
        // SAFETY: `lanes` values from `first` lie within each slice (`first + lanes <=
        // cols`, checked against the slices' lengths by `DotKernel::part_outputs`).
        let (zero, w_scale, bias) = unsafe {
            (
                _mm512_maskz_loadu_epi32(mask, outputs.zero_point.as_ptr().add(first).cast()),
                _mm512_maskz_loadu_ps(mask, outputs.w_scales.as_ptr().add(first)),
                match outputs.output {
                    Output::Set(Some(bias)) => {
                        Some(_mm512_maskz_loadu_ps(mask, bias.as_ptr().add(first)))
                    }
                    _ => None,
                },
            )
        };
        for (r, acc) in acc.iter().enumerate() {
            let scale = _mm512_mul_ps(_mm512_set1_ps(outputs.a_scales[r]), w_scale);
            let value = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[p], zero)));
            // SAFETY: `lanes` outputs of row `r` from column `first`: the caller's
            // promise.
            unsafe {
                let y = outputs.out.add(r * outputs.stride + first);
                let y_out = match (outputs.output, bias) {
                    (Output::Add, _) => _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y), value),
                    (_, Some(bias)) => _mm512_add_ps(value, bias),
                    (_, None) => value,
                };
                _mm512_mask_storeu_ps(y, mask, y_out);
            }
        }
    }
}

/// [`DotKernel::part_outputs`](crate::int8::dot::DotKernel::part_outputs) on AVX-512
/// VNNI: the part's blocks of `tile_panels`, each block's rows in `tiles`.
///
/// # Safety
/// The CPU has avx512f, avx512bw and avx512vnni; the part and `outputs` are as
/// `DotKernel::part_outputs` checks and promises, `tile_panels` is at most 4, and
/// `tiles` of up to 4 rows cover at most the part's rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(crate) unsafe fn part_outputs(
    part: &Tile<'_>,
    outputs: &TileOutputs<'_>,
    tiles: [(usize, usize); 3],
    tile_panels: usize,
) {
    // SAFETY: (all three) the caller's promise, for each block of the part and each
    // tile of a block.
    unsafe {
        for_each_block(part, outputs, (tile_panels, PANEL_ROWS), |block, out| {
            for_each_tile(block, out, tiles, |tile, out| outputs_of(tile, out))
        })
    }
}

/// One tile's outputs.
///
/// # Safety
/// As [`part_outputs`], for a tile of up to 4 rows and 4 panels.
#[inline]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn outputs_of(tile: &Tile<'_>, outputs: &TileOutputs<'_>) {
    // SAFETY: (every arm) the caller's promise, for the tile's own size.
    unsafe {
        match (tile.rows, tile.panels) {
            (1, 1) => tile_outputs::<1, 1>(tile, outputs),
            (1, 2) => tile_outputs::<1, 2>(tile, outputs),
            (1, 3) => tile_outputs::<1, 3>(tile, outputs),
            (1, 4) => tile_outputs::<1, 4>(tile, outputs),
            (2, 1) => tile_outputs::<2, 1>(tile, outputs),
            (2, 2) => tile_outputs::<2, 2>(tile, outputs),
            (2, 3) => tile_outputs::<2, 3>(tile, outputs),
            (2, 4) => tile_outputs::<2, 4>(tile, outputs),
            (3, 1) => tile_outputs::<3, 1>(tile, outputs),
            (3, 2) => tile_outputs::<3, 2>(tile, outputs),
            (3, 3) => tile_outputs::<3, 3>(tile, outputs),
            (3, 4) => tile_outputs::<3, 4>(tile, outputs),
            (4, 1) => tile_outputs::<4, 1>(tile, outputs),
            (4, 2) => tile_outputs::<4, 2>(tile, outputs),
            (4, 3) => tile_outputs::<4, 3>(tile, outputs),
            (4, 4) => tile_outputs::<4, 4>(tile, outputs),
            (rows, panels) => unreachable!("no VNNI tile of {rows} rows × {panels} panels"),
        }
    }
}

/// The sums of a tile of `R` rows and `P` panels, in registers.
///
/// # Safety
/// As [`sums`], with `tile.rows == R` and `tile.panels == P`.
#[inline]
// `p` addresses both a panel's weights and its sums: an index reads better than a zip.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn accumulate<const R: usize, const P: usize>(tile: &Tile<'_>) -> [[__m512i; P]; R] {
    let depth = tile.depth;
    let (a, w) = (tile.a.as_ptr(), tile.w.as_ptr());
    let mut acc = [[_mm512_setzero_si512(); P]; R];
    let whole = depth / GROUP;
    // A small tile (one row: a matrix-vector product) alternates two sets of sums over
    // the groups, so that consecutive `vpdpbusd` of one sum do not wait on each other.
    let pairs = if R * P <= 8 { whole / 2 } else { 0 };
    let mut odd = [[_mm512_setzero_si512(); P]; R];
    for pair in 0..pairs {
        // SAFETY: groups `2 · pair` and `2 · pair + 1` are whole groups (`< whole`).
        unsafe {
            add_group(&mut acc, a, w, (depth, tile.panel_len), 2 * pair);
            add_group(&mut odd, a, w, (depth, tile.panel_len), 2 * pair + 1);
        }
    }
    for g in 2 * pairs..whole {
        // SAFETY: group `g` is a whole group (`< whole`).
        unsafe { add_group(&mut acc, a, w, (depth, tile.panel_len), g) };
    }
    for (acc, odd) in acc.iter_mut().zip(odd) {
        for (acc, odd) in acc.iter_mut().zip(odd) {
            *acc = _mm512_add_epi32(*acc, odd);
        }
    }
    if whole * GROUP < depth {
        let k = whole * GROUP;
        let x: [__m512i; R] =
            core::array::from_fn(|r| _mm512_set1_epi32(group_of(&tile.a[r * depth..][..depth], k)));
        for p in 0..P {
            // SAFETY: the last group of panel `p`, within `w`.
            let v = unsafe { _mm512_loadu_si512(w.add(p * tile.panel_len + whole * 64).cast()) };
            for r in 0..R {
                acc[r][p] = _mm512_dpbusd_epi32(acc[r][p], x[r], v);
            }
        }
    }
    acc
}
