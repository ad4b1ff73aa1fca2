//! A record decoded here instead of by Burn's recorder, checked on the way where Burn's
//! decoder would abort the process on a damaged or hostile file: an allocation it cannot
//! make fails, and no `catch_unwind` can catch that. The record is decoded as Burn
//! decodes it (the same type, format, settings and decoder configuration), through a
//! deserializer that watches for tensors' data (`typed_tensors.rs`), and with a limit on
//! what bincode's length prefixes may claim:
//!
//! - **Tensor shapes** (every format). Burn 0.21 decodes a tensor's data without
//!   comparing its shape with its bytes, then converts data stored in another type than
//!   the recorder's by allocating as many values as the shape claims: a shape past its
//!   bytes is a named error, found before Burn's conversion.
//! - **Length prefixes** (bincode). Burn's bincode recorders (`BinFileRecorder`,
//!   `BinGzFileRecorder`) decode without a size limit, and bincode allocates what a
//!   length prefix claims before it reads a byte (`vec![0; len]` for byte strings): a
//!   prefix of 2^40 aborts. The check's decode claims at most about twice what the file
//!   holds (decompressed; bincode counts what it reads, a number as 8 bytes), and 4 GiB
//!   in all where a gzipped record inflates past [`inflate_limit`]: a claim past it is a
//!   named error. Past 128 GiB a plain record is left to Burn's decoder. The
//!   MessagePack and JSON recorders read byte strings through a bounded reader and grow
//!   other sequences as they read.
//!
//! A record that passes is the one the caller loads ([`decode`] returns it, decoded once)
//! when the caller's recorder is one of Burn's ([`burns_own`]); a recorder of the
//! caller's own (one that decrypts or migrates, say) still decodes the file itself after
//! the check. Every other outcome is left to the recorder's decoder, which reports its
//! own errors.

use std::io::{BufReader, Read};
use std::path::Path;

use burn::record::{BurnRecord, FileRecorder, Record, Recorder};
use burn::tensor::backend::Backend;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::error::RnnError;
use crate::module::typed_tensors::{CLAIM, Claims, Watched};

/// Largest decompressed size read whole from a gzipped bincode record (the largest the
/// check decodes from memory, with its limit of twice the bytes).
const MAX_INFLATED: u64 = 1 << 31;

/// Most bytes a gzipped bincode record of `file_len` bytes is inflated to in memory for
/// the check: a record's numbers compress little, so past 64 times its size (16 MiB at
/// least) the stream is decoded as it inflates instead, with a fixed limit (a few MB of
/// zeros inflate to gigabytes).
fn inflate_limit(file_len: u64) -> u64 {
    file_len.saturating_mul(64).clamp(1 << 24, MAX_INFLATED)
}

/// What bincode's length prefixes may claim in a gzipped record decoded as it inflates
/// (its size unknown until then): a larger record that compresses more than 64-fold is
/// refused.
const STREAMED_LIMIT: usize = 1 << 32;

