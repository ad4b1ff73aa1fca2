//! The tensors a Burn record holds, by path and shape, read from its serialisable item
//! before any tensor is built: what [`load_file_checked`](crate::load_file_checked)
//! compares with the module the record is loaded into.
//!
//! A record item is walked with a serde [`Serializer`](serde::Serializer) that writes nothing: struct
//! fields, sequence indices and enum variants make the path (as burn-store names a
//! module's tensors: `lstm.layers.1.reverse.weight_ih`), a `ParamSerde` is transparent,
//! and a `TensorData` is a tensor whose shape is read and whose bytes are never touched.
//! An `Option` that is `None` holds no tensor: exactly what Burn's `load_record` would
//! silently drop, or silently ignore, without this walk.

use serde::Serialize;
use serde::ser::{self, Impossible};

/// One tensor of a record: its path in the module and its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordTensor {
    pub path: String,
    pub shape: Vec<usize>,
}

/// Every tensor of `item` (a record's item), in the order it serialises.
pub(crate) fn record_tensors<T: Serialize>(item: &T) -> Result<Vec<RecordTensor>, String> {
    let mut walker = Walker::default();
    item.serialize(&mut walker).map_err(|e| e.0)?;
    Ok(walker.found)
}

#[derive(Debug)]
pub(crate) struct WalkError(String);

impl core::fmt::Display for WalkError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl ser::Error for WalkError {
    fn custom<M: core::fmt::Display>(message: M) -> Self {
        Self(message.to_string())
    }
}

#[derive(Default)]
struct Walker {
    path: Vec<String>,
    found: Vec<RecordTensor>,
}

impl Walker {
    fn nested<T: Serialize + ?Sized>(
        &mut self,
        segment: Option<String>,
        value: &T,
    ) -> Result<(), WalkError> {
        let pushed = segment.map(|s| self.path.push(s)).is_some();
        let result = value.serialize(&mut *self);
        if pushed {
            self.path.pop();
        }
        result
    }
}

/// How the fields of a struct being walked are treated.
enum StructKind {
    /// A module's record: every field is a path segment.
    Plain,
    /// Burn's `ParamSerde { id, param }`: `param` is the value, `id` is not a tensor.
    Param,
    /// A `TensorData { bytes, shape, dtype }`: a tensor, its shape read.
    Tensor(Option<Vec<usize>>),
}

struct Compound<'a> {
    walker: &'a mut Walker,
    kind: StructKind,
    index: usize,
}

impl Compound<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        let index = self.index;
        self.index += 1;
        self.walker.nested(Some(index.to_string()), value)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), WalkError> {
        match &mut self.kind {
            StructKind::Plain => self.walker.nested(Some(key.to_string()), value),
            StructKind::Param if key == "param" => self.walker.nested(None, value),
            StructKind::Param => Ok(()),
            StructKind::Tensor(shape) if key == "shape" => {
                let mut reader = ShapeReader::default();
                value.serialize(&mut reader)?;
                *shape = Some(reader.dims);
                Ok(())
            }
            StructKind::Tensor(_) => Ok(()),
        }
    }

    fn finish(self) -> Result<(), WalkError> {
        if let StructKind::Tensor(shape) = self.kind {
            let shape = shape.ok_or_else(|| WalkError("a tensor without a shape".into()))?;
            self.walker.found.push(RecordTensor {
                path: self.walker.path.join("."),
                shape,
            });
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for &'a mut Walker {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Compound<'a>;
    type SerializeTuple = Compound<'a>;
    type SerializeTupleStruct = Compound<'a>;
    type SerializeTupleVariant = Compound<'a>;
    type SerializeMap = Compound<'a>;
    type SerializeStruct = Compound<'a>;
    type SerializeStructVariant = Compound<'a>;

    fn serialize_bool(self, _: bool) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_f32(self, _: f32) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_f64(self, _: f64) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_char(self, _: char) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
    ) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        self.nested(Some(variant.to_string()), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'a>, WalkError> {
        Ok(self.compound(StructKind::Plain))
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'a>, WalkError> {
        Ok(self.compound(StructKind::Plain))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'a>, WalkError> {
        Ok(self.compound(StructKind::Plain))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, WalkError> {
        self.path.push(variant.to_string());
        Ok(self.compound(StructKind::Plain))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'a>, WalkError> {
        Ok(self.compound(StructKind::Plain))
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Compound<'a>, WalkError> {
        let kind = match name {
            "ParamSerde" => StructKind::Param,
            "TensorData" => StructKind::Tensor(None),
            _ => StructKind::Plain,
        };
        Ok(self.compound(kind))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'a>, WalkError> {
        self.path.push(variant.to_string());
        Ok(self.compound(StructKind::Plain))
    }
}

impl<'a> Walker {
    fn compound(&'a mut self, kind: StructKind) -> Compound<'a> {
        Compound {
            walker: self,
            kind,
            index: 0,
        }
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.finish()
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.finish()
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.finish()
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.walker.path.pop();
        self.finish()
    }
}

/// Map entries are walked by position: no module record Burn derives has a map.
impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _: &T) -> Result<(), WalkError> {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.element(value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.finish()
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = WalkError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), WalkError> {
        self.walker.path.pop();
        self.finish()
    }
}

