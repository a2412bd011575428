//! The networks as PyTorch would write them: an `nn.Sequential` of the same layers (a
//! residual block a module holding its own `body` and `shortcut` lists), and the PyTorch
//! path of each cubenet module that holds weights. Exported weights take PyTorch's names
//! (`0.weight`, `3.body.1.running_var`, ...) from it, and imported ones are read back
//! through it.

use serde::{Deserialize, Serialize};

use super::{Activation, FeatureShape, NormSpec};

/// One layer of the `nn.Sequential`, with the arguments PyTorch's constructor takes: the
/// `layer` tag is the class name in `torch.nn`, the other fields its keyword arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "layer")]
pub enum TorchLayer {
    Conv2d {
        in_channels: usize,
        out_channels: usize,
        kernel_size: usize,
        stride: usize,
        padding: usize,
        bias: bool,
    },
    MaxPool2d {
        kernel_size: usize,
        stride: usize,
    },
    AvgPool2d {
        kernel_size: usize,
        stride: usize,
    },
    /// Global average pooling (`output_size` 1).
    AdaptiveAvgPool2d {
        output_size: usize,
    },
    /// Global max pooling (`output_size` 1).
    AdaptiveMaxPool2d {
        output_size: usize,
    },
    /// `[n, c, h, w]` to `[n, c·h·w]`, channel-major as cubenet flattens.
    Flatten,
    Linear {
        in_features: usize,
        out_features: usize,
    },
    BatchNorm1d {
        num_features: usize,
        eps: f64,
        momentum: f64,
        affine: bool,
    },
    BatchNorm2d {
        num_features: usize,
        eps: f64,
        momentum: f64,
        affine: bool,
    },
    /// Inactive in evaluation, as in cubenet outside training.
    Dropout {
        p: f64,
    },
    ReLU,
    /// Exact (`approximate="none"`, PyTorch's default).
    GELU,
    SiLU,
    Tanh,
    Sigmoid,
    /// Not in `torch.nn`: σ(gain·x).
    SigmoidGain {
        gain: f64,
    },
    /// Not in `torch.nn`: 2σ(x) − 1.
    ScaledSigmoid,
    /// Not in `torch.nn`: `body(x) + shortcut(x)`, each an `nn.Sequential` of these layers
    /// (an empty shortcut is the identity).
    Residual {
        body: Vec<TorchLayer>,
        shortcut: Vec<TorchLayer>,
    },
    /// Not in `torch.nn`: ResNet's option-A shortcut, `x[:, :, ::stride, ::stride]` with
    /// `before` zero channels put before and `after` after.
    SubsamplePad {
        stride: usize,
        before: usize,
        after: usize,
    },
}

impl TorchLayer {
    /// Batch normalization over the channels of maps or the features of flat activations.
    pub fn batch_norm(input: FeatureShape, norm: NormSpec) -> Self {
        let (num_features, eps, momentum, affine) =
            (input.features(), norm.eps, norm.momentum, norm.affine);
        match input {
            FeatureShape::Maps(_) => TorchLayer::BatchNorm2d {
                num_features,
                eps,
                momentum,
                affine,
            },
            FeatureShape::Flat(_) => TorchLayer::BatchNorm1d {
                num_features,
                eps,
                momentum,
                affine,
            },
        }
    }

    /// The layer that applies `activation`.
    pub fn activation(activation: Activation) -> Self {
        match activation {
            Activation::Relu => TorchLayer::ReLU,
            Activation::Gelu => TorchLayer::GELU,
            Activation::Silu => TorchLayer::SiLU,
            Activation::Tanh => TorchLayer::Tanh,
            Activation::Sigmoid => TorchLayer::Sigmoid,
            Activation::SigmoidGain { gain } => TorchLayer::SigmoidGain { gain },
            Activation::ScaledSigmoid => TorchLayer::ScaledSigmoid,
        }
    }
}

/// A module with weights, in cubenet's network and in PyTorch's.
#[derive(Debug, Clone, PartialEq)]
pub struct TorchWeights {
    /// Its path in cubenet's network: Burn's field names, enum variants left out, e.g.
    /// `features.0.conv`.
    pub module: String,
    /// Its path in the `nn.Sequential`: `3`, or `3.body.1` inside a residual block.
    pub torch: String,
}

/// A network as an `nn.Sequential`, and where its weights sit in cubenet's module tree.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sequential {
    pub layers: Vec<TorchLayer>,
    pub weights: Vec<TorchWeights>,
}

impl Sequential {
    /// Appends `layer`; `module` is the cubenet path of its weights, if it has any.
    pub fn push(&mut self, layer: TorchLayer, module: Option<String>) {
        if let Some(module) = module {
            let torch = self.layers.len().to_string();
            self.weights.push(TorchWeights { module, torch });
        }
        self.layers.push(layer);
    }

