//! The tensors of a Burn record file, by path and shape, read without the types of the
//! module it was saved from: what a checked loader lists when Burn's decoder rejects a
//! file as the record of another module (`missing field ...`), so that the error names
//! the tensors that differ instead of the decoder's message.
//!
//! [`FileTensors`] deserialises a record item of a self-describing format (named
//! MessagePack, JSON) as a tree: map keys and sequence indices make the path (as
//! burn-store names a module's tensors, and as `record_paths.rs` walks a typed item), a
//! map with `bytes` and `shape` is a tensor (Burn's `TensorData`; its bytes are skipped),
//! and a `param` right after a string `id` is a `Param`'s value (`ParamSerde`,
//! transparent). Bincode records do not describe themselves: deserialising them this way
//! fails, and the loader keeps the decoder's message.
//!
//! The file is the user's input, read after the decoder refused it: every value is
//! visited at most [`MAX_DEPTH`] deep (skipped ones too, so no stack runs out), keys,
//! tensors, their paths and the maps and sequences visited are bounded, and past a
//! bound the listing fails (the loader then keeps the decoder's message).

use core::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::module::record_paths::RecordTensor;

/// Deepest nesting of maps and sequences read (a module tree is far shallower).
const MAX_DEPTH: usize = 64;
/// Longest key read (a field name or a variant).
const MAX_KEY_BYTES: usize = 1 << 10;
/// Most tensors listed.
const MAX_TENSORS: usize = 1 << 16;
/// Most bytes of all listed paths together.
const MAX_PATH_BYTES: usize = 1 << 24;
/// Most maps and sequences visited (skipped ones too).
const MAX_NESTED: usize = 1 << 22;

/// Every tensor of a record item, in the order the file holds them.
#[derive(Debug, Default)]
pub(crate) struct FileTensors(pub Vec<RecordTensor>);

impl<'de> Deserialize<'de> for FileTensors {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut listing = Listing::default();
        Node {
            listing: &mut listing,
            depth: 0,
        }
        .deserialize(deserializer)?;
        Ok(Self(listing.found))
    }
}

/// What the walk has found so far, and what it has spent of its bounds.
#[derive(Default)]
struct Listing {
    path: Vec<String>,
    found: Vec<RecordTensor>,
    path_bytes: usize,
    nested: usize,
}

impl Listing {
    /// Counts one more map or sequence at `depth`.
    fn enter(&mut self, depth: usize) -> Result<(), String> {
        self.nested += 1;
        if depth >= MAX_DEPTH {
            return Err(format!("a record nested deeper than {MAX_DEPTH} levels"));
        }
        if self.nested > MAX_NESTED {
            return Err(format!(
                "a record of more than {MAX_NESTED} maps and sequences"
            ));
        }
        Ok(())
    }

    /// Lists the tensor of `shape` at the current path.
    fn tensor(&mut self, shape: Vec<usize>) -> Result<(), String> {
        let path = self.path.join(".");
        self.path_bytes += path.len();
        if self.found.len() >= MAX_TENSORS || self.path_bytes > MAX_PATH_BYTES {
            return Err(format!(
                "a record of more than {MAX_TENSORS} tensors or {MAX_PATH_BYTES} bytes of names"
            ));
        }
        self.found.push(RecordTensor { path, shape });
        Ok(())
    }
}

/// One value of the tree at the listing's path, `depth` maps and sequences deep. Its
/// value: whether it was a string (a `Param`'s `id` is).
struct Node<'a> {
    listing: &'a mut Listing,
    depth: usize,
}

impl Node<'_> {
    /// The node of a value inside this one, under `segment` (`None`: the same path).
    fn child(&mut self, segment: Option<String>) -> Node<'_> {
        self.listing.path.extend(segment);
        Node {
            listing: self.listing,
            depth: self.depth + 1,
        }
    }

    /// A value inside this one, passed over.
    fn skip(&mut self) -> Skip<'_> {
        Skip {
            listing: self.listing,
            depth: self.depth + 1,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Burn record item")
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(true)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_some<D: Deserializer<'de>>(mut self, deserializer: D) -> Result<bool, D::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        deserializer.deserialize_any(self.child(None))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        mut self,
        deserializer: D,
    ) -> Result<bool, D::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        deserializer.deserialize_any(self.child(None))
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<bool, A::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        for index in 0usize.. {
            let more = seq
                .next_element_seed(self.child(Some(index.to_string())))?
                .is_some();
            self.listing.path.pop();
            if !more {
                break;
            }
        }
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<bool, A::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        let (mut shape, mut bytes, mut after_id) = (None, false, false);
        while let Some(Key(key)) = map.next_key()? {
            let was_string = match key.as_str() {
                "shape" => {
                    shape = match map.next_value_seed(self.skip())? {
                        Skipped::Sizes(sizes) => sizes,
                        _ => None,
                    };
                    false
                }
                "bytes" => {
                    map.next_value_seed(self.skip())?;
                    bytes = true;
                    false
                }
                "param" if after_id => map.next_value_seed(self.child(None))?,
                _ => {
                    let was_string = map.next_value_seed(self.child(Some(key.clone())))?;
                    self.listing.path.pop();
                    was_string
                }
            };
            after_id = key == "id" && was_string;
        }
        if let (Some(shape), true) = (shape, bytes) {
            self.listing.tensor(shape).map_err(de::Error::custom)?;
        }
        Ok(false)
    }
}