/// Reads a tensor's shape (a sequence of unsigned integers).
#[derive(Default)]
struct ShapeReader {
    dims: Vec<usize>,
}

fn not_a_shape<T>() -> Result<T, WalkError> {
    Err(WalkError(
        "a tensor's shape is not a list of sizes".to_string(),
    ))
}

impl ser::SerializeSeq for &mut ShapeReader {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        value.serialize(&mut DimReader(&mut self.dims))
    }
    fn end(self) -> Result<(), WalkError> {
        Ok(())
    }
}

impl ser::SerializeTuple for &mut ShapeReader {
    type Ok = ();
    type Error = WalkError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        value.serialize(&mut DimReader(&mut self.dims))
    }
    fn end(self) -> Result<(), WalkError> {
        Ok(())
    }
}

/// Reads one size of a shape.
struct DimReader<'a>(&'a mut Vec<usize>);

macro_rules! refuse {
    ($($method:ident($($arg:ty),*) -> $ok:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ok, WalkError> {
            not_a_shape()
        })*
    };
}

impl ser::Serializer for &mut ShapeReader {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Impossible<(), WalkError>;
    type SerializeTupleVariant = Impossible<(), WalkError>;
    type SerializeMap = Impossible<(), WalkError>;
    type SerializeStruct = Impossible<(), WalkError>;
    type SerializeStructVariant = Impossible<(), WalkError>;

    fn serialize_seq(self, _: Option<usize>) -> Result<Self, WalkError> {
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, WalkError> {
        Ok(self)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), WalkError> {
        not_a_shape()
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), WalkError> {
        not_a_shape()
    }
    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_u8(u8) -> ();
        serialize_u16(u16) -> ();
        serialize_u32(u32) -> ();
        serialize_u64(u64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), WalkError>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), WalkError>;
        serialize_map(Option<usize>) -> Impossible<(), WalkError>;
        serialize_struct(&'static str, usize) -> Impossible<(), WalkError>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), WalkError>;
    }
}

impl ser::Serializer for &mut DimReader<'_> {
    type Ok = ();
    type Error = WalkError;
    type SerializeSeq = Impossible<(), WalkError>;
    type SerializeTuple = Impossible<(), WalkError>;
    type SerializeTupleStruct = Impossible<(), WalkError>;
    type SerializeTupleVariant = Impossible<(), WalkError>;
    type SerializeMap = Impossible<(), WalkError>;
    type SerializeStruct = Impossible<(), WalkError>;
    type SerializeStructVariant = Impossible<(), WalkError>;

    fn serialize_u64(self, v: u64) -> Result<(), WalkError> {
        self.0
            .push(usize::try_from(v).map_err(|_| WalkError("a size beyond usize".into()))?);
        Ok(())
    }
    fn serialize_u32(self, v: u32) -> Result<(), WalkError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> Result<(), WalkError> {
        self.serialize_u64(v.into())
    }
    fn serialize_u8(self, v: u8) -> Result<(), WalkError> {
        self.serialize_u64(v.into())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        value.serialize(self)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<(), WalkError> {
        not_a_shape()
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<(), WalkError> {
        not_a_shape()
    }
    refuse! {
        serialize_bool(bool) -> ();
        serialize_i8(i8) -> ();
        serialize_i16(i16) -> ();
        serialize_i32(i32) -> ();
        serialize_i64(i64) -> ();
        serialize_f32(f32) -> ();
        serialize_f64(f64) -> ();
        serialize_char(char) -> ();
        serialize_str(&str) -> ();
        serialize_bytes(&[u8]) -> ();
        serialize_none() -> ();
        serialize_unit() -> ();
        serialize_unit_struct(&'static str) -> ();
        serialize_unit_variant(&'static str, u32, &'static str) -> ();
        serialize_seq(Option<usize>) -> Impossible<(), WalkError>;
        serialize_tuple(usize) -> Impossible<(), WalkError>;
        serialize_tuple_struct(&'static str, usize) -> Impossible<(), WalkError>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<(), WalkError>;
        serialize_map(Option<usize>) -> Impossible<(), WalkError>;
        serialize_struct(&'static str, usize) -> Impossible<(), WalkError>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<(), WalkError>;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;
    use burn::module::Module;
    use burn::record::{FullPrecisionSettings, Record};

    type B = NdArray<f32>;

    #[test]
    fn a_records_tensors_are_named_as_burn_store_names_the_modules() {
        let device = Default::default();
        let model = crate::CudnnCompatibleLstmConfig::new(3, 4)
            .with_num_layers(2)
            .with_bidirectional(true)
            .with_proj_size(2)
            .init::<B>(&device);
        let expected: Vec<RecordTensor> =
            burn_store::ModuleSnapshot::collect(&model, None, None, false)
                .into_iter()
                .map(|s| RecordTensor {
                    path: s.full_path(),
                    shape: s.shape.to_vec(),
                })
                .collect();
        let item = model.into_record().into_item::<FullPrecisionSettings>();
        let found = record_tensors(&item).unwrap();
        assert_eq!(found, expected);
        assert_eq!(found.len(), 2 * 2 * 5);
        assert_eq!(found[0].path, "layers.0.forward.weight_ih");
        assert_eq!(found[0].shape, vec![16, 3]);
    }
}