/// The record of type `Rec` at `path`, written by the recorder `R`, decoded as Burn's
/// recorder of `R`'s extension decodes it and checked on the way: `Ok(Some(record))`
/// when it decoded and `R` is one of Burn's recorders ([`burns_own`]), an error when the
/// check refused it, `Ok(None)` when it is left to `R`'s decoder (a recorder of the
/// caller's own, an unreadable file, a decoding error Burn words its own way, a plain
/// bincode record past 128 GiB, another extension).
pub(crate) fn decode<B: Backend, Rec: Record<B>, R: FileRecorder<B>>(
    path: &Path,
) -> Result<Option<Loaded<B, Rec, R::Settings>>, RnnError> {
    type I<B, Rec, R> = Item<B, Rec, <R as Recorder<B>>::Settings>;
    let extension = R::file_extension();
    let damaged = |message: String| RnnError::Io {
        path: path.display().to_string(),
        message: format!("damaged record: {message}"),
    };
    // An unreadable file is Burn's to report (the same error, with its wording).
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let file_len = file.metadata().map_or(0, |m| m.len());
    let file = BufReader::new(file);
    let gunzip = flate2::read::GzDecoder::new;
    let decoded = match extension {
        "mpk" => msgpack::<I<B, Rec, R>, B>(file),
        "mpk.gz" => msgpack::<I<B, Rec, R>, B>(gunzip(file)),
        "json" => json::<I<B, Rec, R>, B>(file),
        "json.gz" => json::<I<B, Rec, R>, B>(gunzip(file)),
        "bin" if file_len <= MAX_INFLATED => {
            let mut bytes = Vec::new();
            if file.take(MAX_INFLATED).read_to_end(&mut bytes).is_err() {
                return Ok(None);
            }
            bincode_slice::<I<B, Rec, R>, B>(&bytes)
        }
        // Past what the check reads into memory: decoded as it is read, its prefixes
        // claiming at most twice the file.
        "bin" => match file_len.saturating_mul(2).saturating_add(1 << 16) {
            n if n <= 1 << 34 => bincode_stream::<I<B, Rec, R>, B, _, { 1 << 34 }>(file),
            n if n <= 1 << 38 => bincode_stream::<I<B, Rec, R>, B, _, { 1 << 38 }>(file),
            _ => return Ok(None),
        },
        // A damaged stream decompresses to garbage up to the point where inflating
        // fails, and Burn's decoder reads that garbage first: the check decodes what
        // could be decompressed, whether or not the rest could.
        "bin.gz" => {
            let limit = inflate_limit(file_len);
            let mut bytes = Vec::new();
            let _ = gunzip(file).take(limit + 1).read_to_end(&mut bytes);
            if bytes.len() as u64 <= limit {
                bincode_slice::<I<B, Rec, R>, B>(&bytes)
            } else {
                let file = std::fs::File::open(path).map_err(|e| damaged(e.to_string()))?;
                let reader = gunzip(BufReader::new(file));
                bincode_stream::<I<B, Rec, R>, B, _, STREAMED_LIMIT>(reader)
            }
        }
        _ => return Ok(None),
    };
    match decoded {
        Ok(record) => Ok(burns_own::<R>().then_some(record)),
        Err(Refusal::Claim(claim)) => Err(damaged(claim)),
        Err(Refusal::Prefix) => Err(damaged(format!(
            "a length prefix claims more than the file holds ({file_len} bytes{})",
            if extension.ends_with(".gz") {
                ", compressed"
            } else {
                ""
            }
        ))),
        Err(Refusal::Other) => Ok(None),
    }
}

/// Whether `R` is one of Burn's own file recorders, whose decoding [`decode`] repeats
/// (Burn writes a recorder's type name into each record's metadata the same way).
/// Another recorder's file is checked, then decoded by that recorder.
pub(crate) fn burns_own<R>() -> bool {
    std::any::type_name::<R>().starts_with("burn_core::record::file::")
}

/// The item type of a record `Rec` at precision `S`.
type Item<B, Rec, S> = <Rec as Record<B>>::Item<S>;

/// Burn's record of a `Rec` at precision `S`, as its recorders decode it.
type Loaded<B, Rec, S> = BurnRecord<Item<B, Rec, S>, B>;

/// What the decoders below give: Burn's record of items `I`, or why not.
type Decoded<I, B> = Result<BurnRecord<I, B>, Refusal>;

/// Why the check's decode stopped.
enum Refusal {
    /// A tensor's shape claims more values than its bytes hold (the claim, in words).
    Claim(String),
    /// A bincode length prefix claims more than the limit.
    Prefix,
    /// Anything else: Burn's decoder reports it its own way.
    Other,
}

