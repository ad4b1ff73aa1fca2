//! The quantized product: raw integer sums from the dot kernel, then the zero point's
//! correction and the scales in f32.

use crate::call::{CallError, len_check};
use crate::int8::dot::dot_kernel;
use crate::int8::{QuantizedActivations, QuantizedMatrix};

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
    let depth = a.cols();
    len_check("w", "inputs of each row, as `a` has", depth, w.cols())?;
    if let Some(bias) = bias {
        len_check("bias", "one per row of `w`", w.rows(), bias.len())?;
    }
    len_check("out", "a.rows() · w.rows()", a.rows() * w.rows(), out.len())?;
    let kernel = dot_kernel(w.levels());
    let mut raw = vec![0i32; w.rows()];
    for (r, out_row) in out
        .chunks_exact_mut(w.rows().max(1))
        .take(a.rows())
        .enumerate()
    {
        let a_row = &a.values()[r * depth..][..depth];
        kernel.raw_sums(a_row, w.values(), &mut raw);
        for (n, y) in out_row.iter_mut().enumerate() {
            let acc = raw[n] - 128 * w.row_sums()[n];
            *y = a.scales()[r] * w.scales()[n] * acc as f32 + bias.map_or(0.0, |b| b[n]);
        }
    }
    Ok(())
}
