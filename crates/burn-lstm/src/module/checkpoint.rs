//! Checkpoints: Burn records checked against the config before they are applied
//! (Burn itself would silently drop a missing bias or panic on a layer count), and
//! PyTorch `nn.LSTM` and `nn.GRU` state dicts in safetensors or `torch.save` files, by
//! their PyTorch names (the two share every helper: their parameters have the same
//! names).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::rc::Rc;

use burn::module::{Module, Param};
use burn::record::{FileRecorder, Record};
use burn::tensor::{DType, Tensor, TensorData, backend::Backend};
use burn_store::{ModuleSnapshot, ModuleStore, SafetensorsStore, TensorSnapshot};

use crate::decoder_stack::on_decoder_stack;
use crate::error::RnnError;
use crate::module::config::CudnnCompatibleLstmConfig;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::gru_config::CudnnCompatibleGruConfig;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::module::record_guard;
use crate::module::record_mismatch::{another_modules_record, module_tensors, recorder_message};
use crate::module::shapes::{PARAM_NAMES, expected_shapes, unexpected, validate_layers};
use crate::module::torch_file::{self, TorchFile};
use crate::module::torch_pickle::TensorMeta;
use crate::module::weights::{RnnLayer, RnnLayerRecord};
use crate::op::spec::RnnArch;

