//! `torch.save` files (PyTorch 1.6 and later): a zip archive of `{archive}/data.pkl`
//! (the pickled object), `{archive}/data/{key}` (each storage's bytes) and
//! `{archive}/byteorder`, read as named tensors without running anything
//! (`torch_pickle`). A state dict's names are its keys; a dict inside (a checkpoint
//! `{"model": model.state_dict(), "optimizer": ...}`) gives `model.encoder.weight_ih_l0`.
//! Tensors are views of storages (a state dict saved from a GPU `nn.LSTM` keeps every
//! parameter in one flat storage, each at its offset), read when asked for, with every
//! size checked against what the archive holds.

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::Path;
use std::rc::Rc;

use burn::tensor::{DType, TensorData, bf16, f16};

use crate::bounded_read::{inflated_bound, is_zip, read_zip_entry};
use crate::module::torch_pickle::{self, Pickle, StorageType, TensorMeta, Value};

/// The first bytes of PyTorch's format before 1.6 (a pickled magic number).
const LEGACY: &[u8; 4] = b"\x80\x02\x8a\x0a";
/// Most dict entries read (every nested dict included).
const MAX_ENTRIES: usize = 10_000_000;
/// Deepest dict nesting read.
const MAX_DEPTH: usize = 64;
/// Most bytes of all tensor names together (64 MiB).
const MAX_NAME_BYTES: usize = 64 << 20;
/// How much larger than the archive its pickle may be (4 MiB).
const MAX_PICKLE_GROWTH: u64 = 4 << 20;

/// A storage's bytes, with the type and length they were read as.
struct ReadStorage {
    dtype: StorageType,
    len: u64,
    bytes: Rc<[u8]>,
}

/// A `torch.save` file's tensors.
pub(crate) struct TorchFile {
    archive: zip::ZipArchive<Cursor<Vec<u8>>>,
    archive_len: u64,
    /// `{archive}/`: the folder every entry is in.
    folder: String,
    /// Every tensor, by name, in the file's order.
    tensors: Vec<(String, Rc<TensorMeta>)>,
    /// Storages read so far, by key (a state dict's tensors may share one), with the
    /// type and length they were read as.
    storages: HashMap<Rc<str>, ReadStorage>,
}

