//! What one call of the kernel takes and returns, and the checks of its arguments.

use core::fmt;

use crate::arch::{CellKind, RnnArch};
use crate::buffers::Buffer;

/// One call of the kernel: a whole layer stack over a whole (padded) batch.
/// Layouts are sequence-major and row-major, as in the rest of the workspace.
#[derive(Clone, Copy, Debug)]
pub struct RnnCall<'a, T> {
    /// The layer stack.
    pub arch: &'a RnnArch,
    /// Time steps `T` (the padded length when `lengths` is set).
    pub seq_len: usize,
    /// Batch rows `B`.
    pub batch: usize,
    /// Valid steps of each row of a right-padded batch, each in `0..=T`; `None` when
    /// every row is full. A row of length 0 (an empty sequence) emits zeros at every
    /// step, ends in its initial state, and in the backward passes `dh_n` / `dc_n`
    /// straight to `dh0` / `dc0` with no gradient to the parameters or its input.
    pub lengths: Option<&'a [usize]>,
    /// Input sequence `[T, B, I]` (or laid out as `input_strides` says). Values at
    /// padded steps (`t >= lengths[b]`) never reach an output, but the input products
    /// read them: they must be finite, or a NaN there (multiplied by a zero gradient)
    /// reaches the gradient of `weight_ih`.
    pub input: &'a [T],
    /// Where each row of `input` starts, when it is not sequence-major `[T, B, I]`:
    /// a batch-first `[B, T, I]` input, or any view whose `I` features are consecutive.
    /// Inference reads it in place; training copies it once, sequence-major, into the
    /// tape (the backward's products read it by steps).
    pub input_strides: Option<InputStrides>,
    /// Flat parameters in the canonical layout ([`RnnArch::direction_layout`]).
    pub weights: &'a [T],
    /// Initial hidden state `[layers * dirs, B, H_out]`.
    pub h0: &'a [T],
    /// Initial cell state `[layers * dirs, B, H]` (empty for a GRU, which has none).
    pub c0: &'a [T],
    /// Inverted-dropout masks (`0` or `1/(1−p)`) multiplied into the input of every layer
    /// above the first (`[T, B, dirs * H_out]` each), or empty for no dropout.
    pub dropout_masks: &'a [&'a [T]],
    /// Threads the call may use (at least 1). Small shapes use fewer: see
    /// `docs/fused-cpu.md`.
    pub threads: usize,
}

/// Where row `b` of step `t` of a call's input starts: at `t * step + b * row`, with its
/// `I` features consecutive from there. Rows may overlap (a broadcast input, stride 0):
/// the kernel only reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputStrides {
    /// Distance between steps `t` and `t + 1` of one batch row, in values.
    pub step: usize,
    /// Distance between batch rows `b` and `b + 1` of one step, in values.
    pub row: usize,
}

impl InputStrides {
    /// Sequence-major `[T, B, I]`, the layout without strides.
    pub fn seq_major(batch: usize, input_size: usize) -> Self {
        Self {
            step: batch * input_size,
            row: input_size,
        }
    }

    /// Batch-first `[B, T, I]`.
    pub fn batch_first(seq_len: usize, input_size: usize) -> Self {
        Self {
            step: input_size,
            row: seq_len * input_size,
        }
    }

    /// Whether step `t + 1`'s rows follow step `t`'s `batch` rows, each `row` apart
    /// (sequence-major, maybe with a gap after each row): then any run of steps is one
    /// run of evenly spaced rows.
    pub(crate) fn steps_follow_rows(&self, batch: usize) -> bool {
        self.step == batch * self.row
    }

    /// Values an input of `seq_len × batch` rows of `input_size` spans from its first
    /// (its last row's end); `None` where that overflows. `seq_len` and `batch` are at
    /// least 1.
    pub(crate) fn span(&self, seq_len: usize, batch: usize, input_size: usize) -> Option<usize> {
        (seq_len - 1)
            .checked_mul(self.step)?
            .checked_add((batch - 1).checked_mul(self.row)?)?
            .checked_add(input_size)
    }
}