pub(crate) fn io_error(path: &Path, e: impl core::fmt::Display) -> RnnError {
    RnnError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl CudnnCompatibleLstmConfig {
    /// Loads a module saved with a Burn file recorder (e.g. `module.save_file(path,
    /// &recorder)`), after checking every parameter against this config. `path` may
    /// carry the recorder's extension (`model.mpk.gz`) or not (`model`). A damaged file
    /// is an [`RnnError::Io`] naming it, never a panic. A checkpoint of another
    /// architecture is a named error, never a silently changed module. For a model that
    /// holds the layer among other modules, [`load_file_checked`](crate::load_file_checked)
    /// makes the same checks.
    pub fn load_checkpoint<B: Backend, R: FileRecorder<B>>(
        &self,
        path: impl AsRef<Path>,
        recorder: &R,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, RnnError> {
        let module = self.try_init::<B>(device)?;
        load_checked(&self.arch(), module, path.as_ref(), recorder, device, |r| {
            &r.layers
        })
    }

    /// Loads PyTorch `nn.LSTM` parameters saved as safetensors under their state-dict
    /// names (`weight_ih_l0`, `bias_hh_l1_reverse`, `weight_hr_l0`, ...): the state dict
    /// of a bare `nn.LSTM`. For an `nn.LSTM` inside a larger module, whose names carry
    /// the parent's prefix (`encoder.weight_ih_l0`), use
    /// [`Self::load_pytorch_safetensors_with_prefix`].
    ///
    /// Values are converted to the device's float type; every tensor the config needs
    /// must be present with its exact shape, and no LSTM parameter the config lacks may
    /// be. A missing tensor that the file holds under a prefix is an error that names
    /// the prefix to pass.
    ///
    /// The file does not hold the config: build it with PyTorch's values, and mind
    /// `batch_first`, which is `False` by default in PyTorch and `true` by default here
    /// (`.with_batch_first(false)` for a model that was fed `[seq, batch, features]`).
    /// A `torch.save` file (`.pt`) loads with [`Self::load_pytorch`].
    pub fn load_pytorch_safetensors<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, RnnError> {
        self.load_pytorch_safetensors_with_prefix(path, "", device)
    }

    /// [`Self::load_pytorch_safetensors`] for an `nn.LSTM` that is a submodule: its
    /// tensors are `{prefix}weight_ih_l0`, ... (`prefix` `"encoder."` for a module
    /// whose LSTM is `self.encoder`; `"model.rnn."` for one nested deeper). Tensors
    /// without the prefix (the rest of the parent module) are left alone; under the
    /// prefix, no LSTM parameter the config lacks may be.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), burn_lstm::RnnError> {
    /// use burn::backend::Flex;
    /// use burn_lstm::CudnnCompatibleLstmConfig;
    ///
    /// // PyTorch: self.encoder = nn.LSTM(16, 32, num_layers=2)  (batch_first=False)
    /// let encoder = CudnnCompatibleLstmConfig::new(16, 32)
    ///     .with_num_layers(2)
    ///     .with_batch_first(false)
    ///     .load_pytorch_safetensors_with_prefix::<Flex>("model.safetensors", "encoder.", &Default::default())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn load_pytorch_safetensors_with_prefix<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        prefix: &str,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, RnnError> {
        load_pytorch(
            &self.arch(),
            path.as_ref(),
            prefix,
            PytorchFormats::Safetensors,
            || self.try_init::<B>(device),
            |m| &mut m.layers,
            device,
        )
    }

    /// Loads PyTorch `nn.LSTM` parameters from a state dict saved by `torch.save`
    /// (`.pt`, `.pth`, `.bin`: PyTorch 1.6's format and later) or as safetensors, told
    /// apart by content, with the checks of [`Self::load_pytorch_safetensors`]. A
    /// `torch.save` file is read without running anything in it: dicts and tensors are
    /// read, any other object is only named (a pickled whole model is an error that
    /// says to save its `state_dict()`). A checkpoint dict (`{"model":
    /// model.state_dict(), "optimizer": ...}`) names its tensors `model.weight_ih_l0`,
    /// ...: load them with [`Self::load_pytorch_with_prefix`].
    ///
    /// ```no_run
    /// # fn main() -> Result<(), burn_lstm::RnnError> {
    /// use burn::backend::Flex;
    /// use burn_lstm::CudnnCompatibleLstmConfig;
    ///
    /// // PyTorch: torch.save(nn.LSTM(16, 32, num_layers=2).state_dict(), "lstm.pt")
    /// let lstm = CudnnCompatibleLstmConfig::new(16, 32)
    ///     .with_num_layers(2)
    ///     .with_batch_first(false)
    ///     .load_pytorch::<Flex>("lstm.pt", &Default::default())?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn load_pytorch<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, RnnError> {
        self.load_pytorch_with_prefix(path, "", device)
    }

    /// [`Self::load_pytorch`] for an `nn.LSTM` that is a submodule (`prefix` as in
    /// [`Self::load_pytorch_safetensors_with_prefix`]; `"model.encoder."` for the
    /// encoder of a checkpoint dict's `"model"` entry).
    pub fn load_pytorch_with_prefix<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        prefix: &str,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, RnnError> {
        load_pytorch(
            &self.arch(),
            path.as_ref(),
            prefix,
            PytorchFormats::Any,
            || self.try_init::<B>(device),
            |m| &mut m.layers,
            device,
        )
    }
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// Saves the parameters as safetensors under PyTorch's `nn.LSTM` state-dict names,
    /// loadable with `model.load_state_dict(safetensors.torch.load_file(path))`.
    pub fn save_pytorch_safetensors(&self, path: impl AsRef<Path>) -> Result<(), RnnError> {
        save_pytorch(self, path.as_ref())
    }
}

impl CudnnCompatibleGruConfig {
    /// Loads a module saved with a Burn file recorder, after checking every parameter
    /// against this config (as [`CudnnCompatibleLstmConfig::load_checkpoint`](crate::CudnnCompatibleLstmConfig::load_checkpoint)
    /// does: a damaged file or another architecture is a named error, never a panic or
    /// a silently changed module).
    pub fn load_checkpoint<B: Backend, R: FileRecorder<B>>(
        &self,
        path: impl AsRef<Path>,
        recorder: &R,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        let module = self.try_init::<B>(device)?;
        load_checked(&self.arch(), module, path.as_ref(), recorder, device, |r| {
            &r.layers
        })
    }

