//! The layer `--impl fused-cpu|portable|cudnn` times, of the cell `--cell` asks for: one
//! type over `CudnnCompatibleLstm` and `CudnnCompatibleGru`, so the implementations build
//! either the same way.

use burn::tensor::Tensor;
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleGruConfig, CudnnCompatibleLstm, CudnnCompatibleLstmConfig,
    KernelChoice, RnnBackend, RnnKernel,
};

use crate::args::{Args, Cell};

/// An LSTM or GRU layer stack of the shape of the command line.
pub enum Layer<B: RnnBackend> {
    Lstm(CudnnCompatibleLstm<B>),
    Gru(CudnnCompatibleGru<B>),
}

impl<B: RnnBackend> Layer<B> {
    /// The layer of `args`'s cell and shape (batch-first, biases, PyTorch's
    /// initialisation) with `kernel` asked for.
    pub fn new(args: &Args, kernel: RnnKernel) -> Result<Self, String> {
        let device = Default::default();
        Ok(match args.cell {
            Cell::Lstm => Layer::Lstm(
                CudnnCompatibleLstmConfig::new(args.input, args.hidden)
                    .with_num_layers(args.layers)
                    .with_bidirectional(args.bidirectional)
                    .with_dropout(args.dropout)
                    .with_proj_size(args.proj_size)
                    .init::<B>(&device)
                    .with_kernel(Some(kernel)),
            ),
            Cell::Gru if args.proj_size > 0 => {
                return Err("--cell gru: a GRU has no projection (--proj-size 0)".into());
            }
            Cell::Gru => Layer::Gru(
                CudnnCompatibleGruConfig::new(args.input, args.hidden)
                    .with_num_layers(args.layers)
                    .with_bidirectional(args.bidirectional)
                    .with_dropout(args.dropout)
                    .init::<B>(&device)
                    .with_kernel(Some(kernel)),
            ),
        })
    }

    /// The kernel that runs for `args`'s batch and sequence.
    pub fn kernel(&self, args: &Args) -> KernelChoice {
        let device = Default::default();
        match self {
            Layer::Lstm(m) => m.kernel(&device, args.batch, args.seq),
            Layer::Gru(m) => m.kernel(&device, args.batch, args.seq),
        }
    }

    /// The output of one call from a zero initial state.
    pub fn forward(&self, x: Tensor<B, 3>, lengths: Option<&[usize]>) -> Tensor<B, 3> {
        match self {
            Layer::Lstm(m) => m.try_forward(x, None, lengths).expect("a valid call").0,
            Layer::Gru(m) => m.try_forward(x, None, lengths).expect("a valid call").0,
        }
    }
}
