//! `torch.save` files (`load_pytorch`): state dicts written by PyTorch
//! (`tests/fixtures/pytorch/`, `make_fixtures.py`) load the same values as the same
//! tensors saved as safetensors, nested checkpoints, views of a shared storage, half
//! types included; what is not a state dict is refused by name; and damaged copies are
//! errors, or the intact file's values, never a panic.

use std::path::{Path, PathBuf};

use burn::backend::NdArray;
use burn_lstm::{CudnnCompatibleGruConfig, CudnnCompatibleLstmConfig, RnnError};

use crate::common::to_f64;
use crate::import::io::fixture;

type B = NdArray<f32>;

fn path(name: &str) -> PathBuf {
    fixture("pytorch", name)
}

/// `nn.LSTM(4, 8, num_layers=2, bidirectional=True)`, the fixtures' encoder.
fn encoder() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(4, 8)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_batch_first(false)
}

fn lstm_values(
    config: &CudnnCompatibleLstmConfig,
    file: &Path,
    prefix: &str,
) -> Result<Vec<f64>, RnnError> {
    config
        .load_pytorch_with_prefix::<B>(file, prefix, &Default::default())
        .map(|m| to_f64(m.flat_weights()))
}

#[test]
fn torch_save_files_load_the_values_of_their_safetensors_twins() {
    let device = Default::default();
    let projected = CudnnCompatibleLstmConfig::new(3, 4)
        .with_proj_size(2)
        .with_batch_first(false);
    // (config, the .pt file, its safetensors twin, the prefix)
    for (config, name, twin, prefix) in [
        (encoder(), "tagger", "tagger", "encoder."),
        // nn.Parameter objects (state_dict(keep_vars=True)); pickle protocol 4.
        (encoder(), "tagger_params", "tagger", "encoder."),
        (encoder(), "tagger_protocol4", "tagger", "encoder."),
        (encoder(), "checkpoint", "checkpoint", "model.encoder."),
        (projected.clone(), "lstm_f16", "lstm_f16", ""),
        (projected, "lstm_bf16", "lstm_bf16", ""),
    ] {
        let twin_path = path(&format!("{twin}.safetensors"));
        let expected = config
            .load_pytorch_safetensors_with_prefix::<B>(&twin_path, prefix, &device)
            .map(|m| to_f64(m.flat_weights()))
            .unwrap();
        let pt = lstm_values(&config, &path(&format!("{name}.pt")), prefix)
            .unwrap_or_else(|e| panic!("{name}.pt: {e}"));
        assert_eq!(pt, expected, "{name}");
        // `load_pytorch` reads safetensors too.
        let again = lstm_values(&config, &twin_path, prefix).unwrap();
        assert_eq!(again, expected, "{twin}.safetensors");
    }
    // Views of one flat storage at their offsets, one of them transposed.
    let gru = CudnnCompatibleGruConfig::new(3, 5).with_batch_first(false);
    let load = |file: &str| {
        gru.load_pytorch::<B>(path(file), &device)
            .map(|m| to_f64(m.flat_weights()))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    };
    assert_eq!(load("gru_views.pt"), load("gru_views.safetensors"));
}

