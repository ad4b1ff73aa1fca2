//! Damaged checkpoints: every loader, given a truncated, bit-flipped, mislabelled or
//! wrong-dtype file made from a real checkpoint, returns a named error (or, for damage
//! that leaves a well-formed file, a module), and never panics or aborts. A truncated or
//! relabelled file never loads with values other than the intact file's.
//!
//! The real checkpoints: PyTorch `nn.LSTM` state dicts (the golden fixtures, written by
//! PyTorch) and the module's own export for `load_pytorch_safetensors`; the module's
//! Burn records in every file format Burn 0.21 has (named MessagePack, gzipped or not,
//! bincode, gzipped or not, pretty JSON) for `load_checkpoint`. The damage is seeded:
//! truncation at every structural boundary and at spread points, single bit flips
//! (every bit of the first bytes, then spread over the file), absurd length prefixes,
//! and tensors relabelled as another dtype.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use burn::backend::NdArray;
use burn::module::Module;
use burn::record::{
    BinFileRecorder, BinGzFileRecorder, FileRecorder, FullPrecisionSettings, HalfPrecisionSettings,
    NamedMpkFileRecorder, NamedMpkGzFileRecorder, PrettyJsonFileRecorder,
};
use burn::tensor::Tensor;
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnError};
use common::{GoldenCase, golden_paths, to_f64};

type B = NdArray<f32>;

/// A test's scratch directory, removed when the test ends.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("burn-lstm-hostile-")
        .tempdir()
        .unwrap()
}

/// A damaged copy of a file and what was done to it.
struct Damaged {
    what: String,
    bytes: Vec<u8>,
    /// Whether no loader may accept it with other values than the intact file's (a
    /// truncated or relabelled file never is a checkpoint of other values).
    must_fail: bool,
}

/// The seeded damage done to `bytes`. `header_end`: where a safetensors header ends
/// (the 8-byte length prefix plus the JSON), for structure-aware cuts.
fn damage(bytes: &[u8], header_end: Option<usize>) -> Vec<Damaged> {
    let len = bytes.len();
    let mut out = Vec::new();
    let mut cuts = vec![0, 1, 4, 7, 8, 9, 16, len / 3, len / 2, len - 8, len - 1];
    if let Some(end) = header_end {
        cuts.extend([end - 1, end, end + 1, end + 4]);
    }
    cuts.extend((1..24).map(|i| i * len / 24));
    cuts.sort();
    cuts.dedup();
    for cut in cuts.into_iter().filter(|&c| c < len) {
        out.push(Damaged {
            what: format!("truncated to {cut} of {len} bytes"),
            bytes: bytes[..cut].to_vec(),
            must_fail: true,
        });
    }
    // Every bit of the first 24 bytes (length prefixes, headers, magic numbers), then
    // one bit at 160 spread positions.
    let mut flips: Vec<usize> = (0..24.min(len) * 8).collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64 ^ len as u64;
    for _ in 0..160 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        flips.push((state % (len as u64 * 8)) as usize);
    }
    for bit in flips {
        let mut flipped = bytes.to_vec();
        flipped[bit / 8] ^= 1 << (bit % 8);
        out.push(Damaged {
            what: format!("bit {} of byte {} flipped", bit % 8, bit / 8),
            bytes: flipped,
            must_fail: false,
        });
    }
    // Absurd values in the first 8 bytes (a safetensors header length; in other
    // formats the first fields).
    for prefix in [u64::MAX, 1 << 62, 1 << 40, 100_000_001, len as u64] {
        let mut patched = bytes.to_vec();
        patched[..8.min(len)].copy_from_slice(&prefix.to_le_bytes()[..8.min(len)]);
        out.push(Damaged {
            what: format!("first 8 bytes set to {prefix}"),
            bytes: patched,
            must_fail: false,
        });
    }
    out
}

