//! A tensor's shape checked against its bytes inside a typed decode of a Burn record, in
//! every Burn file format (`record_guard.rs`).
//!
//! [`Watched`] wraps any serde deserializer and passes every call through, wrapping in
//! turn every visitor, sequence, map, enum and nested deserializer it hands on, so the
//! whole record is read through it, as Burn's decoder reads it. Where the record's type
//! reads a tensor's data (Burn's `TensorData`: a struct of `bytes`, `shape` and `dtype`,
//! whether the format gives its fields in order, by name or by index), it counts the
//! bytes, multiplies the shape and reads which type the data is as they go by; when the
//! struct is read, before Burn converts it (which allocates as many values as the shape
//! claims), a shape that claims more values than the bytes hold is an error: more than
//! one a byte, or [`VALUES_PER_BYTE`] for quantized data (which packs values) and data
//! whose type was not seen.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// The most values a byte of quantized data may hold (its densest packing), and of data
/// whose type was not seen. Every other type takes at least a byte a value.
pub(crate) const VALUES_PER_BYTE: u64 = 8;

/// The start of the error a claim past the bytes gives, recognised by the caller in the
/// decoder's error (no serde message of a record's own types holds it).
pub(crate) const CLAIM: &str = "a tensor's shape claims";

/// The index of `QFloat` among Burn 0.21's `DType` variants, where a format writes a
/// variant by index (bincode); checked by a test.
const QFLOAT_INDEX: u64 = 14;

/// Which field of a tensor's data the decode is in.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Elsewhere,
    Bytes,
    Shape,
    DType,
}

/// The field a tensor data's key names.
fn field_named(name: &[u8]) -> Field {
    match name {
        b"bytes" => Field::Bytes,
        b"shape" => Field::Shape,
        b"dtype" => Field::DType,
        _ => Field::Elsewhere,
    }
}

/// The field at `index` of a tensor's data.
fn field_at(index: u64) -> Field {
    match index {
        0 => Field::Bytes,
        1 => Field::Shape,
        2 => Field::DType,
        _ => Field::Elsewhere,
    }
}

/// Which identifier the decode is reading, if any: a tensor data's key, or the variant
/// of its `dtype`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Identifier {
    None,
    Key,
    Variant,
}

/// What the tensor's data being read has shown so far.
pub(crate) struct Claims {
    field: Cell<Field>,
    /// The field the key just read names.
    keyed: Cell<Field>,
    identifier: Cell<Identifier>,
    bytes: Cell<Option<u64>>,
    /// The shape's product so far (`Some(None)`: past `u64`); `None` before the shape.
    values: Cell<Option<Option<u64>>>,
    /// Whether the data is quantized, from its `dtype`'s (outermost) variant.
    quantized: Cell<Option<bool>>,
}

impl Claims {
    pub(crate) fn new() -> Self {
        Self {
            field: Cell::new(Field::Elsewhere),
            keyed: Cell::new(Field::Elsewhere),
            identifier: Cell::new(Identifier::None),
            bytes: Cell::new(None),
            values: Cell::new(None),
            quantized: Cell::new(None),
        }
    }

    /// Marks `field` as the one being read, until [`Self::leave`].
    fn enter(&self, field: Field) {
        if field == Field::Shape {
            self.values.set(Some(Some(1)));
        }
        self.field.set(field);
    }

    fn leave(&self) {
        self.field.set(Field::Elsewhere);
    }

    /// An error when the tensor's data just read claims more values than its bytes hold.
    fn check(&self) -> Result<(), String> {
        self.leave();
        let quantized = self.quantized.take();
        let (Some(bytes), Some(values)) = (self.bytes.take(), self.values.take()) else {
            return Ok(());
        };
        let per_byte = match quantized {
            Some(false) => 1,
            _ => VALUES_PER_BYTE,
        };
        let holds = bytes.saturating_mul(per_byte);
        match values {
            Some(values) if values <= holds => Ok(()),
            Some(values) => Err(format!(
                "{CLAIM} {values} values, more than its {bytes} bytes hold"
            )),
            None => Err(format!(
                "{CLAIM} more than 2^64 values (its bytes: {bytes})"
            )),
        }
    }

