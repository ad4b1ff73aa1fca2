//! Keras files (`.h5` and `.keras`, told apart by content) through `KerasModel::open`
//! and every layer's and the whole stack's import as an LSTM and as a GRU.
#![no_main]

use burn_lstm::{KerasModel, RecurrentSelection};
use burn_lstm_fuzz::{B, report_our_panics, scratch_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    report_our_panics();
    let path = scratch_file("model.keras", data);
    let Ok(model) = KerasModel::open(&path) else {
        return;
    };
    let device = Default::default();
    let selections = (0..model.layers().len())
        .map(RecurrentSelection::Index)
        .chain([RecurrentSelection::All]);
    for selection in selections {
        let _ = model.lstm::<B>(selection.clone(), &device);
        let _ = model.gru::<B>(selection, &device);
    }
});
