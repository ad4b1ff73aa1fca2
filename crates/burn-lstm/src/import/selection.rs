//! [`RecurrentSelection`]: which recurrent layers of a Keras model, or which recurrent
//! nodes of an ONNX graph, one module is loaded from.

/// Which recurrent layers (Keras) or nodes (ONNX) to load into one module.
///
/// A single layer (by name or index) gives a module of its layers: one, or one per
/// layer of a stack the file itself holds as one node. Several give one multi-layer
/// module, bottom first; they must form a stack the module can express (same cell,
/// hidden size, direction count and bias; each feeding the next directly, all but the
/// last returning their whole sequence).
///
/// `&str`, `String` and `usize` convert into it, so `model.lstm("encoder", &device)` and
/// `model.lstm(0, &device)` both work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecurrentSelection {
    /// One layer or node by its name (Keras: the layer's `name`; ONNX: the node's
    /// `name`, or its first output's name when the node has none).
    Name(String),
    /// One layer or node by its position among the file's recurrent layers or nodes
    /// (0 = the first, in the model's order).
    Index(usize),
    /// Consecutive layers or nodes by name, bottom first, as one multi-layer module.
    Stack(Vec<String>),
    /// Every recurrent layer or node of the file, in order, as one multi-layer module.
    All,
}

impl From<&str> for RecurrentSelection {
    fn from(name: &str) -> Self {
        Self::Name(name.to_string())
    }
}

impl From<String> for RecurrentSelection {
    fn from(name: String) -> Self {
        Self::Name(name)
    }
}

impl From<usize> for RecurrentSelection {
    fn from(index: usize) -> Self {
        Self::Index(index)
    }
}

impl From<&[&str]> for RecurrentSelection {
    fn from(names: &[&str]) -> Self {
        Self::Stack(names.iter().map(|n| n.to_string()).collect())
    }
}

impl core::fmt::Display for RecurrentSelection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Name(name) => write!(f, "'{name}'"),
            Self::Index(index) => write!(f, "#{index}"),
            Self::Stack(names) => write!(f, "[{}]", names.join(", ")),
            Self::All => write!(f, "all"),
        }
    }
}

/// The positions `selection` picks among `names` (the file's recurrent layers or
/// nodes, in order), or an error naming what it asked for and what the file has.
pub(crate) fn resolve(
    selection: &RecurrentSelection,
    names: &[&str],
    source: &str,
    what: &str,
) -> Result<Vec<usize>, crate::RnnError> {
    let find = |name: &str| {
        names.iter().position(|n| *n == name).ok_or_else(|| {
            crate::RnnError::invalid(
                format!("{source}: {what}"),
                format!("one of {}", list(names)),
                format!("'{name}'"),
            )
        })
    };
    let picked = match selection {
        RecurrentSelection::Name(name) => vec![find(name)?],
        RecurrentSelection::Index(index) => {
            if *index >= names.len() {
                return Err(crate::RnnError::invalid(
                    format!("{source}: {what} index"),
                    format!(
                        "an index below {} (the file's recurrent {what}s: {})",
                        names.len(),
                        list(names)
                    ),
                    index.to_string(),
                ));
            }
            vec![*index]
        }
        RecurrentSelection::Stack(stack) => {
            let picked = stack
                .iter()
                .map(|n| find(n))
                .collect::<Result<Vec<_>, _>>()?;
            if picked.is_empty() {
                return Err(crate::RnnError::invalid(
                    format!("{source}: {what}s"),
                    "at least one name",
                    "an empty list",
                ));
            }
            picked
        }
        RecurrentSelection::All => (0..names.len()).collect(),
    };
    if picked.is_empty() {
        return Err(crate::RnnError::invalid(
            format!("{source}: {what}s"),
            format!("at least one recurrent {what} (LSTM or GRU)"),
            "none in the file",
        ));
    }
    Ok(picked)
}

/// `'a', 'b'` (or `none`).
pub(crate) fn list(names: &[&str]) -> String {
    if names.is_empty() {
        return "none".into();
    }
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}
