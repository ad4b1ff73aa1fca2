//! The quantized product: raw integer sums tile by tile from the weights' kernel, then
//! the zero point's correction, the scales and the bias in f32; the weights' panels
//! split over the team when the product is large.
//!
//! The loop keeps one block of panels (a tile's width) hot while every row of the
//! activations passes over it, a tile's rows at a time: the weights stream from memory
//! once per call, the activations (the smaller operand in a recurrent step) once per
//! block, from cache.

use std::ops::Range;

use crate::call::{CallError, len_check};
use crate::int8::dot::RowTiles;
use crate::int8::quantize::ActivationRows;
pub(crate) use crate::int8::tile::Output;
use crate::int8::tile::{TILE_SUMS, Tile, TileOutputs};
use crate::int8::{QuantizedActivations, QuantizedMatrix};
#[cfg(target_arch = "x86_64")]
use crate::simd::{Isa, isa};
use crate::team::{SharedPtr, aligned_part, run_parts};

/// `out[r, n] = a.scales[r] · w.scales[n] · Σ_k (a[r, k] − 128) · w[n, k] + bias[n]`:
/// `x · Wᵀ` on the quantized operands, the sum exact in `i32` (computed as
/// `Σ_k a[r, k] · w[n, k] − 128 · Σ_k w[n, k]`, the form of the vector kernels), `out`
/// row-major `a.rows() × w.rows()`. Errors name `w` when its `cols` differ from `a`'s,
/// `bias` when its length is not `w.rows()`, `out` when its length is not
/// `a.rows() · w.rows()`.
pub fn matmul_int8(
    a: &QuantizedActivations,
    w: &QuantizedMatrix,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<(), CallError> {
    matmul_int8_on(1, a.all_rows(), w, Output::Set(bias), out)
}

/// Products of fewer multiply-adds than this run on the calling thread alone: waking the
/// team costs more than it saves.
const TEAM_WORK: usize = 1 << 18;

/// [`matmul_int8`] of rows `a`, written to `out` as `output` says, on up to `threads`
/// threads (the kernel's team), each taking its own panels (columns of `out`) when the
/// product is large enough ([`TEAM_WORK`]); the results are the same, bit for bit, on
/// any number of threads.
pub(crate) fn matmul_int8_on(
    threads: usize,
    a: ActivationRows<'_>,
    w: &QuantizedMatrix,
    output: Output<'_>,
    out: &mut [f32],
) -> Result<(), CallError> {
    let depth = a.cols;
    len_check("w", "inputs of each row, as `a` has", depth, w.cols())?;
    if let Output::Set(Some(bias)) = output {
        len_check("bias", "one per row of `w`", w.rows(), bias.len())?;
    }
    len_check("out", "a.rows() · w.rows()", a.rows() * w.rows(), out.len())?;
    let parts = if a.rows() * w.rows() * depth >= TEAM_WORK {
        threads.clamp(1, w.panels().count().max(1))
    } else {
        1
    };
    // SAFETY: each part writes only the columns of its own panels (disjoint ranges of
    // `aligned_part`) in every row of `out`, and nothing reads `out` until every part
    // has returned.
    let out = unsafe { SharedPtr::new(out.as_mut_ptr()) };
    // SAFETY: the operands' lengths were checked above; `out` holds `a.rows() ·
    // w.rows()` values and each part owns its columns (the promise just made).
    let run = |part: usize| unsafe { product_part(a, w, output, out, (part, parts)) };
    match parts {
        1 => run(0),
        parts => run_parts(threads, parts, run),
    }
    Ok(())
}

/// Part `part` of `parts` of a product's panels (columns of `out`), as a member of a
/// team that splits every product alike: for a recurrence whose members each compute
/// their columns of a step's products between two barriers. The panels are split
/// evenly, not in whole tiles: a part's last tile may be narrower, and no member waits
/// at the barrier for another's extra tile (13 tiles on two members: 7 and 6).
///
/// # Safety
/// `a.cols == w.cols()`, a bias has `w.rows()` values, `out` points at
/// `a.rows() · w.rows()` values, and until the caller's next barrier no other thread
/// touches this part's columns of them (the other parts' columns are theirs).
pub(crate) unsafe fn product_part(
    a: ActivationRows<'_>,
    w: &QuantizedMatrix,
    output: Output<'_>,
    out: SharedPtr<f32>,
    (part, parts): (usize, usize),
) {
    debug_assert_eq!(a.cols, w.cols());
    let own = aligned_part(w.panels().count(), parts, 1, part);
    if own.is_empty() {
        return;
    }
    let tiles = w.kernel().row_tiles(a.rows(), a.cols);
    let product = Product {
        a,
        w,
        output,
        tiles,
    };
    // The vector kernels finish their tiles in registers (the same operations as the
    // epilogue loop, in its order), the whole part in one call.
    if w.kernel().finishes_in_registers() {
        // SAFETY: the caller's promise, for this part's panels.
        unsafe { product.part_into(own, out) };
        return;
    }
    for first_panel in own.clone().step_by(w.kernel().tile_panels()) {
        // SAFETY: the caller's promise, for this part's panels.
        unsafe { product.block_sums_into(first_panel, own.end, out) };
    }
}

/// The operands of one product.
struct Product<'a> {
    a: ActivationRows<'a>,
    w: &'a QuantizedMatrix,
    output: Output<'a>,
    /// How `a`'s rows go in the kernel's tiles.
    tiles: RowTiles,
}

