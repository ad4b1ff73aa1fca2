//! PyTorch state dicts (`torch.save` zip and legacy files, safetensors) through
//! `load_pytorch_with_prefix`, for the fixtures' three architectures.
#![no_main]

use burn_lstm::{CudnnCompatibleGruConfig, CudnnCompatibleLstmConfig};
use burn_lstm_fuzz::{B, report_our_panics, scratch_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    report_our_panics();
    let path = scratch_file("state.pt", data);
    let device = Default::default();
    let _ = CudnnCompatibleGruConfig::new(3, 5)
        .with_batch_first(false)
        .load_pytorch::<B>(&path, &device);
    let _ = CudnnCompatibleLstmConfig::new(3, 4)
        .with_proj_size(2)
        .with_batch_first(false)
        .load_pytorch::<B>(&path, &device);
    let _ = CudnnCompatibleLstmConfig::new(4, 8)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_batch_first(false)
        .load_pytorch_with_prefix::<B>(&path, "encoder.", &device);
});
