//! The bodies of [`super`]'s functions, instantiated in this crate only
//! ([`crate::compiled`]).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::matrix::{MatrixRef, error};
use crate::call::CallError;
use crate::gemm::{PackedB, par_gemm_into};
use crate::real::Real;
use crate::simd::dispatch;
use crate::team::run_parts;

/// [`matmul`](super::matmul), instantiated in this crate only (`crate::compiled`).
pub(crate) fn matmul_impl<T: Real>(
    threads: usize,
    a: MatrixRef<'_, T>,
    b: MatrixRef<'_, T>,
    bias: Option<&[T]>,
    c: &mut [T],
) -> Result<(), CallError> {
    let (rows, depth, cols) = (a.rows, a.cols, b.cols);
    if b.rows != depth {
        return Err(error(
            "b",
            format!("{depth} rows (the columns of a)"),
            format!("{} rows", b.rows),
        ));
    }
    if rows.checked_mul(cols) != Some(c.len()) {
        return Err(error(
            "c",
            format!("{rows} × {cols} values"),
            format!("{} values", c.len()),
        ));
    }
    if let Some(bias) = bias
        && bias.len() != cols
    {
        return Err(error(
            "bias",
            format!("{cols} values (the columns of b)"),
            format!("{} values", bias.len()),
        ));
    }
    if threads == 0 {
        return Err(error("threads", "at least 1", "0"));
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let zeros;
    let bias = match bias {
        Some(bias) => bias,
        None => {
            zeros = vec![T::ZERO; cols];
            &zeros
        }
    };
    let packed = PackedB::pack_all_on(threads, depth, cols, b.values, b.row_stride, b.col_stride);
    // SAFETY: `MatrixRef::new` checked that every `A(i, k)` lies in `a.values`; `c` holds
    // `rows × cols` values, row-major (checked above), and is borrowed mutably for the
    // call; `bias` has a value for every packed column (checked, or `zeros`).
    unsafe {
        par_gemm_into(
            threads,
            rows,
            a.values.as_ptr(),
            a.row_stride,
            a.col_stride,
            (&packed).into(),
            Some(bias),
            c.as_mut_ptr(),
            cols,
        )
    };
    Ok(())
}

/// Checks `logits` (`targets.len()` rows of `cols`) and the targets.
fn check_rows<T>(logits: &[T], cols: usize, targets: &[usize]) -> Result<(), CallError> {
    if Some(logits.len()) != targets.len().checked_mul(cols) {
        return Err(error(
            "logits",
            format!("{} rows (one a target) × {cols} values", targets.len()),
            format!("{} values", logits.len()),
        ));
    }
    if let Some((row, &target)) = targets.iter().enumerate().find(|(_, t)| **t >= cols) {
        return Err(error(
            "targets",
            format!("classes below {cols}"),
            format!("{target} at row {row}"),
        ));
    }
    Ok(())
}

/// Runs `work(first, run)` over `values` cut into up to `threads` runs of whole units of
/// `unit` values (`first`: the index of the run's first unit).
fn over_runs<T: Send>(
    threads: usize,
    values: &mut [T],
    unit: usize,
    work: impl Fn(usize, &mut [T]) + Sync,
) {
    let unit = unit.max(1);
    let units = values.len() / unit;
    let per_part = units.div_ceil(threads.max(1)).max(1);
    let parts: Vec<Mutex<(usize, &mut [T])>> = values
        .chunks_mut(per_part * unit)
        .enumerate()
        .map(|(i, run)| Mutex::new((i * per_part, run)))
        .collect();
    run_parts(threads, parts.len(), |part| {
        let mut part = parts[part].lock().unwrap_or_else(|e| e.into_inner());
        let (first, ref mut run) = *part;
        work(first, run);
    });
}

/// [`softmax_nll`](super::softmax_nll), instantiated in this crate only (`crate::compiled`).
pub(crate) fn softmax_nll_impl<T: Real>(
    threads: usize,
    logits: &mut [T],
    cols: usize,
    targets: &[usize],
) -> Result<f64, CallError> {
    check_rows(logits, cols, targets)?;
    if cols == 0 {
        return Ok(0.0);
    }
    // Each row's loss (f64 bits) kept apart and summed in row order afterwards: the same
    // total, to the last bit, whatever the number of threads.
    let row_losses: Vec<AtomicU64> = targets.iter().map(|_| AtomicU64::new(0)).collect();
    over_runs(threads, logits, cols, |first, run| {
        for (row, values) in run.chunks_exact_mut(cols).enumerate() {
            let target = values[targets[first + row]].to_f64();
            let mut max_and_sum = [0.0; 2];
            softmax_row(values, &mut max_and_sum);
            let [max, sum] = max_and_sum;
            let loss = sum.ln() + max - target;
            row_losses[first + row].store(loss.to_bits(), Ordering::Relaxed);
        }
    });
    Ok(row_losses
        .into_iter()
        .map(|loss| f64::from_bits(loss.into_inner()))
        .sum())
}

/// Lanes of the reductions in [`softmax_row`]: independent partial maxima and sums, so
/// that the loops vectorise (16 `f32` fill one AVX-512 register, two AVX2 ones).
const LANES: usize = 16;

dispatch! {
    /// Replaces `row` by its softmax; `out` receives its maximum and `Σ e^(x - max)`.
    fn softmax_row<T: Real>(row: &mut [T], out: &mut [f64; 2]) {
        let mut lanes = [row[0]; LANES];
        let mut chunks = row.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (m, &x) in lanes.iter_mut().zip(chunk) {
                *m = if x > *m { x } else { *m };
            }
        }
        let mut max = chunks.remainder().iter().fold(row[0], |m, &x| if x > m { x } else { m });
        for &m in &lanes {
            max = if m > max { m } else { max };
        }
        let mut sums = [T::ZERO; LANES];
        let mut chunks = row.chunks_exact_mut(LANES);
        for chunk in &mut chunks {
            for (s, x) in sums.iter_mut().zip(chunk) {
                let e = (*x - max).exp_on::<FMA>();
                *x = e;
                *s += e;
            }
        }
        let mut sum = T::ZERO;
        for x in chunks.into_remainder() {
            let e = (*x - max).exp_on::<FMA>();
            *x = e;
            sum += e;
        }
        for s in sums {
            sum += s;
        }
        let scale = T::ONE / sum;
        for x in row.iter_mut() {
            *x = *x * scale;
        }
        *out = [max.to_f64(), sum.to_f64()];
    }
}

