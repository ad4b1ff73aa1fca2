//! The tensors of a self-describing Burn record (named MessagePack, JSON) checked before
//! Burn decodes it: each tensor's shape against its bytes.
//!
//! Burn 0.21 decodes a tensor's data (`bytes`, `shape`, `dtype`) without comparing the
//! shape with the bytes, then converts it to the recorder's precision, which allocates
//! as many values as the shape claims (`TensorData::convert`). A damaged or hostile
//! record whose tensor is stored in another type (f64 or f16 for an f32 recorder) and
//! claims a shape of 2^40 values makes that allocation fail, which aborts the process
//! (found by `fuzz/`'s `burn_record` target). So the record is first walked here, as
//! the format's own structure (maps, sequences, values), without building anything: a
//! map with `bytes`, `shape` and `dtype` is a tensor's data, and a shape that claims
//! more values than its bytes hold is a named error. Quantized data (`QFloat`) is not
//! converted by Burn and packs several values a byte: it is not checked.

use std::fmt;
use std::io::Read;

use serde::Deserializer;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// Walks the MessagePack record read from `reader` (Burn's named MessagePack
/// recorders); `Err` names the first tensor whose shape claims more values than its
/// bytes hold (its text holds [`CLAIM`]), or says why the walk stopped (bytes that are
/// no MessagePack, nesting past the decoder's limit: Burn's decoder then reports the
/// damage its own way). Byte strings are read as Burn's decoder reads them.
pub(crate) fn check_msgpack(reader: impl Read) -> Result<(), String> {
    let mut decoder = rmp_serde::Deserializer::new(reader);
    Walk.deserialize(&mut decoder).map_err(|e| e.to_string())
}

/// [`check_msgpack`] for Burn's JSON recorders.
pub(crate) fn check_json(reader: impl Read) -> Result<(), String> {
    let mut decoder = serde_json::Deserializer::from_reader(reader);
    Walk.deserialize(&mut decoder).map_err(|e| e.to_string())
}

/// The error a claim past the bytes gives, recognised by the caller.
pub(crate) const CLAIM: &str = "a tensor's shape";

/// One value of the record, walked: maps and sequences are entered, a tensor's data is
/// checked, anything else passed over.
#[derive(Clone, Copy)]
struct Walk;

impl<'de> DeserializeSeed<'de> for Walk {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Burn record")
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
        self.deserialize(deserializer)
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Walk)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut tensor = TensorClaims::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Bytes => tensor.bytes = Some(map.next_value_seed(ByteCount)?),
                Key::Shape => tensor.values = Some(map.next_value_seed(ShapeProduct)?),
                Key::DType => tensor.quantized = Some(map.next_value_seed(IsQuantized)?),
                Key::Other => map.next_value_seed(Walk)?,
            }
        }
        tensor.check().map_err(de::Error::custom)
    }
}

/// What a map's `bytes`, `shape` and `dtype` say, where it has them.
#[derive(Default)]
struct TensorClaims {
    /// How many bytes `bytes` holds.
    bytes: Option<u64>,
    /// How many values `shape` claims (`None` inside: more than `u64` holds).
    values: Option<Option<u64>>,
    /// Whether `dtype` is quantized (`QFloat`).
    quantized: Option<bool>,
}

impl TensorClaims {
    /// An error when this is a tensor's data (all three fields) whose shape claims more
    /// values than its bytes hold: every unquantized type takes at least a byte a value.
    fn check(&self) -> Result<(), String> {
        let (Some(bytes), Some(values), Some(false)) = (self.bytes, self.values, self.quantized)
        else {
            return Ok(());
        };
        match values {
            Some(values) if values <= bytes => Ok(()),
            Some(values) => Err(format!(
                "{CLAIM} claims {values} values, more than its {bytes} bytes hold"
            )),
            None => Err(format!(
                "{CLAIM} claims more than 2^64 values (its bytes: {bytes})"
            )),
        }
    }
}