    /// Loads PyTorch `nn.GRU` parameters saved as safetensors under their state-dict
    /// names (`weight_ih_l0`, `bias_hh_l1_reverse`, ...; gates r, z, n): the state dict
    /// of a bare `nn.GRU`; [`Self::load_pytorch_safetensors_with_prefix`] for one inside
    /// a larger module. Values are converted to the device's float type; every tensor
    /// the config needs must be present with its exact shape, and no GRU parameter the
    /// config lacks may be. As for the LSTM
    /// ([`CudnnCompatibleLstmConfig::load_pytorch_safetensors`](crate::CudnnCompatibleLstmConfig::load_pytorch_safetensors)),
    /// PyTorch's `batch_first` is `False` by default and ours `true`.
    pub fn load_pytorch_safetensors<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        self.load_pytorch_safetensors_with_prefix(path, "", device)
    }

    /// [`Self::load_pytorch_safetensors`] for an `nn.GRU` that is a submodule: its
    /// tensors are `{prefix}weight_ih_l0`, ... (`prefix` `"encoder."` for a module whose
    /// GRU is `self.encoder`). Tensors without the prefix are left alone.
    pub fn load_pytorch_safetensors_with_prefix<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        prefix: &str,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        load_pytorch(
            &self.arch(),
            path.as_ref(),
            prefix,
            PytorchFormats::Safetensors,
            || self.try_init::<B>(device),
            |m| &mut m.layers,
            device,
        )
    }

    /// Loads PyTorch `nn.GRU` parameters from a state dict saved by `torch.save` or as
    /// safetensors, told apart by content, as
    /// [`CudnnCompatibleLstmConfig::load_pytorch`](crate::CudnnCompatibleLstmConfig::load_pytorch)
    /// does for an LSTM.
    pub fn load_pytorch<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        self.load_pytorch_with_prefix(path, "", device)
    }

    /// [`Self::load_pytorch`] for an `nn.GRU` that is a submodule.
    pub fn load_pytorch_with_prefix<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        prefix: &str,
        device: &B::Device,
    ) -> Result<CudnnCompatibleGru<B>, RnnError> {
        load_pytorch(
            &self.arch(),
            path.as_ref(),
            prefix,
            PytorchFormats::Any,
            || self.try_init::<B>(device),
            |m| &mut m.layers,
            device,
        )
    }
}

impl<B: Backend> CudnnCompatibleGru<B> {
    /// Saves the parameters as safetensors under PyTorch's `nn.GRU` state-dict names,
    /// loadable with `model.load_state_dict(safetensors.torch.load_file(path))`.
    pub fn save_pytorch_safetensors(&self, path: impl AsRef<Path>) -> Result<(), RnnError> {
        save_pytorch(self, path.as_ref())
    }
}

/// `module` with the record of a Burn file recorder at `path` applied, after the
/// record's layers (`layers_of`) were checked against `arch`.
pub(crate) fn load_checked<B, R, M>(
    arch: &RnnArch,
    module: M,
    path: &Path,
    recorder: &R,
    device: &B::Device,
    layers_of: impl FnOnce(&M::Record) -> &[RnnLayerRecord<B>],
) -> Result<M, RnnError>
where
    B: Backend,
    R: FileRecorder<B>,
    M: Module<B>,
{
    // Burn's recorders set their extension on the path they are given, which turns
    // `model.mpk.gz` into `model.mpk.mpk.gz`: give them the stem.
    let extension = format!(".{}", <R as FileRecorder<B>>::file_extension());
    let stem = path
        .to_str()
        .and_then(|p| p.strip_suffix(&extension))
        .map_or_else(|| path.to_path_buf(), std::path::PathBuf::from);
    // Burn's decoders return errors for most damage, but building the tensors of a
    // decoded record panics on some (a shape that does not match its bytes): a
    // damaged file is the user's input, so that panic becomes a named error. Sound
    // here: nothing this call shares outlives it half-built (the recorder is only
    // read, the record is dropped). See docs/robustness.md. On a stack as deep as the
    // decoders' nesting limits (`decoder_stack.rs`).
    let file = stem.with_extension(&extension[1..]);
    let loaded = on_decoder_stack(|| {
        catch_unwind(AssertUnwindSafe(|| {
            // Decoded with the checks that keep a hostile file from aborting the
            // process (`record_guard.rs`); what that decode leaves, and every file of
            // a recorder that is not Burn's, the recorder decodes and words.
            if let Some(record) = record_guard::decode::<B, M::Record, R>(&file)? {
                return Ok(<M::Record as Record<B>>::from_item(record.item, device));
            }
            recorder
                .load::<M::Record>(stem.clone(), device)
                .map_err(|e| {
                    let expected = module_tensors(&module);
                    let source = path.display().to_string();
                    another_modules_record::<B, R>(recorder, &stem, &source, &expected)
                        .unwrap_or_else(|| io_error(path, recorder_message(&e)))
                })
        }))
    });
    let record = match loaded {
        Ok(record) => record?,
        Err(panic) => {
            return Err(io_error(
                path,
                format!(
                    "damaged record: Burn's loader failed ({})",
                    panic_message(panic.as_ref())
                ),
            ));
        }
    };
    validate_layers(arch, layers_of(&record)).map_err(|e| with_source(e, path))?;
    Ok(module.load_record(record))
}

