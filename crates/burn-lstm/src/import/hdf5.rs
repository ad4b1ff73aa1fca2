//! The HDF5 files Keras writes, read with `hdf5-reader` (pure Rust, no libhdf5): groups,
//! string attributes (fixed-length or variable-length) and float datasets (contiguous,
//! compact or chunked, with or without gzip and shuffle; superblocks 0 to 3). Every
//! failure is an [`RnnError::Io`] naming the file and the object; a panic of the
//! decoder on a damaged file is caught and becomes one too.

use std::panic::{AssertUnwindSafe, catch_unwind};

use hdf5_reader::{Datatype, Hdf5File, OpenOptions};

use crate::bounded_read::inflated_bound;
use crate::decoder_stack::on_decoder_stack;
use crate::error::RnnError;
use crate::import::host::HostTensor;

/// HDF5's signature, at offset 0 (or 512, 1024, ... after a user block).
const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Whether `bytes` start like an HDF5 file (at offset 0 or after a user block).
pub(crate) fn is_hdf5(bytes: &[u8]) -> bool {
    let mut offset = 0usize;
    while offset + SIGNATURE.len() <= bytes.len() {
        if &bytes[offset..offset + SIGNATURE.len()] == SIGNATURE {
            return true;
        }
        offset = if offset == 0 { 512 } else { offset * 2 };
    }
    false
}

/// The most bytes one dataset read of a file of `file_len` bytes may decode: what its
/// bytes can hold deflated at deflate's highest ratio (1032:1), at least 1 MiB. A
/// dataset's extent is the file's claim (chunks never written read as zeros), so
/// without a bound a small file could make the reader allocate any amount.
fn max_read_bytes(file_len: usize) -> usize {
    usize::try_from(inflated_bound(file_len as u64))
        .unwrap_or(usize::MAX)
        .max(1 << 20)
}

/// The names of a group's child groups and child datasets.
pub(crate) type Members = (Vec<String>, Vec<String>);

/// An HDF5 file held in memory, with the name errors give it.
pub(crate) struct H5 {
    file: Hdf5File,
    source: String,
}

/// `f()`, a read of the decoder, with its error or its panic as an [`RnnError::Io`] naming
/// `source` and `what` was read. On the decoders' deep stack (`decoder_stack.rs`): the
/// n-bit filter's parameters describe nested types, which `hdf5-reader` 0.12 reads
/// recursively with no bound of its own (a filter message holds about 8,000 levels, some
/// 3 MB of a debug build's stack; 5,930 overflowed a 2 MiB thread).
fn caught<T>(
    source: &str,
    what: &str,
    f: impl FnOnce() -> Result<T, String>,
) -> Result<T, RnnError> {
    match on_decoder_stack(|| catch_unwind(AssertUnwindSafe(f))) {
        Ok(result) => result.map_err(|e| io(source, format!("{what}: {e}"))),
        Err(_) => Err(io(
            source,
            format!("{what}: damaged HDF5 data (the decoder failed)"),
        )),
    }
}

pub(crate) fn io(source: &str, message: impl Into<String>) -> RnnError {
    RnnError::Io {
        path: source.to_string(),
        message: message.into(),
    }
}

impl H5 {
    /// Parses the file's superblock and root group. `source` names it in errors (the
    /// path, or `model.keras!model.weights.h5` inside an archive).
    pub fn from_bytes(bytes: Vec<u8>, source: String) -> Result<Self, RnnError> {
        if !is_hdf5(&bytes) {
            return Err(io(&source, "not an HDF5 file (no HDF5 signature)"));
        }
        let options = OpenOptions::default().with_max_read_bytes(max_read_bytes(bytes.len()));
        let file = caught(&source, "reading the HDF5 superblock", || {
            Hdf5File::from_vec_with_options(bytes, options).map_err(|e| e.to_string())
        })?;
        let h5 = Self { file, source };
        // A file cut short usually fails here already: the root group is read eagerly.
        caught(&h5.source, "reading the root group", || {
            h5.file.root_group().map(|_| ()).map_err(|e| e.to_string())
        })?;
        Ok(h5)
    }

    /// The name errors give the file.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// `(groups, datasets)` directly under the group at `path` (`""` is the root), or
    /// `None` when there is no such group.
    pub fn members(&self, path: &str) -> Result<Option<Members>, RnnError> {
        caught(&self.source, &format!("listing group '/{path}'"), || {
            let group = match self.group(path) {
                Some(group) => group,
                None => return Ok(None),
            };
            let (groups, datasets) = group.member_names().map_err(|e| e.to_string())?;
            Ok(Some((groups, datasets)))
        })
    }

