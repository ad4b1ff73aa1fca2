//! The vocabulary: words and their ids in order of first appearance (`data.py`'s
//! `Dictionary`), saved next to a trained model as `vocab.txt`, one word per line.

use std::collections::HashMap;
use std::path::Path;

use super::error::LmError;

/// Words and their ids, ids in order of first appearance (PyTorch's `Dictionary`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dictionary {
    word_to_id: HashMap<String, u32>,
    words: Vec<String>,
}

impl Dictionary {
    /// An empty dictionary.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `word`, added at the end if it is new (`add_word`).
    pub fn add_word(&mut self, word: &str) -> u32 {
        if let Some(&id) = self.word_to_id.get(word) {
            return id;
        }
        let id = u32::try_from(self.words.len()).expect("fewer than 2^32 words");
        self.words.push(word.to_string());
        self.word_to_id.insert(word.to_string(), id);
        id
    }

    /// The id of `word`, if it is in the vocabulary.
    pub fn id(&self, word: &str) -> Option<u32> {
        self.word_to_id.get(word).copied()
    }

    /// The word of `id`.
    pub fn word(&self, id: u32) -> Option<&str> {
        self.words.get(id as usize).map(String::as_str)
    }

    /// Words in the vocabulary.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether the vocabulary has no word.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The words, in id order.
    pub fn words(&self) -> &[String] {
        &self.words
    }

    /// Writes the words to `path`, one per line in id order (line `i + 1` is word `i`).
    pub fn save(&self, path: &Path) -> Result<(), LmError> {
        let mut text = String::with_capacity(self.words.iter().map(|w| w.len() + 1).sum());
        for word in &self.words {
            text.push_str(word);
            text.push('\n');
        }
        std::fs::write(path, text)
            .map_err(|e| LmError::corrupt("vocabulary", path, format!("cannot be written: {e}")))
    }

    /// Reads a vocabulary written by [`Self::save`], checking that every line is one word
    /// (not empty, no whitespace) and that no word appears twice.
    pub fn load(path: &Path) -> Result<Self, LmError> {
        if !path.is_file() {
            return Err(LmError::Missing {
                what: "vocabulary",
                path: path.to_path_buf(),
            });
        }
        let bytes =
            std::fs::read(path).map_err(|e| LmError::corrupt("vocabulary", path, e.to_string()))?;
        let text = String::from_utf8(bytes).map_err(|e| {
            LmError::corrupt(
                "vocabulary",
                path,
                format!(
                    "expected UTF-8 text, got an invalid byte at offset {}",
                    e.utf8_error().valid_up_to()
                ),
            )
        })?;
        let mut dictionary = Self::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            if line.is_empty() || line.chars().any(is_python_whitespace) {
                return Err(LmError::corrupt(
                    "vocabulary",
                    path,
                    format!("line {number}: expected one word without whitespace, got {line:?}"),
                ));
            }
            let id = dictionary.add_word(line);
            if id as usize != index {
                return Err(LmError::corrupt(
                    "vocabulary",
                    path,
                    format!(
                        "line {number}: expected a new word, got {line:?} again (first on line {})",
                        id + 1
                    ),
                ));
            }
        }
        if dictionary.is_empty() {
            return Err(LmError::corrupt(
                "vocabulary",
                path,
                "expected at least one word, got an empty file",
            ));
        }
        Ok(dictionary)
    }
}

/// Whether Python's `str.split()` splits on `c` (`str.isspace`): Unicode's White_Space
/// plus the information separators U+001C..U+001F.
pub(crate) fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}
