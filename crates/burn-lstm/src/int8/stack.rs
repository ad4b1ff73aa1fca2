//! What [`Int8Lstm`](crate::Int8Lstm) and [`Int8Gru`](crate::Int8Gru) share: the
//! quantized weights, the checks of a call, and the call of `lstm_cpu`'s int8 kernel on
//! the tensors' values.

use std::sync::Arc;

use burn::tensor::{Tensor, TensorData, backend::Backend};
use lstm_cpu::int8::{QuantLevels, QuantizedRnn};
use lstm_cpu::{InputStrides, RnnCall};

use crate::error::RnnError;
use crate::kernels::fused_cpu::threads::CallThreads;
use crate::module::layer_call::checked_shape;
use crate::module::validate;
use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::spec::RnnArch;

/// A quantized layer stack and the settings of the module it was quantized from.
#[derive(Clone, Debug)]
pub(crate) struct Int8Stack {
    model: Arc<QuantizedRnn>,
    levels: QuantLevels,
    batch_first: bool,
    reject_non_finite: bool,
}

/// A call's `(y, h_n, c_n)`; `c_n` is `None` for a cell without a cell state.
pub(crate) type Int8Output<B> = (Tensor<B, 3>, Tensor<B, 3>, Option<Tensor<B, 3>>);

/// A call's initial state, each part `[layers · dirs, batch, ..]`; `None`: zeros.
pub(crate) struct Int8State<B: Backend> {
    pub hidden: Option<Tensor<B, 3>>,
    pub cell: Option<Tensor<B, 3>>,
}

impl Int8Stack {
    /// Quantizes the canonical flat parameters `weights` of `arch` to the weight range
    /// the CPU's fastest int8 kernel runs exactly (`lstm_cpu::int8::fastest_levels`).
    pub(crate) fn quantize<B: Backend>(
        arch: &RnnArch,
        weights: Tensor<B, 1>,
        batch_first: bool,
        reject_non_finite: bool,
    ) -> Result<Self, RnnError> {
        let weights = host_values(weights, "weights")?;
        let levels = lstm_cpu::int8::fastest_levels();
        let model = QuantizedRnn::quantize(arch, &weights, levels).map_err(invalid)?;
        Ok(Self {
            model: Arc::new(model),
            levels,
            batch_first,
            reject_non_finite,
        })
    }

    /// The architecture of the layer stack.
    pub(crate) fn arch(&self) -> &RnnArch {
        self.model.arch()
    }

    /// Bytes of the quantized weights: int8 values, row scales and f32 biases.
    pub(crate) fn weight_bytes(&self) -> usize {
        self.model.weight_bytes()
    }

    /// The kernel every call runs: the int8 kernel, with the instruction set of its
    /// products and the weights' range as its detail.
    pub(crate) fn kernel(&self) -> KernelChoice {
        KernelChoice::fastest(RnnKernel::FusedCpuInt8).with_detail(format!(
            "{} products, weights in ±{}",
            lstm_cpu::int8::kernel_name(self.levels),
            self.levels.max()
        ))
    }

    /// `(y, h_n, c_n)` of a call on `input` (in the module's layout), `c_n` `None` for
    /// a cell without a cell state. Errors name the argument: the input's shape, the
    /// lengths, the state's shapes, non-finite values (under `NanPolicy::Reject`, and
    /// always in `input` and the state: int8 cannot hold them), and an input that
    /// requires gradients (int8 runs inference only).
    pub(crate) fn forward<B: Backend>(
        &self,
        input: Tensor<B, 3>,
        state: Int8State<B>,
        lengths: Option<&[usize]>,
    ) -> Result<Int8Output<B>, RnnError> {
        if input.is_require_grad() {
            return Err(RnnError::invalid(
                "input",
                "a tensor that does not require gradients (int8 models run inference only; \
                 train the f32 module, then quantize it)",
                "a tensor tracked for gradients",
            ));
        }
        let arch = self.arch();
        let [batch, seq_len] = checked_shape(&input, arch, self.batch_first, lengths)?;
        let (device, dtype) = (input.device(), input.dtype());
        let cells = arch.cells();
        let hidden_shape = [cells, batch, arch.output_size()];
        let cell_shape = [cells, batch, arch.cell_state_size()];
        let h0 = self.state_part(state.hidden, "state.hidden", hidden_shape, "H_out")?;
        let c0 = self.state_part(state.cell, "state.cell", cell_shape, "H")?;
        if self.reject_non_finite {
            validate::finite("input", &input)?;
        }
        let threads = CallThreads::start();
        let dims = input.dims();
        let x = host_values(input, "input")?;
        let input_strides = self.batch_first.then_some(InputStrides {
            step: dims[2],
            row: dims[1] * dims[2],
        });
        let call = RnnCall {
            arch,
            seq_len,
            batch,
            lengths,
            input: &x,
            input_strides,
            weights: &[],
            h0: &h0,
            c0: &c0,
            dropout_masks: &[],
            threads: threads.threads(),
        };
        let out = self.model.forward(&call).map_err(invalid)?;
        let tensor = |values: Vec<f32>, shape: [usize; 3]| {
            let data = TensorData::new(values, shape).convert_dtype(dtype);
            Tensor::<B, 3>::from_data(data, &device)
        };
        let y = tensor(out.y, [seq_len, batch, arch.dirs() * arch.output_size()]);
        let y = if self.batch_first {
            y.swap_dims(0, 1)
        } else {
            y
        };
        let c_n = (arch.cell_state_size() > 0).then(|| tensor(out.c_n, cell_shape));
        Ok((y, tensor(out.h_n, hidden_shape), c_n))
    }

    /// A part of the initial state as host values: `given` once its shape is checked
    /// (and its values, under `NanPolicy::Reject`), or zeros.
    fn state_part<B: Backend>(
        &self,
        given: Option<Tensor<B, 3>>,
        name: &'static str,
        shape: [usize; 3],
        last: &str,
    ) -> Result<Vec<f32>, RnnError> {
        let Some(tensor) = given else {
            return Ok(vec![0.0; shape.iter().product()]);
        };
        validate::state_part(name, tensor.dims(), shape, last)?;
        if self.reject_non_finite {
            validate::finite(name, &tensor)?;
        }
        host_values(tensor, name)
    }
}

/// The values of `tensor` as f32 on the host.
fn host_values<B: Backend, const D: usize>(
    tensor: Tensor<B, D>,
    name: &str,
) -> Result<Vec<f32>, RnnError> {
    let dtype = tensor.dtype();
    tensor
        .into_data()
        .convert::<f32>()
        .into_vec::<f32>()
        .map_err(|e| RnnError::invalid(name, "float values", format!("{dtype:?} ({e:?})")))
}

/// The kernel's error as the crate's.
fn invalid(e: lstm_cpu::CallError) -> RnnError {
    RnnError::invalid(e.argument, e.expected, e.actual)
}
