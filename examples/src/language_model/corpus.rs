//! The corpus, read as PyTorch's `data.py` reads it: each line of `train.txt`, `valid.txt`
//! and `test.txt` split on whitespace with `<eos>` appended, one dictionary over the three
//! files in that order of first appearance, and each file as one stream of word ids.
//!
//! Data: `examples/data/wikitext-2/` (WikiText-2, CC BY-SA 3.0; see the README there:
//! WikiText-2's training split was not available, so `train.txt` and `valid.txt` are the
//! first 90 % and the last 10 % of its validation split, and `test.txt` its test split).

use std::path::{Path, PathBuf};

use super::error::LmError;
use super::vocab::{Dictionary, is_python_whitespace};

/// The end-of-line token appended to every line.
pub const EOS: &str = "<eos>";

/// The corpus folder shipped with the repository.
pub fn default_data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/wikitext-2")
}

/// The three splits as word ids, and the dictionary over all three.
#[derive(Clone, Debug)]
pub struct Corpus {
    /// Words and ids, in order of first appearance in train, valid, test.
    pub dictionary: Dictionary,
    /// `train.txt` as one stream of ids.
    pub train: Vec<u32>,
    /// `valid.txt` as one stream of ids.
    pub valid: Vec<u32>,
    /// `test.txt` as one stream of ids.
    pub test: Vec<u32>,
}

impl Corpus {
    /// Reads `dir/train.txt`, `dir/valid.txt` and `dir/test.txt`, adding every new word to
    /// the dictionary (PyTorch's `data.Corpus(path)`).
    pub fn load(dir: &Path) -> Result<Self, LmError> {
        let mut dictionary = Dictionary::new();
        let mut read = |name: &str| -> Result<Vec<u32>, LmError> {
            let path = dir.join(name);
            let text = read_text(&path, "corpus file")?;
            Ok(lines(&text)
                .flat_map(words)
                .map(|w| dictionary.add_word(w))
                .collect())
        };
        let train = read("train.txt")?;
        let valid = read("valid.txt")?;
        let test = read("test.txt")?;
        for (name, ids) in [
            ("train.txt", &train),
            ("valid.txt", &valid),
            ("test.txt", &test),
        ] {
            if ids.is_empty() {
                return Err(LmError::corrupt(
                    "corpus file",
                    dir.join(name),
                    "no words: each of train.txt, valid.txt and test.txt needs text",
                ));
            }
        }
        Ok(Self {
            dictionary,
            train,
            valid,
            test,
        })
    }
}

/// Reads `path` as ids of an existing `dictionary` (a saved model's vocabulary); a word
/// the dictionary lacks is an error naming it, its line and the vocabulary's size.
pub fn encode_file(path: &Path, dictionary: &Dictionary) -> Result<Vec<u32>, LmError> {
    let text = read_text(path, "corpus file")?;
    let mut ids = Vec::new();
    for (index, line) in lines(&text).enumerate() {
        for word in words(line) {
            let id = dictionary.id(word).ok_or_else(|| LmError::Mismatch {
                path: path.to_path_buf(),
                message: format!(
                    "line {}: the word {word:?} is not in the model's vocabulary of {} words \
                     (was the model trained on another corpus?)",
                    index + 1,
                    dictionary.len()
                ),
            })?;
            ids.push(id);
        }
    }
    Ok(ids)
}

/// The words of `line` and the end-of-line token (`line.split() + ['<eos>']`).
pub fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(is_python_whitespace)
        .filter(|w| !w.is_empty())
        .chain(std::iter::once(EOS))
}

/// The lines of `text` as Python's text-mode file iteration gives them (`\n`, `\r\n` and
/// `\r` end a line; no line after a final line end).
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = rest.find(['\n', '\r']).unwrap_or(rest.len());
        let line = &rest[..end];
        let skip = match rest.as_bytes().get(end) {
            Some(b'\r') if rest.as_bytes().get(end + 1) == Some(&b'\n') => 2,
            Some(_) => 1,
            None => 0,
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

/// The UTF-8 text of `path` (`what` names the file in errors).
fn read_text(path: &Path, what: &'static str) -> Result<String, LmError> {
    if !path.is_file() {
        return Err(LmError::Missing {
            what,
            path: path.to_path_buf(),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| LmError::corrupt(what, path, e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| {
        LmError::corrupt(
            what,
            path,
            format!(
                "expected UTF-8 text, got an invalid byte at offset {}",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}
