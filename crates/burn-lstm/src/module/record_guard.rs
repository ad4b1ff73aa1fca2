//! A record checked before Burn decodes it, where Burn's decoder would abort the process
//! on a damaged or hostile file: an allocation it cannot make fails, and no
//! `catch_unwind` can catch that.
//!
//! - **Length prefixes** (bincode). Burn 0.21's bincode recorders (`BinFileRecorder`,
//!   `BinGzFileRecorder`) decode without a size limit, and bincode allocates what a
//!   length prefix claims before it reads a byte (`vec![0; len]` for byte strings,
//!   `Vec::with_capacity(len)` for others): a prefix of 2^40 aborts. So the record is
//!   first decoded here, into the same type, with a limit on the bytes it may claim (at
//!   least twice what the file holds, decompressed): a claim past it is a named error.
//!   The MessagePack and JSON recorders read byte strings through a bounded reader and
//!   grow other sequences as they read: they need no such check.
//! - **Tensor shapes**: a tensor stored in another type than the recorder's whose shape
//!   claims more values than its bytes hold, which Burn converts by allocating what the
//!   shape claims. Named MessagePack and JSON records are walked as their own maps and
//!   sequences (`record_tensors.rs`); bincode records, whose structure only the
//!   record's type describes, are checked inside the decode above, through a
//!   deserializer that watches for tensors' data (`typed_tensors.rs`).
//!
//! Every other outcome is left to Burn's decoder, which reports its own errors.

use std::io::Read;
use std::path::Path;

use burn::record::{BurnRecord, PrecisionSettings, Record};
use burn::tensor::backend::Backend;

use crate::error::RnnError;
use crate::module::{record_tensors, typed_tensors};

/// Largest decompressed size read from a gzipped record (the largest the check below
/// decodes, with its limit of twice the bytes): beyond it the check is left out (Burn's
/// decoder then runs unguarded, as it would anyway).
const MAX_GUARDED: u64 = 1 << 31;

/// Most bytes a gzipped record of `file_len` bytes is inflated to for the check: a
/// record's numbers compress little, so past 64 times its size (16 MiB at least) the
/// stream is no record the check needs to see whole, and inflating it would only spend
/// memory (a few MB of zeros inflate to gigabytes).
fn inflate_limit(file_len: u64) -> u64 {
    file_len.saturating_mul(64).clamp(1 << 24, MAX_GUARDED)
}

/// Checks the bincode record of type `Rec` at `path` (written by a recorder whose file
/// extension is `extension` and whose precision is `S`); a no-op for other recorders.
pub(crate) fn check<B: Backend, Rec: Record<B>, S: PrecisionSettings>(
    path: &Path,
    extension: &str,
) -> Result<(), RnnError> {
    let damaged = |message: String| RnnError::Io {
        path: path.display().to_string(),
        message: format!("damaged record: {message}"),
    };
    if let Some(walked) = walk_tensors(path, extension) {
        return match walked {
            Err(message) if message.contains(record_tensors::CLAIM) => Err(damaged(message)),
            _ => Ok(()),
        };
    }
    let bytes = match extension {
        "bin" => std::fs::read(path).map(Some),
        // A damaged stream decompresses to garbage up to the point where inflating
        // fails, and Burn's decoder reads that garbage first: the check decodes what
        // could be decompressed, whether or not the rest could.
        "bin.gz" => std::fs::File::open(path).and_then(|file| {
            let limit = inflate_limit(file.metadata()?.len());
            let mut bytes = Vec::new();
            let _ = flate2::read::GzDecoder::new(file)
                .take(limit + 1)
                .read_to_end(&mut bytes);
            if bytes.len() as u64 > limit {
                // Left to Burn's decoder, which inflates as it decodes.
                return Ok(None);
            }
            Ok(Some(bytes))
        }),
        _ => return Ok(()),
    };
    // An unreadable file is Burn's to report (the same error, with its wording).
    let Ok(Some(bytes)) = bytes else {
        return Ok(());
    };
    type Item<B, Rec, S> = <Rec as Record<B>>::Item<S>;
    let need = bytes.len().saturating_mul(2).saturating_add(1 << 16);
    let limited = match need {
        n if n <= 1 << 24 => decode::<Item<B, Rec, S>, B, { 1 << 24 }>(&bytes),
        n if n <= 1 << 28 => decode::<Item<B, Rec, S>, B, { 1 << 28 }>(&bytes),
        n if n <= 1 << 32 => decode::<Item<B, Rec, S>, B, { 1 << 32 }>(&bytes),
        _ => return Ok(()),
    };
    match limited {
        Err(e) if limit_exceeded(&e) => Err(damaged(format!(
            "a length prefix claims more than the {} bytes the file holds",
            bytes.len()
        ))),
        Err(e) => shape_claim(&e).map_or(Ok(()), |claim| Err(damaged(claim))),
        Ok(()) => Ok(()),
    }
}

