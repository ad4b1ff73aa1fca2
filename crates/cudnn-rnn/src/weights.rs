//! Where cuDNN keeps each weight matrix and bias inside its weight space, asked of cuDNN
//! (`cudnnGetRNNWeightParams`) rather than assumed, and the copy plan between that space
//! and another layout.

use cudarc::cudnn::sys;
use cudarc::driver::{CudaStream, result as driver};

use crate::config::RnnConfig;
use crate::descriptor::TensorDescriptor;
use crate::error::{CudnnRnnError, Result};
use crate::status::check;

/// Which parameter of a (layer, direction) a region holds. cuDNN numbers them with
/// `linLayerID`: for an LSTM 0–3 the input weights of gates i, f, g, o, 4–7 the
/// recurrent weights, 8 the projection; for a GRU 0–2 the input weights of gates r, z, n
/// and 3–5 the recurrent ones. Each matrix's bias has the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightKind {
    /// One gate's rows of `weight_ih`, `[H, in]`.
    InputWeight,
    /// One gate's rows of `weight_hh`, `[H, H_out]`.
    RecurrentWeight,
    /// One gate's part of `bias_ih`, `[H]`.
    InputBias,
    /// One gate's part of `bias_hh`, `[H]`.
    RecurrentBias,
    /// The projection `weight_hr`, `[H_out, H]`.
    Projection,
}

/// One matrix or bias inside the weight space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WeightRegion {
    /// `layer * dirs + direction`.
    pub pseudo_layer: usize,
    /// What it holds.
    pub kind: WeightKind,
    /// Gate `0..4` (i, f, g, o) or `0..3` (r, z, n); 0 for the projection.
    pub gate: usize,
    /// Offset in elements from the start of the weight space.
    pub offset: usize,
    /// Length in elements.
    pub len: usize,
}

/// Every region of a weight space, as cuDNN reports them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightSpaceLayout {
    /// Size of the weight space in bytes (`cudnnGetRNNWeightSpaceSize`).
    pub bytes: usize,
    /// The regions, by pseudo-layer then `linLayerID`.
    pub regions: Vec<WeightRegion>,
}

impl WeightSpaceLayout {
    /// Asks cuDNN where each parameter lies in a weight space of `bytes` bytes at device
    /// address `base` (only addresses are computed: nothing is read or written there).
    ///
    /// # Safety
    /// `base` must be a device allocation of at least `bytes` bytes on the handle's device,
    /// and `rnn_desc` a configured LSTM descriptor of `config`.
    pub(crate) unsafe fn query(
        handle: sys::cudnnHandle_t,
        rnn_desc: sys::cudnnRNNDescriptor_t,
        config: &RnnConfig,
        base: u64,
        bytes: usize,
    ) -> Result<Self> {
        let elem = config.data_type.size();
        let matrix_desc = TensorDescriptor::new()?;
        let bias_desc = TensorDescriptor::new()?;
        let gates = config.cell.gates() as i32;
        let lin_layers = 2 * gates + i32::from(config.proj_size > 0);
        let mut regions = Vec::new();
        for pseudo_layer in 0..config.pseudo_layers() {
            for lin_layer in 0..lin_layers {
                let mut matrix: *mut core::ffi::c_void = core::ptr::null_mut();
                let mut bias: *mut core::ffi::c_void = core::ptr::null_mut();
                // SAFETY: the caller guarantees the handle, descriptor and weight space.
                check("cudnnGetRNNWeightParams", unsafe {
                    sys::cudnnGetRNNWeightParams(
                        handle,
                        rnn_desc,
                        pseudo_layer as i32,
                        bytes,
                        base as *const core::ffi::c_void,
                        lin_layer,
                        matrix_desc.raw(),
                        &mut matrix,
                        bias_desc.raw(),
                        &mut bias,
                    )
                })?;
                let (weight_kind, bias_kind, gate) = match lin_layer {
                    id if id < gates => {
                        (WeightKind::InputWeight, WeightKind::InputBias, id as usize)
                    }
                    id if id < 2 * gates => (
                        WeightKind::RecurrentWeight,
                        WeightKind::RecurrentBias,
                        (id - gates) as usize,
                    ),
                    _ => (WeightKind::Projection, WeightKind::Projection, 0),
                };
                for (address, desc, kind) in [
                    (matrix, &matrix_desc, weight_kind),
                    (bias, &bias_desc, bias_kind),
                ] {
                    if address.is_null() {
                        continue;
                    }
                    let byte_offset = (address as u64).checked_sub(base).ok_or_else(|| {
                        CudnnRnnError::UnexpectedWeightLayout(format!(
                            "{kind:?} of pseudo-layer {pseudo_layer} lies before the weight space"
                        ))
                    })? as usize;
                    if !byte_offset.is_multiple_of(elem) {
                        return Err(CudnnRnnError::UnexpectedWeightLayout(format!(
                            "{kind:?} of pseudo-layer {pseudo_layer} at byte {byte_offset}, not a multiple of {elem}"
                        )));
                    }
                    let region = WeightRegion {
                        pseudo_layer,
                        kind,
                        gate,
                        offset: byte_offset / elem,
                        len: desc.element_count()?,
                    };
                    check_region(config, &region, bytes / elem)?;
                    regions.push(region);
                }
            }
        }
        Ok(Self { bytes, regions })
    }
}

