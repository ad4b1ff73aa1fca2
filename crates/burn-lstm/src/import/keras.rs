//! [`KerasModel`]: a Keras model file's recurrent layers, loaded into
//! [`CudnnCompatibleLstm`] / [`CudnnCompatibleGru`] with the config they imply.

use std::collections::HashMap;
use std::path::Path;

use burn::tensor::backend::Backend;
use serde_json::Value;

use crate::error::RnnError;
use crate::import::cell_name;
use crate::import::hdf5::io;
use crate::import::host::{StackParams, build_gru, build_lstm};
use crate::import::keras_config::{self, LayerEntry, identity_at_inference};
use crate::import::keras_file::{self, KerasFile, parse_json};
use crate::import::keras_settings::{self, LOADED_CLASSES, RecurrentKind, recurrent_kind, setting};
use crate::import::keras_weights::{self, Expected, LoadedLayer};
use crate::import::selection::{RecurrentSelection, list, resolve};
use crate::module::config::CudnnCompatibleLstmConfig;
use crate::module::gru::CudnnCompatibleGru;
use crate::module::gru_config::CudnnCompatibleGruConfig;
use crate::module::lstm::CudnnCompatibleLstm;
use crate::op::spec::CellKind;

/// One recurrent layer of a Keras model (`LSTM`, `GRU`, `CuDNNLSTM`, `CuDNNGRU`, or a
/// `Bidirectional` of one), as the file describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct KerasRecurrentLayer {
    /// The layer's name in the model; a layer of a model nested in it is named
    /// `model/layer` (`encoder/lstm`), except in a Keras 2 weights-only file opened
    /// without its architecture, where a nested model of one recurrent layer is named
    /// after the model alone.
    pub name: String,
    /// Its Keras class, e.g. `LSTM`, `CuDNNGRU`, `Bidirectional(GRU)`.
    pub class_name: String,
    /// LSTM or GRU.
    pub cell: CellKind,
    /// Features of each input step (from the kernel's shape; 0 when the layer is
    /// refused before its weights are read).
    pub input_size: usize,
    /// Keras's `units`: the hidden size.
    pub units: usize,
    /// A `Bidirectional` wrapper (merge mode `concat`).
    pub bidirectional: bool,
    /// Keras's `use_bias`.
    pub bias: bool,
    /// Keras's `return_sequences`: whether the model uses its whole output sequence
    /// (`false`: only the last step, which is the module's final hidden state).
    pub return_sequences: bool,
    /// `false` for a Keras 2 layer with `time_major=True`.
    pub batch_first: bool,
    /// The layer that masks its input, when there is one upstream (`Masking`, or an
    /// `Embedding` with `mask_zero`) and the layers in between hand its mask on (Keras's
    /// masking layers: dropout-like, `Dense`, normalisations, recurrent layers that
    /// return every step): pass the rows' lengths to `forward_with_lengths`
    /// ([`keras_mask_lengths`](crate::keras_mask_lengths) computes them for a `Masking`).
    pub mask_source: Option<String>,
    /// The `Masking` layer's `mask_value`.
    pub mask_value: Option<f64>,
    /// Whether the file holds the layer's settings. A weights-only `.h5` without its
    /// architecture (see [`KerasModel::open_with_architecture`]) does not: the layer is
    /// then read from its weights alone, assuming the defaults of Keras 2.3 and later
    /// (tanh, sigmoid, `reset_after=True`, forward, not stateful); a file that says an
    /// older Keras wrote it is refused without its architecture.
    pub settings_known: bool,
    /// Why the layer cannot be loaded (a setting cuDNN cannot run, a missing or
    /// misshapen weight), returned when it is selected; `None` when it can.
    pub refusal: Option<RnnError>,
}

