//! The op: one call per layer stack, as an extension trait over Burn's `Backend`.
//!
//! - `contract.rs`: [`RnnBackend`](crate::RnnBackend), the trait a backend implements
//!   (every method defaults to the portable kernel), and `io.rs`, the types it passes.
//! - `spec.rs`: what one call computes; `choice.rs`: which kernel runs it and why.
//! - `call.rs`: the op as a function on Burn tensors ([`rnn`](crate::rnn)).
//! - `shapes.rs`: the shapes of a call's results, and the invariant that no tensor of
//!   zero elements passes (a GRU has no cell state: `None`, not an empty tensor).
//! - `autodiff.rs`: the op on `Autodiff<B>` (one node whose backward calls the inner
//!   backend's); `flat_weights.rs`, `tracked_weights.rs` and `joined_weights.rs`: the
//!   flat parameter buffer.
//! - `fusion.rs` (feature `cubecl`): the op as one custom operation of Burn's fusion
//!   backends.
//!
//! Nothing here knows a concrete backend: `kernels/` implements the contract for them.

pub(crate) mod autodiff;
pub(crate) mod call;
pub(crate) mod choice;
pub(crate) mod contract;
pub(crate) mod flat_weights;
#[cfg(feature = "cubecl")]
pub(crate) mod fusion;
pub(crate) mod io;
pub(crate) mod joined_weights;
pub(crate) mod shapes;
pub(crate) mod spec;
pub(crate) mod tensor;
pub(crate) mod tracked_weights;
pub(crate) mod zero_state;
