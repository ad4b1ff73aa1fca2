//! [`load_file_checked`]: a Burn file record loaded into any module (a model that holds
//! a `CudnnCompatibleLstm` or `CudnnCompatibleGru` among its other layers) with the
//! checks [`CudnnCompatibleLstmConfig::load_checkpoint`](crate::CudnnCompatibleLstmConfig::load_checkpoint)
//! does for a bare layer.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::record::{BurnRecord, FileRecorder, Record, Recorder};
use burn::tensor::backend::Backend;

use crate::decoder_stack::on_decoder_stack;
use crate::error::RnnError;
use crate::module::checkpoint::{io_error, panic_message};
use crate::module::record_guard;
use crate::module::record_mismatch::{
    another_modules_record, compare, module_tensors, recorder_message,
};
use crate::module::record_paths::record_tensors;

/// Loads the Burn record at `path` (saved with `model.save_file(path, &recorder)`) into
/// `model`, a module freshly built from the config the record was saved with, after
/// checking that the record holds exactly the tensors `model` has, with the same
/// shapes. This is Burn's `model.load_file(path, &recorder, device)` with the checks
/// that [`CudnnCompatibleLstmConfig::load_checkpoint`](crate::CudnnCompatibleLstmConfig::load_checkpoint)
/// makes for a bare layer, for a model that holds `CudnnCompatibleLstm` or
/// `CudnnCompatibleGru` among other layers.
///
/// Burn's own `load_file` takes a record of another architecture silently or panics:
/// a tensor of another shape replaces the module's, a missing bias or reverse
/// direction (an `Option`) is dropped, an extra one is ignored, another layer count
/// panics. Here each of those is an error naming the file and the tensor by its path
/// in the module (`lstm.layers.1.reverse.weight_ih`):
///
/// - [`RnnError::CheckpointShape`]: the tensor's shape in the file and the shape
///   `model`'s config needs;
/// - [`RnnError::CheckpointTensor`]: a tensor `model` has that the file lacks
///   (`missing`), or one the file has that `model` lacks (`unexpected`);
/// - [`RnnError::Io`]: no such file, or a damaged one (truncated, bit-flipped, a
///   length prefix claiming more than the file holds): never a panic or an abort, also
///   where Burn's decoder would panic.
///
/// On an error `model` is dropped: no half-loaded model is returned. `path` may carry
/// the recorder's extension (`model.mpk`) or not (`model`). Settings that are not
/// tensors (sizes, `batch_first`, dropout) are `model`'s, from its config: keep the
/// config beside the record and build `model` from it.
///
/// ```
/// use burn::backend::Flex;
/// use burn::module::Module;
/// use burn::nn::{Linear, LinearConfig};
/// use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
/// use burn::tensor::backend::Backend;
/// use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnError};
///
/// #[derive(Module, Debug)]
/// struct Model<B: Backend> {
///     lstm: CudnnCompatibleLstm<B>,
///     head: Linear<B>,
/// }
///
/// fn model<B: Backend>(hidden: usize, device: &B::Device) -> Model<B> {
///     Model {
///         lstm: CudnnCompatibleLstmConfig::new(4, hidden).init(device),
///         head: LinearConfig::new(hidden, 1).init(device),
///     }
/// }
///
/// let device = Default::default();
/// let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
/// let path = std::env::temp_dir().join(format!("burn-lstm-doc-{}", std::process::id()));
/// model::<Flex>(8, &device).save_file(&path, &recorder).unwrap();
///
/// let loaded = burn_lstm::load_file_checked(model::<Flex>(8, &device), &path, &recorder, &device);
/// assert!(loaded.is_ok());
/// // Built from another config: an error naming the file and the tensor, no panic.
/// let err = burn_lstm::load_file_checked(model::<Flex>(16, &device), &path, &recorder, &device)
///     .unwrap_err();
/// assert!(matches!(&err, RnnError::CheckpointShape { name, .. } if name == "lstm.layers.0.forward.weight_ih"));
/// # std::fs::remove_file(path.with_extension("mpk")).unwrap();
/// ```
pub fn load_file_checked<B, M, R>(
    model: M,
    path: impl AsRef<Path>,
    recorder: &R,
    device: &B::Device,
) -> Result<M, RnnError>
where
    B: Backend,
    M: Module<B>,
    R: FileRecorder<B>,
{
    let path = path.as_ref();
    let extension = <R as FileRecorder<B>>::file_extension();
    // Burn's recorders set their extension on the path they are given, which turns
    // `model.mpk.gz` into `model.mpk.mpk.gz`: give them the stem.
    let stem = path
        .to_str()
        .and_then(|p| p.strip_suffix(&format!(".{extension}")))
        .map_or_else(|| path.to_path_buf(), PathBuf::from);
    let file = stem.with_extension(extension);
    if !file.is_file() {
        return Err(io_error(&file, "no such file"));
    }
    let source = file.display().to_string();
    let expected = module_tensors(&model);
    type Item<B, M, R> =
        <<M as Module<B>>::Record as Record<B>>::Item<<R as Recorder<B>>::Settings>;
    // Burn's decoders return errors for most damage, but building the tensors of a
    // decoded record panics on some (a shape that does not match its bytes): a
    // damaged file is the user's input, so that panic becomes a named error. Sound
    // here: nothing this call shares outlives it half-built (the recorder is only
    // read; the item, the record and `model` are dropped on an error). On a stack as
    // deep as the decoders' nesting limits (`decoder_stack.rs`).
    let loaded = on_decoder_stack(|| {
        catch_unwind(AssertUnwindSafe(|| -> Result<M, RnnError> {
            // Decoded with the checks that keep a hostile file from aborting the
            // process (`record_guard.rs`); what that decode leaves, and every file of
            // a recorder that is not Burn's, the recorder decodes and words.
            let record: BurnRecord<Item<B, M, R>, B> =
                match record_guard::decode::<B, M::Record, R>(&file)? {
                    Some(record) => record,
                    None => recorder.load_item(&mut stem.clone()).map_err(|e| {
                        another_modules_record::<B, R>(recorder, &stem, &source, &expected)
                            .unwrap_or_else(|| io_error(&file, recorder_message(&e)))
                    })?,
                };
            let found = record_tensors(&record.item)
                .map_err(|e| io_error(&file, format!("damaged record: {e}")))?;
            compare(&source, &expected, &found)?;
            let record = <M::Record as Record<B>>::from_item(record.item, device);
            Ok(model.load_record(record))
        }))
    });
    match loaded {
        Ok(result) => result,
        Err(panic) => Err(io_error(
            &file,
            format!(
                "damaged record: Burn's loader failed ({})",
                panic_message(panic.as_ref())
            ),
        )),
    }
}
