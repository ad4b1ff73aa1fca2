//! Rows of length 0 taken out of a call before a kernel that refuses them (cuDNN: its
//! sequence descriptor rejects a zero length) and put back after, with Burn tensor ops
//! only, so the same code runs (and is tested) on every backend.
//!
//! The kernel runs the non-empty rows alone (`select` along the batch axis); each result
//! is the kernel's rows followed by the empty rows' own values (`y`: zeros, `h_n` /
//! `c_n`: `h0` / `c0`), put back in the caller's order by one more `select`. The
//! backward does the same with the gradients: the kernel's for the non-empty rows;
//! for the empty rows zero input gradient and `dh0` / `dc0` = `dh_n` / `dc_n`. A
//! batch of only empty rows runs no kernel at all.

use std::sync::{Arc, Mutex};

use burn::tensor::{Int, Tensor, TensorData, backend::Backend, ops::FloatTensor};

use crate::op::io::{HostResiduals, RnnGrads, RnnInputs, RnnOutput, RnnOutputGrads, RnnSaved};
use crate::op::spec::RnnSpec;
use crate::op::tensor::{primitive, tensor};

/// Which rows of a call are empty, and the call of the others alone.
#[derive(Clone, Debug)]
pub(crate) struct EmptyRows {
    /// Rows with at least one step, in order.
    kept: Vec<usize>,
    /// Rows of length 0, in order.
    empty: Vec<usize>,
    /// The call of the kept rows alone (`None` when every row is empty).
    compact: Option<RnnSpec>,
}

impl EmptyRows {
    /// `None` when no row of `spec` is empty.
    pub fn of(spec: &RnnSpec) -> Option<Self> {
        let lengths = spec.lengths.as_deref()?;
        if !lengths.contains(&0) {
            return None;
        }
        let (kept, empty): (Vec<usize>, Vec<usize>) =
            (0..spec.batch).partition(|&b| lengths[b] > 0);
        let compact = (!kept.is_empty()).then(|| RnnSpec {
            batch: kept.len(),
            lengths: Some(kept.iter().map(|&b| lengths[b]).collect()),
            ..spec.clone()
        });
        Some(Self {
            kept,
            empty,
            compact,
        })
    }

    /// The call the kernel runs (`None`: no row has a step).
    pub fn compact_spec(&self) -> Option<&RnnSpec> {
        self.compact.as_ref()
    }

    fn indices<B: Backend>(rows: &[usize], device: &B::Device) -> Tensor<B, 1, Int> {
        let values: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
        Tensor::from_data(TensorData::new(values, [rows.len()]), device)
    }

    /// `[L, B, ·]` → its kept rows `[L, B_kept, ·]`.
    fn keep<B: Backend>(&self, t: FloatTensor<B>) -> FloatTensor<B> {
        let t = tensor::<B, 3>(t);
        let device = t.device();
        primitive(t.select(1, Self::indices::<B>(&self.kept, &device)))
    }

    /// `[L, B, ·]` → its empty rows `[L, B_empty, ·]`.
    fn empty_rows<B: Backend>(&self, t: FloatTensor<B>) -> Tensor<B, 3> {
        let t = tensor::<B, 3>(t);
        let device = t.device();
        t.select(1, Self::indices::<B>(&self.empty, &device))
    }

    /// The full batch from the kept rows' values (`None` when no row is kept) and the
    /// empty rows' values, in the caller's row order.
    fn merge<B: Backend>(
        &self,
        kept: Option<FloatTensor<B>>,
        empty: Tensor<B, 3>,
    ) -> FloatTensor<B> {
        let Some(kept) = kept else {
            return primitive(empty);
        };
        let device = empty.device();
        let joined = Tensor::cat(vec![tensor::<B, 3>(kept), empty], 1);
        // Row b of the result is row `position[b]` of [kept..., empty...].
        let mut position = vec![0; self.kept.len() + self.empty.len()];
        for (at, &row) in self.kept.iter().chain(&self.empty).enumerate() {
            position[row] = at;
        }
        primitive(joined.select(1, Self::indices::<B>(&position, &device)))
    }

    /// Zeros for the empty rows of a `[L, ·, width]` result like `like`.
    fn zeros<B: Backend>(&self, like: &FloatTensor<B>, lead: usize, width: usize) -> Tensor<B, 3> {
        let t = tensor::<B, 3>(like.clone());
        Tensor::zeros([lead, self.empty.len(), width], (&t.device(), t.dtype()))
    }
}

/// What a compacted training forward keeps: the kernel's own saved state (of the kept
/// rows), taken by the backward.
struct Compacted<B: Backend> {
    inner: Mutex<Option<RnnSaved<B>>>,
}

