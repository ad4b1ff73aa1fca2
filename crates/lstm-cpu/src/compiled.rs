//! The kernel compiled in this crate, once per element type.
//!
//! Rust compiles a generic function in the crate that calls it with a concrete type, at
//! that crate's optimisation level. Called through generic public functions, the whole
//! kernel would be compiled again in every crate that uses it (every test binary and
//! example of the workspace), each time at that crate's level: in an unoptimised test
//! binary it ran twenty times slower than this crate's optimised build. So each public
//! entry point that is generic over [`Real`] only calls through the table of its type
//! ([`kernel`]), whose functions are instantiated here, for `f32` and `f64`: a caller
//! links them instead of compiling them.

use std::any::Any;

use crate::arch::RnnArch;
use crate::call::{CallError, OutputGrads, RnnCall, RnnGradients};
use crate::dense::matrix::MatrixRef;
use crate::forward::ForwardResult;
use crate::packed::PackedWeights;
use crate::real::Real;
use crate::tape::Tape;

/// The kernel's entry points for one element type (see the module's documentation).
// Each field spells the signature of the public function it serves: an alias per field
// would only rename each one once.
#[allow(clippy::type_complexity)]
pub(crate) struct Kernel<T: Real> {
    /// [`crate::forward()`]'s pass: the call, whether to keep a tape, packed weights.
    pub(crate) forward: fn(&RnnCall<'_, T>, bool, Option<&PackedWeights<T>>) -> ForwardResult<T>,
    /// [`crate::backward()`].
    pub(crate) backward:
        fn(&RnnCall<'_, T>, Tape<T>, OutputGrads<'_, T>) -> Result<RnnGradients<T>, CallError>,
    /// [`PackedWeights::new`].
    pub(crate) pack: fn(&RnnArch, &[T]) -> Result<PackedWeights<T>, CallError>,
    /// [`crate::dense::matmul`].
    pub(crate) matmul: fn(
        usize,
        MatrixRef<'_, T>,
        MatrixRef<'_, T>,
        Option<&[T]>,
        &mut [T],
    ) -> Result<(), CallError>,
    /// [`crate::dense::softmax_nll`].
    pub(crate) softmax_nll: fn(usize, &mut [T], usize, &[usize]) -> Result<f64, CallError>,
    /// [`crate::dense::softmax_nll_grad`].
    pub(crate) softmax_nll_grad: fn(usize, &mut [T], usize, &[usize], T) -> Result<(), CallError>,
    /// [`crate::dense::column_sums`].
    pub(crate) column_sums: fn(usize, &[T], &mut [T]) -> Result<(), CallError>,
}

/// Fills a [`Kernel`] with this crate's instances for `$t`.
macro_rules! kernel_for {
    ($t:ty) => {
        Kernel::<$t> {
            forward: crate::forward::run::<$t>,
            backward: crate::backward::run::<$t>,
            pack: PackedWeights::<$t>::pack,
            matmul: crate::dense::ops::matmul_impl::<$t>,
            softmax_nll: crate::dense::ops::softmax_nll_impl::<$t>,
            softmax_nll_grad: crate::dense::ops::softmax_nll_grad_impl::<$t>,
            column_sums: crate::dense::ops::column_sums_impl::<$t>,
        }
    };
}

static F32: Kernel<f32> = kernel_for!(f32);
static F64: Kernel<f64> = kernel_for!(f64);

/// The table of `T`. A generic caller compiles only this lookup (two type comparisons
/// that an optimising build folds away).
pub(crate) fn kernel<T: Real>() -> &'static Kernel<T> {
    let f32: &'static dyn Any = &F32;
    let f64: &'static dyn Any = &F64;
    f32.downcast_ref()
        .or_else(|| f64.downcast_ref())
        .expect("`Real` is sealed: implemented for f32 and f64 only")
}