    /// A name went by: taken as the identifier being read, if one is (`true`).
    fn saw_name(&self, name: &[u8]) -> bool {
        match self.identifier.replace(Identifier::None) {
            Identifier::Key => self.keyed.set(field_named(name)),
            Identifier::Variant => self.quantized.set(Some(name == b"QFloat")),
            Identifier::None => return false,
        }
        true
    }

    /// An unsigned number went by: an identifier's index, or one of the shape's sizes.
    fn saw_number(&self, number: u64) {
        match self.identifier.replace(Identifier::None) {
            Identifier::Key => self.keyed.set(field_at(number)),
            Identifier::Variant => self.quantized.set(Some(number == QFLOAT_INDEX)),
            Identifier::None if self.field.get() == Field::Shape => {
                let product = self.values.get().unwrap_or(Some(1));
                self.values
                    .set(Some(product.and_then(|p| p.checked_mul(number))));
            }
            Identifier::None => {}
        }
    }

    /// A signed or 128-bit number went by: as [`Self::saw_number`] where it is not
    /// negative (a negative size is an error of the decoder's own), a size past `u64`
    /// overflowing the shape's product.
    fn saw_wide(&self, number: i128) {
        match u64::try_from(number) {
            Ok(number) => self.saw_number(number),
            Err(_) if number > 0 && self.field.get() == Field::Shape => {
                self.values.set(Some(None));
            }
            Err(_) => {}
        }
    }

