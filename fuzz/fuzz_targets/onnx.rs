//! ONNX graphs (with their external data files) through `OnnxModel::open`
//! and every node's and the whole stack's import as an LSTM and as a GRU.
#![no_main]

use burn_lstm::{OnnxModel, RecurrentSelection};
use burn_lstm_fuzz::{B, report_our_panics, scratch_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    report_our_panics();
    let path = scratch_file("model.onnx", data);
    let Ok(model) = OnnxModel::open(&path) else {
        return;
    };
    let device = Default::default();
    let selections = (0..model.nodes().len())
        .map(RecurrentSelection::Index)
        .chain([RecurrentSelection::All]);
    for selection in selections {
        let _ = model.lstm::<B>(selection.clone(), &device);
        let _ = model.gru::<B>(selection, &device);
    }
});
