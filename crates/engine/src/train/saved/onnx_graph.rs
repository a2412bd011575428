//! A network as one ONNX graph, built from the same description the PyTorch export has
//! ([`Sequential`]) and its weights under PyTorch's names, which become the graph's
//! initializers (`0.weight`, `3.body.1.running_var`): a residual block is its body's nodes
//! and its shortcut's added, dropout is left out (inference), and GELU, SiLU and the scaled
//! sigmoids are composed from ONNX's operators. The input normalization and the output's
//! softmax or sigmoid can be nodes too, for a model that takes raw values.

use std::collections::{BTreeSet, HashMap};

use prost::Message;

use super::onnx_proto::{
    AttributeProto, FLOAT, GraphProto, INT64, IR_VERSION, ModelProto, NodeProto, OPSET,
    OperatorSetIdProto, StringStringEntryProto, TensorProto, ValueInfoProto,
};
use crate::model::{Sequential, TorchLayer};

/// A network that cannot become an ONNX graph.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    #[error("layer {layer} has no tensor `{name}` among the exported weights")]
    MissingWeight { layer: String, name: String },
    #[error("layer {layer} ({what}) has no ONNX form in opset {OPSET}")]
    Unsupported { layer: String, what: String },
}

/// A weight under its PyTorch name: its shape and its f32 values, little-endian.
pub struct Weight {
    pub dims: Vec<usize>,
    pub bytes: Vec<u8>,
}

/// What the graph's input is, and what happens to it before the network.
pub struct GraphInput {
    pub name: String,
    /// One example's shape.
    pub sample: Vec<usize>,
    /// `(x · scale − mean) / std`, `mean` and `std` shaped to broadcast over one example.
    pub normalize: Option<Normalize>,
}

pub struct Normalize {
    pub scale: f32,
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
    /// The shape of `mean` and `std`: `[channels, 1, 1]` for images, `[features]` for rows.
    pub dims: Vec<usize>,
}

/// What the graph's output is.
pub struct GraphOutput {
    pub name: String,
    /// One example's outputs.
    pub width: usize,
    /// Softmax over the classes, a sigmoid, or the network's outputs as they are.
    pub squash: Squash,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Squash {
    Softmax,
    Sigmoid,
    None,
}

/// The encoded ONNX model of `sequential` with `weights`, `metadata` as its properties.
pub fn onnx_model(
    sequential: &Sequential,
    weights: &HashMap<String, Weight>,
    input: &GraphInput,
    output: &GraphOutput,
    metadata: Vec<(String, String)>,
) -> Result<Vec<u8>, OnnxError> {
    let mut graph = Graph {
        weights,
        nodes: Vec::new(),
        initializers: Vec::new(),
        added: BTreeSet::new(),
    };
    let mut x = input.name.clone();
    if let Some(normalize) = &input.normalize {
        let scale = graph.constant(&[], &[normalize.scale]);
        x = graph.node("Mul", vec![x, scale], Vec::new());
        let mean = graph.constant(&normalize.dims, &normalize.mean);
        x = graph.node("Sub", vec![x, mean], Vec::new());
        let std = graph.constant(&normalize.dims, &normalize.std);
        x = graph.node("Div", vec![x, std], Vec::new());
    }
    x = graph.layers(&sequential.layers, "", x)?;
    x = match output.squash {
        Squash::Softmax => graph.node("Softmax", vec![x], vec![AttributeProto::int("axis", 1)]),
        Squash::Sigmoid => graph.node("Sigmoid", vec![x], Vec::new()),
        Squash::None => x,
    };
    // The last node writes the named output (an Identity where the network is empty).
    match graph.nodes.last_mut() {
        Some(last) if last.output[0] == x => last.output[0] = output.name.clone(),
        _ => graph.nodes.push(NodeProto {
            input: vec![x],
            output: vec![output.name.clone()],
            name: "output".into(),
            op_type: "Identity".into(),
            attribute: Vec::new(),
        }),
    }
    let model = ModelProto {
        ir_version: IR_VERSION,
        producer_name: "cubenet".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: String::new(),
        graph: Some(GraphProto {
            node: graph.nodes,
            name: "cubenet".into(),
            initializer: graph.initializers,
            input: vec![ValueInfoProto::batch_of(&input.name, &input.sample)],
            output: vec![ValueInfoProto::batch_of(&output.name, &[output.width])],
        }),
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        metadata_props: metadata
            .into_iter()
            .map(|(key, value)| StringStringEntryProto { key, value })
            .collect(),
    };
    Ok(model.encode_to_vec())
}

/// The graph being built: nodes in order, and the initializers they read.
struct Graph<'w> {
    weights: &'w HashMap<String, Weight>,
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    /// The names of the initializers added.
    added: BTreeSet<String>,
}