    /// Bytes went by: a name if an identifier is being read, else the tensor's bytes
    /// where they are being read.
    fn saw_bytes(&self, bytes: &[u8]) {
        if !self.saw_name(bytes) && self.field.get() == Field::Bytes {
            self.bytes.set(Some(bytes.len() as u64));
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

/// Visits whose number the claims note (`$note`: a method of [`Claims`] taking it
/// widened) before passing it on.
macro_rules! note_visit {
    ($note:ident: $($method:ident: $ty:ty),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<V::Value, E> {
            self.claims.$note(v.into());
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
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
    );

    // A size may come as a signed number (MessagePack's signed markers), which a
    // `usize` accepts when it is not negative; a 128-bit one may pass `u64`.
    note_visit!(saw_wide:
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
    );
    note_visit!(saw_number:
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
    );
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<V::Value, E> {
        self.claims.saw_wide(i128::try_from(v).unwrap_or(i128::MAX));
        self.inner.visit_u128(v)
    }
    // A name, or a tensor's bytes given as a string (which Burn's decoder reads too).
    fn visit_str<E: de::Error>(self, v: &str) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.as_bytes());
        self.inner.visit_str(v)
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.as_bytes());
        self.inner.visit_borrowed_str(v)
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<V::Value, E> {
        self.claims.saw_bytes(v.as_bytes());
        self.inner.visit_string(v)
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<V::Value, E> {
        self.claims.saw_bytes(v);
        self.inner.visit_bytes(v)
    }
    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<V::Value, E> {
        self.claims.saw_bytes(v);
        self.inner.visit_borrowed_bytes(v)
    }
    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<V::Value, E> {
        self.claims.saw_bytes(&v);
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
        // A tensor's bytes as a sequence of numbers (JSON): counted as they are read.
        let counts_bytes = self.claims.field.get() == Field::Bytes;
        if counts_bytes {
            self.claims.bytes.set(Some(0));
        }
        self.inner.visit_seq(Seq {
            inner: seq,
            claims: self.claims,
            fields: None,
            counts_bytes,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Map {
            inner: map,
            claims: self.claims,
            keyed: false,
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
            counts_bytes: false,
        })
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.inner.visit_map(Map {
            inner: map,
            claims: self.claims,
            keyed: true,
        })
    }
}

/// A sequence whose elements are watched; inside a tensor's data (`fields`: the index
/// of the next field), each element marks its field while it is read; a tensor's bytes
/// given as a sequence (`counts_bytes`) count its elements.
struct Seq<'c, A> {
    inner: A,
    claims: &'c Claims,
    fields: Option<usize>,
    counts_bytes: bool,
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
            let element = self.inner.next_element_seed(seed)?;
            if self.counts_bytes && element.is_some() {
                let count = self.claims.bytes.get().unwrap_or(0);
                self.claims.bytes.set(Some(count + 1));
            }
            return Ok(element);
        };
        self.claims.enter(field_at(index as u64));
        let element = self.inner.next_element_seed(seed);
        self.claims.leave();
        self.fields = Some(index + 1);
        element
    }

    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A map whose keys and values are watched; a tensor's data (`keyed`) marks the field
/// its key names while the value is read.
struct Map<'c, A> {
    inner: A,
    claims: &'c Claims,
    keyed: bool,
}

impl<'de, 'c, A: MapAccess<'de>> MapAccess<'de> for Map<'c, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let seed = Seed {
            inner: seed,
            claims: self.claims,
        };
        if !self.keyed {
            return self.inner.next_key_seed(seed);
        }
        self.claims.keyed.set(Field::Elsewhere);
        self.claims.identifier.set(Identifier::Key);
        let key = self.inner.next_key_seed(seed);
        self.claims.identifier.set(Identifier::None);
        key
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        let seed = Seed {
            inner: seed,
            claims: self.claims,
        };
        if !self.keyed {
            return self.inner.next_value_seed(seed);
        }
        self.claims.enter(self.claims.keyed.get());
        let value = self.inner.next_value_seed(seed);
        self.claims.leave();
        value
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
        // The outermost variant of a tensor data's `dtype` says whether it is quantized
        // (the variants inside `Bool` and `QFloat` say nothing of it).
        let reads_dtype =
            self.claims.field.get() == Field::DType && self.claims.quantized.get().is_none();
        if reads_dtype {
            self.claims.identifier.set(Identifier::Variant);
        }
        let seed = Seed {
            inner: seed,
            claims: self.claims,
        };
        let read = self.inner.variant_seed(seed);
        if reads_dtype {
            self.claims.identifier.set(Identifier::None);
        }
        let (value, variant) = read?;
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
    use burn::tensor::quantization::QuantScheme;
    use burn::tensor::{DType, TensorData as BurnTensorData};

    /// The formats Burn's recorders write, and forms a hostile file may take that Burn's
    /// decoder still reads (a struct as a sequence, keys as indices).
    #[derive(Clone, Copy, Debug)]
    enum Format {
        Bincode,
        NamedMsgPack,
        MsgPackSequence,
        Json,
    }
    const FORMATS: [Format; 4] = [
        Format::Bincode,
        Format::NamedMsgPack,
        Format::MsgPackSequence,
        Format::Json,
    ];

    /// `value` encoded in `format`, decoded back as `T` through [`Watched`].
    fn through<S: serde::Serialize, T: serde::de::DeserializeOwned>(
        value: &S,
        format: Format,
    ) -> Result<T, String> {
        let claims = Claims::new();
        match format {
            Format::Bincode => {
                let config = bincode::config::standard();
                let bytes = bincode::serde::encode_to_vec(value, config).unwrap();
                let mut decoder =
                    bincode::serde::BorrowedSerdeDecoder::from_slice(&bytes, config, ());
                T::deserialize(Watched::new(decoder.as_deserializer(), &claims))
                    .map_err(|e| e.to_string())
            }
            Format::NamedMsgPack | Format::MsgPackSequence => {
                let bytes = match format {
                    Format::NamedMsgPack => rmp_serde::to_vec_named(value),
                    _ => rmp_serde::to_vec(value),
                }
                .unwrap();
                let mut decoder = rmp_serde::Deserializer::new(bytes.as_slice());
                T::deserialize(Watched::new(&mut decoder, &claims)).map_err(|e| e.to_string())
            }
            Format::Json => {
                let bytes = serde_json::to_vec(value).unwrap();
                let mut decoder = serde_json::Deserializer::from_slice(&bytes);
                T::deserialize(Watched::new(&mut decoder, &claims)).map_err(|e| e.to_string())
            }
        }
    }

    fn data(bytes: usize, shape: Vec<usize>, dtype: DType) -> BurnTensorData {
        let mut data = BurnTensorData::new(vec![0u8; bytes], [bytes]);
        data.shape = shape.into();
        data.dtype = dtype;
        data
    }

    #[test]
    fn tensor_data_is_read_through_unchanged() {
        for format in FORMATS {
            for data in [
                BurnTensorData::new(vec![1.5f32, -2.0, 3.25, 0.0, 7.0, 8.0], [2, 3]),
                BurnTensorData::new(vec![1.5f64], [1]),
                BurnTensorData::new(Vec::<f32>::new(), [0, 4]),
                BurnTensorData::new(vec![3i64, 4], [2]),
                BurnTensorData::new(vec![true, false, true], [3]),
                data(2, vec![16], DType::QFloat(QuantScheme::default())),
            ] {
                let read: BurnTensorData = through(&data, format).unwrap();
                assert_eq!(read, data, "{format:?}");
            }
        }
    }

    #[test]
    fn shapes_past_the_bytes_are_refused_in_every_format() {
        for format in FORMATS {
            let read = |d: &BurnTensorData| through::<_, BurnTensorData>(d, format);
            // Unquantized: a value a byte at most.
            assert!(
                read(&data(16, vec![4, 4], DType::F64)).is_ok(),
                "{format:?}"
            );
            let err = read(&data(16, vec![17], DType::F64)).expect_err(&format!("{format:?}"));
            assert!(
                err.contains("a tensor's shape claims 17 values, more than its 16 bytes hold"),
                "{format:?}: {err}"
            );
            let err = read(&data(8, vec![1 << 40], DType::F16)).unwrap_err();
            assert!(
                err.contains("claims 1099511627776 values"),
                "{format:?}: {err}"
            );
            let err = read(&data(8, vec![1 << 40, 1 << 40], DType::F32)).unwrap_err();
            assert!(err.contains("more than 2^64 values"), "{format:?}: {err}");
            // Quantized data packs up to 8 values a byte.
            let q = DType::QFloat(QuantScheme::default());
            assert!(read(&data(2, vec![16], q)).is_ok(), "{format:?}");
            let err = read(&data(2, vec![17], q)).unwrap_err();
            assert!(err.contains("claims 17 values"), "{format:?}: {err}");
        }
    }

    /// A struct of the record's own with a field named `shape` is no tensor's data.
    #[test]
    fn other_structs_with_such_fields_pass_unchecked() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Other {
            bytes: Vec<u8>,
            shape: String,
            dtype: Option<u64>,
        }
        let other = Other {
            bytes: vec![1],
            shape: "wide".into(),
            dtype: Some(1 << 40),
        };
        for format in FORMATS {
            assert_eq!(
                through::<_, Other>(&other, format).unwrap(),
                other,
                "{format:?}"
            );
        }
    }

    /// MessagePack forms Burn's decoder reads and serde's encoders do not write: a size
    /// with a signed marker, a tensor's bytes as a string.
    #[test]
    fn message_pack_sizes_as_signed_numbers_and_bytes_as_strings_are_counted() {
        let read = |bytes: &[u8]| {
            let claims = Claims::new();
            let mut decoder = rmp_serde::Deserializer::new(bytes);
            <BurnTensorData as serde::Deserialize>::deserialize(Watched::new(&mut decoder, &claims))
                .map(|d| d.shape.num_elements())
                .map_err(|e| e.to_string())
        };
        let tensor = |bytes: &[u8], shape: &[u8]| {
            let mut out = vec![0x83, 0xa5];
            out.extend_from_slice(b"bytes");
            out.extend_from_slice(bytes);
            out.push(0xa5);
            out.extend_from_slice(b"shape");
            out.extend_from_slice(shape);
            out.push(0xa5);
            out.extend_from_slice(b"dtype");
            out.extend_from_slice(b"\xa3F16");
            out
        };
        let bin8 = [&[0xc4, 8][..], &[0; 8]].concat();
        let str8 = [&[0xa8][..], &[0; 8]].concat();
        let signed = |size: i64| [&[0x91, 0xd3][..], &size.to_be_bytes()].concat();
        assert_eq!(read(&tensor(&bin8, &signed(4))), Ok(4));
        assert_eq!(read(&tensor(&str8, &signed(4))), Ok(4));
        for bytes in [&bin8, &str8] {
            let err = read(&tensor(bytes, &signed(1 << 40))).unwrap_err();
            assert!(
                err.contains("a tensor's shape claims 1099511627776 values, more than its 8"),
                "{err}"
            );
        }
    }

    #[test]
    fn qfloat_is_the_variant_bincode_writes_as_its_index() {
        let q = DType::QFloat(QuantScheme::default());
        let bytes = bincode::serde::encode_to_vec(q, bincode::config::standard()).unwrap();
        assert_eq!(u64::from(bytes[0]), QFLOAT_INDEX);
    }
}