/// A map key: a string, or an integer as its digits; at most [`MAX_KEY_BYTES`].
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(
                    f,
                    "a string or integer key of at most {MAX_KEY_BYTES} bytes"
                )
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<Key, E> {
                if key.len() > MAX_KEY_BYTES {
                    return Err(E::custom(format!("a key of {} bytes", key.len())));
                }
                Ok(Key(key.to_owned()))
            }

            fn visit_u64<E>(self, key: u64) -> Result<Key, E> {
                Ok(Key(key.to_string()))
            }

            fn visit_i64<E>(self, key: i64) -> Result<Key, E> {
                Ok(Key(key.to_string()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// A value passed over (a tensor's bytes and shape, its dtype), its maps and sequences
/// counted against the listing's bounds like the tree's. Its value: what a shape needs
/// to know of it.
struct Skip<'a> {
    listing: &'a mut Listing,
    depth: usize,
}

/// What [`Skip`] saw.
enum Skipped {
    /// A non-negative integer.
    Size(usize),
    /// A sequence, with its entries when each is a size (at most [`MAX_DEPTH`]).
    Sizes(Option<Vec<usize>>),
    /// Anything else.
    Other,
}

impl Skip<'_> {
    fn inner(&mut self) -> Skip<'_> {
        Skip {
            listing: self.listing,
            depth: self.depth + 1,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = Skipped;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Skipped, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = Skipped;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_i64<E>(self, value: i64) -> Result<Skipped, E> {
        Ok(usize::try_from(value).map_or(Skipped::Other, Skipped::Size))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Skipped, E> {
        Ok(usize::try_from(value).map_or(Skipped::Other, Skipped::Size))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_unit<E>(self) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_none<E>(self) -> Result<Skipped, E> {
        Ok(Skipped::Other)
    }

    fn visit_some<D: Deserializer<'de>>(mut self, deserializer: D) -> Result<Skipped, D::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        deserializer
            .deserialize_any(self.inner())
            .map(|_| Skipped::Other)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        mut self,
        deserializer: D,
    ) -> Result<Skipped, D::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        deserializer
            .deserialize_any(self.inner())
            .map(|_| Skipped::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Skipped, A::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        let mut sizes = Some(Vec::new());
        while let Some(entry) = seq.next_element_seed(self.inner())? {
            match (entry, sizes.as_mut()) {
                (Skipped::Size(size), Some(so_far)) if so_far.len() < MAX_DEPTH => {
                    so_far.push(size)
                }
                _ => sizes = None,
            }
        }
        Ok(Skipped::Sizes(sizes))
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Skipped, A::Error> {
        self.listing.enter(self.depth).map_err(de::Error::custom)?;
        while map.next_key_seed(self.inner())?.is_some() {
            map.next_value_seed(self.inner())?;
        }
        Ok(Skipped::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(json: &str) -> Result<Vec<(String, Vec<usize>)>, String> {
        serde_json::from_str::<FileTensors>(json)
            .map(|t| t.0.into_iter().map(|t| (t.path, t.shape)).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn paths_follow_keys_and_indices_through_params() {
        let tensor =
            |shape: &str| format!(r#"{{"bytes":[0,0,0,0],"shape":{shape},"dtype":"F32"}}"#);
        let json = format!(
            r#"{{"lstm":{{"layers":[{{"forward":{{"weight_ih":{{"id":"a","param":{w}}},"bias_ih":null}},"reverse":null}}]}},"head":{{"weight":{{"id":"b","param":{h}}},"shape":"not a tensor"}}}}"#,
            w = tensor("[8,4]"),
            h = tensor("[3,2]"),
        );
        assert_eq!(
            listed(&json).unwrap(),
            [
                ("lstm.layers.0.forward.weight_ih".to_string(), vec![8, 4]),
                ("head.weight".to_string(), vec![3, 2]),
            ]
        );
    }

    #[test]
    fn a_param_field_not_after_an_id_is_a_path_segment() {
        let json = r#"{"param":{"bytes":[],"shape":[2],"dtype":"F32"}}"#;
        assert_eq!(listed(json).unwrap(), [("param".to_string(), vec![2])]);
    }

    #[test]
    fn a_param_after_an_id_that_is_no_string_is_a_path_segment() {
        let json = r#"{"id":{"x":1},"param":{"bytes":[],"shape":[2],"dtype":"F32"}}"#;
        assert_eq!(listed(json).unwrap(), [("param".to_string(), vec![2])]);
    }

    #[test]
    fn values_passed_over_count_against_the_depth_bound() {
        // serde_json's own limit is 128 levels: these are the walk's.
        let deep = |levels: usize| format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        for key in ["bytes", "shape", "dtype"] {
            let json = format!(r#"{{"t":{{"{key}":{}}}}}"#, deep(100));
            let error = listed(&json).unwrap_err();
            assert!(error.contains("nested deeper"), "{key}: {error}");
        }
    }

    #[test]
    fn long_keys_and_too_many_tensors_are_errors() {
        let key = "k".repeat(MAX_KEY_BYTES + 1);
        let error = listed(&format!(r#"{{"{key}":1}}"#)).unwrap_err();
        assert!(error.contains("a key of"), "{error}");
        let tensor = r#"{"bytes":[],"shape":[1]}"#;
        let many = |n: usize| format!("[{}]", vec![tensor; n].join(","));
        assert_eq!(listed(&many(MAX_TENSORS)).unwrap().len(), MAX_TENSORS);
        let error = listed(&many(MAX_TENSORS + 1)).unwrap_err();
        assert!(error.contains("tensors"), "{error}");
    }

    #[test]
    fn nesting_past_the_bound_is_an_error() {
        let json = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        let error = listed(&json).unwrap_err();
        assert!(error.contains("nested deeper"), "{error}");
        let json = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert_eq!(listed(&json).unwrap(), []);
    }
}
