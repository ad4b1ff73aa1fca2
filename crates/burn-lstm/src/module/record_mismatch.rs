//! Why a Burn record does not fit the module it is loaded into: the first tensor that
//! differs ([`compare`]), also for a file Burn's decoder rejects as another module's
//! record ([`another_modules_record`], from the tensors the file lists), with where
//! one module sits in the other when the file holds a larger module or a part.

use std::collections::HashMap;
use std::path::Path;

use burn::module::Module;
use burn::record::{BurnRecord, FileRecorder, RecorderError};
use burn::tensor::backend::Backend;
use burn_store::ModuleSnapshot;

use crate::error::RnnError;
use crate::module::record_listing::FileTensors;
use crate::module::record_paths::RecordTensor;

/// Every tensor of `module`, by path (burn-store's names) and shape.
pub(crate) fn module_tensors<B: Backend, M: Module<B>>(module: &M) -> Vec<RecordTensor> {
    module
        .collect(None, None, false)
        .into_iter()
        .map(|s| RecordTensor {
            path: s.full_path(),
            shape: s.shape.to_vec(),
        })
        .collect()
}

/// What Burn's recorder said, without the `Debug` wrapping of its error's variant.
pub(crate) fn recorder_message(error: &RecorderError) -> String {
    match error {
        RecorderError::FileNotFound(message)
        | RecorderError::DeserializeError(message)
        | RecorderError::Unknown(message) => message.clone(),
    }
}

/// Why a record file that Burn's decoder rejected does not load into a module with
/// the tensors `expected`, when the file lists its own (`record_listing.rs`: named
/// MessagePack and JSON records): the first difference, as for a record that decodes,
/// and where one module sits in the other when the file's record holds this module or
/// is one part of it. `None` when the file lists no tensors (or the same ones).
pub(crate) fn another_modules_record<B: Backend, R: FileRecorder<B>>(
    recorder: &R,
    stem: &Path,
    source: &str,
    expected: &[RecordTensor],
) -> Option<RnnError> {
    let mut args = stem.to_path_buf();
    let record: BurnRecord<FileTensors, B> = recorder.load_item(&mut args).ok()?;
    let found = record.item.0;
    if found.is_empty() {
        // Not a record of tensors this walk knows (a record of Burn before 0.14 keeps
        // them otherwise): the decoder's message says more.
        return None;
    }
    let error = compare(source, expected, &found).err()?;
    let hint = match (nested_in(expected, &found), nested_in(&found, expected)) {
        (Some(outer), _) => format!(
            "the file is the record of a module that holds this one as `{outer}`: load \
             that module (load_file_checked), or this one from a file of its own"
        ),
        (None, Some(part)) => format!(
            "the file is the record of this module's `{part}` alone: load it into that \
             part (a layer: its config's load_checkpoint)"
        ),
        (None, None) => return Some(error),
    };
    match error {
        RnnError::CheckpointTensor {
            source_name,
            problem,
            name,
            ..
        } => Some(RnnError::CheckpointTensor {
            source_name,
            problem,
            name,
            hint: Some(hint),
        }),
        other => Some(other),
    }
}

/// The path `p` under which `outer` holds exactly the tensors of `inner` (`p.{path}`
/// for each path of `inner`, with its shape, and nothing else under `p`), if there is
/// one.
fn nested_in(inner: &[RecordTensor], outer: &[RecordTensor]) -> Option<String> {
    let first = &inner.first()?.path;
    let in_outer = shapes_by_path(outer);
    let is_inner = |prefix: &str| {
        let under = format!("{prefix}.");
        let held = outer.iter().filter(|t| t.path.starts_with(&under)).count();
        held == inner.len()
            && inner.iter().all(|t| {
                in_outer.get(format!("{under}{}", t.path).as_str()) == Some(&t.shape.as_slice())
            })
    };
    outer
        .iter()
        .filter_map(|t| t.path.strip_suffix(first.as_str())?.strip_suffix('.'))
        .find(|prefix| !prefix.is_empty() && is_inner(prefix))
        .map(str::to_owned)
}

/// Each tensor's shape by its path.
fn shapes_by_path(tensors: &[RecordTensor]) -> HashMap<&str, &[usize]> {
    tensors
        .iter()
        .map(|t| (t.path.as_str(), t.shape.as_slice()))
        .collect()
}

/// The first difference between the tensors a module has (`expected`) and those a
/// record holds (`found`): a shape, then a tensor the record lacks, then one it has
/// that the module lacks, each in the module's order.
pub(crate) fn compare(
    source: &str,
    expected: &[RecordTensor],
    found: &[RecordTensor],
) -> Result<(), RnnError> {
    let in_record = shapes_by_path(found);
    let in_module = shapes_by_path(expected);
    let problem = |problem: &'static str, name: &str, others: usize| {
        let more = others.saturating_sub(1);
        RnnError::CheckpointTensor {
            source_name: source.to_string(),
            problem,
            name: name.to_string(),
            hint: (more > 0).then(|| {
                format!(
                    "and {more} more {problem} tensor{}: was the model built from the config the file was saved with?",
                    if more == 1 { "" } else { "s" }
                )
            }),
        }
    };
    for tensor in expected {
        if let Some(shape) = in_record.get(tensor.path.as_str())
            && *shape != tensor.shape.as_slice()
        {
            return Err(RnnError::CheckpointShape {
                source_name: source.to_string(),
                name: tensor.path.clone(),
                expected: tensor.shape.clone(),
                actual: shape.to_vec(),
            });
        }
    }
    let missing: Vec<&RecordTensor> = expected
        .iter()
        .filter(|t| !in_record.contains_key(t.path.as_str()))
        .collect();
    if let Some(first) = missing.first() {
        return Err(problem("missing", &first.path, missing.len()));
    }
    let unexpected: Vec<&RecordTensor> = found
        .iter()
        .filter(|t| !in_module.contains_key(t.path.as_str()))
        .collect();
    if let Some(first) = unexpected.first() {
        return Err(problem("unexpected", &first.path, unexpected.len()));
    }
    Ok(())
}
