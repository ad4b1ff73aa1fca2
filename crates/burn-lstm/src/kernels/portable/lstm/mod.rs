//! The LSTM cell on the portable kernel: its forward (gate math of a step, the
//! residuals it keeps) and its backpropagation through time.

pub(super) mod backward;
pub(super) mod forward;
mod residuals;