/// The tensor walk of a MessagePack or JSON record (`record_tensors.rs`), streamed from
/// the file (inflated as it is read where gzipped); `None` for the other recorders. An
/// unreadable file is Burn's to report: `Some(Ok(()))`.
fn walk_tensors(path: &Path, extension: &str) -> Option<Result<(), String>> {
    let file = || std::fs::File::open(path).map(std::io::BufReader::new);
    let gzipped = || file().map(flate2::read::GzDecoder::new);
    let walked = match extension {
        "mpk" => file().map(record_tensors::check_msgpack),
        "mpk.gz" => gzipped().map(record_tensors::check_msgpack),
        "json" => file().map(record_tensors::check_json),
        "json.gz" => gzipped().map(record_tensors::check_json),
        _ => return None,
    };
    Some(walked.unwrap_or(Ok(())))
}

/// Whether `e` is bincode's `LimitExceeded`, also when Burn's own deserializers (its
/// tensor data) pass it on as text in `OtherString`.
fn limit_exceeded(e: &bincode::error::DecodeError) -> bool {
    use bincode::error::DecodeError;
    match e {
        DecodeError::LimitExceeded => true,
        DecodeError::OtherString(text) => text.starts_with("LimitExceeded"),
        _ => false,
    }
}

/// Decodes `bytes` as Burn's bincode recorders do, claiming at most `LIMIT` bytes, with
/// every tensor's shape checked against its bytes before Burn converts it
/// (`typed_tensors.rs`).
fn decode<I: serde::de::DeserializeOwned, B: Backend, const LIMIT: usize>(
    bytes: &[u8],
) -> Result<(), bincode::error::DecodeError> {
    use serde::Deserialize;
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let mut decoder = bincode::serde::BorrowedSerdeDecoder::from_slice(bytes, config, ());
    let claims = typed_tensors::Claims::new();
    let watched = typed_tensors::Watched::new(decoder.as_deserializer(), &claims);
    BurnRecord::<I, B>::deserialize(watched).map(|_| ())
}

/// The claim of a tensor's shape past its bytes that `e` carries (through Burn's own
/// wrapping of its tensor data's errors), if it carries one.
fn shape_claim(e: &bincode::error::DecodeError) -> Option<String> {
    let text = match e {
        bincode::error::DecodeError::OtherString(text) => text,
        _ => return None,
    };
    let at = text.find(typed_tensors::CLAIM)?;
    let claim = &text[at..];
    Some(claim[..claim.find(['"', '\n']).unwrap_or(claim.len())].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::module::Module;
    use burn::record::{BinFileRecorder, FullPrecisionSettings};

    use crate::module::lstm::CudnnCompatibleLstmRecord;

    type B = NdArray<f32>;
    type Item = <CudnnCompatibleLstmRecord<B> as Record<B>>::Item<FullPrecisionSettings>;

    #[test]
    fn an_intact_record_decodes_within_the_limit() {
        let model = crate::CudnnCompatibleLstmConfig::new(3, 4).init::<B>(&Default::default());
        let _ = model.flat_weights();
        let dir = tempfile::Builder::new()
            .prefix("burn-lstm-guard-")
            .tempdir()
            .unwrap();
        let stem = dir.path().join("intact");
        model
            .clone()
            .save_file(&stem, &BinFileRecorder::<FullPrecisionSettings>::new())
            .unwrap();
        let bytes = std::fs::read(stem.with_extension("bin")).unwrap();
        decode::<Item, B, { 1 << 24 }>(&bytes).unwrap();
        assert!(limit_exceeded(&decode::<Item, B, 64>(&bytes).unwrap_err()));
        // weight_ih's byte string (48 f32: a one-byte length, 192) claiming 2^40 bytes.
        // (Converted: another test of this process may have made the device f64.)
        let values: Vec<f32> = model.layers[0]
            .forward
            .weight_ih
            .val()
            .into_data()
            .convert::<f32>()
            .to_vec()
            .unwrap();
        let start: Vec<u8> = values[..4].iter().flat_map(|v| v.to_le_bytes()).collect();
        let at = bytes.windows(16).position(|w| w == start).unwrap();
        assert_eq!(bytes[at - 1], 192);
        let mut patched = bytes[..at - 1].to_vec();
        patched.push(0xFD);
        patched.extend_from_slice(&(1u64 << 40).to_le_bytes());
        patched.extend_from_slice(&bytes[at..]);
        let err = decode::<Item, B, { 1 << 24 }>(&patched).unwrap_err();
        assert!(limit_exceeded(&err), "{err:?}");
    }
}