/// A module made by `init` with the PyTorch state dict at `path` loaded into its
/// `layers` (checked against `arch` first).
fn load_pytorch<B: Backend, M>(
    arch: &RnnArch,
    path: &Path,
    prefix: &str,
    formats: PytorchFormats,
    init: impl FnOnce() -> Result<M, RnnError>,
    layers: impl FnOnce(&mut M) -> &mut [RnnLayer<B>],
    device: &B::Device,
) -> Result<M, RnnError> {
    let pytorch = PytorchParameters::open(arch, path, prefix, formats)?;
    let mut module = init()?;
    pytorch.load_into(layers(&mut module), device)?;
    Ok(module)
}

/// Which files a PyTorch loader reads, and its name (errors name it in their hints).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PytorchFormats {
    /// safetensors only (`load_pytorch_safetensors`).
    Safetensors,
    /// safetensors or a `torch.save` file, told apart by content (`load_pytorch`).
    Any,
}

impl PytorchFormats {
    fn loader(self) -> &'static str {
        match self {
            Self::Safetensors => "load_pytorch_safetensors",
            Self::Any => "load_pytorch",
        }
    }
}

/// Where a state dict's tensors come from.
enum Tensors {
    Safetensors(SafetensorsStore),
    Torch(TorchFile),
}

/// One tensor of a state dict, found by name.
enum Found {
    Snapshot(TensorSnapshot),
    Torch(Rc<TensorMeta>),
}

impl Found {
    fn shape(&self) -> Vec<usize> {
        match self {
            Found::Snapshot(s) => s.shape.to_vec(),
            Found::Torch(t) => torch_file::shape(t),
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Found::Snapshot(s) => s.dtype,
            Found::Torch(t) => torch_file::dtype(t.storage.dtype),
        }
    }
}

impl Tensors {
    fn open(path: &Path, formats: PytorchFormats) -> Result<Self, RnnError> {
        match torch_file::open_if_torch(path).map_err(|e| io_error(path, e))? {
            Some(file) if formats == PytorchFormats::Any => Ok(Self::Torch(file)),
            Some(_) => Err(io_error(
                path,
                "a torch.save file, not safetensors: load it with load_pytorch (or \
                 load_pytorch_with_prefix), which reads both",
            )),
            None => Ok(Self::Safetensors(SafetensorsStore::from_file(path))),
        }
    }

    fn names(&mut self) -> Result<Vec<String>, String> {
        match self {
            Self::Safetensors(store) => store.keys().map_err(|e| e.to_string()),
            Self::Torch(file) => Ok(file.names()),
        }
    }

    fn find(&mut self, key: &str) -> Result<Option<Found>, String> {
        match self {
            Self::Safetensors(store) => store
                .get_snapshot(key)
                .map(|s| s.cloned().map(Found::Snapshot))
                .map_err(|e| e.to_string()),
            Self::Torch(file) => Ok(file.get(key).map(Found::Torch)),
        }
    }

    fn data(&mut self, found: Found) -> Result<TensorData, String> {
        match (self, found) {
            (_, Found::Snapshot(s)) => s.to_data().map_err(|e| format!("{e:?}")),
            (Self::Torch(file), Found::Torch(t)) => file.read(&t),
            (Self::Safetensors(_), Found::Torch(_)) => {
                Err("a torch.save tensor asked of a safetensors file".into())
            }
        }
    }
}

