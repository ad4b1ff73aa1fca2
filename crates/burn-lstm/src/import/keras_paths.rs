//! Where a Keras file keeps a recurrent layer: the datasets of its directions, and the
//! place that matches it to the architecture's layer (`LayerEntry`). Read from Keras 2's
//! layout by `keras_legacy`, from Keras 3's by `keras_native`.

use crate::import::keras_config::LayerEntry;

/// The datasets of one direction of a layer.
#[derive(Debug, Clone)]
pub(crate) struct DirectionPaths {
    pub kernel: String,
    pub recurrent_kernel: String,
    pub bias: Option<String>,
}

/// The datasets of one recurrent layer.
#[derive(Debug, Clone)]
pub(crate) struct LayerPaths {
    /// The layer's name: as the file names it (a nested model's layer: `outer/inner`),
    /// else its group's (tf-keras's Keras-3-style files name no layer).
    pub name: String,
    pub place: Place,
    /// Where the layer sits among all the model's layers, as far as the file tells
    /// (Keras 2's `layer_names` list every top-level layer): two layers stack without
    /// an architecture only when their slots are consecutive. `None` in a nested
    /// model's group (which shows neither its layers without weights nor their order)
    /// and in Keras 3's layout, which keeps no order between groups.
    pub slot: Option<usize>,
    pub forward: DirectionPaths,
    pub backward: Option<DirectionPaths>,
}

/// Where a layer's weights sit in the file, to match it to the architecture's layer.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// Keras 2's layout: the group of the top-level layer (a nested model's group holds
    /// all its layers' weights) and the scope of the layer's weight names, its own name
    /// last (`lstm`; Keras 3's legacy files name the models around it too:
    /// `sequential/enc/lstm`).
    Legacy { group: String, scope: Vec<String> },
    /// Keras 3's: the group below `layers/` (`functional/layers/lstm` in a nested model)
    /// and whether the file names its layers (tf-keras's files do not: their groups are
    /// matched to the architecture by class and position, as Keras does).
    Native { group: String, named: bool },
}

impl LayerPaths {
    /// Whether these can be the weights of the architecture's layer `entry`: in Keras
    /// 2's layout, a nested layer's path below its top-level model and the weights'
    /// scope (or the scope less a last part, a cell's the user named) agree as far as
    /// both go (Keras 2 names the layer alone, Keras 3 the models around it too);
    /// layers that agree alike are told apart by order.
    pub fn belong_to(&self, entry: &LayerEntry) -> bool {
        match &self.place {
            Place::Legacy { group, scope } => match entry.path.as_slice() {
                [top] => top == group,
                [top, below @ ..] => {
                    let agree = |scope: &[String]| {
                        let n = below.len().min(scope.len());
                        n > 0 && below[below.len() - n..] == scope[scope.len() - n..]
                    };
                    // The scope may end in a cell the user named (`rnn/enc_cell`).
                    top == group
                        && (agree(scope) || scope.split_last().is_some_and(|(_, s)| agree(s)))
                }
                [] => false,
            },
            Place::Native { named: true, .. } => self.name == entry.name,
            Place::Native {
                group,
                named: false,
            } => *group == entry.native_group,
        }
    }
}

/// `rest` below the HDF5 group `root` (`""`: the file's root).
pub(crate) fn join(root: &str, rest: &str) -> String {
    if root.is_empty() {
        rest.to_string()
    } else {
        format!("{root}/{rest}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nested layer's path below its top-level model and its weights' scope agree as
    /// far as both go: Keras 2 names the layer alone, Keras 3 the models around it too.
    #[test]
    fn nested_weights_belong_to_the_layer_whose_path_agrees_with_their_scope() {
        let paths = |scope: &[&str]| LayerPaths {
            name: String::new(),
            place: Place::Legacy {
                group: "enc".into(),
                scope: scope.iter().map(|s| s.to_string()).collect(),
            },
            slot: None,
            forward: DirectionPaths {
                kernel: String::new(),
                recurrent_kernel: String::new(),
                bias: None,
            },
            backward: None,
        };
        let entry = |path: &[&str]| LayerEntry {
            name: path.join("/"),
            path: path.iter().map(|s| s.to_string()).collect(),
            native_group: String::new(),
            class_name: "LSTM".into(),
            config: serde_json::Value::Null,
            inbound: Vec::new(),
            pass_through: false,
        };
        let nested = entry(&["enc", "inner", "rnn"]);
        assert!(paths(&["rnn"]).belong_to(&nested));
        assert!(paths(&["sequential", "enc", "inner", "rnn"]).belong_to(&nested));
        assert!(!paths(&["sequential", "enc", "rnn"]).belong_to(&nested));
        assert!(!paths(&["other"]).belong_to(&nested));
        assert!(paths(&["sequential", "enc", "rnn"]).belong_to(&entry(&["enc", "rnn"])));
        assert!(!paths(&["rnn"]).belong_to(&entry(&["dec", "rnn"])));
        // A cell the user named stays in the scope (`RNN(LSTMCell(name="enc_cell"))`).
        assert!(paths(&["rnn", "enc_cell"]).belong_to(&entry(&["enc", "rnn"])));
        // A top-level layer: its group.
        assert!(paths(&["seq", "enc"]).belong_to(&entry(&["enc"])));
    }
}