impl TorchFile {
    /// Reads the archive's pickle and lists its tensors. Errors say what the file is
    /// when it is not a state dict.
    pub fn open(bytes: Vec<u8>) -> Result<Self, String> {
        let archive_len = bytes.len() as u64;
        let mut archive = zip::ZipArchive::new(Cursor::new(bytes))
            .map_err(|e| format!("a damaged zip archive: {e}"))?;
        let pickles: Vec<String> = archive
            .file_names()
            .filter(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
            .map(str::to_string)
            .collect();
        let pkl = match pickles.as_slice() {
            [one] => one.clone(),
            [] => {
                return Err(
                    "a zip archive without `{name}/data.pkl`: not a file of torch.save".into(),
                );
            }
            many => return Err(format!("a zip archive with {} data.pkl files", many.len())),
        };
        let folder = pkl.trim_end_matches("data.pkl").to_string();
        // PyTorch writes "little" or "big"; files before it wrote none were little-endian.
        let byteorder = format!("{folder}byteorder");
        if archive.index_for_name(&byteorder).is_some() {
            let order = read_zip_entry(&mut archive, &byteorder, 64)?;
            if order.trim_ascii() != b"little" {
                return Err(format!(
                    "storages in {:?} byte order (only little-endian files are read)",
                    String::from_utf8_lossy(&order)
                ));
            }
        }
        // torch.save stores the pickle uncompressed: no larger than the archive (a
        // little more allowed for a re-compressed one).
        let data = read_zip_entry(
            &mut archive,
            &pkl,
            archive_len.saturating_add(MAX_PICKLE_GROWTH),
        )?;
        let pickle = torch_pickle::decode(&data).map_err(|e| format!("{pkl}: {e}"))?;
        let Value::Dict(root) = pickle.root else {
            let what = pickle.root.kind();
            let hint = if archive
                .index_for_name(&format!("{folder}constants.pkl"))
                .is_some()
            {
                "a TorchScript archive (torch.jit.save); save the model's state_dict() with torch.save"
            } else {
                "save the model's state_dict(): torch.save(model.state_dict(), path)"
            };
            return Err(format!("the file holds {what}, not a state dict: {hint}"));
        };
        let mut tensors = Vec::new();
        let mut budget = Budget {
            entries: MAX_ENTRIES,
            name_bytes: MAX_NAME_BYTES,
        };
        flatten(&pickle, root, "", 0, &mut tensors, &mut budget)?;
        let mut seen = std::collections::HashSet::new();
        if let Some((name, _)) = tensors.iter().find(|(name, _)| !seen.insert(name.as_str())) {
            return Err(format!(
                "two tensors named `{name}` (keys that Python keeps apart, as 0 and \"0\", \
                 or a key with a dot beside a dict)"
            ));
        }
        Ok(Self {
            archive,
            archive_len,
            folder,
            tensors,
            storages: HashMap::new(),
        })
    }

    /// Every tensor's name, in the file's order.
    pub fn names(&self) -> Vec<String> {
        self.tensors.iter().map(|(n, _)| n.clone()).collect()
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<Rc<TensorMeta>> {
        self.tensors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    /// A tensor's values, in its shape and storage type (floats only: the others are
    /// no parameters).
    pub fn read(&mut self, tensor: &TensorMeta) -> Result<TensorData, String> {
        let storage = &tensor.storage;
        let size = storage.dtype.size();
        let shape: Vec<usize> = tensor
            .shape
            .iter()
            .map(|&d| usize::try_from(d).map_err(|_| format!("a dimension of {d}")))
            .collect::<Result<_, _>>()?;
        let count = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .ok_or_else(|| format!("a shape {shape:?} whose size overflows"))?;
        // The highest element the view reads, which its storage must hold.
        let last = tensor
            .shape
            .iter()
            .zip(&tensor.strides)
            .try_fold(tensor.offset, |at, (&d, &s)| {
                at.checked_add(d.saturating_sub(1).checked_mul(s)?)
            })
            .ok_or("a view whose extent overflows")?;
        if count > 0 && last >= storage.len {
            return Err(format!(
                "a view (offset {}, shape {:?}, strides {:?}) reaching element {last} of a \
                 storage of {}",
                tensor.offset, tensor.shape, tensor.strides, storage.len
            ));
        }
        if count as u64 > inflated_bound(self.archive_len) / size as u64 {
            return Err(format!(
                "a tensor of {count} elements, more than the archive can hold"
            ));
        }
        let bytes = self.storage(&storage.key, storage.dtype, storage.len)?;
        let indices = view_indices(tensor, count);
        let data = match storage.dtype {
            StorageType::F32 => decode(&bytes, indices, shape, f32::from_le_bytes),
            StorageType::F64 => decode(&bytes, indices, shape, f64::from_le_bytes),
            StorageType::F16 => decode(&bytes, indices, shape, f16::from_le_bytes),
            StorageType::BF16 => decode(&bytes, indices, shape, bf16::from_le_bytes),
            other => return Err(format!("a tensor of {other:?}, not of floats")),
        };
        Ok(data)
    }

    /// The bytes of storage `key` (`len` elements of `dtype`), read once. Two tensors
    /// of a damaged file may declare one storage with other types or sizes: checked
    /// for each.
    fn storage(&mut self, key: &Rc<str>, dtype: StorageType, len: u64) -> Result<Rc<[u8]>, String> {
        let need = len
            .checked_mul(dtype.size() as u64)
            .ok_or_else(|| format!("storage '{key}': {len} elements overflow"))?;
        if let Some(first) = self.storages.get(key) {
            if (first.dtype, first.len) != (dtype, len) {
                return Err(format!(
                    "storage '{key}' declared as {} {:?} and as {len} {dtype:?}",
                    first.len, first.dtype
                ));
            }
            return Ok(first.bytes.clone());
        }
        let name = format!("{}data/{key}", self.folder);
        let bound = inflated_bound(self.archive_len);
        let bytes: Rc<[u8]> = read_zip_entry(&mut self.archive, &name, bound)
            .map_err(|e| format!("storage '{key}': {e}"))?
            .into();
        if (bytes.len() as u64) < need {
            return Err(format!(
                "storage '{key}' holds {} bytes where {len} elements of {} bytes were declared",
                bytes.len(),
                dtype.size()
            ));
        }
        self.storages.insert(
            key.clone(),
            ReadStorage {
                dtype,
                len,
                bytes: bytes.clone(),
            },
        );
        Ok(bytes)
    }
}

/// The elements at `indices` of a storage's `bytes`, each decoded from its `N`
/// little-endian bytes (`indices` inside the storage: `TorchFile::read` checks them).
fn decode<T: burn::tensor::Element, const N: usize>(
    bytes: &[u8],
    indices: impl Iterator<Item = usize>,
    shape: Vec<usize>,
    from: fn([u8; N]) -> T,
) -> TensorData {
    let values: Vec<T> = indices
        .map(|i| from(bytes[i * N..(i + 1) * N].try_into().expect("N bytes")))
        .collect();
    TensorData::new(values, shape)
}

/// The storage indices of a view's elements, in row-major order.
fn view_indices(tensor: &TensorMeta, count: usize) -> impl Iterator<Item = usize> + '_ {
    let dims = tensor.shape.len();
    let mut index = vec![0u64; dims];
    let mut at = tensor.offset;
    (0..count).map(move |k| {
        if k > 0 {
            // Advance the last dimension, carrying into the ones before.
            // Wrapping: a step past a dimension's end may leave u64 before the carry
            // brings it back (the elements themselves were checked by `read`).
            for d in (0..dims).rev() {
                index[d] += 1;
                at = at.wrapping_add(tensor.strides[d]);
                if index[d] < tensor.shape[d] {
                    break;
                }
                at = at.wrapping_sub(tensor.strides[d].wrapping_mul(tensor.shape[d]));
                index[d] = 0;
            }
        }
        // Within the storage: `read` checked the view's extent.
        at as usize
    })
}

/// What [`flatten`] may still produce.
struct Budget {
    entries: usize,
    name_bytes: usize,
}

/// Every tensor under the dict `id` (and the dicts inside it), named by their keys
/// joined with dots after `prefix`. A key set twice in one dict keeps its last value,
/// as in Python (a string and an integer key are different keys).
fn flatten(
    pickle: &Pickle,
    id: usize,
    prefix: &str,
    depth: usize,
    out: &mut Vec<(String, Rc<TensorMeta>)>,
    budget: &mut Budget,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "dicts nested more than {MAX_DEPTH} deep (or a dict that holds itself)"
        ));
    }
    let mut at: HashMap<(bool, String), usize> = HashMap::new();
    let mut items: Vec<(String, &Value)> = Vec::new();
    for (key, value) in pickle.dict(id) {
        budget.entries = budget
            .entries
            .checked_sub(1)
            .ok_or_else(|| format!("more than {MAX_ENTRIES} dict entries"))?;
        let key = match key {
            Value::Str(s) => (true, s.to_string()),
            Value::Int(i) => (false, i.to_string()),
            _ => continue,
        };
        match at.get(&key) {
            Some(&i) => items[i].1 = value,
            None => {
                at.insert(key.clone(), items.len());
                items.push((key.1, value));
            }
        }
    }
    for (key, value) in items {
        let name = if prefix.is_empty() {
            key
        } else {
            format!("{prefix}.{key}")
        };
        budget.name_bytes = budget
            .name_bytes
            .checked_sub(name.len())
            .ok_or_else(|| format!("names longer than {MAX_NAME_BYTES} bytes in all"))?;
        match value {
            Value::Tensor(t) => out.push((name, t.clone())),
            Value::Dict(child) => flatten(pickle, *child, &name, depth + 1, out, budget)?,
            _ => {}
        }
    }
    Ok(())
}

