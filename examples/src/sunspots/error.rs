//! What can go wrong in the examples, each error naming the file and what was expected.

use std::fmt;
use std::path::PathBuf;

/// What can go wrong in the examples, each naming the file and what was expected.
#[derive(Debug)]
pub enum ExampleError {
    /// A file that should be there is not.
    Missing {
        /// What the file is.
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
        /// Why.
        message: String,
    },
    /// The checkpoint's parameters do not fit the config next to it.
    ConfigMismatch {
        /// The checkpoint.
        path: PathBuf,
        /// Which parameter and shapes.
        message: String,
    },
    /// A flag's value.
    Usage(String),
}

impl fmt::Display for ExampleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Missing { what, path } => write!(f, "{what} not found: {}", path.display()),
            Self::Corrupt {
                what,
                path,
                message,
            } => write!(f, "{what} {} cannot be read: {message}", path.display()),
            Self::ConfigMismatch { path, message } => write!(
                f,
                "checkpoint {} does not match its config (was it saved by another run?): {message}",
                path.display()
            ),
            Self::Usage(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ExampleError {}
