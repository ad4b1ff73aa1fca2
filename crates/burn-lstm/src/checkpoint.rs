//! Checkpoints: Burn records checked against the config before they are applied
//! (Burn itself would silently drop a missing bias or panic on a layer count), and
//! PyTorch `nn.LSTM` state dicts in safetensors, by their PyTorch names.

use std::path::Path;

use burn::module::{Module, Param};
use burn::record::FileRecorder;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn_store::{ModuleSnapshot, ModuleStore, SafetensorsStore};

use crate::config::CudnnCompatibleLstmConfig;
use crate::error::LstmError;
use crate::module::{
    CudnnCompatibleLstm, CudnnCompatibleLstmRecord, LstmDirectionWeights,
    LstmDirectionWeightsRecord, LstmLayer, LstmLayerRecord,
};
use crate::spec::LstmArch;

/// The parameter names of one direction, in canonical order.
const PARAM_NAMES: [&str; 5] = ["weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr"];

/// Shapes the architecture needs for cell `(layer, direction)`, `None` where it has no such parameter.
fn expected_shapes(arch: &LstmArch, layer: usize) -> [Option<Vec<usize>>; 5] {
    let h4 = 4 * arch.hidden_size;
    [
        Some(vec![h4, arch.layer_input_size(layer)]),
        Some(vec![h4, arch.output_size()]),
        arch.bias.then(|| vec![h4]),
        arch.bias.then(|| vec![h4]),
        (arch.proj_size > 0).then(|| vec![arch.proj_size, arch.hidden_size]),
    ]
}

/// Parameter shapes of one direction, for modules and their records alike.
pub(crate) trait DirectionShapes {
    /// Shapes in [`PARAM_NAMES`] order.
    fn shapes(&self) -> [Option<Vec<usize>>; 5];
}

/// One layer's directions, for modules and their records alike.
pub(crate) trait LayerDirections {
    /// The direction type.
    type Direction: DirectionShapes;
    /// Forward and (optional) reverse.
    fn directions(&self) -> (&Self::Direction, Option<&Self::Direction>);
}

macro_rules! impl_shapes {
    ($direction:ident, $layer:ident) => {
        impl<B: Backend> DirectionShapes for $direction<B> {
            fn shapes(&self) -> [Option<Vec<usize>>; 5] {
                fn dims<B: Backend, const D: usize>(p: &Param<Tensor<B, D>>) -> Vec<usize> {
                    p.val().dims().to_vec()
                }
                [
                    Some(dims(&self.weight_ih)),
                    Some(dims(&self.weight_hh)),
                    self.bias_ih.as_ref().map(dims),
                    self.bias_hh.as_ref().map(dims),
                    self.weight_hr.as_ref().map(dims),
                ]
            }
        }
        impl<B: Backend> LayerDirections for $layer<B> {
            type Direction = $direction<B>;
            fn directions(&self) -> (&Self::Direction, Option<&Self::Direction>) {
                (&self.forward, self.reverse.as_ref())
            }
        }
    };
}
impl_shapes!(LstmDirectionWeights, LstmLayer);
impl_shapes!(LstmDirectionWeightsRecord, LstmLayerRecord);