#[test]
fn a_checkpoint_dict_names_its_prefix() {
    let e = encoder()
        .load_pytorch::<B>(path("checkpoint.pt"), &Default::default())
        .unwrap_err();
    assert!(
        matches!(
            e,
            RnnError::CheckpointTensor {
                problem: "missing",
                ..
            }
        ),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains(
            "the file has it as `model.encoder.weight_ih_l0`: load it with \
             `load_pytorch_with_prefix(path, \"model.encoder.\", device)`"
        ),
        "{e}"
    );
    // Under the prefix, a parameter the config lacks is refused (one layer asked for).
    let e = CudnnCompatibleLstmConfig::new(4, 8)
        .with_bidirectional(true)
        .load_pytorch_with_prefix::<B>(path("checkpoint.pt"), "model.encoder.", &Default::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.encoder.weight_ih_l1"), "{e}");
}

#[test]
fn files_that_are_not_state_dicts_are_refused_by_name() {
    for (file, part) in [
        (
            "whole_model.pt",
            "the file holds a __main__.Tagger object, not a state dict: save the model's \
             state_dict(): torch.save(model.state_dict(), path)",
        ),
        ("scripted.pt", "a TorchScript archive (torch.jit.save)"),
        ("legacy.pt", "PyTorch's format before 1.6"),
    ] {
        let e = lstm_values(&encoder(), &path(file), "").unwrap_err();
        assert!(matches!(e, RnnError::Io { .. }), "{file}: {e:?}");
        assert!(e.to_string().contains(part), "{file}: {e}");
    }
    let e = encoder()
        .load_pytorch_safetensors_with_prefix::<B>(
            path("tagger.pt"),
            "encoder.",
            &Default::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("a torch.save file, not safetensors: load it with load_pytorch"),
        "{e}"
    );
}

/// Loads a fixture's module from a file, as flat parameter values.
type Loader = Box<dyn Fn(&Path) -> Result<Vec<f64>, RnnError>>;

#[test]
fn damaged_torch_save_files_are_errors_or_the_intact_values() {
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-pytorch-")
        .tempdir()
        .unwrap();
    for name in ["tagger.pt", "gru_views.pt"] {
        let bytes = std::fs::read(path(name)).unwrap();
        let copy = dir.path().join(name);
        let (load, intact): (Loader, _) = if name == "tagger.pt" {
            let load = |p: &Path| lstm_values(&encoder(), p, "encoder.");
            (Box::new(load), load(&path(name)).unwrap())
        } else {
            let gru = CudnnCompatibleGruConfig::new(3, 5).with_batch_first(false);
            let load = move |p: &Path| {
                gru.load_pytorch::<B>(p, &Default::default())
                    .map(|m| to_f64(m.flat_weights()))
            };
            let intact = load(&path(name)).unwrap();
            (Box::new(load), intact)
        };
        let mut refused = 0;
        // Cuts, and bytes flipped (every byte of the small file, every fifth of the
        // larger: the zip's CRCs cover each entry, so a flipped value is an error).
        let mut copies: Vec<(String, Vec<u8>)> = (0..bytes.len())
            .step_by(7)
            .map(|cut| (format!("cut at {cut}"), bytes[..cut].to_vec()))
            .collect();
        let every = if bytes.len() > 4096 { 5 } else { 1 };
        for at in (0..bytes.len()).step_by(every) {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x5a;
            copies.push((format!("byte {at} flipped"), flipped));
        }
        for (what, damaged) in copies {
            std::fs::write(&copy, &damaged).unwrap();
            match load(&copy) {
                Err(_) => refused += 1,
                Ok(values) => assert_eq!(values, intact, "{name}: {what}"),
            }
        }
        assert!(refused > bytes.len() / 7, "{name}: {refused} refused");
    }
}

/// A parameter's name spelled otherwise than PyTorch spells it (`weight_ih_l01`,
/// `weight_ih_l+1`: both read as layer 1 by Rust's integer parsing) is an unexpected
/// tensor, not one ignored beside the real parameter.
#[test]
fn parameter_names_spelled_otherwise_are_unexpected() {
    let bytes = std::fs::read(path("tagger.safetensors")).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-pytorch-names-")
        .tempdir()
        .unwrap();
    for odd in ["encoder.weight_ih_l01", "encoder.weight_ih_l+1"] {
        let mut tensors: Vec<(String, safetensors::tensor::TensorView<'_>)> =
            file.tensors().into_iter().collect();
        let extra = file.tensor("encoder.weight_ih_l1").unwrap();
        tensors.push((odd.to_string(), extra));
        let out = dir.path().join("odd.safetensors");
        safetensors::serialize_to_file(tensors, None, &out).unwrap();
        let e = lstm_values(&encoder(), &out, "encoder.").unwrap_err();
        assert!(
            matches!(&e, RnnError::CheckpointTensor { problem: "unexpected", name, .. } if name == odd),
            "{odd}: {e:?}"
        );
    }
}
