//! Burn records (named MessagePack, bincode, JSON; plain and gzipped) through
//! `load_checkpoint` of a two-layer bidirectional LSTM with projection. With
//! `BURN_LSTM_FUZZ_SEEDS=DIR` set, the target first saves that module with each recorder
//! into `DIR` (the seeds: `BURN_LSTM_FUZZ_SEEDS=fuzz/corpus/burn_record cargo fuzz run
//! burn_record -- -runs=0`).
#![no_main]

use std::path::Path;

use burn::module::Module;
use burn::record::{
    BinFileRecorder, BinGzFileRecorder, FileRecorder, FullPrecisionSettings, NamedMpkFileRecorder,
    NamedMpkGzFileRecorder, PrettyJsonFileRecorder,
};
use burn_lstm::CudnnCompatibleLstmConfig;
use burn_lstm_fuzz::{B, report_our_panics, scratch_file};
use libfuzzer_sys::fuzz_target;

fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(3, 4)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(2)
}

/// `data` as the file of `recorder`, loaded with it.
fn load<R: FileRecorder<B>>(data: &[u8], recorder: R) {
    let extension = <R as FileRecorder<B>>::file_extension();
    let path = scratch_file(&format!("record.{extension}"), data);
    let _ = config().load_checkpoint::<B, _>(path, &recorder, &Default::default());
}

/// Saves the module with `recorder` as `dir/<extension>`.
fn seed<R: FileRecorder<B>>(dir: &Path, recorder: R) {
    let name = <R as FileRecorder<B>>::file_extension().replace('.', "-");
    let module = config().init::<B>(&Default::default());
    module
        .save_file(dir.join(&name), &recorder)
        .expect("the seed is saved");
    let saved = dir
        .join(&name)
        .with_extension(<R as FileRecorder<B>>::file_extension());
    std::fs::rename(saved, dir.join(name)).expect("the seed is renamed");
}

fuzz_target!(
    init: {
        report_our_panics();
        if let Some(dir) = std::env::var_os("BURN_LSTM_FUZZ_SEEDS") {
            let dir = Path::new(&dir);
            std::fs::create_dir_all(dir).expect("the seed folder can be made");
            seed(dir, NamedMpkFileRecorder::<FullPrecisionSettings>::new());
            seed(dir, NamedMpkGzFileRecorder::<FullPrecisionSettings>::new());
            seed(dir, BinFileRecorder::<FullPrecisionSettings>::new());
            seed(dir, BinGzFileRecorder::<FullPrecisionSettings>::new());
            seed(dir, PrettyJsonFileRecorder::<FullPrecisionSettings>::new());
        }
    },
    |data: &[u8]| {
        load(data, NamedMpkFileRecorder::<FullPrecisionSettings>::new());
        load(data, NamedMpkGzFileRecorder::<FullPrecisionSettings>::new());
        load(data, BinFileRecorder::<FullPrecisionSettings>::new());
        load(data, BinGzFileRecorder::<FullPrecisionSettings>::new());
        load(data, PrettyJsonFileRecorder::<FullPrecisionSettings>::new());
    }
);
