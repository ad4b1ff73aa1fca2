//! The ONNX protobuf messages the importer reads, declared with prost's derive. Field
//! numbers and types are those of ONNX's `onnx.proto` (vendored beside this file);
//! fields left out are skipped by the decoder, as protobuf allows.

/// `ModelProto`: the file.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: Option<String>,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
}

/// `OperatorSetIdProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub domain: Option<String>,
    #[prost(int64, optional, tag = "2")]
    pub version: Option<i64>,
}

/// `GraphProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: Vec<ValueInfoProto>,
}

/// `ValueInfoProto`: a tensor's name and declared type.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

/// `TypeProto`, its `tensor_type` arm only (a oneof field reads on the wire as an
/// optional one; the other arms are skipped).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// `TypeProto.Tensor`: element type and shape.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorTypeProto {
    #[prost(int32, optional, tag = "1")]
    pub elem_type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

/// `TensorShapeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<DimensionProto>,
}

/// `TensorShapeProto.Dimension`: a size, a symbolic name, or neither (the `value`
/// oneof's two arms read as optional fields).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct DimensionProto {
    #[prost(int64, optional, tag = "1")]
    pub dim_value: Option<i64>,
    #[prost(string, optional, tag = "2")]
    pub dim_param: Option<String>,
}

/// `NodeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, optional, tag = "3")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: Option<String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
    #[prost(string, optional, tag = "7")]
    pub domain: Option<String>,
}

/// `AttributeProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub name: Option<String>,
    #[prost(float, optional, tag = "2")]
    pub f: Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: Option<Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: Option<TensorProto>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: Vec<Vec<u8>>,
    /// `AttributeType`: 1 FLOAT, 2 INT, 3 STRING, 4 TENSOR, 6 FLOATS, 7 INTS, 8 STRINGS.
    #[prost(int32, optional, tag = "20")]
    pub r#type: Option<i32>,
}

/// `TensorProto` (dense tensors; segments and sparse data are not read).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TensorProto {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: Vec<i64>,
    /// `DataType`: 1 FLOAT, 6 INT32, 7 INT64, 10 FLOAT16, 11 DOUBLE.
    #[prost(int32, optional, tag = "2")]
    pub data_type: Option<i32>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: Vec<i32>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: Option<String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub raw_data: Option<Vec<u8>>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: Vec<f64>,
    #[prost(message, repeated, tag = "13")]
    pub external_data: Vec<StringStringEntryProto>,
    /// `DataLocation`: 0 DEFAULT, 1 EXTERNAL.
    #[prost(int32, optional, tag = "14")]
    pub data_location: Option<i32>,
}

/// `StringStringEntryProto`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub value: Option<String>,
}

/// The attribute `name` of `node`, when it has one.
pub(crate) fn attr<'a>(node: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    node.attribute
        .iter()
        .find(|a| a.name.as_deref() == Some(name))
}

/// Builders of graph pieces for the importer's unit tests.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// A node of ONNX's domain with one output.
    pub(crate) fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.to_string()],
            op_type: Some(op.to_string()),
            ..Default::default()
        }
    }

    /// An attribute holding `ints` (and, when there is one, it as the int `i`).
    pub(crate) fn ints_attr(name: &str, ints: &[i64]) -> AttributeProto {
        AttributeProto {
            name: Some(name.to_string()),
            ints: ints.to_vec(),
            i: (ints.len() == 1).then(|| ints[0]),
            ..Default::default()
        }
    }

    /// An INT64 initializer.
    pub(crate) fn int64s(name: &str, values: &[i64]) -> TensorProto {
        TensorProto {
            name: Some(name.to_string()),
            data_type: Some(7),
            dims: vec![values.len() as i64],
            int64_data: values.to_vec(),
            ..Default::default()
        }
    }

    /// A FLOAT initializer.
    pub(crate) fn floats(name: &str, values: &[f32]) -> TensorProto {
        TensorProto {
            name: Some(name.to_string()),
            data_type: Some(1),
            dims: vec![values.len() as i64],
            float_data: values.to_vec(),
            ..Default::default()
        }
    }

    /// A tensor declared with static `dims`.
    pub(crate) fn declared(name: &str, dims: &[i64]) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.to_string()),
            r#type: Some(TypeProto {
                tensor_type: Some(TensorTypeProto {
                    elem_type: Some(1),
                    shape: Some(TensorShapeProto {
                        dim: dims
                            .iter()
                            .map(|&d| DimensionProto {
                                dim_value: Some(d),
                                dim_param: None,
                            })
                            .collect(),
                    }),
                }),
            }),
        }
    }

    /// Writes a model of `graph` (IR version 8) to `dir/name`; returns its path.
    pub(crate) fn write_model(
        dir: &std::path::Path,
        name: &str,
        graph: GraphProto,
    ) -> std::path::PathBuf {
        use prost::Message;
        let model = ModelProto {
            ir_version: Some(8),
            graph: Some(graph),
            ..Default::default()
        };
        let path = dir.join(name);
        std::fs::write(&path, model.encode_to_vec()).unwrap();
        path
    }
}
