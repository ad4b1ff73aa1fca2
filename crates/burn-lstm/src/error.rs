//! The one error type of the crate. Every variant names what was wrong, what was
//! expected and what was found, so a user can fix the call without reading our code.

/// Errors returned by the LSTM module, its op and its checkpoint functions.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RnnError {
    /// An argument of a call (input, state, lengths) or a config field is not acceptable.
    #[error("invalid `{argument}`: expected {expected}, got {actual}")]
    InvalidArgument {
        /// The argument or config field.
        argument: String,
        /// What was expected.
        expected: String,
        /// What was given.
        actual: String,
    },
    /// A parameter (loaded from a checkpoint, or set by hand) has a shape the config does not allow.
    #[error("parameter `{name}` has shape {actual:?}, but the config needs {expected:?}")]
    ParameterShape {
        /// Path of the parameter, e.g. `layers.1.reverse.weight_ih` or `weight_ih_l1_reverse`.
        name: String,
        /// Shape the config implies.
        expected: Vec<usize>,
        /// Shape found.
        actual: Vec<usize>,
    },
    /// A tensor that the config needs is absent from a checkpoint, or present where the config has none.
    #[error(
        "checkpoint {source_name}: {problem} tensor `{name}`{}",
        .hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
    )]
    CheckpointTensor {
        /// The file or store.
        source_name: String,
        /// `missing` or `unexpected`.
        problem: &'static str,
        /// The tensor name.
        name: String,
        /// What probably went wrong, when the file says more: for a missing PyTorch
        /// tensor, the names it has under a parent module's prefix (`encoder.weight_ih_l0`)
        /// and the call that loads them.
        hint: Option<String>,
    },
    /// A checkpoint tensor has another shape than the module it is loaded into
    /// ([`load_file_checked`](crate::load_file_checked)): the module was built from
    /// another config than the one that saved the file.
    #[error(
        "checkpoint {source_name}: tensor `{name}` has shape {actual:?}, but the config needs {expected:?}"
    )]
    CheckpointShape {
        /// The file.
        source_name: String,
        /// The tensor's path in the module, e.g. `lstm.layers.1.reverse.weight_ih`.
        name: String,
        /// Shape of the module's tensor (what its config implies).
        expected: Vec<usize>,
        /// Shape in the file.
        actual: Vec<usize>,
    },
    /// A checkpoint tensor holds values of a type that is not a float (an integer or
    /// boolean tensor under a parameter's name): refused rather than converted.
    #[error("checkpoint {source_name}: tensor `{name}` has dtype {actual}, expected {expected}")]
    CheckpointDtype {
        /// The file or store.
        source_name: String,
        /// The tensor name.
        name: String,
        /// The dtypes accepted.
        expected: String,
        /// The dtype found.
        actual: String,
    },
    /// Input or state holds NaN or infinite values while the NaN policy rejects them.
    #[error(
        "`{argument}` holds {count} non-finite value(s) (NaN or ±inf), rejected by NanPolicy::Reject"
    )]
    NonFinite {
        /// The argument.
        argument: String,
        /// How many values are not finite.
        count: usize,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl RnnError {
    /// Shorthand for [`RnnError::InvalidArgument`].
    pub fn invalid(
        argument: impl Into<String>,
        expected: impl Into<String>,
        actual: impl Into<String>,
    ) -> Self {
        Self::InvalidArgument {
            argument: argument.into(),
            expected: expected.into(),
            actual: actual.into(),
        }
    }
}