/// [`softmax_nll_grad`](super::softmax_nll_grad), instantiated in this crate only (`crate::compiled`).
pub(crate) fn softmax_nll_grad_impl<T: Real>(
    threads: usize,
    probabilities: &mut [T],
    cols: usize,
    targets: &[usize],
    scale: T,
) -> Result<(), CallError> {
    check_rows(probabilities, cols, targets)?;
    if cols == 0 {
        return Ok(());
    }
    over_runs(threads, probabilities, cols, |first, run| {
        for (row, values) in run.chunks_exact_mut(cols).enumerate() {
            scale_row(values, scale);
            values[targets[first + row]] += -scale;
        }
    });
    Ok(())
}

dispatch! {
    /// `row *= scale`.
    fn scale_row<T: Real>(row: &mut [T], scale: T) {
        for x in row.iter_mut() {
            *x = *x * scale;
        }
    }
}

/// [`column_sums`](super::column_sums), instantiated in this crate only (`crate::compiled`).
pub(crate) fn column_sums_impl<T: Real>(
    threads: usize,
    m: &[T],
    sums: &mut [T],
) -> Result<(), CallError> {
    let cols = sums.len();
    if cols == 0 || !m.len().is_multiple_of(cols) {
        return Err(error(
            "m",
            format!("whole rows of {cols} values"),
            format!("{} values", m.len()),
        ));
    }
    // Threads take runs of columns; each adds its columns of every row in row order.
    over_runs(threads, sums, 1, |first, run| {
        run.fill(T::ZERO);
        for row in m.chunks_exact(cols) {
            add_row(run, &row[first..first + run.len()]);
        }
    });
    Ok(())
}

dispatch! {
    /// `sums += row`.
    fn add_row<T: Real>(sums: &mut [T], row: &[T]) {
        for (s, &x) in sums.iter_mut().zip(row) {
            *s += x;
        }
    }
}
