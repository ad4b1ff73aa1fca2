//! A tensor's shape checked against its bytes inside a typed decode: for bincode
//! records, whose structure only the record's type describes (`record_guard.rs`).
//!
//! [`Watched`] wraps any serde deserializer and passes every call through, wrapping in
//! turn every visitor, sequence, map, enum and nested deserializer it hands on, so the
//! whole record is read through it. Where the record's type reads a tensor's data
//! (Burn's `TensorData`: a struct of `bytes`, `shape` and `dtype`), it counts the bytes
//! and multiplies the shape as they go by, and when the struct is read, before Burn
//! converts it (which allocates as many values as the shape claims), a shape past
//! [`VALUES_PER_BYTE`] values a byte is an error.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// The most values a byte of a tensor's data may hold: 8 (quantized data packs up to
/// that many; every other type takes at least a byte a value). The type itself is not
/// read, so this bounds the conversion's allocation at 64 times the tensor's bytes.
pub(crate) const VALUES_PER_BYTE: u64 = 8;

/// The error a claim past the bytes gives, recognised by the caller.
pub(crate) const CLAIM: &str = "a tensor's shape";

/// Which field of a tensor's data the decode is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Elsewhere,
    Bytes,
    Shape,
}

/// What the tensor's data being read has shown so far.
pub(crate) struct Claims {
    field: Cell<Field>,
    bytes: Cell<Option<u64>>,
    /// The shape's product so far (`Some(None)`: past `u64`); `None` before the shape.
    values: Cell<Option<Option<u64>>>,
}

impl Claims {
    pub(crate) fn new() -> Self {
        Self {
            field: Cell::new(Field::Elsewhere),
            bytes: Cell::new(None),
            values: Cell::new(None),
        }
    }

    /// An error when the tensor's data just read claims more values than its bytes hold.
    fn check(&self) -> Result<(), String> {
        self.field.set(Field::Elsewhere);
        let (Some(bytes), Some(values)) = (self.bytes.take(), self.values.take()) else {
            return Ok(());
        };
        let holds = bytes.saturating_mul(VALUES_PER_BYTE);
        match values {
            Some(values) if values <= holds => Ok(()),
            Some(values) => Err(format!(
                "{CLAIM} claims {values} values, more than its {bytes} bytes hold"
            )),
            None => Err(format!(
                "{CLAIM} claims more than 2^64 values (its bytes: {bytes})"
            )),
        }
    }

    fn saw_bytes(&self, len: usize) {
        if self.field.get() == Field::Bytes {
            self.bytes.set(Some(len as u64));
        }
    }

    fn saw_size(&self, size: u64) {
        if self.field.get() == Field::Shape {
            let product = self.values.get().unwrap_or(Some(1));
            self.values
                .set(Some(product.and_then(|p| p.checked_mul(size))));
        }
    }
}

/// A deserializer read through, watching for tensors' data.
pub(crate) struct Watched<'c, D> {
    inner: D,
    claims: &'c Claims,
}

impl<'c, D> Watched<'c, D> {
    pub(crate) fn new(inner: D, claims: &'c Claims) -> Self {
        Self { inner, claims }
    }
}

/// Whether a struct is Burn's tensor data.
fn is_tensor_data(name: &str, fields: &[&str]) -> bool {
    name == "TensorData" && fields == ["bytes", "shape", "dtype"]
}

macro_rules! pass_deserialize {
    ($($method:ident),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method(Watch { inner: visitor, claims: self.claims })
        }
    )*};
}

impl<'de, 'c, D: Deserializer<'de>> Deserializer<'de> for Watched<'c, D> {
    type Error = D::Error;

    pass_deserialize!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = Watch::new(visitor, self.claims);
        self.inner.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = Watch::new(visitor, self.claims);
        self.inner.deserialize_newtype_struct(name, visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = Watch::new(visitor, self.claims);
        self.inner.deserialize_tuple(len, visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = Watch::new(visitor, self.claims);
        self.inner.deserialize_tuple_struct(name, len, visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        if !is_tensor_data(name, fields) {
            let visitor = Watch::new(visitor, self.claims);
            return self.inner.deserialize_struct(name, fields, visitor);
        }
        let visitor = TensorData {
            inner: visitor,
            claims: self.claims,
        };
        let value = self.inner.deserialize_struct(name, fields, visitor)?;
        self.claims.check().map_err(de::Error::custom)?;
        Ok(value)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        let visitor = Watch::new(visitor, self.claims);
        self.inner.deserialize_enum(name, variants, visitor)
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor whose values are passed on, and whose nested reads are watched too.
struct Watch<'c, V> {
    inner: V,
    claims: &'c Claims,
}

impl<'c, V> Watch<'c, V> {
    fn new(inner: V, claims: &'c Claims) -> Self {
        Self { inner, claims }
    }
}

macro_rules! pass_visit {
    ($($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.inner.$method(v)
        }
    )*};
}

impl<'de, 'c, V: Visitor<'de>> Visitor<'de> for Watch<'c, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    pass_visit!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
        visit_str: &str,
        visit_borrowed_str: &'de str,
        visit_string: String,
    );

    fn visit_u8<E: de::Error>(self, v: u8) -> Result<V::Value, E> {
        self.claims.saw_size(v.into());
        self.inner.visit_u8(v)
    }
    fn visit_u16<E: de::Error>(self, v: u16) -> Result<V::Value, E> {
        self.claims.saw_size(v.into());
        self.inner.visit_u16(v)
    }
    fn visit_u32<E: de::Error>(self, v: u32) -> Result<V::Value, E> {
        self.claims.saw_size(v.into());
        self.inner.visit_u32(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<V::Value, E> {
        self.claims.saw_size(v);
        self.inner.visit_u64(v)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.len());
        self.inner.visit_bytes(v)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.len());
        self.inner.visit_borrowed_bytes(v)
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.len());
        self.inner.visit_byte_buf(v)
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Watched::new(d, self.claims))
    }
    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner
            .visit_newtype_struct(Watched::new(d, self.claims))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(Seq {
            inner: seq,
            claims: self.claims,
            fields: None,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Map {
            inner: map,
            claims: self.claims,
        })
    }
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Enum {
            inner: data,
            claims: self.claims,
        })
    }
}