impl Product<'_> {
    /// Every row's outputs of panels `own` into `out`, by a kernel that finishes its
    /// tiles in registers.
    ///
    /// # Safety
    /// `out` points at `a.rows() · w.rows()` values, and no other thread accesses the
    /// columns of `own` of them until the product returns; `own` is a non-empty range
    /// of panels.
    unsafe fn part_into(&self, own: Range<usize>, out: SharedPtr<f32>) {
        let (a, w) = (&self.a, self.w);
        let panels = w.panels();
        let first_col = own.start * panels.panel_rows();
        let cols = (own.len() * panels.panel_rows()).min(w.rows() - first_col);
        let part = Tile {
            a: a.values,
            rows: a.rows(),
            w: &panels.bytes()[own.start * panels.panel_len()..],
            panels: own.len(),
            depth: a.cols,
            panel_len: panels.panel_len(),
        };
        let all = TileOutputs {
            // SAFETY: the first output of `out` (the caller's promise).
            out: unsafe { out.at(0) },
            stride: w.rows(),
            cols: w.rows(),
            a_scales: a.scales,
            w_scales: w.scales(),
            zero_point: w.zero_point_sums(),
            output: self.output,
        };
        // SAFETY: the part's columns lie within the matrix's `w.rows()` outputs.
        let outputs = unsafe { all.columns(first_col, cols) };
        // SAFETY: the part's outputs are its columns of `out` (the caller's promise).
        unsafe { w.kernel().part_outputs(&part, &self.tiles, &outputs) };
    }

    /// Every row's outputs of the block of panels from `first_panel` (a tile's width,
    /// ending at panel `end` at the latest) into `out`, by the scalar reference: its
    /// sums stored, then the epilogue loop.
    ///
    /// # Safety
    /// `out` points at `a.rows() · w.rows()` values, and no other thread accesses this
    /// block's columns of them until the product returns; `first_panel < end <=` the
    /// panel count.
    unsafe fn block_sums_into(&self, first_panel: usize, end: usize, out: SharedPtr<f32>) {
        let (a, w) = (&self.a, self.w);
        let (kernel, panels) = (w.kernel(), w.panels());
        let tile_panels = kernel.tile_panels().min(end - first_panel);
        let first_col = first_panel * panels.panel_rows();
        let cols = (tile_panels * panels.panel_rows()).min(w.rows() - first_col);
        let depth = a.cols;
        let w_bytes = &panels.bytes()[first_panel * panels.panel_len()..];
        for tile_rows in self.tiles.iter() {
            let (first_row, rows) = (tile_rows.start, tile_rows.len());
            let tile = Tile {
                a: &a.values[first_row * depth..][..rows * depth],
                rows,
                w: w_bytes,
                panels: tile_panels,
                depth,
                panel_len: panels.panel_len(),
            };
            let mut sums = [0i32; TILE_SUMS];
            kernel.sums(&tile, &mut sums);
            let width = tile_panels * panels.panel_rows();
            for r in 0..rows {
                let row = first_row + r;
                // SAFETY: `cols` values from `(row, first_col)` lie within `out` (the
                // caller's promise) and belong to this block.
                let y = unsafe {
                    core::slice::from_raw_parts_mut(out.at(row * w.rows() + first_col), cols)
                };
                self.finish(row, first_col, &sums[r * width..][..cols], y);
            }
        }
    }

    /// `y[j] = a.scales[row] · w.scales[n] · (raw[j] − 128 · Σ_k w[n, k]) + bias[n]`
    /// (or `y[j] +=` the product), `n = first_col + j`: the same operations, in the same
    /// order, on every kernel and instruction set.
    #[inline]
    fn finish(&self, row: usize, first_col: usize, raw: &[i32], y: &mut [f32]) {
        let n = first_col..first_col + y.len();
        let parts = Epilogue {
            a_scale: self.a.scales[row],
            w_scales: &self.w.scales()[n.clone()],
            zero_point: &self.w.zero_point_sums()[n.clone()],
            output: match self.output {
                Output::Set(Some(bias)) => Output::Set(Some(&bias[n])),
                other => other,
            },
        };
        #[cfg(target_arch = "x86_64")]
        match isa() {
            // SAFETY: the CPU reported avx512f and avx2 (`Isa::Avx512`).
            Isa::Avx512 => unsafe { epilogue_avx512(&parts, raw, y) },
            // SAFETY: the CPU reported avx2 (`Isa::Avx2`).
            Isa::Avx2 => unsafe { epilogue_avx2(&parts, raw, y) },
            Isa::Baseline => epilogue(&parts, raw, y),
        }
        #[cfg(not(target_arch = "x86_64"))]
        epilogue(&parts, raw, y);
    }
}

