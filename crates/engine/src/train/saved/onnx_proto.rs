//! The messages of ONNX's `onnx.proto` that a cubenet model needs (a graph of nodes over
//! float tensors with initializers), with that file's field numbers, encoded by prost.

use prost::Message;

/// The IR version of the files written: ONNX 1.12's, the first with opset 17.
pub const IR_VERSION: i64 = 8;
/// The default domain's operator set the graphs use.
pub const OPSET: i64 = 17;

/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: i32 = 1;
/// `TensorProto.DataType.INT64`.
pub const INT64: i32 = 7;

#[derive(Clone, PartialEq, Message)]
pub struct ModelProto {
    #[prost(int64, tag = "1")]
    pub ir_version: i64,
    #[prost(string, tag = "2")]
    pub producer_name: String,
    #[prost(string, tag = "3")]
    pub producer_version: String,
    #[prost(string, tag = "6")]
    pub doc_string: String,
    #[prost(message, optional, tag = "7")]
    pub graph: Option<GraphProto>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: Vec<OperatorSetIdProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: Vec<StringStringEntryProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct OperatorSetIdProto {
    #[prost(string, tag = "1")]
    pub domain: String,
    #[prost(int64, tag = "2")]
    pub version: i64,
}

#[derive(Clone, PartialEq, Message)]
pub struct StringStringEntryProto {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: Vec<NodeProto>,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(message, repeated, tag = "5")]
    pub initializer: Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub input: Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: Vec<ValueInfoProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    pub output: Vec<String>,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub op_type: String,
    #[prost(message, repeated, tag = "5")]
    pub attribute: Vec<AttributeProto>,
}

/// `AttributeProto.AttributeType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, prost::Enumeration)]
#[repr(i32)]
pub enum AttributeType {
    /// The proto's default, never written (prost leaves a field at its default out).
    Undefined = 0,
    Float = 1,
    Int = 2,
    Ints = 7,
}

#[derive(Clone, PartialEq, Message)]
pub struct AttributeProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(float, tag = "2")]
    pub f: f32,
    #[prost(int64, tag = "3")]
    pub i: i64,
    #[prost(int64, repeated, tag = "8")]
    pub ints: Vec<i64>,
    #[prost(enumeration = "AttributeType", tag = "20")]
    pub r#type: i32,
}

impl AttributeProto {
    pub fn float(name: &str, f: f32) -> Self {
        Self::of(name, AttributeType::Float, |a| a.f = f)
    }

    pub fn int(name: &str, i: i64) -> Self {
        Self::of(name, AttributeType::Int, |a| a.i = i)
    }

    pub fn ints(name: &str, ints: Vec<i64>) -> Self {
        Self::of(name, AttributeType::Ints, |a| a.ints = ints)
    }

    fn of(name: &str, kind: AttributeType, set: impl FnOnce(&mut Self)) -> Self {
        let mut attribute = Self {
            name: name.into(),
            r#type: kind as i32,
            ..Self::default()
        };
        set(&mut attribute);
        attribute
    }
}

/// A constant tensor, its values little-endian in `raw_data`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorProto {
    #[prost(int64, repeated, tag = "1")]
    pub dims: Vec<i64>,
    #[prost(int32, tag = "2")]
    pub data_type: i32,
    #[prost(string, tag = "8")]
    pub name: String,
    #[prost(bytes = "vec", tag = "9")]
    pub raw_data: Vec<u8>,
}

#[derive(Clone, PartialEq, Message)]
pub struct ValueInfoProto {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub r#type: Option<TypeProto>,
}

impl ValueInfoProto {
    /// A float tensor named `name` whose first dimension is the batch, of any size.
    pub fn batch_of(name: &str, sample: &[usize]) -> Self {
        let batch = Dimension {
            value: Some(DimensionValue::Param("batch".into())),
        };
        let rest = sample.iter().map(|&size| Dimension {
            value: Some(DimensionValue::Size(size as i64)),
        });
        Self {
            name: name.into(),
            r#type: Some(TypeProto {
                tensor_type: Some(TensorTypeProto {
                    elem_type: FLOAT,
                    shape: Some(TensorShapeProto {
                        dim: std::iter::once(batch).chain(rest).collect(),
                    }),
                }),
            }),
        }
    }
}

/// `TypeProto`, of which cubenet writes tensors only.
#[derive(Clone, PartialEq, Message)]
pub struct TypeProto {
    #[prost(message, optional, tag = "1")]
    pub tensor_type: Option<TensorTypeProto>,
}

/// `TypeProto.Tensor`.
#[derive(Clone, PartialEq, Message)]
pub struct TensorTypeProto {
    #[prost(int32, tag = "1")]
    pub elem_type: i32,
    #[prost(message, optional, tag = "2")]
    pub shape: Option<TensorShapeProto>,
}

#[derive(Clone, PartialEq, Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: Vec<Dimension>,
}

/// `TensorShapeProto.Dimension`.
#[derive(Clone, PartialEq, Message)]
pub struct Dimension {
    #[prost(oneof = "DimensionValue", tags = "1, 2")]
    pub value: Option<DimensionValue>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
pub enum DimensionValue {
    #[prost(int64, tag = "1")]
    Size(i64),
    /// A named dimension of any size.
    #[prost(string, tag = "2")]
    Param(String),
}