/// The visitor of a tensor's data: its fields, read in order (bincode reads a struct
/// as a sequence), each marked in the claims while it is read.
struct TensorData<'c, V> {
    inner: V,
    claims: &'c Claims,
}

impl<'de, 'c, V: Visitor<'de>> Visitor<'de> for TensorData<'c, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        self.inner.visit_seq(Seq {
            inner: seq,
            claims: self.claims,
            fields: Some(0),
        })
    }
    // A self-describing format's map: passed on unwatched (no field is marked, so the
    // check finds nothing to compare).
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Map {
            inner: map,
            claims: self.claims,
        })
    }
}

/// A sequence whose elements are watched; inside a tensor's data (`fields`: the index
/// of the next field), each element marks its field while it is read.
struct Seq<'c, A> {
    inner: A,
    claims: &'c Claims,
    fields: Option<usize>,
}

impl<'de, 'c, A: SeqAccess<'de>> SeqAccess<'de> for Seq<'c, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        let seed = Seed {
            inner: seed,
            claims: self.claims,
        };
        let Some(index) = self.fields else {
            return self.inner.next_element_seed(seed);
        };
        let field = match index {
            0 => Field::Bytes,
            1 => Field::Shape,
            _ => Field::Elsewhere,
        };
        if field == Field::Shape {
            self.claims.values.set(Some(Some(1)));
        }
        self.claims.field.set(field);
        let element = self.inner.next_element_seed(seed);
        self.claims.field.set(Field::Elsewhere);
        self.fields = Some(index + 1);
        element
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map whose keys and values are watched.
struct Map<'c, A> {
    inner: A,
    claims: &'c Claims,
}

impl<'de, 'c, A: MapAccess<'de>> MapAccess<'de> for Map<'c, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.inner.next_key_seed(Seed {
            inner: seed,
            claims: self.claims,
        })
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(Seed {
            inner: seed,
            claims: self.claims,
        })
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An enum whose variant's contents are watched.
struct Enum<'c, A> {
    inner: A,
    claims: &'c Claims,
}

impl<'de, 'c, A: EnumAccess<'de>> EnumAccess<'de> for Enum<'c, A> {
    type Error = A::Error;
    type Variant = Variant<'c, A::Variant>;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let (value, variant) = self.inner.variant_seed(seed)?;
        let variant = Variant {
            inner: variant,
            claims: self.claims,
        };
        Ok((value, variant))
    }
}

/// A variant whose contents are watched.
struct Variant<'c, A> {
    inner: A,
    claims: &'c Claims,
}

impl<'de, 'c, A: VariantAccess<'de>> VariantAccess<'de> for Variant<'c, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.newtype_variant_seed(Seed {
            inner: seed,
            claims: self.claims,
        })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.inner
            .tuple_variant(len, Watch::new(visitor, self.claims))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.inner
            .struct_variant(fields, Watch::new(visitor, self.claims))
    }
}

/// A seed whose value is read through a watched deserializer.
struct Seed<'c, T> {
    inner: T,
    claims: &'c Claims,
}

impl<'de, 'c, T: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<'c, T> {
    type Value = T::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<T::Value, D::Error> {
        self.inner.deserialize(Watched::new(d, self.claims))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData as BurnTensorData;
    use serde::Deserialize;

    /// `data` encoded as Burn's bincode recorders encode it, decoded back through
    /// [`Watched`].
    fn round_trip(data: &BurnTensorData) -> Result<BurnTensorData, String> {
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(data, config).unwrap();
        decode(&bytes)
    }

    fn decode(bytes: &[u8]) -> Result<BurnTensorData, String> {
        let config = bincode::config::standard();
        let mut decoder = bincode::serde::BorrowedSerdeDecoder::from_slice(bytes, config, ());
        let claims = Claims::new();
        BurnTensorData::deserialize(Watched::new(decoder.as_deserializer(), &claims))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn tensor_data_is_read_through_unchanged() {
        for data in [
            BurnTensorData::new(vec![1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], [2, 3]),
            BurnTensorData::new(vec![1.5f64], [1]),
            BurnTensorData::new(Vec::<f32>::new(), [0, 4]),
            BurnTensorData::new(vec![3i64, 4], [2]),
        ] {
            assert_eq!(round_trip(&data).unwrap(), data);
        }
    }

    #[test]
    fn shapes_past_eight_values_a_byte_are_refused() {
        // 2 f64 values (16 bytes) relabelled as 128 values: the most 16 bytes may hold.
        let mut data = BurnTensorData::new(vec![1.0f64, 2.0], [2]);
        data.shape = vec![128].into();
        assert!(round_trip(&data).is_ok());
        data.shape = vec![129].into();
        let err = round_trip(&data).unwrap_err();
        assert!(
            err.contains("a tensor's shape claims 129 values, more than its 16 bytes hold"),
            "{err}"
        );
        data.shape = vec![1usize << 40, 1 << 40].into();
        let err = round_trip(&data).unwrap_err();
        assert!(err.contains("more than 2^64 values"), "{err}");
    }
}