impl Refusal {
    /// The refusal a decoder's error message says.
    fn of(message: &str) -> Self {
        match message.find(CLAIM) {
            // Burn passes its tensor data's errors on in their `Debug` form.
            Some(at) => {
                let claim = &message[at..];
                let end = claim.find(['"', '\\', '\n']).unwrap_or(claim.len());
                Self::Claim(claim[..end].to_string())
            }
            None => Self::Other,
        }
    }
}

/// Decodes Burn's record of items `I` from `decoder`, through [`Watched`].
fn watched<'de, I: DeserializeOwned, B: Backend, D: serde::Deserializer<'de>>(
    decoder: D,
) -> Result<BurnRecord<I, B>, D::Error> {
    let claims = Claims::new();
    BurnRecord::<I, B>::deserialize(Watched::new(decoder, &claims))
}

/// Decodes a named MessagePack record as Burn's recorders do (`rmp_serde::from_read`).
fn msgpack<I: DeserializeOwned, B: Backend>(reader: impl Read) -> Decoded<I, B> {
    let mut decoder = rmp_serde::Deserializer::new(reader);
    watched::<I, B, _>(&mut decoder).map_err(|e| Refusal::of(&e.to_string()))
}

/// Decodes a JSON record as Burn's recorders do (`serde_json::from_reader`, which also
/// refuses anything but whitespace after the record).
fn json<I: DeserializeOwned, B: Backend>(reader: impl Read) -> Decoded<I, B> {
    let mut decoder = serde_json::Deserializer::from_reader(reader);
    let record = watched::<I, B, _>(&mut decoder).map_err(|e| Refusal::of(&e.to_string()))?;
    decoder.end().map_err(|_| Refusal::Other)?;
    Ok(record)
}

/// Decodes a bincode record held in memory as Burn's recorders do, its length prefixes
/// claiming at most twice its bytes.
fn bincode_slice<I: DeserializeOwned, B: Backend>(bytes: &[u8]) -> Decoded<I, B> {
    let need = bytes.len().saturating_mul(2).saturating_add(1 << 16);
    match need {
        n if n <= 1 << 24 => bincode_from_slice::<I, B, { 1 << 24 }>(bytes),
        n if n <= 1 << 28 => bincode_from_slice::<I, B, { 1 << 28 }>(bytes),
        n if n <= 1 << 32 => bincode_from_slice::<I, B, { 1 << 32 }>(bytes),
        _ => bincode_from_slice::<I, B, { 1 << 34 }>(bytes),
    }
    .map_err(|e| bincode_refusal(&e))
}

/// Decodes a bincode record held in memory, its length prefixes claiming at most `LIMIT`
/// bytes.
fn bincode_from_slice<I: DeserializeOwned, B: Backend, const LIMIT: usize>(
    bytes: &[u8],
) -> Result<BurnRecord<I, B>, bincode::error::DecodeError> {
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let mut decoder = bincode::serde::BorrowedSerdeDecoder::from_slice(bytes, config, ());
    watched::<I, B, _>(decoder.as_deserializer())
}

/// Decodes a bincode record as it is read, its length prefixes claiming at most `LIMIT`
/// bytes.
fn bincode_stream<I: DeserializeOwned, B: Backend, R: Read, const LIMIT: usize>(
    mut reader: R,
) -> Decoded<I, B> {
    let config = bincode::config::standard().with_limit::<LIMIT>();
    let mut decoder =
        bincode::serde::OwnedSerdeDecoder::from_reader(StdReader(&mut reader), config);
    watched::<I, B, _>(decoder.as_deserializer()).map_err(|e| bincode_refusal(&e))
}

/// An `std::io::Read` as bincode's reader (whose own adapter needs its `std` feature).
struct StdReader<R>(R);

impl<R: Read> bincode::de::read::Reader for StdReader<R> {
    fn read(&mut self, bytes: &mut [u8]) -> Result<(), bincode::error::DecodeError> {
        self.0
            .read_exact(bytes)
            .map_err(|_| bincode::error::DecodeError::UnexpectedEnd {
                additional: bytes.len(),
            })
    }
}