    fn group(&self, path: &str) -> Option<hdf5_reader::group::Group> {
        if path.is_empty() {
            self.file.root_group().ok()
        } else {
            self.file.group(&format!("/{path}")).ok()
        }
    }

    /// Whether a group exists at `path`: `false` for a path the decoder cannot read (a
    /// damaged file then fails at the read that needs it, with its error).
    pub fn has_group(&self, path: &str) -> bool {
        on_decoder_stack(|| catch_unwind(AssertUnwindSafe(|| self.group(path).is_some())))
            .unwrap_or(false)
    }

    /// The string values of attribute `name` of the group at `path`: `None` when the
    /// group or the attribute is absent, an empty list for an empty non-string array
    /// (h5py writes an empty list as float64), an error for another type.
    pub fn attr_strings(&self, path: &str, name: &str) -> Result<Option<Vec<String>>, RnnError> {
        caught(
            &self.source,
            &format!("reading attribute '{name}' of '/{path}'"),
            || {
                let Some(group) = self.group(path) else {
                    return Ok(None);
                };
                let attributes = group.attributes().map_err(|e| e.to_string())?;
                let Some(attr) = attributes.into_iter().find(|a| a.name == name) else {
                    return Ok(None);
                };
                let empty = attr.shape.iter().product::<u64>() == 0 && !attr.shape.is_empty();
                match &attr.datatype {
                    Datatype::String { .. } | Datatype::VarLen { .. } => {
                        if attr.shape.is_empty() {
                            attr.read_string().map(|s| Some(vec![s]))
                        } else {
                            attr.read_strings().map(Some)
                        }
                    }
                    _ if empty => Ok(Some(Vec::new())),
                    other => {
                        return Err(format!("a string attribute was expected, found {other:?}"));
                    }
                }
                .map_err(|e| e.to_string())
            },
        )
    }

    /// The float dataset at `path` (float32 or float64, any byte order), or `None` when
    /// there is none.
    pub fn dataset(&self, path: &str) -> Result<Option<HostTensor>, RnnError> {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        match self.members(parent)? {
            Some((_, datasets)) if datasets.iter().any(|d| d == name) => {}
            _ => return Ok(None),
        }
        caught(&self.source, &format!("reading dataset '/{path}'"), || {
            let dataset = self
                .file
                .dataset(&format!("/{path}"))
                .map_err(|e| e.to_string())?;
            let shape: Vec<usize> = dataset.shape().iter().map(|&d| d as usize).collect();
            let values: Vec<f64> = match dataset.dtype() {
                Datatype::FloatingPoint { size: 4, .. } => dataset
                    .read_array::<f32>()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .map(|&v| f64::from(v))
                    .collect(),
                Datatype::FloatingPoint { size: 8, .. } => dataset
                    .read_array::<f64>()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .copied()
                    .collect(),
                other => {
                    return Err(format!(
                        "a float32 or float64 dataset was expected, found {other:?}"
                    ));
                }
            };
            if values.len() != shape.iter().product::<usize>() {
                return Err(format!(
                    "{} values for shape {shape:?} (damaged file)",
                    values.len()
                ));
            }
            Ok(Some(HostTensor { shape, values }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n-bit filter parameters that nest `levels` arrays of 4 bytes around a 32-bit
    /// value: [parameter count, needs no compression, elements, (array, 4 bytes) ×
    /// levels, an atomic type (size 4, little-endian, precision 32, offset 0)].
    fn nbit_parameters(levels: usize) -> Vec<u32> {
        let mut parameters = vec![0u32, 0, 1];
        for _ in 0..levels {
            parameters.extend([2, 4]);
        }
        parameters.extend([1, 4, 0, 32, 0]);
        parameters[0] = parameters.len() as u32;
        parameters
    }

    /// An n-bit filter message nesting 8,000 levels (the most a filter message's size
    /// allows is about 8,186): `hdf5-reader` reads them recursively, which overflowed a
    /// 2 MiB thread at 5,930 levels and aborted the process. Through [`caught`] the read
    /// completes, with the value one level gives.
    #[test]
    fn deeply_nested_filter_parameters_are_read_on_the_decoder_stack() {
        let read = |levels: usize| {
            caught("deep.h5", "reading dataset '/w'", || {
                hdf5_reader::filters::nbit::decompress_with_limit(
                    &[1, 2, 3, 4],
                    &nbit_parameters(levels),
                    1 << 20,
                )
                .map_err(|e| e.to_string())
            })
            .unwrap()
        };
        assert_eq!(read(8000), read(1));
    }
}
