//! The values of an ONNX tensor: inline (`float_data`, `double_data`, `int32_data`,
//! `raw_data`) or in a file beside the model (external data), read as f64 or tested
//! for zeros.

use std::borrow::Cow;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path, PathBuf};

use burn::tensor::{bf16, f16};

use crate::error::RnnError;
use crate::import::hdf5::io;
use crate::import::host::HostTensor;
use crate::import::onnx_proto::TensorProto;

/// ONNX's `TensorProto.DataType` values of the float types read.
const FLOAT: i32 = 1;
const FLOAT16: i32 = 10;
const DOUBLE: i32 = 11;
const BFLOAT16: i32 = 16;

/// The float values of a dense tensor (`float_data`, `double_data`, `int32_data` for
/// 16-bit floats, `raw_data`, or external data in a file beside the model), as f64
/// (exact for every type read).
pub(crate) fn tensor_values(
    source: &str,
    dir: &Path,
    name: &str,
    tensor: &TensorProto,
) -> Result<HostTensor, RnnError> {
    let bad = |message: String| io(source, format!("tensor '{name}': {message}"));
    let shape: Vec<usize> = tensor
        .dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| bad(format!("negative dimension {d}"))))
        .collect::<Result<_, _>>()?;
    let count = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {shape:?} overflows")))?;
    let data_type = tensor.data_type.unwrap_or(0);
    let width = match data_type {
        FLOAT => 4,
        DOUBLE => 8,
        FLOAT16 | BFLOAT16 => 2,
        other => {
            return Err(bad(format!(
                "data type {other}; expected FLOAT (1), DOUBLE (11), FLOAT16 (10) or BFLOAT16 (16)"
            )));
        }
    };
    // A 16-bit float's bits as f64 (exact).
    let half = |bits: u16| match data_type {
        FLOAT16 => f16::from_bits(bits).to_f64(),
        _ => bf16::from_bits(bits).to_f64(),
    };
    let raw = raw_bytes(dir, tensor, count, width).map_err(bad)?;
    let values: Vec<f64> = match raw.as_deref() {
        Some(bytes) => {
            if Some(bytes.len()) != count.checked_mul(width) {
                return Err(bad(format!(
                    "{} bytes of data for {count} values of {width} bytes (shape {shape:?})",
                    bytes.len()
                )));
            }
            match width {
                4 => bytes
                    .chunks_exact(4)
                    .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                    .collect(),
                8 => bytes
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect(),
                _ => bytes
                    .chunks_exact(2)
                    .map(|c| half(u16::from_le_bytes([c[0], c[1]])))
                    .collect(),
            }
        }
        None => match data_type {
            FLOAT => tensor.float_data.iter().map(|&v| f64::from(v)).collect(),
            DOUBLE => tensor.double_data.clone(),
            // ONNX keeps 16-bit floats' bits in `int32_data`, one value each.
            _ => tensor
                .int32_data
                .iter()
                .map(|&v| {
                    u16::try_from(v)
                        .map(half)
                        .map_err(|_| bad(format!("a 16-bit float stored as {v}")))
                })
                .collect::<Result<_, _>>()?,
        },
    };
    if values.len() != count {
        return Err(bad(format!("{} values for shape {shape:?}", values.len())));
    }
    Ok(HostTensor { shape, values })
}

/// The bytes of `tensor`'s `count` values of `width` bytes where they are bytes: its
/// `raw_data`, or its external data (read to that size); `None` where they are in the
/// typed fields (`float_data`, ...).
fn raw_bytes<'t>(
    dir: &Path,
    tensor: &'t TensorProto,
    count: usize,
    width: usize,
) -> Result<Option<Cow<'t, [u8]>>, String> {
    if tensor.data_location != Some(1) {
        return Ok(tensor.raw_data.as_deref().map(Cow::Borrowed));
    }
    let expected = count
        .checked_mul(width)
        .ok_or_else(|| format!("{count} values of {width} bytes overflow"))?;
    read_external(dir, tensor, expected as u64).map(|bytes| Some(Cow::Owned(bytes)))
}

/// The value of the external data entry `key` of `tensor`.
fn external_entry(tensor: &TensorProto, key: &str) -> Option<String> {
    tensor
        .external_data
        .iter()
        .find(|e| e.key.as_deref() == Some(key))
        .and_then(|e| e.value.clone())
}

/// The file that holds `tensor`'s external data: its `location`, a plain relative path
/// inside the model's folder `dir`.
pub(crate) fn external_path(dir: &Path, tensor: &TensorProto) -> Result<PathBuf, String> {
    let location = external_entry(tensor, "location").ok_or("external data without a location")?;
    let relative = Path::new(&location);
    if !relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "external data location '{location}' outside the model's folder"
        ));
    }
    Ok(dir.join(relative))
}