struct Recurrent {
    info: KerasRecurrentLayer,
    /// Its weights, read and converted (or why not).
    loaded: Result<LoadedLayer, RnnError>,
    /// Position in the architecture's layer list (None without one).
    entry: Option<usize>,
    /// Its slot among the weights file's layers (`LayerPaths::slot`), for stacks
    /// without an architecture.
    slot: Option<usize>,
}

/// The recurrent layers of a Keras model file: `.keras` (Keras 3), a full-model `.h5`
/// (Keras 2, or Keras 3's legacy `model.save("x.h5")`) or a weights-only `.h5`
/// (`save_weights`, Keras 2 or 3; give it its architecture with
/// [`Self::open_with_architecture`]).
///
/// Every layer's settings and weights are read and checked when the file is opened; a
/// layer that cannot be loaded says why in [`KerasRecurrentLayer::refusal`], and
/// selecting it returns that error. Building a module reads nothing more from the file.
///
/// ```no_run
/// # fn main() -> Result<(), burn_lstm::RnnError> {
/// use burn::backend::Flex;
/// use burn_lstm::{KerasModel, RecurrentSelection};
///
/// let model = KerasModel::open("model.keras")?;
/// for layer in model.layers() {
///     println!("{} {} units={} bidirectional={}", layer.name, layer.class_name, layer.units, layer.bidirectional);
/// }
/// // One layer by name, or a stack of them as one multi-layer module.
/// let (encoder, config) = model.lstm::<Flex>("encoder", &Default::default())?;
/// let (stack, _) = model.lstm::<Flex>(RecurrentSelection::All, &Default::default())?;
/// # Ok(())
/// # }
/// ```
pub struct KerasModel {
    source: String,
    recurrent: Vec<Recurrent>,
    /// The architecture's top-level layers (empty without one).
    entries: Vec<LayerEntry>,
    /// Each entry's position, by name.
    positions: HashMap<String, usize>,
    /// Recurrent layers of classes this crate does not load: (name, class).
    others: Vec<(String, String)>,
}

impl core::fmt::Debug for KerasModel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KerasModel")
            .field("source", &self.source)
            .field("layers", &self.layers())
            .finish()
    }
}

