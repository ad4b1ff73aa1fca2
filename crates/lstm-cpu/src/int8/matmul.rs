//! The quantized product: raw integer sums from the dot kernel, then the zero point's
//! correction and the scales in f32; large products split by rows over the team.

use std::sync::Mutex;

use crate::call::{CallError, len_check};
use crate::int8::dot::{DotKernel, dot_kernel};
use crate::int8::{QuantizedActivations, QuantizedMatrix};
use crate::team::run_parts;

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
    matmul_int8_on(1, a, w, bias, out)
}

/// Products of fewer multiply-adds than this run on the calling thread alone: waking the
/// team costs more than it saves.
const TEAM_WORK: usize = 1 << 18;

/// [`matmul_int8`] on up to `threads` threads (the kernel's team), each taking its own
/// block of `a`'s rows when the product is large enough ([`TEAM_WORK`]); the results
/// are the same, bit for bit, on any number of threads.
pub(crate) fn matmul_int8_on(
    threads: usize,
    a: &QuantizedActivations,
    w: &QuantizedMatrix,
    bias: Option<&[f32]>,
    out: &mut [f32],
) -> Result<(), CallError> {
    let depth = a.cols();
    len_check("w", "inputs of each row, as `a` has", depth, w.cols())?;
    if let Some(bias) = bias {
        len_check("bias", "one per row of `w`", w.rows(), bias.len())?;
    }
    len_check("out", "a.rows() · w.rows()", a.rows() * w.rows(), out.len())?;
    let (rows, n) = (a.rows(), w.rows().max(1));
    let parts = if rows * n * depth >= TEAM_WORK {
        threads.clamp(1, rows.max(1))
    } else {
        1
    };
    let per_part = rows.div_ceil(parts).max(1);
    // Each part's rows of `out`, with the index of its first row: disjoint, so each
    // lock is taken by one thread only.
    let blocks: Vec<Mutex<(usize, &mut [f32])>> = out
        .chunks_mut(per_part * n)
        .enumerate()
        .map(|(i, block)| Mutex::new((i * per_part, block)))
        .collect();
    let kernel = dot_kernel(w.levels());
    let run = |part: usize| {
        let mut block = blocks[part].lock().unwrap_or_else(|e| e.into_inner());
        let (first, out_rows) = &mut *block;
        rows_into(kernel, a, w, bias, *first, out_rows);
    };
    match blocks.len() {
        0 => {}
        1 => run(0),
        parts => run_parts(threads, parts, run),
    }
    Ok(())
}

/// `out_rows`: the results of `a`'s rows from `first` on.
fn rows_into(
    kernel: DotKernel,
    a: &QuantizedActivations,
    w: &QuantizedMatrix,
    bias: Option<&[f32]>,
    first: usize,
    out_rows: &mut [f32],
) {
    let depth = a.cols();
    let mut raw = vec![0i32; w.rows()];
    for (i, out_row) in out_rows.chunks_exact_mut(w.rows().max(1)).enumerate() {
        let r = first + i;
        kernel.raw_sums(&a.values()[r * depth..][..depth], w.values(), &mut raw);
        for (n, y) in out_row.iter_mut().enumerate() {
            let acc = raw[n] - 128 * w.row_sums()[n];
            *y = a.scales()[r] * w.scales()[n] * acc as f32 + bias.map_or(0.0, |b| b[n]);
        }
    }
}
