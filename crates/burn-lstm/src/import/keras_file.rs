//! The files Keras saves, opened: a `.keras` archive (zip: `config.json` and
//! `model.weights.h5`), a full-model `.h5` (`model_config` attribute and
//! `model_weights` group), or a weights-only `.h5` (Keras 2's `save_weights`: a
//! `layer_names` attribute at the root; Keras 3's `.weights.h5`: a `layers` group, or a
//! `vars` group at the root, a subclassed model's, whose layers are its attributes).

use std::path::Path;

use serde_json::Value;

use crate::bounded_read::{inflated_bound, is_zip, read_zip_entry};
use crate::error::RnnError;
use crate::import::hdf5::{H5, io, is_hdf5};

/// Where a file keeps its weights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WeightLayout {
    /// Keras 2's layout (and Keras 3's legacy `.h5`): under `root`, a `layer_names`
    /// attribute and per layer a group with a `weight_names` attribute.
    Legacy {
        /// `"model_weights"` in a full-model file, `""` in a weights-only one.
        root: String,
    },
    /// Keras 3's layout: `layers/<group>/vars`, `layers/<group>/cell/vars/0..2`; the
    /// group's `vars` has the layer's name as its `name` attribute. A subclassed model
    /// keeps its layers under their attributes' names (`encoder/cell/vars/0..2`).
    Native,
}

/// An opened Keras file.
pub(crate) struct KerasFile {
    /// The weights.
    pub h5: H5,
    /// The model's architecture JSON, when the file holds it.
    pub config: Option<Value>,
    /// Where the weights are.
    pub layout: WeightLayout,
    /// The name errors give the file.
    pub source: String,
}

/// Largest member of a `.keras` archive read into memory (4 GiB).
const MAX_MEMBER: u64 = 4 << 30;

/// Opens `path` (`.keras` or `.h5`, told apart by their first bytes).
pub(crate) fn open(path: &Path) -> Result<KerasFile, RnnError> {
    let source = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| io(&source, e.to_string()))?;
    if is_zip(&bytes) {
        return open_archive(bytes, source);
    }
    if !is_hdf5(&bytes) {
        let head: Vec<String> = bytes.iter().take(8).map(|b| format!("{b:02x}")).collect();
        return Err(io(
            &source,
            format!(
                "not a Keras file: expected an HDF5 file (.h5) or a zip archive (.keras), \
                 found first bytes {}",
                if head.is_empty() {
                    "none (empty file)".to_string()
                } else {
                    head.join(" ")
                }
            ),
        ));
    }
    let h5 = H5::from_bytes(bytes, source.clone())?;
    let config = match h5.attr_strings("", "model_config")? {
        Some(text) => Some(parse_json(
            &source,
            "attribute 'model_config'",
            &text.concat(),
        )?),
        None => None,
    };
    let layout = if h5.has_group("model_weights") {
        WeightLayout::Legacy {
            root: "model_weights".into(),
        }
    } else if h5.attr_strings("", "layer_names")?.is_some() {
        WeightLayout::Legacy { root: "".into() }
    } else if is_native(&h5) {
        WeightLayout::Native
    } else {
        return Err(io(
            &source,
            "an HDF5 file without Keras weights: expected a 'model_weights' group, a \
             'layer_names' attribute (Keras 2 save_weights) or a 'layers' or 'vars' group \
             (Keras 3)",
        ));
    };
    Ok(KerasFile {
        h5,
        config,
        layout,
        source,
    })
}

fn open_archive(bytes: Vec<u8>, source: String) -> Result<KerasFile, RnnError> {
    let archive_len = bytes.len() as u64;
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| io(&source, format!("a damaged .keras archive: {e}")))?;
    let bound = MAX_MEMBER.min(inflated_bound(archive_len));
    let mut member = |name: &str| -> Result<Vec<u8>, RnnError> {
        if archive.index_for_name(name).is_none() {
            return Err(io(
                &source,
                format!("a .keras archive without '{name}': not a Keras 3 model file"),
            ));
        }
        read_zip_entry(&mut archive, name, bound).map_err(|e| io(&source, e))
    };
    let config_bytes = member("config.json")?;
    let weights = member("model.weights.h5")?;
    let text = String::from_utf8(config_bytes)
        .map_err(|_| io(&source, "config.json is not UTF-8 text"))?;
    let config = parse_json(&source, "config.json", &text)?;
    let h5 = H5::from_bytes(weights, format!("{source}!model.weights.h5"))?;
    if !is_native(&h5) {
        return Err(io(
            h5.source(),
            "no 'layers' or 'vars' group: not the weights of a Keras 3 model",
        ));
    }
    Ok(KerasFile {
        h5,
        config: Some(config),
        layout: WeightLayout::Native,
        source,
    })
}

/// Whether `h5` holds weights in Keras 3's layout: a `layers` group (a Sequential's or
/// functional model's; tf-keras 2.13 named it `_layer_checkpoint_dependencies`), or the
/// root's own `vars` group (every Keras 3 model's; a subclassed model's layers are its
/// other groups).
fn is_native(h5: &H5) -> bool {
    ["layers", "_layer_checkpoint_dependencies", "vars"]
        .iter()
        .any(|group| h5.has_group(group))
}

/// `text` parsed as JSON, or an error naming where it came from.
pub(crate) fn parse_json(source: &str, what: &str, text: &str) -> Result<Value, RnnError> {
    serde_json::from_str(text).map_err(|e| io(source, format!("{what} is not valid JSON: {e}")))
}