/// What turns one row's raw sums of a block into outputs.
struct Epilogue<'a> {
    a_scale: f32,
    w_scales: &'a [f32],
    zero_point: &'a [i32],
    /// With the block's part of the bias.
    output: Output<'a>,
}

/// [`Product::finish`]'s loop, inlined into each instruction set's copy below, which the
/// compiler vectorizes for that set's width.
#[inline(always)]
fn epilogue(parts: &Epilogue<'_>, raw: &[i32], y: &mut [f32]) {
    let a_scale = parts.a_scale;
    let values = raw.iter().zip(parts.zero_point).zip(parts.w_scales);
    match parts.output {
        Output::Set(Some(bias)) => {
            for ((y, ((&raw, &zero), &scale)), &b) in y.iter_mut().zip(values).zip(bias) {
                *y = a_scale * scale * (raw - zero) as f32 + b;
            }
        }
        Output::Set(None) => {
            for (y, ((&raw, &zero), &scale)) in y.iter_mut().zip(values) {
                *y = a_scale * scale * (raw - zero) as f32;
            }
        }
        Output::Add => {
            for (y, ((&raw, &zero), &scale)) in y.iter_mut().zip(values) {
                *y += a_scale * scale * (raw - zero) as f32;
            }
        }
    }
}

/// [`epilogue`] compiled for AVX-512.
///
/// # Safety
/// The CPU has avx512f and avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn epilogue_avx512(parts: &Epilogue<'_>, raw: &[i32], y: &mut [f32]) {
    epilogue(parts, raw, y);
}

/// [`epilogue`] compiled for AVX2.
///
/// # Safety
/// The CPU has avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn epilogue_avx2(parts: &Epilogue<'_>, raw: &[i32], y: &mut [f32]) {
    epilogue(parts, raw, y);
}
