//! Reads of compressed files bounded by what their bytes can hold: no header's claim
//! makes a reader reserve or inflate more than deflate could have made of the file.
//! Keras archives, HDF5 datasets and `torch.save` archives read through it.

use std::io::{Read, Seek};

use zip::ZipArchive;

/// Deflate's highest ratio: `n` deflated bytes inflate to at most `1032·n` bytes.
const DEFLATE_MAX_RATIO: u64 = 1032;

/// The most bytes that `len` deflated bytes inflate to.
pub(crate) fn inflated_bound(len: u64) -> u64 {
    len.saturating_mul(DEFLATE_MAX_RATIO)
}

/// Whether `bytes` start as a zip archive does (a local file header, or the end record
/// of an empty archive).
pub(crate) fn is_zip(bytes: &[u8]) -> bool {
    bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
}

/// Most bytes reserved ahead of a read, whatever the bound (1 GiB): a larger entry
/// grows its buffer as its bytes arrive.
const MAX_RESERVE: u64 = 1 << 30;

/// Reads the whole entry `name` of `archive` (to its end, where the zip reader checks
/// its CRC: a damaged byte is an error, not another value), refusing more than
/// `bound` bytes (a header's size claim reserves nothing beyond that).
pub(crate) fn read_zip_entry<R: Read + Seek>(
    archive: &mut ZipArchive<R>,
    name: &str,
    bound: u64,
) -> Result<Vec<u8>, String> {
    let entry = archive
        .by_name(name)
        .map_err(|e| format!("no entry '{name}' in the archive ({e})"))?;
    if entry.size() > bound {
        return Err(format!(
            "'{name}' claims {} bytes, more than the {bound} it may have",
            entry.size()
        ));
    }
    let reserve = entry.size().min(bound).min(MAX_RESERVE);
    let mut out = Vec::with_capacity(usize::try_from(reserve).unwrap_or(0));
    entry
        .take(bound.saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|e| format!("reading '{name}': {e}"))?;
    if out.len() as u64 > bound {
        return Err(format!("'{name}' inflates past {bound} bytes"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::{Cursor, Write};

    use super::*;

    fn archive(entries: &[(&str, &[u8])], method: zip::CompressionMethod) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in entries {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    #[test]
    fn entries_read_whole_within_their_bound() {
        let zeros = vec![0u8; 100_000];
        let bytes = archive(
            &[("a", b"hello"), ("zeros", &zeros)],
            zip::CompressionMethod::Deflated,
        );
        assert!(is_zip(&bytes) && !is_zip(b"\x89HDF"));
        let len = bytes.len() as u64;
        assert!(len < 2_000, "{len} bytes");
        let mut zip = ZipArchive::new(Cursor::new(bytes)).unwrap();
        assert_eq!(read_zip_entry(&mut zip, "a", 5).unwrap(), b"hello");
        assert_eq!(
            read_zip_entry(&mut zip, "zeros", inflated_bound(len)).unwrap(),
            zeros
        );
        let e = read_zip_entry(&mut zip, "a", 4).unwrap_err();
        assert_eq!(e, "'a' claims 5 bytes, more than the 4 it may have");
        let e = read_zip_entry(&mut zip, "b", 4).unwrap_err();
        assert!(e.starts_with("no entry 'b' in the archive"), "{e}");
    }

    #[test]
    fn the_deflate_bound_saturates() {
        assert_eq!(inflated_bound(2), 2064);
        assert_eq!(inflated_bound(u64::MAX), u64::MAX);
    }
}