/// A forward through `kernel` of a call with empty rows (`rows` = [`EmptyRows::of`]).
pub(crate) fn forward<B: Backend>(
    rows: &EmptyRows,
    inputs: RnnInputs<B>,
    spec: &RnnSpec,
    save: bool,
    kernel: impl FnOnce(RnnInputs<B>, &RnnSpec, bool) -> (RnnOutput<B>, Option<RnnSaved<B>>),
) -> (RnnOutput<B>, Option<RnnSaved<B>>) {
    let arch = &spec.arch;
    let RnnInputs {
        input: x,
        weights: w,
        h0,
        c0,
    } = inputs.clone();
    let (output, inner) = match rows.compact_spec() {
        Some(compact) => {
            let compact_inputs = RnnInputs {
                input: rows.keep::<B>(x),
                weights: w,
                h0: rows.keep::<B>(h0.clone()),
                c0: c0.clone().map(|c0| rows.keep::<B>(c0)),
            };
            let (output, saved) = kernel(compact_inputs, compact, save);
            (Some(output), saved)
        }
        None => (None, None),
    };
    let y_width = arch.dirs() * arch.output_size();
    let empty_y = rows.zeros::<B>(&h0, spec.seq_len, y_width);
    let (y, h_n, c_n) = match output {
        Some(o) => (Some(o.y), Some(o.h_n), o.c_n),
        None => (None, None, None),
    };
    let output = RnnOutput {
        y: rows.merge::<B>(y, empty_y),
        h_n: rows.merge::<B>(h_n, rows.empty_rows::<B>(h0)),
        c_n: c0.map(|c0| rows.merge::<B>(c_n, rows.empty_rows::<B>(c0))),
    };
    let saved = save.then(|| RnnSaved {
        spec: spec.clone(),
        kernel: inner
            .as_ref()
            .map_or(crate::op::choice::RnnKernel::Portable, |s| s.kernel),
        inputs,
        residuals: Vec::new(),
        host: Some(HostResiduals(Arc::new(Compacted {
            inner: Mutex::new(inner),
        }))),
    });
    (output, saved)
}

/// Whether `saved` came from [`forward`].
pub(crate) fn is_compacted<B: Backend>(saved: &RnnSaved<B>) -> bool {
    saved
        .host
        .as_ref()
        .is_some_and(|h| h.0.downcast_ref::<Compacted<B>>().is_some())
}

/// The backward of a [`forward`] with `save`, the kept rows' through `kernel`.
pub(crate) fn backward<B: Backend>(
    saved: RnnSaved<B>,
    grads: RnnOutputGrads<B>,
    kernel: impl FnOnce(RnnSaved<B>, RnnOutputGrads<B>) -> RnnGrads<B>,
) -> RnnGrads<B> {
    let spec = saved.spec.clone();
    let rows = EmptyRows::of(&spec).expect("a compacted call has empty rows");
    let compacted = saved
        .host
        .expect("checked by is_compacted")
        .0
        .downcast::<Compacted<B>>()
        .unwrap_or_else(|_| unreachable!("checked by is_compacted"));
    let inner = compacted
        .inner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    let (x, w) = (saved.inputs.input, saved.inputs.weights);
    let kept = match (rows.compact_spec(), inner) {
        (Some(_), Some(inner)) => Some(kernel(
            inner,
            RnnOutputGrads {
                dy: rows.keep::<B>(grads.dy),
                dh_n: rows.keep::<B>(grads.dh_n.clone()),
                dc_n: grads.dc_n.clone().map(|dc_n| rows.keep::<B>(dc_n)),
                input_required: grads.input_required,
            },
        )),
        (Some(_), None) => panic!("an LSTM backward runs once per forward"),
        (None, _) => None,
    };
    let input = grads.input_required.then(|| {
        let empty = rows.zeros::<B>(&x, spec.seq_len, spec.arch.input_size);
        let kept = kept
            .as_ref()
            .map(|g| g.input.clone().expect("the input's gradient was asked for"));
        rows.merge::<B>(kept, empty)
    });
    let weights = match &kept {
        Some(g) => g.weights.clone(),
        None => {
            let w = tensor::<B, 1>(w);
            primitive(Tensor::<B, 1>::zeros(w.shape(), (&w.device(), w.dtype())))
        }
    };
    let (h0, c0) = match kept {
        Some(g) => (Some(g.h0), g.c0),
        None => (None, None),
    };
    RnnGrads {
        input,
        weights,
        h0: rows.merge::<B>(h0, rows.empty_rows::<B>(grads.dh_n)),
        c0: grads
            .dc_n
            .map(|dc_n| rows.merge::<B>(c0, rows.empty_rows::<B>(dc_n))),
    }
}

#[cfg(test)]
mod tests {
    //! The compaction around each CPU kernel gives what that kernel gives the whole
    //! batch (both run empty rows natively): the same code wraps cuDNN, where it cannot
    //! be run without a GPU.

    use super::*;
    use burn::backend::NdArray;
    use burn::tensor::DType;

    use crate::kernels::{fused_cpu, portable};
    use crate::op::spec::{CellKind, RnnArch};

    type B = NdArray<f64>;