/// Results of a forward call.
#[derive(Clone, Debug, PartialEq)]
pub struct RnnOutputs<T> {
    /// Output of the last layer `[T, B, dirs * H_out]`, zero past each row's length.
    pub y: Vec<T>,
    /// Final hidden state of every layer and direction `[layers * dirs, B, H_out]`.
    pub h_n: Vec<T>,
    /// Final cell state of every layer and direction `[layers * dirs, B, H]` (empty for
    /// a GRU).
    pub c_n: Vec<T>,
}

/// Upstream gradients of a forward's three outputs (their shapes).
#[derive(Clone, Copy, Debug)]
pub struct OutputGrads<'a, T> {
    /// Gradient of `y`.
    pub dy: &'a [T],
    /// Gradient of `h_n`.
    pub dh_n: &'a [T],
    /// Gradient of `c_n`.
    pub dc_n: &'a [T],
    /// Whether to compute the gradient of `input`. When not (an input nobody trains,
    /// such as raw features), [`RnnGradients::input`] is left empty and the first
    /// layer's input product, a sixth of a one-layer step's work, is skipped.
    pub input_wanted: bool,
}

/// Gradients of a call's inputs.
#[derive(Clone, Debug, PartialEq)]
pub struct RnnGradients<T> {
    /// Of `input`, `[T, B, I]` (empty unless [`OutputGrads::input_wanted`]).
    pub input: Vec<T>,
    /// Of the flat parameters, same layout.
    pub weights: Vec<T>,
    /// Of `h0`.
    pub h0: Vec<T>,
    /// Of `c0`.
    pub c0: Vec<T>,
}

/// An argument of a call that does not fit the others.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    /// The argument.
    pub argument: &'static str,
    /// What it should have been.
    pub expected: String,
    /// What it was.
    pub actual: String,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid `{}`: expected {}, got {}",
            self.argument, self.expected, self.actual
        )
    }
}

impl std::error::Error for CallError {}

/// What every layout of `arch` relies on: sizes of at least 1, no projection on a GRU
/// (PyTorch's `nn.GRU` and cuDNN's GRU have none), and a parameter count whose bytes
/// (as f64) an address can hold, so that no size computed from it overflows.
pub(crate) fn arch_fits(arch: &RnnArch) -> Result<(), CallError> {
    for (argument, value) in [
        ("arch.num_layers", arch.num_layers),
        ("arch.hidden_size", arch.hidden_size),
        ("arch.input_size", arch.input_size),
    ] {
        if value == 0 {
            return Err(CallError {
                argument,
                expected: "at least 1".into(),
                actual: "0".into(),
            });
        }
    }
    if arch.cell == CellKind::Gru && arch.proj_size > 0 {
        return Err(CallError {
            argument: "arch.proj_size",
            expected: "0 for a gru (a GRU has no projection)".into(),
            actual: arch.proj_size.to_string(),
        });
    }
    match arch.checked_weight_count() {
        Some(_) => Ok(()),
        None => Err(CallError {
            argument: "arch",
            expected: format!(
                "at most {} parameters (their bytes must fit in an address)",
                RnnArch::MAX_WEIGHT_COUNT
            ),
            actual: format!(
                "{} layers of {} units on {} inputs (projection {})",
                arch.num_layers, arch.hidden_size, arch.input_size, arch.proj_size
            ),
        }),
    }
}

/// The product of `factors`, or an error naming `argument` where it overflows.
pub(crate) fn checked_size(
    argument: &'static str,
    what: &str,
    factors: &[usize],
) -> Result<usize, CallError> {
    factors
        .iter()
        .try_fold(1usize, |product, &f| product.checked_mul(f))
        .ok_or_else(|| CallError {
            argument,
            expected: format!("{what} whose element count fits in an address"),
            actual: format!("{factors:?}, whose product overflows"),
        })
}

pub(crate) fn len_check(
    argument: &'static str,
    what: &str,
    expected: usize,
    actual: usize,
) -> Result<(), CallError> {
    if expected == actual {
        Ok(())
    } else {
        Err(CallError {
            argument,
            expected: format!("{expected} values ({what})"),
            actual: format!("{actual} values"),
        })
    }
}

