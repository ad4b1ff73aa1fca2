//! The kernel's public passes, generic over the element type: each calls the instance
//! compiled in this crate for its type ([`crate::compiled`]).

use crate::arch::RnnArch;
use crate::call::{CallError, OutputGrads, RnnCall, RnnGradients, RnnOutputs};
use crate::compiled::kernel;
use crate::packed::PackedWeights;
use crate::real::Real;
use crate::tape::Tape;

/// Inference: outputs only.
pub fn forward<T: Real>(call: &RnnCall<'_, T>) -> Result<RnnOutputs<T>, CallError> {
    (kernel::<T>().forward)(call, false, None).map(|(outputs, _)| outputs)
}

/// Training: outputs and the [`Tape`] that [`backward`](crate::backward()) needs.
pub fn forward_train<T: Real>(
    call: &RnnCall<'_, T>,
) -> Result<(RnnOutputs<T>, Tape<T>), CallError> {
    (kernel::<T>().forward)(call, true, None)
        .map(|(outputs, tape)| (outputs, tape.expect("a training run keeps its tape")))
}

/// Inference with weights packed beforehand: the same results as [`forward`] on the
/// flat parameters `packed` was made from. `call.weights` is not read (it may be empty);
/// `packed` must be of `call.arch`.
pub fn forward_packed<T: Real>(
    call: &RnnCall<'_, T>,
    packed: &PackedWeights<T>,
) -> Result<RnnOutputs<T>, CallError> {
    if packed.arch() != call.arch {
        return Err(CallError {
            argument: "packed",
            expected: format!("weights packed for {:?}", call.arch),
            actual: format!("weights packed for {:?}", packed.arch()),
        });
    }
    (kernel::<T>().forward)(call, false, Some(packed)).map(|(outputs, _)| outputs)
}

/// Gradients of the call's inputs from the upstream gradients of its outputs.
pub fn backward<T: Real>(
    call: &RnnCall<'_, T>,
    tape: Tape<T>,
    grads: OutputGrads<'_, T>,
) -> Result<RnnGradients<T>, CallError> {
    (kernel::<T>().backward)(call, tape, grads)
}

impl<T: Real> PackedWeights<T> {
    /// Packs `weights`, the canonical flat parameters of `arch`
    /// ([`RnnArch::direction_layout`]).
    pub fn new(arch: &RnnArch, weights: &[T]) -> Result<Self, CallError> {
        (kernel::<T>().pack)(arch, weights)
    }
}