/// Checks layer count, directions and every parameter shape against `arch`.
pub(crate) fn validate_layers<L: LayerDirections>(
    arch: &LstmArch,
    layers: &[L],
) -> Result<(), LstmError> {
    if layers.len() != arch.num_layers {
        return Err(LstmError::ParameterShape {
            name: "layers".into(),
            expected: vec![arch.num_layers],
            actual: vec![layers.len()],
        });
    }
    for (l, layer) in layers.iter().enumerate() {
        let (forward, reverse) = layer.directions();
        match (arch.bidirectional, reverse) {
            (true, None) => return Err(missing("the config", format!("layers.{l}.reverse"))),
            (false, Some(_)) => {
                return Err(unexpected("the config", format!("layers.{l}.reverse")));
            }
            _ => {}
        }
        for (direction, name) in
            core::iter::once((forward, "forward")).chain(reverse.map(|r| (r, "reverse")))
        {
            let expected = expected_shapes(arch, l);
            for ((param, expected), actual) in
                PARAM_NAMES.iter().zip(expected).zip(direction.shapes())
            {
                let path = format!("layers.{l}.{name}.{param}");
                match (expected, actual) {
                    (Some(e), Some(a)) if e != a => {
                        return Err(LstmError::ParameterShape {
                            name: path,
                            expected: e,
                            actual: a,
                        });
                    }
                    (Some(_), None) => return Err(missing("the checkpoint", path)),
                    (None, Some(_)) => return Err(unexpected("the checkpoint", path)),
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

fn missing(source: &str, name: String) -> LstmError {
    LstmError::CheckpointTensor {
        source_name: source.into(),
        problem: "missing",
        name,
    }
}

fn unexpected(source: &str, name: String) -> LstmError {
    LstmError::CheckpointTensor {
        source_name: source.into(),
        problem: "unexpected",
        name,
    }
}

fn io_error(path: &Path, e: impl core::fmt::Display) -> LstmError {
    LstmError::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

impl CudnnCompatibleLstmConfig {
    /// Loads a module saved with a Burn file recorder (e.g. `module.save_file(path,
    /// &recorder)`), after checking every parameter against this config. A checkpoint
    /// of another architecture is a named error, never a silently changed module.
    pub fn load_checkpoint<B: Backend, R: FileRecorder<B>>(
        &self,
        path: impl AsRef<Path>,
        recorder: &R,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, LstmError> {
        let path = path.as_ref();
        let module = self.try_init::<B>(device)?;
        let record: CudnnCompatibleLstmRecord<B> = recorder
            .load(path.to_path_buf(), device)
            .map_err(|e| io_error(path, e))?;
        validate_layers(&self.arch(), &record.layers).map_err(|e| with_source(e, path))?;
        Ok(module.load_record(record))
    }

    /// Loads PyTorch `nn.LSTM` parameters saved as safetensors under their state-dict
    /// names (`weight_ih_l0`, `bias_hh_l1_reverse`, `weight_hr_l0`, ...). Values are
    /// converted to the backend's float type; every tensor the config needs must be
    /// present with its exact shape, and no LSTM parameter the config lacks may be.
    pub fn load_pytorch_safetensors<B: Backend>(
        &self,
        path: impl AsRef<Path>,
        device: &B::Device,
    ) -> Result<CudnnCompatibleLstm<B>, LstmError> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(io_error(path, "no such file"));
        }
        let arch = self.arch();
        let mut store = SafetensorsStore::from_file(path);
        let names = store.keys().map_err(|e| io_error(path, e))?;
        for name in names.iter().filter(|n| parse_pytorch_name(n).is_some()) {
            let (param, layer, reverse) = parse_pytorch_name(name).expect("filtered");
            let index = PARAM_NAMES
                .iter()
                .position(|p| *p == param)
                .expect("known name");
            if layer >= arch.num_layers
                || (reverse && !arch.bidirectional)
                || expected_shapes(&arch, layer)[index].is_none()
            {
                return Err(unexpected(&path.display().to_string(), name.clone()));
            }
        }
        let mut load = |name: String, shape: Vec<usize>| -> Result<TensorData, LstmError> {
            let snapshot = store
                .get_snapshot(&name)
                .map_err(|e| io_error(path, e))?
                .ok_or_else(|| missing(&path.display().to_string(), name.clone()))?;
            if snapshot.shape.to_vec() != shape {
                return Err(LstmError::ParameterShape {
                    name,
                    expected: shape,
                    actual: snapshot.shape.to_vec(),
                });
            }
            let data = snapshot
                .to_data()
                .map_err(|e| io_error(path, format!("{e:?}")))?;
            Ok(data.convert::<B::FloatElem>())
        };
        let mut module = self.try_init::<B>(device)?;
        for (l, layer) in module.layers.iter_mut().enumerate() {
            let expected = expected_shapes(&arch, l);
            let directions = core::iter::once((&mut layer.forward, ""))
                .chain(layer.reverse.as_mut().map(|r| (r, "_reverse")));
            for (weights, suffix) in directions {
                let mut fetch = |index: usize| -> Result<Option<TensorData>, LstmError> {
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
        Ok(module)
    }
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// Saves the parameters as safetensors under PyTorch's `nn.LSTM` state-dict names,
    /// loadable with `model.load_state_dict(safetensors.torch.load_file(path))`.
    pub fn save_pytorch_safetensors(&self, path: impl AsRef<Path>) -> Result<(), LstmError> {
        let path = path.as_ref();
        let mut store = SafetensorsStore::from_file(path)
            .with_key_remapping(r"^layers\.(\d+)\.forward\.(\w+)$", "${2}_l${1}")
            .with_key_remapping(r"^layers\.(\d+)\.reverse\.(\w+)$", "${2}_l${1}_reverse")
            .overwrite(true);
        self.save_into(&mut store).map_err(|e| io_error(path, e))
    }
}

/// `weight_ih_l3_reverse` → `("weight_ih", 3, true)`; `None` for other names.
fn parse_pytorch_name(name: &str) -> Option<(&str, usize, bool)> {
    let (stem, reverse) = match name.strip_suffix("_reverse") {
        Some(stem) => (stem, true),
        None => (name, false),
    };
    let (param, layer) = stem.rsplit_once("_l")?;
    let layer = layer.parse().ok()?;
    PARAM_NAMES
        .iter()
        .find(|p| **p == param)
        .map(|p| (*p, layer, reverse))
}

fn with_source(error: LstmError, path: &Path) -> LstmError {
    match error {
        LstmError::CheckpointTensor { problem, name, .. } => LstmError::CheckpointTensor {
            source_name: path.display().to_string(),
            problem,
            name,
        },
        other => other,
    }
}
