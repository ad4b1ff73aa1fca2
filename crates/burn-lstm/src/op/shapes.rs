//! The shapes of what one call of the op passes, and the invariant every path keeps:
//! no tensor of zero elements. A CubeCL device refuses to launch a kernel over none
//! (CUDA answers `CUDA_ERROR_INVALID_VALUE` to a grid of 0 blocks), so a GRU, which has
//! no cell state, passes no `c0`, returns no `c_n` and receives no `dc_n` (`None`), rather
//! than empty tensors.

use burn::tensor::{TensorMetadata, backend::Backend, ops::FloatTensor};

use crate::op::spec::RnnSpec;

/// Shapes of a call's results `y`, `h_n`, `c_n` (and so of their upstream gradients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResultShapes {
    /// `[T, B, dirs * H_out]`.
    pub y: [usize; 3],
    /// `[layers * dirs, B, H_out]`.
    pub h_n: [usize; 3],
    /// `[layers * dirs, B, H]` for an LSTM; `None` for a GRU.
    pub c_n: Option<[usize; 3]>,
}

impl ResultShapes {
    /// The result shapes of `spec`.
    pub fn of(spec: &RnnSpec) -> Self {
        let arch = &spec.arch;
        let (cells, batch) = (arch.cells(), spec.batch);
        let cell_state = arch.cell_state_size();
        Self {
            y: [spec.seq_len, batch, arch.dirs() * arch.output_size()],
            h_n: [cells, batch, arch.output_size()],
            c_n: (cell_state > 0).then_some([cells, batch, cell_state]),
        }
    }
}

/// Checks (in debug builds, where the tests run) that none of `tensors` has zero
/// elements; `place` names the call site in the panic message. Every place that hands
/// tensors between the op's layers (the call, autodiff, fusion, the CubeCL glue) runs
/// it, so the CPU tests pin the invariant for the GPU paths too.
pub(crate) fn debug_check_non_empty<'a, B: Backend>(
    place: &str,
    tensors: impl IntoIterator<Item = &'a FloatTensor<B>>,
) {
    if cfg!(debug_assertions) {
        for (index, tensor) in tensors.into_iter().enumerate() {
            let shape = tensor.shape();
            assert!(
                shape.num_elements() > 0,
                "burn-lstm: {place}: tensor {index} has zero elements (shape {:?}); \
                 the op never passes an empty tensor (a CubeCL device cannot launch over one)",
                shape.as_slice()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::spec::{CellKind, RnnArch};

    fn spec(cell: CellKind, proj_size: usize, bidirectional: bool) -> RnnSpec {
        RnnSpec {
            arch: RnnArch {
                cell,
                input_size: 3,
                hidden_size: 5,
                proj_size,
                num_layers: 2,
                bidirectional,
                bias: true,
            },
            seq_len: 7,
            batch: 4,
            lengths: None,
            dropout: 0.0,
            training: true,
            dropout_seed: None,
            kernel: None,
        }
    }

    #[test]
    fn a_gru_has_no_cell_state_and_no_empty_result() {
        for bidirectional in [false, true] {
            let shapes = ResultShapes::of(&spec(CellKind::Gru, 0, bidirectional));
            let dirs = if bidirectional { 2 } else { 1 };
            assert_eq!(shapes.y, [7, 4, 5 * dirs]);
            assert_eq!(shapes.h_n, [2 * dirs, 4, 5]);
            assert_eq!(shapes.c_n, None);
        }
    }

    #[test]
    fn an_lstm_carries_its_cell_state_unprojected() {
        let shapes = ResultShapes::of(&spec(CellKind::Lstm, 2, true));
        assert_eq!(shapes.y, [7, 4, 4]);
        assert_eq!(shapes.h_n, [4, 4, 2]);
        assert_eq!(shapes.c_n, Some([4, 4, 5]));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "tensor 1 has zero elements (shape [2, 4, 0])")]
    fn an_empty_tensor_is_caught() {
        use crate::op::tensor::primitive;
        use burn::tensor::Tensor;
        type B = burn_ndarray::NdArray<f32>;
        let device = Default::default();
        let full = primitive(Tensor::<B, 3>::zeros([2, 4, 5], &device));
        let empty = primitive(Tensor::<B, 3>::zeros([2, 4, 0], &device));
        debug_check_non_empty::<B>("test", [&full, &empty]);
    }
}