    fn values(len: usize, seed: u64) -> Vec<f64> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect()
    }

    fn random<const D: usize>(shape: [usize; D], seed: u64) -> FloatTensor<B> {
        let data = TensorData::new(values(shape.iter().product(), seed), shape);
        primitive(Tensor::<B, D>::from_data(
            data,
            (&Default::default(), DType::F64),
        ))
    }

    fn host(t: FloatTensor<B>) -> Vec<f64> {
        tensor::<B, 1>(t)
            .into_data()
            .convert::<f64>()
            .to_vec()
            .unwrap()
    }

    fn close(name: &str, a: FloatTensor<B>, b: FloatTensor<B>) {
        let (a, b) = (host(a), host(b));
        assert_eq!(a.len(), b.len(), "{name}: length");
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(worst < 1e-12, "{name}: off by {worst:e}");
    }

    type Kernel = fn(RnnInputs<B>, &RnnSpec, bool) -> (RnnOutput<B>, Option<RnnSaved<B>>);
    type KernelBackward = fn(RnnSaved<B>, RnnOutputGrads<B>) -> RnnGrads<B>;

    fn close_optional(name: &str, a: Option<FloatTensor<B>>, b: Option<FloatTensor<B>>) {
        match (a, b) {
            (Some(a), Some(b)) => close(name, a, b),
            (None, None) => {}
            (a, b) => panic!("{name}: present {} against {}", a.is_some(), b.is_some()),
        }
    }

    /// An LSTM with projection, or a GRU (no cell state).
    fn check(cell: CellKind, lengths: &[usize], kernel: Kernel, kernel_backward: KernelBackward) {
        let arch = RnnArch {
            cell,
            input_size: 3,
            hidden_size: 5,
            proj_size: if cell == CellKind::Lstm { 3 } else { 0 },
            num_layers: 2,
            bidirectional: true,
            bias: true,
        };
        let (t, b, cells) = (4, lengths.len(), arch.cells());
        let (p, h) = (arch.output_size(), arch.cell_state_size());
        let spec = RnnSpec {
            arch: arch.clone(),
            seq_len: t,
            batch: b,
            lengths: Some(lengths.into()),
            dropout: 0.0,
            training: true,
            dropout_seed: None,
            kernel: None,
        };
        let inputs = RnnInputs {
            input: random([t, b, 3], 1),
            weights: random([arch.weight_count()], 2),
            h0: random([cells, b, p], 3),
            c0: (h > 0).then(|| random([cells, b, h], 4)),
        };
        let grads = || RnnOutputGrads {
            dy: random([t, b, 2 * p], 5),
            dh_n: random([cells, b, p], 6),
            dc_n: (h > 0).then(|| random([cells, b, h], 7)),
            input_required: true,
        };
        let rows = EmptyRows::of(&spec).expect("some row is empty");
        let (whole, whole_saved) = kernel(inputs.clone(), &spec, true);
        let (compact, compact_saved) = forward(&rows, inputs, &spec, true, kernel);
        close("y", whole.y, compact.y);
        close("h_n", whole.h_n, compact.h_n);
        close_optional("c_n", whole.c_n, compact.c_n);
        let compact_saved = compact_saved.expect("saved");
        assert!(is_compacted(&compact_saved));
        let whole = kernel_backward(whole_saved.expect("saved"), grads());
        let compact = backward(compact_saved, grads(), kernel_backward);
        close("dx", whole.input.unwrap(), compact.input.unwrap());
        close("dw", whole.weights, compact.weights);
        close("dh0", whole.h0, compact.h0);
        close_optional("dc0", whole.c0, compact.c0);
    }

    #[test]
    fn compaction_gives_what_each_cpu_kernel_gives_the_whole_batch() {
        for cell in [CellKind::Lstm, CellKind::Gru] {
            for lengths in [&[0, 4, 2, 0, 1][..], &[3, 0], &[0, 0, 0]] {
                check(
                    cell,
                    lengths,
                    portable::forward::<B>,
                    portable::backward::<B>,
                );
                check(
                    cell,
                    lengths,
                    fused_cpu::call::run::<B>,
                    fused_cpu::call::run_backward::<B>,
                );
            }
        }
    }

    #[test]
    fn no_empty_row_means_no_compaction() {
        let spec = |lengths: Option<&[usize]>| RnnSpec {
            arch: RnnArch {
                cell: crate::op::spec::CellKind::Lstm,
                input_size: 1,
                hidden_size: 1,
                proj_size: 0,
                num_layers: 1,
                bidirectional: false,
                bias: true,
            },
            seq_len: 3,
            batch: 2,
            lengths: lengths.map(Into::into),
            dropout: 0.0,
            training: false,
            dropout_seed: None,
            kernel: None,
        };
        assert!(EmptyRows::of(&spec(None)).is_none());
        assert!(EmptyRows::of(&spec(Some(&[1, 3]))).is_none());
        let rows = EmptyRows::of(&spec(Some(&[0, 3]))).expect("row 0 is empty");
        assert_eq!(rows.compact_spec().unwrap().batch, 1);
        assert_eq!(
            rows.compact_spec().unwrap().lengths.as_deref(),
            Some(&[3][..])
        );
    }
}