/// The size cuDNN reports must be the size the canonical layout has.
fn check_region(config: &RnnConfig, region: &WeightRegion, capacity: usize) -> Result<()> {
    let layer = region.pseudo_layer / config.dirs();
    let layer_input = if layer == 0 {
        config.input_size
    } else {
        config.dirs() * config.output_size()
    };
    let h = config.hidden_size;
    let expected = match region.kind {
        WeightKind::InputWeight => h * layer_input,
        WeightKind::RecurrentWeight => h * config.output_size(),
        WeightKind::InputBias | WeightKind::RecurrentBias => h,
        WeightKind::Projection => config.proj_size * h,
    };
    if region.len != expected {
        return Err(CudnnRnnError::UnexpectedWeightLayout(format!(
            "{region:?} has {} elements, expected {expected}",
            region.len
        )));
    }
    if region.offset + region.len > capacity {
        return Err(CudnnRnnError::UnexpectedWeightLayout(format!(
            "{region:?} ends past the weight space ({capacity} elements)"
        )));
    }
    Ok(())
}

/// One contiguous copy: `len` elements from `src` to `dst` (element offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyRun {
    /// Offset in the source buffer.
    pub src: usize,
    /// Offset in the destination buffer.
    pub dst: usize,
    /// Elements.
    pub len: usize,
}

/// Copies between two layouts of the same parameters, with runs that are contiguous on
/// both sides merged (cuDNN keeps a layer's four gates together, so a plan is a handful
/// of copies, or none at all when the layouts coincide).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopyPlan {
    runs: Vec<CopyRun>,
}

impl CopyPlan {
    /// A plan from individual runs, in any order.
    pub fn new(runs: impl IntoIterator<Item = CopyRun>) -> Self {
        let mut sorted: Vec<CopyRun> = runs.into_iter().filter(|r| r.len > 0).collect();
        sorted.sort_by_key(|r| r.src);
        let mut merged: Vec<CopyRun> = Vec::with_capacity(sorted.len());
        for run in sorted {
            match merged.last_mut() {
                Some(last) if last.src + last.len == run.src && last.dst + last.len == run.dst => {
                    last.len += run.len;
                }
                _ => merged.push(run),
            }
        }
        Self { runs: merged }
    }

    /// The merged runs, by source offset.
    pub fn runs(&self) -> &[CopyRun] {
        &self.runs
    }

    /// Whether the two layouts coincide over `len` elements: one buffer can be used as
    /// the other with no copy.
    pub fn is_identity(&self, len: usize) -> bool {
        matches!(self.runs.as_slice(), [CopyRun { src: 0, dst: 0, len: l }] if *l == len)
    }

    /// Elements the plan writes.
    pub fn covered(&self) -> usize {
        self.runs.iter().map(|r| r.len).sum()
    }

    /// The plan that copies back (destination to source).
    pub fn reversed(&self) -> Self {
        Self::new(self.runs.iter().map(|r| CopyRun {
            src: r.dst,
            dst: r.src,
            len: r.len,
        }))
    }

    /// Queues the copies on `stream`: from device buffer `from` to `to`, elements of
    /// `elem` bytes.
    ///
    /// # Safety
    /// Both addresses must be device allocations on the stream's context that hold every
    /// run's source and destination range.
    pub unsafe fn copy(&self, stream: &CudaStream, from: u64, to: u64, elem: usize) -> Result<()> {
        for run in &self.runs {
            // SAFETY: the caller guarantees both ranges.
            unsafe {
                driver::memcpy_dtod_async(
                    to + (run.dst * elem) as u64,
                    from + (run.src * elem) as u64,
                    run.len * elem,
                    stream.cu_stream(),
                )
            }
            .map_err(|e| CudnnRnnError::driver("cuMemcpyDtoDAsync (weights)", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_runs_contiguous_on_both_sides() {
        let plan = CopyPlan::new([
            CopyRun {
                src: 4,
                dst: 104,
                len: 4,
            },
            CopyRun {
                src: 0,
                dst: 100,
                len: 4,
            },
            CopyRun {
                src: 8,
                dst: 0,
                len: 2,
            },
            CopyRun {
                src: 10,
                dst: 2,
                len: 0,
            },
        ]);
        assert_eq!(
            plan.runs(),
            &[
                CopyRun {
                    src: 0,
                    dst: 100,
                    len: 8
                },
                CopyRun {
                    src: 8,
                    dst: 0,
                    len: 2
                }
            ]
        );
        assert_eq!(plan.covered(), 10);
        assert!(!plan.is_identity(10));
        assert_eq!(plan.reversed().runs()[0].src, 0);
        assert_eq!(plan.reversed().runs()[0].dst, 8);
        let same = CopyPlan::new([
            CopyRun {
                src: 0,
                dst: 0,
                len: 3,
            },
            CopyRun {
                src: 3,
                dst: 3,
                len: 5,
            },
        ]);
        assert!(same.is_identity(8));
        assert!(!same.is_identity(9));
    }
}
