//! What can go wrong in the language model, each error naming the file or flag, what was
//! expected and what was found.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong while reading a corpus, training, saving, loading or sampling.
#[derive(Debug)]
pub enum LmError {
    /// A file that should be there is not.
    Missing {
        /// What the file is (`"corpus file"`, `"checkpoint"`, `"vocabulary"`, ...).
        what: &'static str,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A file is there but cannot be read as what it should be.
    Corrupt {
        /// What the file is.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },
    /// The files of a saved model do not fit each other (a vocabulary of another size
    /// than the checkpoint's embedding, a checkpoint of another architecture than its
    /// `config.json`).
    Mismatch {
        /// The file that does not fit.
        path: PathBuf,
        /// What was expected and what was found.
        message: String,
    },
    /// A flag's or an argument's value, with what was expected.
    Usage(String),
}

impl LmError {
    /// A [`LmError::Corrupt`] for `what` at `path`.
    pub(crate) fn corrupt(
        what: &'static str,
        path: impl Into<PathBuf>,
        message: impl Into<String>,
    ) -> Self {
        Self::Corrupt {
            what,
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for LmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { what, path } => write!(f, "{what} not found: {}", path.display()),
            Self::Corrupt {
                what,
                path,
                message,
            } => write!(f, "{what} {} cannot be read: {message}", path.display()),
            Self::Mismatch { path, message } => write!(
                f,
                "{} does not match the other files of the model (saved by another run?): {message}",
                path.display()
            ),
            Self::Usage(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for LmError {}