impl<T> RnnCall<'_, T> {
    /// Checks every slice length and every length against the architecture and shape.
    pub fn check(&self) -> Result<(), CallError> {
        self.check_with_weights(true)
    }

    /// [`Self::check`], leaving out `weights` when `weights_read` is false (weights
    /// packed beforehand).
    pub(crate) fn check_with_weights(&self, weights_read: bool) -> Result<(), CallError> {
        let a = self.arch;
        arch_fits(a)?;
        let (t, b) = (self.seq_len, self.batch);
        let positive = |argument, value: usize| {
            if value == 0 {
                Err(CallError {
                    argument,
                    expected: "at least 1".into(),
                    actual: "0".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("seq_len", t)?;
        positive("batch", b)?;
        positive("threads", self.threads)?;
        let (c, p, cells) = (a.cell_state_size(), a.output_size(), a.cells());
        let input_shape = format!("[T={t}, B={b}, I={}]", a.input_size);
        // The outputs' sizes too: `y` is `[T, B, dirs · H_out]`.
        let input_len = checked_size("input", &input_shape, &[t, b, a.input_size])?;
        checked_size(
            "seq_len",
            "an output [T, B, dirs · H_out]",
            &[t, b, a.dirs() * p],
        )?;
        checked_size("batch", "states [cells, B, H]", &[cells, b, a.hidden_size])?;
        match self.input_strides {
            None => len_check("input", &input_shape, input_len, self.input.len())?,
            Some(strides) => {
                let span = strides.span(t, b, a.input_size).ok_or_else(|| CallError {
                    argument: "input_strides",
                    expected: format!("strides whose span over {input_shape} fits in an address"),
                    actual: format!("{strides:?}"),
                })?;
                if self.input.len() < span {
                    return Err(CallError {
                        argument: "input",
                        expected: format!(
                            "at least {span} values (T={t}, B={b}, I={} at strides {strides:?})",
                            a.input_size
                        ),
                        actual: format!("{} values", self.input.len()),
                    });
                }
            }
        }
        if weights_read {
            len_check(
                "weights",
                "the canonical flat layout",
                a.weight_count(),
                self.weights.len(),
            )?;
        }
        len_check(
            "h0",
            &format!("[{cells}, B={b}, {p}]"),
            cells * b * p,
            self.h0.len(),
        )?;
        len_check(
            "c0",
            &format!("[{cells}, B={b}, {c}] ({} cell state)", a.cell),
            cells * b * c,
            self.c0.len(),
        )?;
        if let Some(lengths) = self.lengths {
            len_check("lengths", "one per batch row", b, lengths.len())?;
            if let Some((row, &len)) = lengths.iter().enumerate().find(|(_, l)| **l > t) {
                return Err(CallError {
                    argument: "lengths",
                    expected: format!("every length in 0..={t}"),
                    actual: format!("{len} at row {row}"),
                });
            }
        }
        if !self.dropout_masks.is_empty() {
            len_check(
                "dropout_masks",
                "one per layer above the first",
                a.num_layers - 1,
                self.dropout_masks.len(),
            )?;
            for mask in self.dropout_masks {
                len_check(
                    "dropout_masks",
                    "[T, B, dirs * H_out] each",
                    t * b * a.dirs() * p,
                    mask.len(),
                )?;
            }
        }
        Ok(())
    }

    /// Where the input's rows are, `None` when sequence-major (with or without
    /// [`Self::input_strides`] saying so).
    pub(crate) fn strided_input(&self) -> Option<InputStrides> {
        let seq_major = InputStrides::seq_major(self.batch, self.arch.input_size);
        self.input_strides.filter(|s| *s != seq_major)
    }

    /// The input sequence-major `[T, B, I]`, copied row by row from its strides.
    pub(crate) fn seq_major_input(&self, strides: InputStrides) -> Buffer<T>
    where
        T: crate::real::Real,
    {
        let (t, b, i) = (self.seq_len, self.batch, self.arch.input_size);
        let mut values = Buffer::for_overwrite(t * b * i);
        for (at, dst) in values.chunks_exact_mut(i).enumerate() {
            let start = (at / b) * strides.step + (at % b) * strides.row;
            dst.copy_from_slice(&self.input[start..start + i]);
        }
        values
    }

    /// The lengths when some row is shorter than `seq_len` (else no masking is needed).
    pub(crate) fn padding(&self) -> Option<&[usize]> {
        self.lengths
            .filter(|l| l.iter().any(|&len| len < self.seq_len))
    }
}

impl<T> OutputGrads<'_, T> {
    pub(crate) fn check<U>(&self, call: &RnnCall<'_, U>) -> Result<(), CallError> {
        let a = call.arch;
        let rows = call.seq_len * call.batch;
        len_check(
            "dy",
            "[T, B, dirs * H_out]",
            rows * a.dirs() * a.output_size(),
            self.dy.len(),
        )?;
        len_check(
            "dh_n",
            "[layers * dirs, B, H_out]",
            a.cells() * call.batch * a.output_size(),
            self.dh_n.len(),
        )?;
        len_check(
            "dc_n",
            "[layers * dirs, B, H] (empty for a gru)",
            a.cells() * call.batch * a.cell_state_size(),
            self.dc_n.len(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gru() -> RnnArch {
        RnnArch {
            cell: CellKind::Gru,
            input_size: 3,
            hidden_size: 4,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
        }
    }

    fn call<'a>(arch: &'a RnnArch, weights: &'a [f32], c0: &'a [f32]) -> RnnCall<'a, f32> {
        RnnCall {
            arch,
            seq_len: 2,
            batch: 1,
            lengths: None,
            input: &[0.0; 6],
            input_strides: None,
            weights,
            h0: &[0.0; 4],
            c0,
            dropout_masks: &[],
            threads: 1,
        }
    }

    #[test]
    fn a_gru_takes_an_empty_cell_state_and_no_projection() {
        let arch = gru();
        let weights = vec![0.0; arch.weight_count()];
        assert_eq!(call(&arch, &weights, &[]).check(), Ok(()));
        let err = call(&arch, &weights, &[0.0; 4]).check().unwrap_err();
        assert_eq!(err.argument, "c0");
        assert!(
            err.expected.contains("0 values") && err.expected.contains("gru"),
            "{err}"
        );
        assert_eq!(err.actual, "4 values");

        let projected = RnnArch {
            proj_size: 2,
            ..gru()
        };
        let weights = vec![0.0; projected.weight_count()];
        let err = call(&projected, &weights, &[]).check().unwrap_err();
        assert_eq!(
            (err.argument, err.actual.as_str()),
            ("arch.proj_size", "2"),
            "{err}"
        );
    }

    /// Sizes whose products overflow are named errors, never a wrapped size that lets a
    /// short slice through (the kernel reads the input in place at those strides).
    #[test]
    fn sizes_that_overflow_are_named_errors() {
        let arch = gru();
        let weights = vec![0.0; arch.weight_count()];
        let strided = RnnCall {
            input_strides: Some(InputStrides {
                step: 1 << 63,
                row: 0,
            }),
            seq_len: 3,
            ..call(&arch, &weights, &[])
        };
        assert_eq!(strided.check().unwrap_err().argument, "input_strides");
        let long = RnnCall {
            seq_len: 1 << 63,
            ..call(&arch, &weights, &[])
        };
        assert_eq!(long.check().unwrap_err().argument, "input");
        for (hidden_size, num_layers) in [(1 << 62, 1), (1 << 20, 1 << 40)] {
            let huge = RnnArch {
                hidden_size,
                num_layers,
                ..gru()
            };
            let err = call(&huge, &[], &[]).check().unwrap_err();
            assert_eq!(err.argument, "arch", "{err}");
            assert!(err.actual.contains("layers of"), "{err}");
        }
        let empty = RnnArch {
            num_layers: 0,
            ..gru()
        };
        let err = crate::PackedWeights::<f32>::new(&empty, &[]).unwrap_err();
        assert_eq!(err.argument, "arch.num_layers");
        let err = crate::int8::QuantizedRnn::quantize(&empty, &[], crate::int8::QuantLevels::Full)
            .unwrap_err();
        assert_eq!(err.argument, "arch.num_layers");
    }
}
