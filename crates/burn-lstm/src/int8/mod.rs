//! int8 inference on the CPU: [`Int8Lstm`](crate::Int8Lstm) and [`Int8Gru`](crate::Int8Gru), quantized copies of a
//! [`CudnnCompatibleLstm`](crate::CudnnCompatibleLstm) or
//! [`CudnnCompatibleGru`](crate::CudnnCompatibleGru) (`quantized_int8()`), which run
//! `lstm_cpu`'s int8 kernel ([`RnnKernel::FusedCpuInt8`](crate::RnnKernel::FusedCpuInt8)).
//! They sit beside the modules, not under the op contract: they hold no `Param` and
//! never train.

pub(crate) mod models;
pub(crate) mod stack;
