//! The tensors of a Burn record file, by path and shape, read without the types of the
//! module it was saved from: what a checked loader lists when Burn's decoder rejects a
//! file as the record of another module (`missing field ...`), so that the error names
//! the tensors that differ instead of the decoder's message.
//!
//! [`FileTensors`] deserialises a record item of a self-describing format (named
//! MessagePack, JSON) as a tree: map keys and sequence indices make the path (as
//! burn-store names a module's tensors, and as `record_paths.rs` walks a typed item), a
//! map with `bytes` and `shape` is a tensor (Burn's `TensorData`; its bytes are skipped),
//! and a `param` right after an `id` is a `Param`'s value (`ParamSerde`, transparent).
//! Bincode records do not describe themselves: deserialising them this way fails, and
//! the loader keeps the decoder's message.

use core::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::module::record_paths::RecordTensor;

/// Deepest nesting of maps and sequences read (a module tree is far shallower; a file
/// nested deeper is damaged or hostile).
const MAX_DEPTH: usize = 64;

/// Every tensor of a record item, in the order the file holds them.
#[derive(Debug, Default)]
pub(crate) struct FileTensors(pub Vec<RecordTensor>);

impl<'de> Deserialize<'de> for FileTensors {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let (mut path, mut found) = (Vec::new(), Vec::new());
        Node {
            path: &mut path,
            found: &mut found,
            depth: 0,
        }
        .deserialize(deserializer)?;
        Ok(Self(found))
    }
}

/// One value of the tree at `path`; the tensors under it go to `found`.
struct Node<'a> {
    path: &'a mut Vec<String>,
    found: &'a mut Vec<RecordTensor>,
    depth: usize,
}

impl Node<'_> {
    /// The node of the value under `segment` (`None`: the same path).
    fn child(&mut self, segment: Option<String>) -> Result<Node<'_>, String> {
        if self.depth >= MAX_DEPTH {
            return Err(format!("a record nested deeper than {MAX_DEPTH} levels"));
        }
        self.path.extend(segment);
        Ok(Node {
            path: self.path,
            found: self.found,
            depth: self.depth + 1,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Burn record item")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        for index in 0.. {
            let node = self
                .child(Some(index.to_string()))
                .map_err(de::Error::custom)?;
            let more = seq.next_element_seed(node)?.is_some();
            self.path.pop();
            if !more {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let (mut shape, mut bytes, mut after_id) = (None, false, false);
        while let Some(Key(key)) = map.next_key()? {
            match key.as_str() {
                "shape" => shape = map.next_value::<Shape>()?.0,
                "bytes" => bytes = map.next_value::<IgnoredAny>().map(|_| true)?,
                "param" if after_id => {
                    let node = self.child(None).map_err(de::Error::custom)?;
                    map.next_value_seed(node)?;
                }
                _ => {
                    let node = self.child(Some(key.clone())).map_err(de::Error::custom)?;
                    map.next_value_seed(node)?;
                    self.path.pop();
                }
            }
            after_id = key == "id";
        }
        if let (Some(shape), true) = (shape, bytes) {
            self.found.push(RecordTensor {
                path: self.path.join("."),
                shape,
            });
        }
        Ok(())
    }
}

/// A map key: a string, or an integer as its digits.
struct Key(String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or integer key")
            }

            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
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

/// A `shape` entry: the dims when it is a sequence of sizes, `None` for anything else
/// (a module may have a field named `shape`).
struct Shape(Option<Vec<usize>>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ShapeVisitor;
        impl<'de> Visitor<'de> for ShapeVisitor {
            type Value = Shape;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a tensor shape")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Shape, A::Error> {
                let mut dims = Vec::new();
                while let Some(dim) = seq.next_element::<IgnoredOrSize>()? {
                    match dim.0 {
                        Some(dim) if dims.len() < MAX_DEPTH => dims.push(dim),
                        _ => {
                            while seq.next_element::<IgnoredAny>()?.is_some() {}
                            return Ok(Shape(None));
                        }
                    }
                }
                Ok(Shape(Some(dims)))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Shape, A::Error> {
                IgnoredAny.visit_map(map).map(|_| Shape(None))
            }

            fn visit_str<E>(self, _: &str) -> Result<Shape, E> {
                Ok(Shape(None))
            }

            fn visit_u64<E>(self, _: u64) -> Result<Shape, E> {
                Ok(Shape(None))
            }

            fn visit_i64<E>(self, _: i64) -> Result<Shape, E> {
                Ok(Shape(None))
            }

            fn visit_f64<E>(self, _: f64) -> Result<Shape, E> {
                Ok(Shape(None))
            }

            fn visit_unit<E>(self) -> Result<Shape, E> {
                Ok(Shape(None))
            }
        }
        deserializer.deserialize_any(ShapeVisitor)
    }
}

/// One entry of a shape: its size when it is a non-negative integer.
struct IgnoredOrSize(Option<usize>);

impl<'de> Deserialize<'de> for IgnoredOrSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl<'de> Visitor<'de> for SizeVisitor {
            type Value = IgnoredOrSize;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size")
            }

            fn visit_u64<E>(self, size: u64) -> Result<IgnoredOrSize, E> {
                Ok(IgnoredOrSize(usize::try_from(size).ok()))
            }

            fn visit_i64<E>(self, size: i64) -> Result<IgnoredOrSize, E> {
                Ok(IgnoredOrSize(usize::try_from(size).ok()))
            }

            fn visit_f64<E>(self, _: f64) -> Result<IgnoredOrSize, E> {
                Ok(IgnoredOrSize(None))
            }

            fn visit_str<E>(self, _: &str) -> Result<IgnoredOrSize, E> {
                Ok(IgnoredOrSize(None))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<IgnoredOrSize, A::Error> {
                IgnoredAny.visit_seq(seq).map(|_| IgnoredOrSize(None))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<IgnoredOrSize, A::Error> {
                IgnoredAny.visit_map(map).map(|_| IgnoredOrSize(None))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
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
    fn nesting_past_the_bound_is_an_error() {
        let json = format!("{}{}", "[".repeat(MAX_DEPTH + 2), "]".repeat(MAX_DEPTH + 2));
        let error = listed(&json).unwrap_err();
        assert!(error.contains("nested deeper"), "{error}");
        let json = format!("{}{}", "[".repeat(MAX_DEPTH - 1), "]".repeat(MAX_DEPTH - 1));
        assert_eq!(listed(&json).unwrap(), []);
    }
}