impl KerasModel {
    /// Opens a Keras file (`.keras` or `.h5`, told apart by content). A weights-only
    /// `.h5` is read from its weights alone (see
    /// [`KerasRecurrentLayer::settings_known`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, RnnError> {
        let file = keras_file::open(path.as_ref())?;
        Self::from_file(file, None)
    }

    /// Opens a weights-only file (`model.save_weights(...)`) with the model's
    /// architecture JSON (`model.to_json()` saved to `architecture`), whose settings are
    /// then checked as in a full-model file. Also accepted for a full-model file, whose
    /// own architecture it replaces.
    pub fn open_with_architecture(
        path: impl AsRef<Path>,
        architecture: impl AsRef<Path>,
    ) -> Result<Self, RnnError> {
        let file = keras_file::open(path.as_ref())?;
        let json_path = architecture.as_ref();
        let json_source = json_path.display().to_string();
        let text =
            std::fs::read_to_string(json_path).map_err(|e| io(&json_source, e.to_string()))?;
        let json = parse_json(&json_source, "the architecture", &text)?;
        Self::from_file(file, Some(json))
    }

    fn from_file(file: KerasFile, architecture: Option<Value>) -> Result<Self, RnnError> {
        let source = file.source.clone();
        let weights = keras_weights::recurrent_layers(&file.h5, &file.layout)?;
        // A subclassed model's own config lists no layers: its file is read as weights
        // alone (an architecture given for it is refused by `layers`), and a legacy
        // file's order of layers is the order they were created, not the one they run.
        let subclassed = file
            .config
            .as_ref()
            .is_some_and(|c| !keras_config::lists_layers(c));
        let config = architecture.or(file.config.clone().filter(keras_config::lists_layers));
        let entries = match &config {
            Some(json) => keras_config::layers(&source, json)?,
            None => Vec::new(),
        };
        // The first of a name, as a walk by name found it.
        let mut positions = HashMap::with_capacity(entries.len());
        for (k, entry) in entries.iter().enumerate() {
            positions.entry(entry.name.clone()).or_insert(k);
        }
        let mut recurrent = Vec::new();
        let mut others = Vec::new();
        if config.is_some() {
            // Weights matched to a layer already: nested layers whose names agree alike
            // take theirs in order, as Keras loads them.
            let mut taken = vec![false; weights.len()];
            for (index, entry) in entries.iter().enumerate() {
                let wrapped = entry.class_name == "Bidirectional";
                let kind = if wrapped {
                    let inner = entry.config.get("layer");
                    let part = |key: &str| inner.and_then(|l| l.get(key));
                    recurrent_kind(
                        part("class_name").and_then(Value::as_str).unwrap_or("?"),
                        part("config").unwrap_or(&Value::Null),
                    )
                } else {
                    recurrent_kind(&entry.class_name, &entry.config)
                };
                let (kind_cell, class) = match kind {
                    RecurrentKind::Loaded { cell, class, .. } => (Some(cell), class),
                    RecurrentKind::Other(class) => (None, class),
                    RecurrentKind::NotRecurrent => continue,
                };
                let class_name = if wrapped {
                    format!("Bidirectional({class})")
                } else {
                    class
                };
                let Some(kind_cell) = kind_cell else {
                    others.push((entry.name.clone(), class_name));
                    continue;
                };
                let order = (0..weights.len()).find(|&k| !taken[k] && weights[k].belong_to(entry));
                if let Some(k) = order {
                    taken[k] = true;
                }
                let settings = keras_settings::settings(&source, entry);
                let loaded = match (&settings, order) {
                    (Err(e), _) => Err(e.clone()),
                    (Ok(_), None) => Err(RnnError::CheckpointTensor {
                        source_name: file.h5.source().to_string(),
                        problem: "missing",
                        name: format!("the weights of Keras layer '{}'", entry.name),
                        hint: Some(format!(
                            "the file has weights for {}",
                            list(&weights.iter().map(|w| w.name.as_str()).collect::<Vec<_>>())
                        )),
                    }),
                    (Ok(s), Some(order)) => keras_weights::load(
                        &file.h5,
                        &source,
                        &weights[order],
                        Some(&Expected {
                            cell: s.cell,
                            cudnn: s.cudnn,
                            units: s.units,
                            bias: s.bias,
                        }),
                    )
                    .and_then(|l| {
                        if l.backward.is_some() != s.bidirectional {
                            Err(io(
                                &source,
                                format!(
                                    "Keras layer '{}': the weights have {} direction(s), the \
                                     architecture {}",
                                    entry.name,
                                    1 + usize::from(l.backward.is_some()),
                                    1 + usize::from(s.bidirectional)
                                ),
                            ))
                        } else {
                            Ok(l)
                        }
                    }),
                };
                let (mask_source, mask_value) = mask_of(&entries, &positions, index);
                let (cell, units, bidirectional, bias, return_sequences, batch_first) =
                    match &settings {
                        Ok(s) => (
                            s.cell,
                            s.units,
                            s.bidirectional,
                            s.bias,
                            s.return_sequences,
                            s.batch_first,
                        ),
                        Err(_) => {
                            let layer = if wrapped {
                                entry.config.get("layer").and_then(|l| l.get("config"))
                            } else {
                                Some(&entry.config)
                            };
                            let units = layer.and_then(keras_settings::declared_units).unwrap_or(0)
                                as usize;
                            (kind_cell, units, wrapped, true, false, true)
                        }
                    };
                recurrent.push(Recurrent {
                    info: KerasRecurrentLayer {
                        name: entry.name.clone(),
                        class_name,
                        cell,
                        input_size: loaded.as_ref().map(|l| l.input_size).unwrap_or(0),
                        units,
                        bidirectional,
                        bias,
                        return_sequences,
                        batch_first,
                        mask_source,
                        mask_value,
                        settings_known: true,
                        refusal: loaded.as_ref().err().cloned(),
                    },
                    loaded,
                    entry: Some(index),
                    slot: None,
                });
            }
        } else {
            let old_defaults = file
                .h5
                .attr_strings("", "keras_version")?
                .and_then(|v| v.into_iter().next())
                .filter(|v| defaults_predate_2_3(v));
            for paths in &weights {
                let loaded = keras_weights::load(&file.h5, &source, paths, None).and_then(|l| {
                    match &old_defaults {
                        // CuDNN layers have no activation or reset settings.
                        Some(version) if !l.cudnn => Err(RnnError::invalid(
                            format!("{source}: Keras layer '{}'", paths.name),
                            "its architecture (KerasModel::open_with_architecture): without \
                             it the layer's settings are Keras's defaults, which Keras \
                             changed in 2.3 (recurrent_activation hard_sigmoid to sigmoid, \
                             GRU reset_after false to true)",
                            format!("a weights-only file written by Keras {version}"),
                        )),
                        _ => Ok(l),
                    }
                });
                let (cell, units, bias, input_size, cudnn) = match &loaded {
                    Ok(l) => (l.cell, l.units, l.bias, l.input_size, l.cudnn),
                    Err(_) => (CellKind::Lstm, 0, true, 0, false),
                };
                let base = if cudnn {
                    format!("CuDNN{}", cell_name(cell))
                } else {
                    cell_name(cell).to_string()
                };
                recurrent.push(Recurrent {
                    info: KerasRecurrentLayer {
                        name: paths.name.clone(),
                        class_name: if paths.backward.is_some() {
                            format!("Bidirectional({base})")
                        } else {
                            base
                        },
                        cell,
                        input_size,
                        units,
                        bidirectional: paths.backward.is_some(),
                        bias,
                        return_sequences: true,
                        batch_first: true,
                        mask_source: None,
                        mask_value: None,
                        settings_known: false,
                        refusal: loaded.as_ref().err().cloned(),
                    },
                    loaded,
                    entry: None,
                    slot: paths.slot.filter(|_| !subclassed),
                });
            }
        }
        Ok(Self {
            source,
            recurrent,
            entries,
            positions,
            others,
        })
    }

    /// The file's name, as errors give it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The recurrent layers this crate loads, in the model's order (an
    /// [`RecurrentSelection::Index`] counts among them). A Keras 3 weights file opened
    /// without its architecture keeps no model order: its layers are listed by the
    /// group Keras keeps them in (class, then number; a nested model's in its own),
    /// and do not stack.
    pub fn layers(&self) -> Vec<&KerasRecurrentLayer> {
        self.recurrent.iter().map(|r| &r.info).collect()
    }

    /// The layer named `name`, when it is one of [`Self::layers`].
    pub fn layer(&self, name: &str) -> Option<&KerasRecurrentLayer> {
        self.recurrent
            .iter()
            .map(|r| &r.info)
            .find(|l| l.name == name)
    }

    /// Loads the selected LSTM layers (`LSTM`, `CuDNNLSTM`, `Bidirectional` of them) as
    /// one module, with the config they imply (batch-first as Keras, no dropout: Keras's
    /// `dropout`, `recurrent_dropout` and `Dropout` layers act in training only).
    pub fn lstm<B: Backend>(
        &self,
        layers: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(CudnnCompatibleLstm<B>, CudnnCompatibleLstmConfig), RnnError> {
        build_lstm(self.stack(&layers.into(), CellKind::Lstm)?, device)
    }

    /// Loads the selected GRU layers (`GRU(reset_after=True)`, `CuDNNGRU`,
    /// `Bidirectional` of them) as one module, with the config they imply (as
    /// [`Self::lstm`]).
    pub fn gru<B: Backend>(
        &self,
        layers: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(CudnnCompatibleGru<B>, CudnnCompatibleGruConfig), RnnError> {
        build_gru(self.stack(&layers.into(), CellKind::Gru)?, device)
    }

    /// The parameters of the selected layers, checked to form one stack of `cell`.
    fn stack(
        &self,
        selection: &RecurrentSelection,
        cell: CellKind,
    ) -> Result<StackParams, RnnError> {
        let names: Vec<&str> = self
            .recurrent
            .iter()
            .map(|r| r.info.name.as_str())
            .collect();
        let asked: Vec<&str> = match selection {
            RecurrentSelection::Name(n) => vec![n],
            RecurrentSelection::Stack(s) => s.iter().map(String::as_str).collect(),
            _ => vec![],
        };
        for name in asked {
            if let Some((_, class)) = self.others.iter().find(|(n, _)| n == name) {
                return Err(RnnError::invalid(
                    setting(&self.source, name, "class"),
                    LOADED_CLASSES,
                    class.clone(),
                ));
            }
        }
        let picked = resolve(selection, &names, &self.source, "Keras layer")?;
        let mut layers = Vec::with_capacity(picked.len());
        for (k, &index) in picked.iter().enumerate() {
            let layer = &self.recurrent[index];
            let loaded = layer.loaded.as_ref().map_err(Clone::clone)?;
            let info = &layer.info;
            if loaded.cell != cell {
                return Err(RnnError::invalid(
                    format!("{}: Keras layer '{}'", self.source, info.name),
                    format!(
                        "an {} layer (this call loads {}s)",
                        cell_name(cell),
                        cell_name(cell)
                    ),
                    format!(
                        "a {} ({}): load it with KerasModel::{}",
                        cell_name(loaded.cell),
                        info.class_name,
                        cell_name(loaded.cell).to_lowercase()
                    ),
                ));
            }
            if k > 0 {
                let named = matches!(selection, RecurrentSelection::Stack(_));
                self.check_link(&self.recurrent[picked[k - 1]], layer, named)?;
            }
            layers.push((loaded.forward.clone(), loaded.backward.clone()));
        }
        let first = &self.recurrent[picked[0]];
        let loaded = first.loaded.as_ref().map_err(Clone::clone)?;
        Ok(StackParams {
            cell,
            input_size: loaded.input_size,
            hidden_size: loaded.units,
            bidirectional: first.info.bidirectional,
            bias: loaded.bias,
            batch_first: first.info.batch_first,
            layers,
        })
    }

    /// Checks that `upper` can sit on `lower` in one multi-layer module; `named`: the
    /// caller named the layers in order, which is all a file that keeps no order
    /// between its layers (Keras 3's, without an architecture) can go by.
    fn check_link(
        &self,
        lower: &Recurrent,
        upper: &Recurrent,
        named: bool,
    ) -> Result<(), RnnError> {
        let (a, b) = (&lower.info, &upper.info);
        let what = |setting: &str| {
            format!(
                "{}: Keras layer '{}' {setting} (stacked on '{}')",
                self.source, b.name, a.name
            )
        };
        let same = |name: &str, x: String, y: String| {
            if x == y {
                Ok(())
            } else {
                Err(RnnError::invalid(
                    what(name),
                    format!("{x}, as '{}' (one module has one {name})", a.name),
                    y,
                ))
            }
        };
        let unordered = lower.entry.is_none() && (lower.slot.is_none() || upper.slot.is_none());
        if unordered && !named {
            return Err(RnnError::invalid(
                what("position"),
                format!(
                    "the layer right after '{}': name the layers in the order they run \
                     (RecurrentSelection::Stack) or give the architecture \
                     (KerasModel::open_with_architecture)",
                    a.name
                ),
                "a layer whose file does not say which layer feeds which (a Keras 3 weights \
                 file, a subclassed model's, or a nested model's layers in a weights-only \
                 Keras 2 file)",
            ));
        }
        same("units", a.units.to_string(), b.units.to_string())?;
        same(
            "bidirectional",
            a.bidirectional.to_string(),
            b.bidirectional.to_string(),
        )?;
        same("use_bias", a.bias.to_string(), b.bias.to_string())?;
        same(
            "batch_first",
            a.batch_first.to_string(),
            b.batch_first.to_string(),
        )?;
        let feeds = a.units * if a.bidirectional { 2 } else { 1 };
        if b.input_size != feeds {
            return Err(RnnError::invalid(
                what("input size"),
                format!("{feeds} (the output of '{}')", a.name),
                b.input_size.to_string(),
            ));
        }
        if !a.return_sequences {
            return Err(RnnError::invalid(
                format!("{}: Keras layer '{}' return_sequences", self.source, a.name),
                format!("true (it feeds '{}' in the stack)", b.name),
                "false",
            ));
        }
        match (lower.entry, upper.entry) {
            (Some(lo), Some(up)) => {
                // Walk back from `upper` through layers that are identities at inference;
                // a walk longer than the model has layers is a cycle.
                let mut at = up;
                for _ in 0..self.entries.len() {
                    let entry = &self.entries[at];
                    let inbound = match entry.inbound.as_slice() {
                        [one] => one,
                        other => {
                            return Err(RnnError::invalid(
                                what("input"),
                                format!("the output of '{}' alone", a.name),
                                format!(
                                    "the outputs of {}",
                                    list(&other.iter().map(String::as_str).collect::<Vec<_>>())
                                ),
                            ));
                        }
                    };
                    let Some(&next) = self.positions.get(inbound) else {
                        return Err(RnnError::invalid(
                            what("input"),
                            format!("the output of '{}'", a.name),
                            format!("'{inbound}'"),
                        ));
                    };
                    if next == lo {
                        return Ok(());
                    }
                    let class = &self.entries[next].class_name;
                    if self.entries[next].pass_through {
                        at = next;
                        continue;
                    }
                    if class == "Masking" {
                        return Err(RnnError::invalid(
                            what("input"),
                            format!(
                                "the output of '{}' (a Masking layer between stacked layers changes which steps the upper layer reads)",
                                a.name
                            ),
                            format!("Masking layer '{inbound}'"),
                        ));
                    }
                    if !identity_at_inference(class) {
                        return Err(RnnError::invalid(
                            what("input"),
                            format!(
                                "the output of '{}' (only dropout-like layers may sit between stacked layers)",
                                a.name
                            ),
                            format!("{class} layer '{inbound}'"),
                        ));
                    }
                    at = next;
                }
                Err(RnnError::invalid(
                    what("input"),
                    format!("the output of '{}'", a.name),
                    "layers whose inputs form a cycle",
                ))
            }
            _ => match (lower.slot, upper.slot) {
                (Some(lo), Some(up)) if up == lo + 1 => Ok(()),
                (Some(_), Some(_)) => Err(RnnError::invalid(
                    what("position"),
                    format!("the layer right after '{}' in the file", a.name),
                    "a layer between them in the file (one with weights, or one not named as Keras names a dropout: a weights-only file without its architecture stacks neighbours only; give the architecture with KerasModel::open_with_architecture)",
                )),
                // Named in order by the caller (`unordered` refused the rest).
                _ => Ok(()),
            },
        }
    }
}

/// The mask-producing layer upstream of `entries[index]`, and a `Masking` layer's value.
fn mask_of(
    entries: &[LayerEntry],
    positions: &HashMap<String, usize>,
    index: usize,
) -> (Option<String>, Option<f64>) {
    let mut at = index;
    for _ in 0..entries.len() {
        let Some(inbound) = entries[at].inbound.first() else {
            break;
        };
        let Some(&next) = positions.get(inbound) else {
            break;
        };
        let entry = &entries[next];
        match entry.class_name.as_str() {
            "Masking" => {
                let value = entry
                    .config
                    .get("mask_value")
                    .and_then(Value::as_f64)
                    .unwrap_or(0.0);
                return (Some(entry.name.clone()), Some(value));
            }
            "Embedding" if entry.config.get("mask_zero").and_then(Value::as_bool) == Some(true) => {
                return (Some(entry.name.clone()), None);
            }
            class if entry.pass_through || passes_mask(class, &entry.config) => at = next,
            _ => break,
        }
    }
    (None, None)
}

/// Whether a layer hands its input's mask on to the next layer (Keras's
/// `supports_masking` layers that keep the time steps, and recurrent layers that return
/// every step); other layers drop it.
fn passes_mask(class_name: &str, config: &Value) -> bool {
    let returns_sequences =
        |config: &Value| config.get("return_sequences").and_then(Value::as_bool) == Some(true);
    match class_name {
        "Dense" | "Activation" | "TimeDistributed" | "BatchNormalization"
        | "LayerNormalization" | "UnitNormalization" | "ReLU" | "LeakyReLU" | "PReLU" | "ELU"
        | "Softmax" => true,
        "Bidirectional" => config
            .get("layer")
            .and_then(|l| l.get("config"))
            .is_some_and(returns_sequences),
        class => {
            identity_at_inference(class)
                || (recurrent_kind(class, config) != RecurrentKind::NotRecurrent
                    && returns_sequences(config))
        }
    }
}

/// Whether a file's `keras_version` is older than 2.3, whose LSTM and GRU defaults
/// (`recurrent_activation="hard_sigmoid"`, `reset_after=False`) cuDNN's cells do not
/// run. tf.keras labelled itself `2.2.4-tf` in TensorFlow 1 (those defaults) and in
/// TensorFlow 2.0 and 2.1 (the new ones): older than 2.3 too, as it cannot be told
/// apart. A version that does not parse is taken as recent.
fn defaults_predate_2_3(version: &str) -> bool {
    let mut parts = version.split(['.', '-']);
    let mut number = || parts.next().and_then(|p| p.parse::<u32>().ok());
    match (number(), number()) {
        (Some(major), Some(minor)) => (major, minor) < (2, 3),
        _ => false,
    }
}

impl<B: Backend> CudnnCompatibleLstm<B> {
    /// Loads LSTM layers of a Keras file (`.keras`, `.h5`): shorthand for
    /// [`KerasModel::open`] then [`KerasModel::lstm`]. `layers`: a layer's name, its
    /// index among the recurrent layers, a [`RecurrentSelection::Stack`] or
    /// [`RecurrentSelection::All`]. Returns the module and the config it implies.
    pub fn from_keras_file(
        path: impl AsRef<Path>,
        layers: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(Self, CudnnCompatibleLstmConfig), RnnError> {
        KerasModel::open(path)?.lstm(layers, device)
    }
}

impl<B: Backend> CudnnCompatibleGru<B> {
    /// Loads GRU layers of a Keras file (`.keras`, `.h5`): shorthand for
    /// [`KerasModel::open`] then [`KerasModel::gru`].
    pub fn from_keras_file(
        path: impl AsRef<Path>,
        layers: impl Into<RecurrentSelection>,
        device: &B::Device,
    ) -> Result<(Self, CudnnCompatibleGruConfig), RnnError> {
        KerasModel::open(path)?.gru(layers, device)
    }
}

#[cfg(test)]
mod tests {
    use super::defaults_predate_2_3;

    #[test]
    fn keras_versions_before_2_3_have_the_old_defaults() {
        for (version, old) in [
            ("2.2.4", true),
            ("2.2.4-tf", true),
            ("2.1.6", true),
            ("1.2.2", true),
            ("2.3.0", false),
            ("2.3.0-tf", false),
            ("2.21.0", false),
            ("3.15.1", false),
            ("10.0", false),
            ("", false),
            ("tf", false),
        ] {
            assert_eq!(defaults_predate_2_3(version), old, "{version}");
        }
    }
}
