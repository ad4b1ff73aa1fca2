//! The user-facing layer: [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm), its
//! config, its checkpoints and conversions, and the checks of its arguments. It runs
//! through the op contract (`op/`) and knows no kernel.

pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod convert;
pub(crate) mod lstm;
pub(crate) mod record_guard;
pub(crate) mod shapes;
pub(crate) mod state;
pub(crate) mod validate;
pub(crate) mod weights;
