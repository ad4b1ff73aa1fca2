//! The user-facing layers: [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm) and
//! [`CudnnCompatibleGru`](crate::CudnnCompatibleGru), their configs, checkpoints and
//! conversions, and the checks of their arguments. They run through the op contract
//! (`op/`) and know no kernel.

pub(crate) mod checkpoint;
pub(crate) mod config;
pub(crate) mod convert;
pub(crate) mod gru;
pub(crate) mod gru_config;
pub(crate) mod layer_call;
pub(crate) mod lstm;
pub(crate) mod methods;
pub(crate) mod model_checkpoint;
pub(crate) mod padding_mask;
pub(crate) mod record_guard;
pub(crate) mod record_listing;
pub(crate) mod record_mismatch;
pub(crate) mod record_paths;
pub(crate) mod shapes;
pub(crate) mod state;
pub(crate) mod torch_file;
pub(crate) mod torch_pickle;
pub(crate) mod typed_tensors;
pub(crate) mod validate;
pub(crate) mod weights;