/// A PyTorch state dict (`nn.LSTM` or `nn.GRU` names, each after `prefix`) in
/// safetensors or a `torch.save` file, checked against an architecture: no parameter
/// the architecture lacks.
pub(crate) struct PytorchParameters<'a> {
    arch: &'a RnnArch,
    path: &'a Path,
    prefix: &'a str,
    formats: PytorchFormats,
    /// Every tensor name of the file (for the hint of a missing one).
    names: Vec<String>,
    tensors: Tensors,
}

impl<'a> PytorchParameters<'a> {
    pub fn open(
        arch: &'a RnnArch,
        path: &'a Path,
        prefix: &'a str,
        formats: PytorchFormats,
    ) -> Result<Self, RnnError> {
        if !path.is_file() {
            return Err(io_error(path, "no such file"));
        }
        let mut tensors = Tensors::open(path, formats)?;
        let names = tensors.names().map_err(|e| io_error(path, e))?;
        for name in &names {
            let Some(rest) = name.strip_prefix(prefix) else {
                continue;
            };
            let Some((param, layer, reverse)) = parse_pytorch_name(rest) else {
                // A parameter's name spelled otherwise (`weight_ih_l01`, `weight_ih_l+1`)
                // is no parameter this loader reads, nor one to ignore silently.
                let numbered = |p: &&str| {
                    rest.strip_prefix(*p)
                        .and_then(|r| r.strip_prefix("_l"))
                        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit() || c == '+'))
                };
                if PARAM_NAMES.iter().any(numbered) {
                    return Err(unexpected(&path.display().to_string(), name.clone()));
                }
                continue;
            };
            let index = PARAM_NAMES
                .iter()
                .position(|p| *p == param)
                .expect("known name");
            if layer >= arch.num_layers
                || (reverse && !arch.bidirectional)
                || expected_shapes(arch, layer)[index].is_none()
            {
                return Err(unexpected(&path.display().to_string(), name.clone()));
            }
        }
        Ok(Self {
            arch,
            path,
            prefix,
            formats,
            names,
            tensors,
        })
    }

    /// Replaces every parameter of `layers` (made for the same architecture) with the
    /// file's.
    pub fn load_into<B: Backend>(
        mut self,
        layers: &mut [RnnLayer<B>],
        device: &B::Device,
    ) -> Result<(), RnnError> {
        let (path, prefix, names, loader) =
            (self.path, self.prefix, &self.names, self.formats.loader());
        let tensors = &mut self.tensors;
        let mut load = |name: String, shape: Vec<usize>| -> Result<TensorData, RnnError> {
            let key = format!("{prefix}{name}");
            let found = tensors
                .find(&key)
                .map_err(|e| io_error(path, e))?
                .ok_or_else(|| RnnError::CheckpointTensor {
                    source_name: path.display().to_string(),
                    problem: "missing",
                    hint: prefix_hint(names, &name, &key, loader),
                    name: key.clone(),
                })?;
            if found.shape() != shape {
                return Err(RnnError::ParameterShape {
                    name: key,
                    expected: shape,
                    actual: found.shape(),
                });
            }
            // Float values are converted to the device's float type; an integer or
            // boolean tensor under a parameter's name is not a parameter.
            if !matches!(
                found.dtype(),
                DType::F64 | DType::F32 | DType::F16 | DType::BF16
            ) {
                return Err(RnnError::CheckpointDtype {
                    source_name: path.display().to_string(),
                    name: key,
                    expected: "a float dtype (F64, F32, F16 or BF16)".into(),
                    actual: format!("{:?}", found.dtype()),
                });
            }
            // `Tensor::from_data` converts to the device's float type (not the backend's
            // `FloatElem`: Flex's is f32 even on a device set to f64).
            tensors
                .data(found)
                .map_err(|e| io_error(path, format!("tensor `{key}`: {e}")))
        };
        for (l, layer) in layers.iter_mut().enumerate() {
            let expected = expected_shapes(self.arch, l);
            let directions = core::iter::once((&mut layer.forward, ""))
                .chain(layer.reverse.as_mut().map(|r| (r, "_reverse")));
            for (weights, suffix) in directions {
                let mut fetch = |index: usize| -> Result<Option<TensorData>, RnnError> {
                    expected[index]
                        .clone()
                        .map(|shape| load(format!("{}_l{l}{suffix}", PARAM_NAMES[index]), shape))
                        .transpose()
                };
                let matrix =
                    |d: TensorData| Param::from_tensor(Tensor::<B, 2>::from_data(d, device));
                let vector =
                    |d: TensorData| Param::from_tensor(Tensor::<B, 1>::from_data(d, device));
                weights.weight_ih = matrix(fetch(0)?.expect("always present"));
                weights.weight_hh = matrix(fetch(1)?.expect("always present"));
                weights.bias_ih = fetch(2)?.map(vector);
                weights.bias_hh = fetch(3)?.map(vector);
                weights.weight_hr = fetch(4)?.map(matrix);
            }
        }
        Ok(())
    }
}