/// The refusal a bincode error says: its `LimitExceeded`, also where Burn's own
/// deserializers (its tensor data) pass it on as text in `OtherString`.
fn bincode_refusal(e: &bincode::error::DecodeError) -> Refusal {
    use bincode::error::DecodeError;
    match e {
        DecodeError::LimitExceeded => Refusal::Prefix,
        DecodeError::OtherString(text) if text.starts_with("LimitExceeded") => Refusal::Prefix,
        other => Refusal::of(&other.to_string()),
    }
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

    /// Burn's file recorders are told from others by their type's path, as Burn names a
    /// recorder in a record's metadata.
    #[test]
    fn burns_own_recorders_are_told_from_others() {
        use burn::record::{
            BinGzFileRecorder, HalfPrecisionSettings, JsonGzFileRecorder, NamedMpkFileRecorder,
            NamedMpkGzFileRecorder, PrettyJsonFileRecorder,
        };
        type Full = FullPrecisionSettings;
        type Half = HalfPrecisionSettings;
        assert!(burns_own::<BinFileRecorder<Full>>());
        assert!(burns_own::<BinGzFileRecorder<Half>>());
        assert!(burns_own::<JsonGzFileRecorder<Full>>());
        assert!(burns_own::<PrettyJsonFileRecorder<Full>>());
        assert!(burns_own::<NamedMpkFileRecorder<Half>>());
        assert!(burns_own::<NamedMpkGzFileRecorder<Full>>());
        struct Wrapper<R>(R);
        assert!(!burns_own::<Wrapper<NamedMpkFileRecorder<Full>>>());
        assert!(!burns_own::<burn::record::BinBytesRecorder<Full>>());
    }

    /// In every format Burn's recorders write, at full and half precision, the decode
    /// gives the parameters Burn's own recorder loads from the same file.
    #[test]
    fn every_format_decodes_to_what_burns_recorder_loads() {
        use burn::record::{
            BinGzFileRecorder, FileRecorder, HalfPrecisionSettings, JsonGzFileRecorder,
            NamedMpkFileRecorder, NamedMpkGzFileRecorder, PrettyJsonFileRecorder,
        };

        type Lstm = crate::CudnnCompatibleLstm<B>;
        let device = Default::default();
        let model = crate::CudnnCompatibleLstmConfig::new(3, 4)
            .with_num_layers(2)
            .with_bidirectional(true)
            .init::<B>(&device);
        // Initialised now: a lazy parameter's clones would each draw their own values.
        let _ = model.flat_weights();
        let dir = tempfile::Builder::new()
            .prefix("burn-lstm-decode-")
            .tempdir()
            .unwrap();
        fn values(model: Lstm) -> Vec<f32> {
            model.flat_weights().into_data().to_vec::<f32>().unwrap()
        }
        /// Saves `model` with `recorder`, decodes the file here and loads it with the
        /// recorder: both give the same parameters, which it returns.
        fn decoded_as_burn_loads<R: FileRecorder<B>>(
            recorder: R,
            model: &Lstm,
            dir: &Path,
        ) -> Vec<f32> {
            let device = Default::default();
            let extension = <R as FileRecorder<B>>::file_extension();
            let stem = dir.join(extension.replace('.', "-"));
            model.clone().save_file(&stem, &recorder).unwrap();
            let file = stem.with_extension(extension);
            let ours = decode::<B, CudnnCompatibleLstmRecord<B>, R>(&file)
                .unwrap()
                .unwrap_or_else(|| panic!("{extension}: left to Burn's decoder"));
            let ours = model
                .clone()
                .load_record(Record::from_item(ours.item, &device));
            let burns = model
                .clone()
                .load_record(recorder.load(stem, &device).unwrap());
            assert_eq!(values(ours), values(burns.clone()), "{extension}");
            values(burns)
        }
        type Full = FullPrecisionSettings;
        let (full, dir) = (values(model.clone()), dir.path());
        assert_eq!(
            decoded_as_burn_loads(BinFileRecorder::<Full>::new(), &model, dir),
            full
        );
        assert_eq!(
            decoded_as_burn_loads(BinGzFileRecorder::<Full>::new(), &model, dir),
            full
        );
        assert_eq!(
            decoded_as_burn_loads(PrettyJsonFileRecorder::<Full>::new(), &model, dir),
            full
        );
        assert_eq!(
            decoded_as_burn_loads(JsonGzFileRecorder::<Full>::new(), &model, dir),
            full
        );
        assert_eq!(
            decoded_as_burn_loads(NamedMpkFileRecorder::<Full>::new(), &model, dir),
            full
        );
        let half = decoded_as_burn_loads(
            NamedMpkGzFileRecorder::<HalfPrecisionSettings>::new(),
            &model,
            dir,
        );
        assert_ne!(half, full, "a half-precision record");
    }

    /// What Burn's recorder refuses is left to it: JSON followed by more than whitespace
    /// (its `serde_json::from_reader` refuses that). A bincode record decoded as it is
    /// read gives what the decode from memory gives.
    #[test]
    fn trailing_json_is_left_to_burn_and_a_streamed_decode_matches() {
        use burn::record::{PrettyJsonFileRecorder, Recorder};
        let device = Default::default();
        let model = crate::CudnnCompatibleLstmConfig::new(3, 4).init::<B>(&device);
        let _ = model.flat_weights();
        let dir = tempfile::Builder::new()
            .prefix("burn-lstm-trailing-")
            .tempdir()
            .unwrap();
        let json = PrettyJsonFileRecorder::<FullPrecisionSettings>::new();
        let stem = dir.path().join("model");
        model.clone().save_file(&stem, &json).unwrap();
        let file = stem.with_extension("json");
        let decode_json = || {
            decode::<B, CudnnCompatibleLstmRecord<B>, PrettyJsonFileRecorder<FullPrecisionSettings>>(
                &file,
            )
            .unwrap()
        };
        assert!(decode_json().is_some(), "the intact file");
        let mut text = std::fs::read(&file).unwrap();
        text.extend_from_slice(b"\n\t \n");
        std::fs::write(&file, &text).unwrap();
        assert!(decode_json().is_some(), "whitespace after the record");
        text.extend_from_slice(b"{}");
        std::fs::write(&file, &text).unwrap();
        assert!(decode_json().is_none(), "text after the record");
        let burns: Result<CudnnCompatibleLstmRecord<B>, _> = json.load(stem.clone(), &device);
        assert!(burns.is_err(), "Burn's recorder refuses it too");

        let bin = BinFileRecorder::<FullPrecisionSettings>::new();
        model.clone().save_file(&stem, &bin).unwrap();
        let bytes = std::fs::read(stem.with_extension("bin")).unwrap();
        let from_memory = bincode_slice::<Item, B>(&bytes).ok().unwrap();
        let streamed = bincode_stream::<Item, B, _, { 1 << 24 }>(&bytes[..])
            .ok()
            .unwrap();
        let values = |record: BurnRecord<Item, B>| {
            model
                .clone()
                .load_record(CudnnCompatibleLstmRecord::from_item(record.item, &device))
                .flat_weights()
                .into_data()
        };
        assert_eq!(values(from_memory), values(streamed));
    }

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
        bincode_from_slice::<Item, B, { 1 << 24 }>(&bytes).unwrap();
        assert!(matches!(
            bincode_refusal(&bincode_from_slice::<Item, B, 64>(&bytes).err().unwrap()),
            Refusal::Prefix
        ));
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
        let err = bincode_from_slice::<Item, B, { 1 << 24 }>(&patched)
            .err()
            .unwrap();
        assert!(matches!(bincode_refusal(&err), Refusal::Prefix), "{err:?}");
    }
}