impl Graph<'_> {
    /// Appends an `op` node reading `inputs`; the name of its output.
    fn node(&mut self, op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>) -> String {
        let name = format!("{op}_{}", self.nodes.len());
        self.nodes.push(NodeProto {
            input: inputs,
            output: vec![name.clone()],
            name: name.clone(),
            op_type: op.into(),
            attribute,
        });
        name
    }

    /// The exported weight `{path}.{tensor}` as an initializer.
    fn weight(&mut self, path: &str, tensor: &str) -> Result<String, OnnxError> {
        let name = format!("{path}.{tensor}");
        if self.added.insert(name.clone()) {
            let weight = self
                .weights
                .get(&name)
                .ok_or_else(|| OnnxError::MissingWeight {
                    layer: path.into(),
                    name: name.clone(),
                })?;
            self.initializers.push(TensorProto {
                dims: weight.dims.iter().map(|&d| d as i64).collect(),
                data_type: FLOAT,
                name: name.clone(),
                raw_data: weight.bytes.clone(),
            });
        }
        Ok(name)
    }

    /// Whether the exported weights hold `{path}.{tensor}`.
    fn has_weight(&self, path: &str, tensor: &str) -> bool {
        self.weights.contains_key(&format!("{path}.{tensor}"))
    }

    /// A constant float tensor of `dims` holding `values`.
    fn constant(&mut self, dims: &[usize], values: &[f32]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.initializer(dims, FLOAT, bytes)
    }

    /// A constant int64 vector.
    fn ints(&mut self, values: &[i64]) -> String {
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.initializer(&[values.len()], INT64, bytes)
    }

    fn initializer(&mut self, dims: &[usize], data_type: i32, raw_data: Vec<u8>) -> String {
        let name = format!("constant_{}", self.initializers.len());
        self.added.insert(name.clone());
        self.initializers.push(TensorProto {
            dims: dims.iter().map(|&d| d as i64).collect(),
            data_type,
            name: name.clone(),
            raw_data,
        });
        name
    }

    /// `layers` applied to `x`, the first at PyTorch path `{prefix}0`.
    fn layers(
        &mut self,
        layers: &[TorchLayer],
        prefix: &str,
        x: String,
    ) -> Result<String, OnnxError> {
        layers.iter().enumerate().try_fold(x, |x, (index, layer)| {
            self.layer(layer, &format!("{prefix}{index}"), x)
        })
    }

    /// `layer`, at PyTorch path `path`, applied to `x`.
    fn layer(&mut self, layer: &TorchLayer, path: &str, x: String) -> Result<String, OnnxError> {
        let pair = |size: usize| vec![size as i64; 2];
        Ok(match layer {
            TorchLayer::Conv2d {
                kernel_size,
                stride,
                padding,
                bias,
                ..
            } => {
                let mut inputs = vec![x, self.weight(path, "weight")?];
                if *bias {
                    inputs.push(self.weight(path, "bias")?);
                }
                let attributes = vec![
                    AttributeProto::ints("kernel_shape", pair(*kernel_size)),
                    AttributeProto::ints("strides", pair(*stride)),
                    AttributeProto::ints("pads", vec![*padding as i64; 4]),
                ];
                self.node("Conv", inputs, attributes)
            }
            TorchLayer::MaxPool2d {
                kernel_size,
                stride,
            }
            | TorchLayer::AvgPool2d {
                kernel_size,
                stride,
            } => {
                let op = match layer {
                    TorchLayer::MaxPool2d { .. } => "MaxPool",
                    _ => "AveragePool",
                };
                let attributes = vec![
                    AttributeProto::ints("kernel_shape", pair(*kernel_size)),
                    AttributeProto::ints("strides", pair(*stride)),
                ];
                self.node(op, vec![x], attributes)
            }
            TorchLayer::AdaptiveAvgPool2d { output_size: 1 } => {
                self.node("GlobalAveragePool", vec![x], Vec::new())
            }
            TorchLayer::AdaptiveMaxPool2d { output_size: 1 } => {
                self.node("GlobalMaxPool", vec![x], Vec::new())
            }
            TorchLayer::AdaptiveAvgPool2d { output_size }
            | TorchLayer::AdaptiveMaxPool2d { output_size } => {
                return Err(OnnxError::Unsupported {
                    layer: path.into(),
                    what: format!("adaptive pooling to {output_size}x{output_size}"),
                });
            }
            TorchLayer::Flatten => {
                self.node("Flatten", vec![x], vec![AttributeProto::int("axis", 1)])
            }
            TorchLayer::Linear { .. } => {
                let mut inputs = vec![x, self.weight(path, "weight")?];
                if self.has_weight(path, "bias") {
                    inputs.push(self.weight(path, "bias")?);
                }
                self.node("Gemm", inputs, vec![AttributeProto::int("transB", 1)])
            }
            TorchLayer::BatchNorm1d {
                num_features,
                eps,
                affine,
                ..
            }
            | TorchLayer::BatchNorm2d {
                num_features,
                eps,
                affine,
                ..
            } => {
                let (scale, shift) = match affine {
                    true => (self.weight(path, "weight")?, self.weight(path, "bias")?),
                    false => (
                        self.constant(&[*num_features], &vec![1.0; *num_features]),
                        self.constant(&[*num_features], &vec![0.0; *num_features]),
                    ),
                };
                let mean = self.weight(path, "running_mean")?;
                let var = self.weight(path, "running_var")?;
                let epsilon = AttributeProto::float("epsilon", *eps as f32);
                self.node(
                    "BatchNormalization",
                    vec![x, scale, shift, mean, var],
                    vec![epsilon],
                )
            }
            TorchLayer::Dropout { .. } => x,
            TorchLayer::ReLU => self.node("Relu", vec![x], Vec::new()),
            TorchLayer::Tanh => self.node("Tanh", vec![x], Vec::new()),
            TorchLayer::Sigmoid => self.node("Sigmoid", vec![x], Vec::new()),
            TorchLayer::GELU => {
                // x · Φ(x) = x · (1 + erf(x / √2)) / 2, exact as cubenet's.
                let root_two = self.constant(&[], &[std::f32::consts::SQRT_2]);
                let scaled = self.node("Div", vec![x.clone(), root_two], Vec::new());
                let erf = self.node("Erf", vec![scaled], Vec::new());
                let one = self.constant(&[], &[1.0]);
                let shifted = self.node("Add", vec![erf, one], Vec::new());
                let product = self.node("Mul", vec![x, shifted], Vec::new());
                let half = self.constant(&[], &[0.5]);
                self.node("Mul", vec![product, half], Vec::new())
            }
            TorchLayer::SiLU => {
                let sigmoid = self.node("Sigmoid", vec![x.clone()], Vec::new());
                self.node("Mul", vec![x, sigmoid], Vec::new())
            }
            TorchLayer::SigmoidGain { gain } => {
                let gain = self.constant(&[], &[*gain as f32]);
                let scaled = self.node("Mul", vec![x, gain], Vec::new());
                self.node("Sigmoid", vec![scaled], Vec::new())
            }
            TorchLayer::ScaledSigmoid => {
                let sigmoid = self.node("Sigmoid", vec![x], Vec::new());
                let two = self.constant(&[], &[2.0]);
                let doubled = self.node("Mul", vec![sigmoid, two], Vec::new());
                let one = self.constant(&[], &[1.0]);
                self.node("Sub", vec![doubled, one], Vec::new())
            }
            TorchLayer::Residual { body, shortcut } => {
                let body = self.layers(body, &format!("{path}.body."), x.clone())?;
                let shortcut = self.layers(shortcut, &format!("{path}.shortcut."), x)?;
                self.node("Add", vec![body, shortcut], Vec::new())
            }
            TorchLayer::SubsamplePad {
                stride,
                before,
                after,
            } => {
                let starts = self.ints(&[0, 0]);
                let ends = self.ints(&[i64::MAX, i64::MAX]);
                let axes = self.ints(&[2, 3]);
                let steps = self.ints(&[*stride as i64; 2]);
                let every = self.node("Slice", vec![x, starts, ends, axes, steps], Vec::new());
                let (before, after) = (*before as i64, *after as i64);
                let pads = self.ints(&[0, before, 0, 0, 0, after, 0, 0]);
                self.node("Pad", vec![every, pads], Vec::new())
            }
        })
    }
}