    /// The layer at PyTorch path `torch` (`3`, `3.body.1`, `3.shortcut.0`).
    pub fn layer_at(&self, torch: &str) -> Option<&TorchLayer> {
        let mut parts = torch.split('.');
        let mut layer = self.layers.get(parts.next()?.parse::<usize>().ok()?)?;
        while let Some(list) = parts.next() {
            let index: usize = parts.next()?.parse().ok()?;
            layer = match (layer, list) {
                (TorchLayer::Residual { body, .. }, "body") => body.get(index)?,
                (TorchLayer::Residual { shortcut, .. }, "shortcut") => shortcut.get(index)?,
                _ => return None,
            };
        }
        Some(layer)
    }

    /// The layer that the tensor named `key` (PyTorch's name, e.g. `3.running_var` or
    /// `3.body.1.weight`) belongs to, with the index of the top-level layer holding it:
    /// how error messages name a layer.
    pub fn layer_of(&self, key: &str) -> Option<(usize, &TorchLayer)> {
        let (path, _tensor) = key.rsplit_once('.')?;
        let index: usize = key.split('.').next()?.parse().ok()?;
        self.layer_at(path).map(|layer| (index, layer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CnnConfig, LayerSpecs, MlpConfig};

    fn paths(sequential: &Sequential) -> Vec<(&str, &str)> {
        sequential
            .weights
            .iter()
            .map(|w| (w.module.as_str(), w.torch.as_str()))
            .collect()
    }

    #[test]
    fn a_run_file_cnn_becomes_pytorch_layers_with_a_flatten_before_the_first_dense() {
        let layers: LayerSpecs = toml::from_str::<toml::Table>(
            r#"layers = [{ conv = 4, padding = 1 }, { relu = true }, { pool = 2 },
               { batch_norm = true }, { dense = 8 }, { relu = true }, { dropout = 0.5 },
               { batch_norm = true }, { dense = "classes" }]"#,
        )
        .unwrap()["layers"]
            .clone()
            .try_into()
            .unwrap();
        let sequential = CnnConfig::new([2, 6, 6], 3, layers).sequential().unwrap();
        let norm = |features, two_d| {
            let shape = match two_d {
                true => FeatureShape::Maps([features, 1, 1]),
                false => FeatureShape::Flat(features),
            };
            TorchLayer::batch_norm(shape, NormSpec::new())
        };
        assert_eq!(
            sequential.layers,
            [
                TorchLayer::Conv2d {
                    in_channels: 2,
                    out_channels: 4,
                    kernel_size: 3,
                    stride: 1,
                    padding: 1,
                    bias: true
                },
                TorchLayer::ReLU,
                TorchLayer::MaxPool2d {
                    kernel_size: 2,
                    stride: 2
                },
                norm(4, true),
                TorchLayer::Flatten,
                TorchLayer::Linear {
                    in_features: 36,
                    out_features: 8
                },
                TorchLayer::ReLU,
                TorchLayer::Dropout { p: 0.5 },
                norm(8, false),
                TorchLayer::Linear {
                    in_features: 8,
                    out_features: 3
                },
            ]
        );
        // conv·ReLU·pool is one module, batch norm the next; dense·ReLU opens the head.
        assert_eq!(
            paths(&sequential),
            [
                ("features.0.conv", "0"),
                ("features.1", "3"),
                ("head.0", "5"),
                ("head.2", "8"),
                ("head.3", "9")
            ]
        );
        assert_eq!(sequential.layer_of("8.running_var").unwrap().0, 8);
        assert!(sequential.layer_of("10.weight").is_none());
    }

    #[test]
    fn an_mlp_alternates_linear_layers_and_activations() {
        let config = MlpConfig::new(5, vec![4, 3], 2)
            .with_layer_activations(vec![Activation::Tanh, Activation::ScaledSigmoid]);
        let sequential = config.sequential("mlp.dense", false).unwrap();
        assert_eq!(sequential.layers.len(), 5);
        assert_eq!(sequential.layers[1], TorchLayer::Tanh);
        assert_eq!(sequential.layers[3], TorchLayer::ScaledSigmoid);
        assert_eq!(
            paths(&sequential),
            [
                ("mlp.dense.0", "0"),
                ("mlp.dense.1", "2"),
                ("mlp.dense.2", "4")
            ]
        );
        let flattened = config.sequential("dense", true).unwrap();
        assert_eq!(flattened.layers[0], TorchLayer::Flatten);
        assert_eq!(paths(&flattened)[0], ("dense.0", "1"));
    }
}