/// Each tensor of a safetensors file relabelled as `to` where the byte sizes allow it
/// (a well-formed file whose values are not floats, or a dtype of another size).
fn relabelled(bytes: &[u8], from: &str, to: &str) -> Option<Damaged> {
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).ok()?;
    let pattern = format!("\"dtype\":\"{from}\"");
    if !header.contains(&pattern) {
        return None;
    }
    let new_header = header.replace(&pattern, &format!("\"dtype\":\"{to}\""));
    // Same length: names of equal length (F64/I64, F32/I32/U32) keep the offsets.
    let mut out = (new_header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(new_header.as_bytes());
    out.extend_from_slice(&bytes[8 + header_len..]);
    Some(Damaged {
        what: format!("every {from} tensor relabelled {to}"),
        bytes: out,
        must_fail: true,
    })
}

/// The outcome of one load: `Ok(true)` a module, `Ok(false)` a named error.
fn outcome(
    path: &Path,
    what: &str,
    load: impl FnOnce() -> Result<CudnnCompatibleLstm<B>, RnnError>,
) -> Result<bool, String> {
    match catch_unwind(AssertUnwindSafe(load)) {
        Err(_) => Err(format!("{}: {what}: the loader panicked", path.display())),
        Ok(Ok(_)) => Ok(true),
        Ok(Err(e)) => {
            let named = match &e {
                RnnError::Io { path: p, message } => !p.is_empty() && !message.is_empty(),
                RnnError::CheckpointTensor { name, .. } | RnnError::ParameterShape { name, .. } => {
                    !name.is_empty()
                }
                RnnError::CheckpointDtype { name, .. } => !name.is_empty(),
                _ => false,
            };
            if named {
                Ok(false)
            } else {
                Err(format!("{}: {what}: unnamed error {e:?}", path.display()))
            }
        }
    }
}

/// Every parameter of a loaded module, in the canonical order.
fn values(model: &CudnnCompatibleLstm<B>) -> Vec<f64> {
    to_f64(model.flat_weights())
}

/// Writes every damaged copy of `original` to `path` and loads it with `load`.
fn walk(
    original: &[u8],
    damaged: Vec<Damaged>,
    path: &Path,
    load: &dyn Fn(&Path) -> Result<CudnnCompatibleLstm<B>, RnnError>,
) -> (usize, usize, Vec<String>) {
    std::fs::write(path, original).unwrap();
    let intact = load(path).unwrap_or_else(|e| panic!("the intact file loads: {e}"));
    let intact = values(&intact);
    let (mut loaded, mut refused, mut failures) = (0, 0, Vec::new());
    for d in damaged {
        std::fs::write(path, &d.bytes).unwrap();
        let mut same = None;
        let result = outcome(path, &d.what, || {
            load(path).inspect(|m| same = Some(values(m) == intact))
        });
        match result {
            // A cut or relabelled file may load only when the damage lies in bytes the
            // decoder never reads (bincode's trailing bytes) and changed no value.
            Ok(true) if d.must_fail && same != Some(true) => failures.push(format!(
                "{}: {}: loaded with changed values",
                path.display(),
                d.what
            )),
            Ok(true) => loaded += 1,
            Ok(false) => refused += 1,
            Err(failure) => failures.push(failure),
        }
    }
    (loaded, refused, failures)
}