/// A storage type as Burn's dtype.
pub(crate) fn dtype(storage: StorageType) -> DType {
    match storage {
        StorageType::F64 => DType::F64,
        StorageType::F32 => DType::F32,
        StorageType::F16 => DType::F16,
        StorageType::BF16 => DType::BF16,
        StorageType::I64 => DType::I64,
        StorageType::I32 => DType::I32,
        StorageType::I16 => DType::I16,
        StorageType::I8 => DType::I8,
        StorageType::U8 => DType::U8,
        StorageType::Bool => DType::Bool(burn::tensor::BoolStore::Native),
    }
}

/// A tensor's shape as `usize` (dimensions beyond it are refused when it is read).
pub(crate) fn shape(tensor: &TensorMeta) -> Vec<usize> {
    tensor
        .shape
        .iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect()
}

/// Opens `path` when its first bytes say it is a `torch.save` file (a zip archive:
/// [`TorchFile::open`] says when it is another one): `Ok(None)` for another kind of
/// file (safetensors, for one).
pub(crate) fn open_if_torch(path: &Path) -> Result<Option<TorchFile>, String> {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| e.to_string())?;
    let head = &head[..n];
    // A zip archive: torch.save's format since PyTorch 1.6.
    if is_zip(head) {
        let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
        TorchFile::open(bytes).map(Some)
    } else if head.starts_with(LEGACY) {
        Err(
            "a torch.save file in PyTorch's format before 1.6: load it in PyTorch and save \
             it again with torch.save (or as safetensors)"
                .into(),
        )
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A pickle int: BININT1 below 256, else LONG1 of 8 bytes.
    fn int(v: u64) -> Vec<u8> {
        match u8::try_from(v) {
            Ok(b) => vec![b'K', b],
            Err(_) => {
                let mut out = vec![0x8a, 8];
                out.extend(v.to_le_bytes());
                out
            }
        }
    }

    /// A pickled tuple of one or two ints (TUPLE1, TUPLE2).
    fn ints(values: &[u64]) -> Vec<u8> {
        let mut out: Vec<u8> = values.iter().flat_map(|&v| int(v)).collect();
        out.push(0x84 + values.len() as u8);
        out
    }

    /// A pickled view (`_rebuild_tensor_v2`) of the float32 storage "0" of `len`
    /// elements.
    fn tensor(len: u64, offset: u64, size: &[u64], stride: &[u64]) -> Vec<u8> {
        let mut t = b"ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpu".to_vec();
        t.extend(int(len));
        t.extend(b"tQ");
        t.extend(int(offset));
        t.extend(ints(size));
        t.extend(ints(stride));
        t.extend(b"\x89}tR");
        t
    }

    /// A state dict `{"w": view}` of a float32 storage "0" of `len` elements.
    fn state_dict(len: u64, offset: u64, size: [u64; 2], stride: [u64; 2]) -> Vec<u8> {
        let mut p = b"\x80\x02}q\x00X\x01\x00\x00\x00w".to_vec();
        p.extend(tensor(len, offset, &size, &stride));
        p.extend(b"s.");
        p
    }

    /// A zip archive of `entries` under the folder `archive/`, stored.
    fn archive(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            zip.start_file(format!("archive/{name}"), options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    fn floats(n: usize) -> Vec<u8> {
        (0..n).flat_map(|i| (i as f32).to_le_bytes()).collect()
    }

    fn read(pickle: &[u8], storage: &[u8]) -> Result<TensorData, String> {
        let mut file = TorchFile::open(archive(&[("data.pkl", pickle), ("data/0", storage)]))?;
        let w = file.get("w").ok_or("no tensor w")?;
        file.read(&w)
    }

    #[test]
    fn a_view_reads_its_elements_at_their_offset_and_strides() {
        let data = read(&state_dict(10, 1, [2, 3], [1, 2]), &floats(10)).unwrap();
        assert_eq!(data.shape.to_vec(), [2, 3]);
        assert_eq!(
            data.to_vec::<f32>().unwrap(),
            [1.0, 3.0, 5.0, 2.0, 4.0, 6.0]
        );
        // A stride far beyond the storage on a dimension of 1 reads nothing past it.
        let data = read(&state_dict(10, 4, [1, 3], [u64::MAX / 2, 1]), &floats(10)).unwrap();
        assert_eq!(data.to_vec::<f32>().unwrap(), [4.0, 5.0, 6.0]);
    }

    #[test]
    fn sizes_the_archive_does_not_hold_are_errors_before_any_allocation() {
        // A storage declared with 2^40 elements, 40 bytes in the archive.
        let e = read(&state_dict(1 << 40, 0, [2, 3], [3, 1]), &floats(10)).unwrap_err();
        assert!(
            e.contains("holds 40 bytes where 1099511627776 elements of 4 bytes were declared"),
            "{e}"
        );
        // A view reaching past its storage.
        let e = read(&state_dict(6, 0, [2, 3], [4, 1]), &floats(6)).unwrap_err();
        assert!(e.contains("reaching element 6 of a storage of 6"), "{e}");
        // A shape whose size overflows.
        let e = read(&state_dict(6, 0, [1 << 40, 1 << 40], [0, 0]), &floats(6)).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        // A storage the archive lacks.
        let mut file =
            TorchFile::open(archive(&[("data.pkl", &state_dict(6, 0, [2, 3], [3, 1]))])).unwrap();
        let w = file.get("w").unwrap();
        let e = file.read(&w).unwrap_err();
        assert!(e.contains("no entry 'archive/data/0'"), "{e}");
    }

    #[test]
    fn a_storage_declared_twice_with_other_sizes_is_checked_for_each_tensor() {
        // "a": storage "0" of 2 elements; "b": the same storage said to have 100, its
        // view reaching element 99. The archive holds 2 elements.
        let view = |len: u64| tensor(len, 0, &[len], &[1]);
        let mut p = b"\x80\x02}(X\x01\x00\x00\x00a".to_vec();
        p.extend(view(2));
        p.extend(b"X\x01\x00\x00\x00b");
        p.extend(view(100));
        p.extend(b"u.");
        let mut file =
            TorchFile::open(archive(&[("data.pkl", &p), ("data/0", &floats(2))])).unwrap();
        let a = file.get("a").unwrap();
        assert_eq!(file.read(&a).unwrap().to_vec::<f32>().unwrap(), [0.0, 1.0]);
        let b = file.get("b").unwrap();
        let e = file.read(&b).unwrap_err();
        assert!(
            e.contains("storage '0' declared as 2 F32 and as 100 F32"),
            "{e}"
        );
    }

    #[test]
    fn names_that_python_keeps_apart_are_not_merged() {
        // {"0": t, 0: t}: two keys in Python, one name here.
        let t = tensor(6, 0, &[2, 3], &[3, 1]);
        let mut p = b"\x80\x02}(X\x01\x00\x00\x000".to_vec();
        p.extend(&t);
        p.extend(b"K\x00");
        p.extend(&t);
        p.extend(b"u.");
        let e = TorchFile::open(archive(&[("data.pkl", &p), ("data/0", &floats(6))]))
            .err()
            .unwrap();
        assert!(e.contains("two tensors named `0`"), "{e}");
    }

    #[test]
    fn archives_that_are_not_little_endian_state_dicts_are_named() {
        let pickle = state_dict(6, 0, [2, 3], [3, 1]);
        let e = TorchFile::open(archive(&[("data.pkl", &pickle), ("byteorder", b"big")]))
            .err()
            .unwrap();
        assert!(e.contains("\"big\" byte order"), "{e}");
        let e = TorchFile::open(archive(&[("data.pkl", &pickle), ("byteorder", b"middle")]))
            .err()
            .unwrap();
        assert!(e.contains("\"middle\" byte order"), "{e}");
        let e = TorchFile::open(archive(&[("other.pkl", &pickle)]))
            .err()
            .unwrap();
        assert!(e.contains("without `{name}/data.pkl`"), "{e}");
        // A dict that holds itself.
        let e = TorchFile::open(archive(&[(
            "data.pkl",
            b"\x80\x02}q\x00X\x01\x00\x00\x00ah\x00s.",
        )]))
        .err()
        .unwrap();
        assert!(e.contains("nested more than 64 deep"), "{e}");
        let e = TorchFile::open(archive(&[("data.pkl", b"\x80\x02K\x07.")]))
            .err()
            .unwrap();
        assert!(
            e.contains("the file holds an integer, not a state dict"),
            "{e}"
        );
    }

    #[test]
    fn nested_dicts_name_their_tensors_with_dots_and_a_key_set_twice_keeps_its_last_value() {
        // {"model": {"w": t1}, "w2": t1} then "w2" set again to a second view.
        let tensor = |offset: u64| tensor(6, offset, &[2], &[1]);
        let pickle = |mark: &[u8]| {
            let mut p = b"\x80\x02}".to_vec();
            p.extend(mark);
            p.extend(b"X\x05\x00\x00\x00model}X\x01\x00\x00\x00w");
            p.extend(tensor(0));
            p.extend(b"sX\x02\x00\x00\x00w2");
            p.extend(tensor(1));
            p.extend(b"X\x02\x00\x00\x00w2");
            p.extend(tensor(4));
            p.extend(b"u.");
            p
        };
        // (`u` with no mark: SETITEMS needs one)
        let p = pickle(b"");
        let e = TorchFile::open(archive(&[("data.pkl", &p), ("data/0", &floats(6))]))
            .err()
            .unwrap();
        assert!(e.contains("needs a mark"), "{e}");
        let p = pickle(b"(");
        let mut file =
            TorchFile::open(archive(&[("data.pkl", &p), ("data/0", &floats(6))])).unwrap();
        assert_eq!(file.names(), ["model.w", "w2"]);
        let w2 = file.get("w2").unwrap();
        assert_eq!(file.read(&w2).unwrap().to_vec::<f32>().unwrap(), [4.0, 5.0]);
    }
}

#[cfg(test)]
mod mutations {
    use std::io::Write;

    use super::*;

    /// Every entry of a fixture written by PyTorch (`tests/fixtures/pytorch/`).
    fn entries(name: &str) -> Vec<(String, Vec<u8>)> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/pytorch")
            .join(name);
        let mut archive = zip::ZipArchive::new(Cursor::new(std::fs::read(path).unwrap())).unwrap();
        (0..archive.len())
            .map(|i| {
                let mut entry = archive.by_index(i).unwrap();
                let mut bytes = Vec::new();
                entry.read_to_end(&mut bytes).unwrap();
                (entry.name().to_string(), bytes)
            })
            .collect()
    }

    fn archive(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, bytes) in entries {
            zip.start_file(name.as_str(), options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// The pickle of PyTorch-written state dicts with each byte changed (the zip's CRCs
    /// recomputed, so the reader meets the changed pickle): opening and reading every
    /// tensor is an error or a value, never a panic, and reads nothing outside the
    /// storages.
    #[test]
    fn every_byte_of_a_real_pickle_changed_is_an_error_or_a_value() {
        // (file, every how many bytes, the changes): the checkpoint's pickle (its
        // optimizer's state included) is the largest.
        for (file, every, changes) in [
            ("gru_views.pt", 1, &[0x01u8, 0x80, 0xff][..]),
            ("lstm_f16.pt", 1, &[0x01, 0x80, 0xff][..]),
            ("checkpoint.pt", 3, &[0xff][..]),
        ] {
            let intact = entries(file);
            let pkl = intact
                .iter()
                .position(|(n, _)| n.ends_with("/data.pkl"))
                .unwrap();
            let (mut opened, mut read) = (0, 0);
            for at in (0..intact[pkl].1.len()).step_by(every) {
                for &change in changes {
                    let mut copy = intact.clone();
                    copy[pkl].1[at] ^= change;
                    let Ok(mut file) = TorchFile::open(archive(&copy)) else {
                        continue;
                    };
                    opened += 1;
                    for name in file.names() {
                        let tensor = file.get(&name).unwrap();
                        read += usize::from(file.read(&tensor).is_ok());
                    }
                }
            }
            assert!(
                opened > 0 && read > 0,
                "{file}: {opened} opened, {read} read"
            );
        }
    }
}