/// Where a file holds the tensor `name` that was looked for as `key`: under other
/// prefixes (a parent module's state dict: `encoder.weight_ih_l0`), named with the call
/// that loads them; `None` where it holds no such name.
fn prefix_hint(names: &[String], name: &str, key: &str, loader: &str) -> Option<String> {
    let prefixes: Vec<&str> = names
        .iter()
        .filter(|n| n.as_str() != key)
        .filter_map(|n| n.strip_suffix(name))
        .filter(|p| p.is_empty() || p.ends_with('.'))
        .collect();
    let call = |p: &str| {
        if p.is_empty() {
            format!("{loader}(path, device)")
        } else {
            format!("{loader}_with_prefix(path, {p:?}, device)")
        }
    };
    match prefixes.as_slice() {
        [] => None,
        [p] => Some(format!(
            "the file has it as `{p}{name}`: load it with `{}`",
            call(p)
        )),
        many => Some(format!(
            "the file has it under {} prefixes ({}): name the module's with `{}`",
            many.len(),
            many.iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            call(many[0])
        )),
    }
}

/// Saves `module`'s `layers.{l}.{forward,reverse}.{param}` under PyTorch's state-dict
/// names (`{param}_l{l}[_reverse]`).
pub(crate) fn save_pytorch<B: Backend, M: Module<B>>(
    module: &M,
    path: &Path,
) -> Result<(), RnnError> {
    let mut store = SafetensorsStore::from_file(path)
        .with_key_remapping(r"^layers\.(\d+)\.forward\.(\w+)$", "${2}_l${1}")
        .with_key_remapping(r"^layers\.(\d+)\.reverse\.(\w+)$", "${2}_l${1}_reverse")
        .overwrite(true);
    module.save_into(&mut store).map_err(|e| io_error(path, e))
}

/// `weight_ih_l3_reverse` → `("weight_ih", 3, true)`; `None` for other names.
fn parse_pytorch_name(name: &str) -> Option<(&str, usize, bool)> {
    let (stem, reverse) = match name.strip_suffix("_reverse") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let (param, layer) = stem.rsplit_once("_l")?;
    // PyTorch's own spelling only: `usize::from_str` also takes "+1" and "01".
    let canonical = !layer.is_empty()
        && layer.bytes().all(|b| b.is_ascii_digit())
        && (layer == "0" || !layer.starts_with('0'));
    if !canonical {
        return None;
    }
    let layer = layer.parse().ok()?;
    PARAM_NAMES
        .iter()
        .find(|p| **p == param)
        .map(|p| (*p, layer, reverse))
}

fn with_source(error: RnnError, path: &Path) -> RnnError {
    match error {
        RnnError::CheckpointTensor {
            problem,
            name,
            hint,
            ..
        } => RnnError::CheckpointTensor {
            source_name: path.display().to_string(),
            problem,
            name,
            hint,
        },
        other => other,
    }
}

/// The message of a caught panic (`&str` or `String` payloads; others unnamed).
pub(crate) fn panic_message(payload: &(dyn core::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}