fn report(label: &str, (loaded, refused, failures): (usize, usize, Vec<String>)) {
    println!(
        "{label}: {refused} damaged files refused with a named error, {loaded} loaded (a \
         flipped bit inside a value, or bytes the decoder never reads)"
    );
    assert!(
        failures.is_empty(),
        "{label}: {} failure(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(refused > 0, "{label}: no damaged file was refused");
}

fn header_end(bytes: &[u8]) -> usize {
    8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

#[test]
fn damaged_pytorch_safetensors_are_named_errors() {
    let device = Default::default();
    let dir = scratch();
    for golden in golden_paths().into_iter().take(4) {
        let case = GoldenCase::load(&golden);
        let config = case.module_config();
        let original = std::fs::read(&golden).unwrap();
        let mut damaged = damage(&original, Some(header_end(&original)));
        for (from, to) in [
            ("F64", "I64"),
            ("F64", "U64"),
            ("F64", "F32"),
            ("F64", "U8"),
        ] {
            damaged.extend(relabelled(&original, from, to));
        }
        let path = dir.path().join(format!("{}.safetensors", case.name));
        let load = |p: &Path| config.load_pytorch_safetensors::<B>(p, &device);
        report(
            &format!("pytorch {}", case.name),
            walk(&original, damaged, &path, &load),
        );
    }
}

fn model() -> (CudnnCompatibleLstmConfig, CudnnCompatibleLstm<B>) {
    let config = CudnnCompatibleLstmConfig::new(3, 4)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(2);
    let model = config.init::<B>(&Default::default());
    // Burn initialises parameters lazily: read them so the files hold the values.
    let _ = model.flat_weights();
    (config, model)
}

#[test]
fn damaged_exports_of_the_module_are_named_errors() {
    let device = Default::default();
    let (config, model) = model();
    let dir = scratch();
    let path = dir.path().join("export.safetensors");
    model.save_pytorch_safetensors(&path).unwrap();
    let original = std::fs::read(&path).unwrap();
    let mut damaged = damage(&original, Some(header_end(&original)));
    for (from, to) in [
        ("F32", "I32"),
        ("F32", "U32"),
        ("F32", "BOOL"),
        ("F32", "F16"),
    ] {
        damaged.extend(relabelled(&original, from, to));
    }
    let load = |p: &Path| config.load_pytorch_safetensors::<B>(p, &device);
    report("module export", walk(&original, damaged, &path, &load));
}

fn burn_record<R: FileRecorder<B>>(label: &str, recorder: R) {
    let device = Default::default();
    let (config, model) = model();
    let dir = scratch();
    let stem = dir.path().join(label);
    model.clone().save_file(&stem, &recorder).unwrap();
    let path = stem.with_extension(<R as FileRecorder<B>>::file_extension());
    let original = std::fs::read(&path).unwrap();
    let damaged = damage(&original, None);
    let load = |p: &Path| config.load_checkpoint::<B, R>(p, &recorder, &device);
    report(label, walk(&original, damaged, &path, &load));
    // The intact record gives the saved module back.
    std::fs::write(&path, &original).unwrap();
    let loaded = config
        .load_checkpoint::<B, R>(&path, &recorder, &device)
        .unwrap();
    let x = Tensor::<B, 3>::ones([2, 3, 3], &device);
    assert_eq!(
        to_f64(loaded.forward(x.clone(), None).0),
        to_f64(model.forward(x, None).0)
    );
}

#[test]
fn damaged_named_mpk_records_are_named_errors() {
    burn_record("mpk", NamedMpkFileRecorder::<FullPrecisionSettings>::new());
}

#[test]
fn damaged_named_mpk_gz_records_are_named_errors() {
    burn_record(
        "mpk-gz",
        NamedMpkGzFileRecorder::<FullPrecisionSettings>::new(),
    );
}

#[test]
fn damaged_bincode_records_are_named_errors() {
    burn_record("bin", BinFileRecorder::<FullPrecisionSettings>::new());
}

#[test]
fn damaged_bincode_gz_records_are_named_errors() {
    burn_record("bin-gz", BinGzFileRecorder::<FullPrecisionSettings>::new());
}

#[test]
fn damaged_json_records_are_named_errors() {
    burn_record(
        "json",
        PrettyJsonFileRecorder::<FullPrecisionSettings>::new(),
    );
}

/// Saved in half precision, loaded with a full-precision recorder (a dtype the recorder
/// did not write): Burn converts, so the module loads with its values rounded to f16.
#[test]
fn a_half_precision_record_loads_with_a_full_precision_recorder_as_f16_values() {
    let device = Default::default();
    let (config, model) = model();
    let original = values(&model);
    let dir = scratch();
    let stem = dir.path().join("half");
    model
        .save_file(&stem, &NamedMpkFileRecorder::<HalfPrecisionSettings>::new())
        .unwrap();
    let path = stem.with_extension("mpk");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    let result = outcome(&path, "half precision record", || {
        config.load_checkpoint::<B, _>(&path, &recorder, &device)
    });
    assert_eq!(result, Ok(true));
    let loaded = values(
        &config
            .load_checkpoint::<B, _>(&path, &recorder, &device)
            .unwrap(),
    );
    assert_eq!(loaded.len(), original.len());
    for (k, (&got, &want)) in loaded.iter().zip(&original).enumerate() {
        let rounded = burn::tensor::f16::from_f64(want).to_f64();
        assert_eq!(got, rounded, "parameter value {k}: {want} rounded to f16");
    }
    assert_ne!(loaded, original, "no value was rounded");
}

#[test]
fn a_missing_file_is_a_named_error() {
    let device = Default::default();
    let (config, _) = model();
    let dir = scratch();
    let path = dir.path().join("nothing-here.mpk");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    for result in [
        config.load_checkpoint::<B, _>(&path, &recorder, &device),
        config.load_pytorch_safetensors::<B>(&path, &device),
    ] {
        match result {
            Err(RnnError::Io { path: p, .. }) => assert!(p.contains("nothing-here")),
            other => panic!("expected an Io error naming the file, got {other:?}"),
        }
    }
}

/// `bytes` gzipped, as Burn's `.gz` recorders write them.
fn gzipped(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// Whether this test ran in a child process of its own (the caller returns): the tests
/// whose failure is an abort of the process run there, so that one that fails is
/// reported by name and the rest of the suite still runs.
fn in_a_process_of_its_own(test: &str) -> bool {
    lstm_cpu::reran_in_child(module_path!(), test, &[("BURN_LSTM_ABORT_TEST", test)])
}

/// `bytes` inflated.
fn gunzipped(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The first four values of layer 0's `weight_ih`, as the f32 bytes every format stores:
/// where a test finds that tensor in a record.
fn weight_ih_start(model: &CudnnCompatibleLstm<B>) -> Vec<u8> {
    let weight_ih: Vec<f32> = model.layers[0]
        .forward
        .weight_ih
        .val()
        .into_data()
        .convert::<f32>()
        .to_vec()
        .unwrap();
    weight_ih[..4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
}

/// `bytes` with the first byte string whose contents start with `start` given a length
/// prefix of `claimed`: bincode's varint `0xFD` + u64 (`msgpack` false), or MessagePack's
/// bin32 `0xC6` + u32 (`msgpack` true). The real prefix is found as the bytes just before
/// `start`.
fn huge_prefix(bytes: &[u8], start: &[u8], msgpack: bool, claimed: u64) -> Vec<u8> {
    let at = bytes
        .windows(start.len())
        .position(|w| w == start)
        .expect("the parameter's bytes are in the record");
    // bincode: one byte for a length below 251; MessagePack bin8: 0xC4 and one byte.
    let prefix_len = if msgpack { 2 } else { 1 };
    let mut out = bytes[..at - prefix_len].to_vec();
    if msgpack {
        out.push(0xC6);
        out.extend_from_slice(&(claimed as u32).to_be_bytes());
    } else {
        out.push(0xFD);
        out.extend_from_slice(&claimed.to_le_bytes());
    }
    out.extend_from_slice(&bytes[at..]);
    out
}

/// A record whose byte string claims 2^40 bytes (or 4 GiB in MessagePack, its largest):
/// Burn's bincode decoder would allocate that before reading (an allocation failure
/// aborts the process); here each is a named error.
#[test]
fn absurd_length_prefixes_are_named_errors_not_aborts() {
    if in_a_process_of_its_own("absurd_length_prefixes_are_named_errors_not_aborts") {
        return;
    }
    let (config, model) = model();
    let start = weight_ih_start(&model);
    let dir = scratch();
    fn check<R: FileRecorder<B>>(
        config: &CudnnCompatibleLstmConfig,
        model: &CudnnCompatibleLstm<B>,
        recorder: R,
        stem: PathBuf,
        patch: &dyn Fn(&[u8]) -> Vec<u8>,
    ) {
        model.clone().save_file(&stem, &recorder).unwrap();
        let path = stem.with_extension(<R as FileRecorder<B>>::file_extension());
        let patched = patch(&std::fs::read(&path).unwrap());
        std::fs::write(&path, patched).unwrap();
        let result = config.load_checkpoint::<B, R>(&path, &recorder, &Default::default());
        match result {
            Err(RnnError::Io { path: p, message }) => {
                assert!(
                    p.ends_with(path.file_name().unwrap().to_str().unwrap()),
                    "{p}"
                );
                println!("{}: {message}", path.display());
            }
            other => panic!("{}: expected a named error, got {other:?}", path.display()),
        }
    }
    check(
        &config,
        &model,
        BinFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("huge-bin"),
        &|b| huge_prefix(b, &start, false, 1 << 40),
    );
    check(
        &config,
        &model,
        BinGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("huge-bin-gz"),
        &|b| gzipped(&huge_prefix(&gunzipped(b), &start, false, 1 << 40)),
    );
    check(
        &config,
        &model,
        NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("huge-mpk"),
        &|b| huge_prefix(b, &start, true, u32::MAX as u64),
    );
    check(
        &config,
        &model,
        NamedMpkGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("huge-mpk-gz"),
        &|b| gzipped(&huge_prefix(&gunzipped(b), &start, true, u32::MAX as u64)),
    );
}

/// `bytes` with the first occurrence of `from` at or after `at` replaced by `to`, and
/// where it was.
fn replaced(bytes: &[u8], at: usize, from: &[u8], to: &[u8]) -> (Vec<u8>, usize) {
    let found = at
        + bytes[at..]
            .windows(from.len())
            .position(|w| w == from)
            .unwrap_or_else(|| panic!("{:?} is in the record", String::from_utf8_lossy(from)));
    let mut out = bytes[..found].to_vec();
    out.extend_from_slice(to);
    out.extend_from_slice(&bytes[found + from.len()..]);
    (out, found)
}

/// A record with a tensor relabelled f64 with a shape of 2^40 values (MessagePack and
/// bincode: layer 0's `weight_ih`, 16 × 3 f32; JSON: the first in its key order): Burn
/// converts it to the recorder's f32 by allocating as many values as the shape claims,
/// which fails and aborts the process (found by fuzzing, `fuzz/`); here it is a named
/// error, in the MessagePack, JSON and bincode records, plain and gzipped, also where
/// the JSON tensor's data is a sequence of its fields and where a gzipped bincode record
/// inflates past what the guard reads whole (17 MiB from about 20 kB).
#[test]
fn shapes_claiming_more_values_than_their_bytes_are_named_errors_not_aborts() {
    if in_a_process_of_its_own(
        "shapes_claiming_more_values_than_their_bytes_are_named_errors_not_aborts",
    ) {
        return;
    }
    use burn::record::JsonGzFileRecorder;
    let (config, model) = model();
    let dir = scratch();
    // MessagePack: `shape` [16, 3] (fixarray of two fixints) to [2^40] (uint64), then
    // the `dtype` after it from "F32" to "F64".
    let msgpack = |b: &[u8]| {
        let mut huge = b"\xa5shape\x91\xcf".to_vec();
        huge.extend_from_slice(&(1u64 << 40).to_be_bytes());
        let (b, at) = replaced(b, 0, b"\xa5shape\x92\x10\x03", &huge);
        replaced(&b, at, b"\xa5dtype\xa3F32", b"\xa5dtype\xa3F64").0
    };
    // JSON: the same fields of the first object that has a `shape`.
    fn relabel(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(map) if map.contains_key("shape") => {
                map.insert("shape".into(), serde_json::json!([1u64 << 40]));
                map.insert("dtype".into(), serde_json::json!("F64"));
                true
            }
            serde_json::Value::Object(map) => map.values_mut().any(relabel),
            serde_json::Value::Array(items) => items.iter_mut().any(relabel),
            _ => false,
        }
    }
    let json = |b: &[u8]| {
        let mut record: serde_json::Value = serde_json::from_slice(b).unwrap();
        assert!(relabel(&mut record), "the record has a tensor");
        serde_json::to_vec(&record).unwrap()
    };
    // The same tensor's data as a sequence of its fields, which Burn's decoder reads too.
    fn as_sequence(value: &mut serde_json::Value) -> bool {
        match value {
            serde_json::Value::Object(map) if map.contains_key("shape") => {
                let fields = ["bytes", "shape", "dtype"].map(|k| map[k].clone());
                *value = serde_json::Value::Array(fields.to_vec());
                true
            }
            serde_json::Value::Object(map) => map.values_mut().any(as_sequence),
            serde_json::Value::Array(items) => items.iter_mut().any(as_sequence),
            _ => false,
        }
    }
    let json_sequence = |b: &[u8]| {
        let mut record: serde_json::Value = serde_json::from_slice(&json(b)).unwrap();
        assert!(as_sequence(&mut record), "the record has a tensor");
        serde_json::to_vec(&record).unwrap()
    };
    // Bincode: after weight_ih's 192 bytes, `shape` [16, 3] (a varint length and two
    // varints) and `dtype` F32 (variant 1) become [2^40] (0xFD and a u64) and F64 (0).
    let start = weight_ih_start(&model);
    // `padded`: weight_ih's bytes padded with zeros to 17 MiB (a length prefix of 0xFC
    // and a u32), which gzip squeezes past the 64-fold inflation the guard reads whole.
    let bincode_padded = |b: &[u8], padded: Option<u32>| {
        let at = b.windows(start.len()).position(|w| w == start).unwrap();
        assert_eq!(b[at - 1], 192, "weight_ih's byte count");
        let end = at + 192;
        assert_eq!(
            b[end..end + 4],
            [2, 16, 3, 1],
            "weight_ih's shape and dtype"
        );
        let mut out = b[..at - 1].to_vec();
        match padded {
            Some(len) => {
                out.push(0xFC);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&b[at..end]);
                out.resize(out.len() + len as usize - 192, 0);
            }
            None => out.extend_from_slice(&b[at - 1..end]),
        }
        out.extend([1, 0xFD]);
        out.extend_from_slice(&(1u64 << 40).to_le_bytes());
        out.push(0);
        out.extend_from_slice(&b[end + 4..]);
        out
    };
    let bincode = |b: &[u8]| bincode_padded(b, None);
    fn check<R: FileRecorder<B>>(
        config: &CudnnCompatibleLstmConfig,
        model: &CudnnCompatibleLstm<B>,
        recorder: R,
        stem: PathBuf,
        patch: &dyn Fn(&[u8]) -> Vec<u8>,
    ) {
        model.clone().save_file(&stem, &recorder).unwrap();
        let path = stem.with_extension(<R as FileRecorder<B>>::file_extension());
        let original = std::fs::read(&path).unwrap();
        std::fs::write(&path, patch(&original)).unwrap();
        match config.load_checkpoint::<B, R>(&path, &recorder, &Default::default()) {
            Err(RnnError::Io { message, .. }) => assert!(
                message.contains("a tensor's shape claims 1099511627776 values, more than its")
                    && message.contains(" bytes hold"),
                "{}: {message}",
                path.display()
            ),
            other => panic!("{}: expected a named error, got {other:?}", path.display()),
        }
        // The intact record still loads.
        std::fs::write(&path, original).unwrap();
        config
            .load_checkpoint::<B, R>(&path, &recorder, &Default::default())
            .unwrap();
    }
    check(
        &config,
        &model,
        NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-mpk"),
        &msgpack,
    );
    check(
        &config,
        &model,
        NamedMpkGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-mpk-gz"),
        &|b| gzipped(&msgpack(&gunzipped(b))),
    );
    check(
        &config,
        &model,
        PrettyJsonFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-json"),
        &json,
    );
    check(
        &config,
        &model,
        JsonGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-json-gz"),
        &|b| gzipped(&json(&gunzipped(b))),
    );
    check(
        &config,
        &model,
        PrettyJsonFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-json-sequence"),
        &json_sequence,
    );
    check(
        &config,
        &model,
        BinFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-bin"),
        &bincode,
    );
    check(
        &config,
        &model,
        BinGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-bin-gz-padded"),
        &|b| gzipped(&bincode_padded(&gunzipped(b), Some(17 << 20))),
    );
    check(
        &config,
        &model,
        BinGzFileRecorder::<FullPrecisionSettings>::new(),
        dir.path().join("shape-bin-gz"),
        &|b| gzipped(&bincode(&gunzipped(b))),
    );
}

/// MessagePack records nested 1,000 arrays deep (under rmp-serde's own limit of 1,024
/// levels), as `item` itself and as a field the record does not have: Burn's decoder
/// recurses once per level, in its typed read, in what it passes over and in the read of
/// the metadata alone it makes after an error. At 1,000 levels a debug build overflowed
/// the 2 MiB stack of a test thread (a stack overflow aborts the process). Both checked
/// loaders return a named error, gzipped or not.
#[test]
fn records_nested_a_thousand_deep_are_named_errors() {
    if in_a_process_of_its_own("records_nested_a_thousand_deep_are_named_errors") {
        return;
    }
    let levels = 1000;
    let nested = || {
        let mut bytes = vec![0x91; levels];
        bytes.push(0xc0);
        bytes
    };
    // A map of two string keys, "item" first (a reader that passes it over recurses
    // through it), then "metadata" (an empty map).
    let record = |item: Vec<u8>| {
        let mut bytes = vec![0x82, 0xa4];
        bytes.extend_from_slice(b"item");
        bytes.extend(item);
        bytes.push(0xa8);
        bytes.extend_from_slice(b"metadata");
        bytes.push(0x80);
        bytes
    };
    // `item` a map whose only field, "zzz", no record has.
    let mut unknown_field = vec![0x81, 0xa3];
    unknown_field.extend_from_slice(b"zzz");
    unknown_field.extend(nested());
    let (config, model) = model();
    let dir = scratch();
    // Both checked loaders on the file at `path`, written for `recorder`.
    fn both<R: FileRecorder<B>>(
        config: &CudnnCompatibleLstmConfig,
        model: &CudnnCompatibleLstm<B>,
        path: &Path,
        recorder: R,
    ) -> [(&'static str, Result<CudnnCompatibleLstm<B>, RnnError>); 2] {
        let device = Default::default();
        [
            (
                "load_checkpoint",
                config.load_checkpoint::<B, _>(path, &recorder, &device),
            ),
            (
                "load_file_checked",
                burn_lstm::load_file_checked(model.clone(), path, &recorder, &device),
            ),
        ]
    }
    for (what, bytes) in [
        ("item", record(nested())),
        ("unknown field", record(unknown_field)),
    ] {
        for (name, gzip) in [("deep.mpk", false), ("deep.mpk.gz", true)] {
            let path = dir.path().join(name);
            let results = if gzip {
                std::fs::write(&path, gzipped(&bytes)).unwrap();
                let recorder = NamedMpkGzFileRecorder::<FullPrecisionSettings>::new();
                both(&config, &model, &path, recorder)
            } else {
                std::fs::write(&path, &bytes).unwrap();
                let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
                both(&config, &model, &path, recorder)
            };
            for (loader, result) in results {
                match result {
                    Err(RnnError::Io { path: p, message }) => {
                        assert!(p.ends_with(name), "{p}");
                        println!("{what}, {name}, {loader}: {message}");
                    }
                    other => {
                        panic!("{what}, {name}, {loader}: expected a named error, got {other:?}")
                    }
                }
            }
        }
    }
}
