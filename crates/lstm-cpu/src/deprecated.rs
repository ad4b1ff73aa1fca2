//! The names this crate's types had while they held LSTMs only, kept for one release.

use crate::{RnnArch, RnnCall, RnnGradients, RnnOutputs};

/// The name [`RnnArch`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnArch`")]
pub type LstmArch = RnnArch;

/// The name [`RnnCall`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnCall`")]
pub type LstmCall<'a, T> = RnnCall<'a, T>;

/// The name [`RnnOutputs`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnOutputs`")]
pub type LstmOutputs<T> = RnnOutputs<T>;

/// The name [`RnnGradients`] had before the GRU.
#[deprecated(since = "0.2.0", note = "renamed `RnnGradients`")]
pub type LstmGradients<T> = RnnGradients<T>;