/// A map key, sorted into the fields of a tensor's data and the rest.
enum Key {
    Bytes,
    Shape,
    DType,
    Other,
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a map key")
            }
            fn visit_str<E>(self, key: &str) -> Result<Key, E> {
                Ok(match key {
                    "bytes" => Key::Bytes,
                    "shape" => Key::Shape,
                    "dtype" => Key::DType,
                    _ => Key::Other,
                })
            }
            fn visit_bytes<E>(self, _: &[u8]) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Key, E> {
                Ok(Key::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Key, E> {
                Ok(Key::Other)
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

/// The length of `bytes`: a byte string (MessagePack) or a sequence of numbers (JSON).
struct ByteCount;

impl<'de> DeserializeSeed<'de> for ByteCount {
    type Value = u64;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<u64, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ByteCount {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tensor's bytes")
    }
    fn visit_bytes<E>(self, bytes: &[u8]) -> Result<u64, E> {
        Ok(bytes.len() as u64)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u64, A::Error> {
        let mut count = 0u64;
        while seq.next_element::<IgnoredAny>()?.is_some() {
            count += 1;
        }
        Ok(count)
    }
}

/// The product of `shape`'s sizes, `None` past `u64`.
struct ShapeProduct;

impl<'de> DeserializeSeed<'de> for ShapeProduct {
    type Value = Option<u64>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<u64>, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for ShapeProduct {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tensor's shape")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Option<u64>, A::Error> {
        let mut product = Some(1u64);
        while let Some(size) = seq.next_element::<u64>()? {
            product = product.and_then(|p| p.checked_mul(size));
        }
        Ok(product)
    }
}

/// Whether `dtype` is quantized: `QFloat` carries its scheme (a map, or a sequence
/// beginning with the name), the other types are a bare name.
struct IsQuantized;

impl<'de> DeserializeSeed<'de> for IsQuantized {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsQuantized {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tensor's type")
    }
    fn visit_str<E>(self, name: &str) -> Result<bool, E> {
        Ok(name == "QFloat")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut quantized = false;
        while let Some(name) = map.next_key::<String>()? {
            quantized |= name == "QFloat";
            map.next_value::<IgnoredAny>()?;
        }
        Ok(quantized)
    }
    // Forms Burn does not write (a variant's index, a sequence): not checked, as if
    // quantized; Burn's decoder reads them its own way.
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record with one tensor's data, in JSON.
    fn json(bytes: &str, shape: &str, dtype: &str) -> String {
        format!(
            r#"{{"item":{{"layers":[{{"w":{{"param":{{"bytes":{bytes},"shape":{shape},"dtype":{dtype}}}}}}}]}},"metadata":{{}}}}"#
        )
    }

    #[test]
    fn shapes_that_claim_more_values_than_the_bytes_hold_are_refused() {
        let ok = |b: &str, s: &str, d: &str| check_json(json(b, s, d).as_bytes());
        // 2 f32 values in 8 bytes, a scalar, an empty tensor.
        assert_eq!(ok("[0,0,128,63,0,0,0,64]", "[2,1]", r#""F32""#), Ok(()));
        assert_eq!(ok("[0,0,128,63]", "[]", r#""F32""#), Ok(()));
        assert_eq!(ok("[]", "[0,7]", r#""F64""#), Ok(()));
        let err = ok("[0,0,0,0,0,0,0,0]", "[1099511627776]", r#""F64""#).unwrap_err();
        assert!(
            err.contains("claims 1099511627776 values, more than its 8 bytes hold"),
            "{err}"
        );
        let err = ok("[0,0,0,0]", "[4294967296,4294967296,2]", r#""F16""#).unwrap_err();
        assert!(err.contains("more than 2^64 values"), "{err}");
        // Quantized data packs values: left to Burn.
        assert_eq!(ok("[0]", "[1024]", r#"{"QFloat":{"value":"Q4F"}}"#), Ok(()));
        // A map that is not a tensor's data, and fields in another order.
        assert_eq!(
            check_json(&br#"{"shape":[99999999999],"other":1}"#[..]),
            Ok(())
        );
        let reordered = r#"{"dtype":"I64","shape":[9,9],"bytes":[1,2,3]}"#;
        assert!(check_json(reordered.as_bytes()).is_err());
    }

    #[test]
    fn message_pack_tensors_are_walked_as_json_ones() {
        /// A byte string, as Burn's tensor bytes are written.
        struct Bin<'a>(&'a [u8]);
        impl serde::Serialize for Bin<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_bytes(self.0)
            }
        }
        #[derive(serde::Serialize)]
        struct Data<'a> {
            bytes: Bin<'a>,
            shape: Vec<u64>,
            dtype: &'a str,
        }
        let record = |shape: Vec<u64>| {
            let layers = vec![std::collections::BTreeMap::from([(
                "weight",
                Data {
                    bytes: Bin(&[0; 16]),
                    shape,
                    dtype: "F64",
                },
            )])];
            let mut out = Vec::new();
            let mut encoder = rmp_serde::Serializer::new(&mut out).with_struct_map();
            serde::Serialize::serialize(&("item", layers), &mut encoder).unwrap();
            out
        };
        assert_eq!(check_msgpack(record(vec![2, 1]).as_slice()), Ok(()));
        let err = check_msgpack(record(vec![1 << 40]).as_slice()).unwrap_err();
        assert!(err.contains("more than its 16 bytes hold"), "{err}");
    }
}
