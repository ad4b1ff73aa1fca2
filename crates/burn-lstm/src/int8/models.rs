//! [`Int8Lstm`] and [`Int8Gru`]: the int8 copies of the two modules, and the modules'
//! `quantized_int8()` that makes them.

use core::marker::PhantomData;

use burn::tensor::{Tensor, backend::Backend};

use crate::error::RnnError;
use crate::int8::stack::{Int8Stack, Int8State};
use crate::module::gru::CudnnCompatibleGru;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::module::state::{GruState, LstmState};
use crate::op::choice::KernelChoice;
use crate::op::contract::RnnBackend;
use crate::op::spec::RnnArch;

/// An LSTM layer stack with int8 weights, for CPU inference: every product (input,
/// recurrent, LSTMP projection) on weights quantized symmetric per output row and
/// activations quantized per row at run time, accumulated exactly in `i32`; the gate
/// math in f32 as [`CudnnCompatibleLstm`]'s fused CPU kernel runs it.
///
/// Made by [`CudnnCompatibleLstm::quantized_int8`]; its results are within the bound
/// of the repository's docs/numerics.md ("int8 inference") of the f32 model's. It
/// holds no `Param`: it never trains, and a checkpoint of it is the f32 model's
/// (quantize after loading). Inputs on any backend are read to the host; it is meant
/// for Flex and NdArray.
#[derive(Clone, Debug)]
pub struct Int8Lstm<B: Backend> {
    stack: Int8Stack,
    _backend: PhantomData<B>,
}

/// A GRU layer stack with int8 weights, for CPU inference: as [`Int8Lstm`], made by
/// [`CudnnCompatibleGru::quantized_int8`].
#[derive(Clone, Debug)]
pub struct Int8Gru<B: Backend> {
    stack: Int8Stack,
    _backend: PhantomData<B>,
}

/// The methods both int8 models have, word for word.
macro_rules! int8_methods {
    ($model:ident) => {
        impl<B: Backend> $model<B> {
            /// The architecture of the layer stack.
            pub fn arch(&self) -> &RnnArch {
                self.stack.arch()
            }

            /// Bytes of the quantized weights (int8 values, one f32 scale per output
            /// row, the f32 biases): about a quarter of the f32 model's.
            pub fn weight_bytes(&self) -> usize {
                self.stack.weight_bytes()
            }

            /// The kernel every call runs ([`RnnKernel::FusedCpuInt8`](crate::RnnKernel::FusedCpuInt8)),
            /// with the instruction set of its products and the weights' range.
            pub fn kernel(&self) -> KernelChoice {
                self.stack.kernel()
            }
        }
    };
}

int8_methods!(Int8Lstm);
int8_methods!(Int8Gru);

impl<B: Backend> Int8Lstm<B> {
    /// Runs the layer stack over full-length sequences, as
    /// [`CudnnCompatibleLstm::forward`].
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.try_forward(input, state, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Self::forward`] for right-padded batches, as
    /// [`CudnnCompatibleLstm::forward_with_lengths`].
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward_with_lengths(
        &self,
        input: Tensor<B, 3>,
        lengths: &[usize],
        state: Option<LstmState<B>>,
    ) -> (Tensor<B, 3>, LstmState<B>) {
        self.try_forward(input, state, Some(lengths))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Self::forward`] / [`Self::forward_with_lengths`] returning an error, naming the
    /// argument with the expected and the actual value, instead of panicking; an input
    /// that requires gradients is an error (int8 runs inference only).
    pub fn try_forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<LstmState<B>>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor<B, 3>, LstmState<B>), RnnError> {
        let (hidden, cell) = state.map_or((None, None), |s| (Some(s.hidden), Some(s.cell)));
        let (y, h_n, c_n) = self
            .stack
            .forward(input, Int8State { hidden, cell }, lengths)?;
        let c_n = c_n.expect("an LSTM's kernel returns its cell state");
        Ok((y, LstmState::new(h_n, c_n)))
    }
}

impl<B: Backend> Int8Gru<B> {
    /// Runs the layer stack over full-length sequences, as
    /// [`CudnnCompatibleGru::forward`].
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<GruState<B>>,
    ) -> (Tensor<B, 3>, GruState<B>) {
        self.try_forward(input, state, None)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Like [`Self::forward`] for right-padded batches, as
    /// [`CudnnCompatibleGru::forward_with_lengths`].
    ///
    /// # Panics
    /// With the message of [`Self::try_forward`]'s error on invalid input.
    pub fn forward_with_lengths(
        &self,
        input: Tensor<B, 3>,
        lengths: &[usize],
        state: Option<GruState<B>>,
    ) -> (Tensor<B, 3>, GruState<B>) {
        self.try_forward(input, state, Some(lengths))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Int8Lstm::try_forward`].
    pub fn try_forward(
        &self,
        input: Tensor<B, 3>,
        state: Option<GruState<B>>,
        lengths: Option<&[usize]>,
    ) -> Result<(Tensor<B, 3>, GruState<B>), RnnError> {
        let hidden = state.map(|s| s.hidden);
        let state = Int8State { hidden, cell: None };
        let (y, h_n, _) = self.stack.forward(input, state, lengths)?;
        Ok((y, GruState::new(h_n)))
    }
}

impl<B: RnnBackend> CudnnCompatibleLstm<B> {
    /// An int8 copy of this model for CPU inference ([`Int8Lstm`]): the weights
    /// quantized once, symmetric per output row, to the range the CPU's fastest int8
    /// kernel runs exactly (±127 with AVX-512 VNNI, AVX-VNNI or no vector kernel, ±63
    /// where AVX2 without VNNI is the widest). The f32 model is unchanged. Errors as [`Self::validate`]'s,
    /// and name `weights` when a parameter is not finite.
    pub fn quantized_int8(&self) -> Result<Int8Lstm<B>, RnnError> {
        self.validate()?;
        let stack = Int8Stack::quantize(
            &self.arch(),
            crate::module::weights::flat_parameters_once(&self.layers),
            self.batch_first,
            self.reject_non_finite,
        )?;
        Ok(Int8Lstm {
            stack,
            _backend: PhantomData,
        })
    }
}

impl<B: RnnBackend> CudnnCompatibleGru<B> {
    /// An int8 copy of this model for CPU inference ([`Int8Gru`]), as
    /// [`CudnnCompatibleLstm::quantized_int8`].
    pub fn quantized_int8(&self) -> Result<Int8Gru<B>, RnnError> {
        self.validate()?;
        let stack = Int8Stack::quantize(
            &self.arch(),
            crate::module::weights::flat_parameters_once(&self.layers),
            self.batch_first,
            self.reject_non_finite,
        )?;
        Ok(Int8Gru {
            stack,
            _backend: PhantomData,
        })
    }
}