/// The `expected` bytes of a tensor stored outside the model (`location`, `offset`,
/// `length`, which must be `expected` when given), from a file in the model's folder;
/// nothing is read unless the file holds them.
fn read_external(dir: &Path, tensor: &TensorProto, expected: u64) -> Result<Vec<u8>, String> {
    let path = external_path(dir, tensor)?;
    let entry = |key: &str| external_entry(tensor, key);
    let parse = |key: &str| {
        entry(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("external data {key} '{v}'"))
            })
            .transpose()
    };
    let offset = parse("offset")?.unwrap_or(0);
    let length = parse("length")?;
    let failed = |e: std::io::Error| format!("external data {}: {e}", path.display());
    let mut file = std::fs::File::open(&path).map_err(failed)?;
    let size = file.metadata().map_err(failed)?.len();
    if let Some(length) = length.filter(|&n| n != expected) {
        return Err(format!(
            "external data {}: length {length} for {expected} bytes of values",
            path.display()
        ));
    }
    // Only the tensor's bytes are read, after the file is known to hold them.
    let end = offset.checked_add(expected);
    let len = match end {
        Some(end) if end <= size => expected,
        _ => {
            return Err(format!(
                "external data {}: bytes {offset}..{} of {size}",
                path.display(),
                end.map_or_else(|| "overflow".to_string(), |e| e.to_string())
            ));
        }
    };
    let mut bytes = vec![0; usize::try_from(len).map_err(|_| "length too large".to_string())?];
    file.seek(SeekFrom::Start(offset)).map_err(failed)?;
    file.read_exact(&mut bytes).map_err(failed)?;
    Ok(bytes)
}

/// ONNX's `TensorProto.DataType` values of the integer types tested for zeros.
const INTEGERS: [(i32, usize); 7] = [
    (2, 1), // UINT8
    (3, 1), // INT8
    (4, 2), // UINT16
    (5, 2), // INT16
    (6, 4), // INT32
    (7, 8), // INT64
    (9, 1), // BOOL
];

/// Whether every value of `tensor` (a float or integer type) is zero, negative zero
/// included; `false` for a tensor whose data does not match its shape.
pub(crate) fn all_zero(dir: &Path, tensor: &TensorProto) -> bool {
    let Some(count) = tensor
        .dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
    else {
        return false;
    };
    let data_type = tensor.data_type.unwrap_or(0);
    // Each type's width, and the bits that are not the sign (all bits for integers).
    let (width, magnitude): (usize, u64) = match data_type {
        FLOAT => (4, 0x7fff_ffff),
        DOUBLE => (8, 0x7fff_ffff_ffff_ffff),
        FLOAT16 | BFLOAT16 => (2, 0x7fff),
        other => match INTEGERS.iter().find(|(t, _)| *t == other) {
            Some(&(_, width)) => (width, u64::MAX),
            None => return false,
        },
    };
    let Ok(raw) = raw_bytes(dir, tensor, count, width) else {
        return false;
    };
    if let Some(bytes) = raw.as_deref() {
        return Some(bytes.len()) == count.checked_mul(width)
            && bytes.chunks_exact(width).all(|c| {
                let mut word = [0u8; 8];
                word[..width].copy_from_slice(c);
                u64::from_le_bytes(word) & magnitude == 0
            });
    }
    match data_type {
        FLOAT => tensor.float_data.len() == count && tensor.float_data.iter().all(|v| *v == 0.0),
        DOUBLE => tensor.double_data.len() == count && tensor.double_data.iter().all(|v| *v == 0.0),
        7 => tensor.int64_data.len() == count && tensor.int64_data.iter().all(|v| *v == 0),
        _ => {
            tensor.int32_data.len() == count
                && tensor
                    .int32_data
                    .iter()
                    .all(|&v| u64::from(v as u32) & magnitude == 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::onnx_proto::StringStringEntryProto;

    fn external(entries: &[(&str, &str)], dims: &[i64]) -> TensorProto {
        TensorProto {
            name: Some("w".into()),
            data_type: Some(FLOAT),
            dims: dims.to_vec(),
            data_location: Some(1),
            external_data: entries
                .iter()
                .map(|(k, v)| StringStringEntryProto {
                    key: Some(k.to_string()),
                    value: Some(v.to_string()),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn external_data_is_read_to_the_tensors_size_only() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<u8> = [0.0f32, 1.5, -2.0, 0.0, 0.0, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(dir.path().join("d.bin"), &values).unwrap();
        let read = |t: &TensorProto| tensor_values("m.onnx", dir.path(), "w", t);
        // Without a length: the tensor's bytes from the offset, not the rest of the file.
        let t = external(&[("location", "d.bin"), ("offset", "4")], &[2]);
        assert_eq!(read(&t).unwrap().values, [1.5, -2.0]);
        assert!(!all_zero(dir.path(), &t));
        let t = external(
            &[("location", "d.bin"), ("offset", "12"), ("length", "8")],
            &[2],
        );
        assert!(all_zero(dir.path(), &t));
        for (entries, part) in [
            (
                &[("location", "d.bin"), ("length", "12")][..],
                "length 12 for 8 bytes",
            ),
            (
                &[("location", "d.bin"), ("offset", "20")],
                "bytes 20..28 of 24",
            ),
            (
                &[("location", "d.bin"), ("offset", "x")],
                "external data offset 'x'",
            ),
            (&[("location", "../d.bin")], "outside the model's folder"),
        ] {
            let t = external(entries, &[2]);
            let e = read(&t).unwrap_err().to_string();
            assert!(e.contains(part), "{entries:?}: {e}");
            assert!(!all_zero(dir.path(), &t));
        }
        // A shape whose byte count overflows is refused before any read.
        let t = external(&[("location", "d.bin")], &[1 << 62, 4]);
        assert!(read(&t).unwrap_err().to_string().contains("overflows"));
        assert!(!all_zero(dir.path(), &t));
    }
}
