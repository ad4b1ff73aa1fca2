//! Recurrent layers of other frameworks' files, loaded into this crate's modules:
//! Keras models (`.keras`, `.h5`; [`KerasModel`]) and ONNX graphs (`.onnx`;
//! [`OnnxModel`]). Each reads and checks every tensor of the selected layers before it
//! builds a module, and refuses settings cuDNN's LSTM and GRU cannot run with an error
//! that names the file, the layer, the setting, the expected and the actual value. See
//! `docs/keras-onnx.md`.

mod gates;
mod hdf5;
mod host;
mod keras;
mod keras_config;
mod keras_file;
mod keras_legacy;
mod keras_native;
mod keras_paths;
mod keras_settings;
mod keras_weights;
mod mask;
mod onnx;
mod onnx_axes;
mod onnx_graph;
mod onnx_layout;
mod onnx_link;
mod onnx_proto;
mod onnx_shape;
mod onnx_state;
mod onnx_static;
mod onnx_tensor;
mod onnx_zeros;
mod selection;

/// Most units a file's layer may declare (Keras's `units`, ONNX's `hidden_size`): far
/// above any trained layer (4·2^40 values in one LSTM matrix), and small enough that no
/// shape computed from it overflows.
pub(crate) const MAX_UNITS: usize = 1 << 20;

/// `LSTM` or `GRU`, as errors name a cell.
pub(crate) fn cell_name(cell: crate::op::spec::CellKind) -> &'static str {
    match cell {
        crate::op::spec::CellKind::Lstm => "LSTM",
        crate::op::spec::CellKind::Gru => "GRU",
    }
}

pub use keras::{KerasModel, KerasRecurrentLayer};
pub use mask::keras_mask_lengths;
pub use onnx::{OnnxModel, OnnxRecurrentNode};
pub use selection::RecurrentSelection;
