//! The networks, generic over the backend: a CNN defined layer by layer, residual blocks
//! included (with the seed's single-conv CNN and a LeNet-style CNN as its presets), an MLP, and the tabular net built
//! on it; each also as the PyTorch `nn.Sequential` its weights are exported for.

mod activation;
mod batch_norm;
mod classifier;
mod cnn;
mod cnn_config;
mod cnn_summary;
mod cnn_torch;
mod conv_block;
mod dense;
mod feature_shape;
mod fresh_leaves;
mod geometry;
mod kernels;
mod layer_options;
mod layer_spec;
mod mlp;
mod network_size;
mod pooling;
mod presets;
mod residual;
mod sequential;
mod step_outputs;
mod tabular_net;

pub use activation::Activation;
pub use batch_norm::BatchNorm;
pub use classifier::{ImageModel, ImageModelConfig};
pub use cnn::Cnn;
pub use cnn_config::{CnnConfig, Step};
pub use cnn_summary::{CnnSummary, LayerSummary};
pub use conv_block::{AfterConv, ConvBlock};
/// How the convolutions multiply: a setting of the CNN configs.
pub use cubenet_kernels::Precision;
pub use dense::Dense;
pub use feature_shape::FeatureShape;
pub use fresh_leaves::{fresh_leaf, with_fresh_leaves};
pub use geometry::{Size2, conv_output, pool_output};
pub use kernels::Kernels;
pub use layer_options::{ConvSpec, GlobalPool, NormSpec, Shortcut, Width};
pub use layer_spec::{LayerSpec, LayerSpecs, MAX_LAYERS, ResidualSpec};
pub use mlp::{Mlp, MlpConfig};
pub use network_size::NetworkSize;
pub use presets::{LeNetConfig, SimpleCnnConfig};
pub use sequential::{Sequential, TorchLayer, TorchWeights};
pub use step_outputs::StepOutputs;
pub use tabular_net::{TabularNet, TabularOutput, Task};

/// A network that cannot be built as configured; names the layer and the sizes involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error(
        "layer `{layer}`: the {}x{} window is larger than its {}x{} (padded) input",
        window[0], window[1], input[0], input[1]
    )]
    WindowTooLarge {
        layer: String,
        window: Size2,
        input: Size2,
    },
    #[error(
        "layer `{layer}`: {}x{} windows with stride {}x{} do not tile the {}x{} input exactly",
        window[0], window[1], stride[0], stride[1], input[0], input[1]
    )]
    InexactTiling {
        layer: String,
        input: Size2,
        window: Size2,
        stride: Size2,
    },
    #[error(
        "{given} layer activations given for {hidden} hidden layers (give one per layer, or none)"
    )]
    ActivationCount { given: usize, hidden: usize },
    #[error("layer `{layer}`: {what} must be positive, got a zero")]
    Zero { layer: String, what: &'static str },
    #[error("layer `{layer}`: {problem}")]
    Layer {
        layer: String,
        problem: &'static str,
    },
    /// A residual block whose shortcut cannot meet its layers' output.
    #[error("layer `{layer}`: {problem}")]
    Residual { layer: String, problem: String },
    #[error(
        "layer `{layer}`: a CNN ends with its logits, one per class ({classes}): make the last \
         layer `dense = \"classes\"` (this one outputs {output})"
    )]
    NoLogits {
        layer: String,
        output: FeatureShape,
        classes: usize,
    },
    #[error("a CNN needs layers, the last of them `dense = \"classes\"`")]
    NoLayers,
    #[error(
        "model `{model}` takes square gray images, not {channels}x{height}x{width}: use \
         [model] kind = \"cnn\" with its `layers`"
    )]
    NotSquareGray {
        model: &'static str,
        channels: usize,
        height: usize,
        width: usize,
    },
}
