//! A [`CnnConfig`]'s network as PyTorch layers: what `cubenet export` describes in its
//! sidecar and names the weights after.

use super::cnn_config::{Step, fused_len, steps};
use super::residual::shortcut_stride;
use super::{
    CnnConfig, FeatureShape, LayerSpec, ModelError, NormSpec, Sequential, Shortcut, TorchLayer,
    TorchWeights,
};

/// A list of PyTorch layers being filled: the network's, or a residual block's body.
struct Frame {
    layers: Vec<TorchLayer>,
    /// PyTorch's path to the list, ending in a dot (empty for the network's).
    prefix: String,
}

impl Frame {
    fn path(&self) -> String {
        format!("{}{}", self.prefix, self.layers.len())
    }
}

impl CnnConfig {
    /// The network as a PyTorch `nn.Sequential` (a `Flatten` before the first dense layer,
    /// a residual block a `Residual` of its body and shortcut), with the cubenet module of
    /// each layer that has weights, grouped as [`init`](Self::init) groups them.
    pub fn sequential(&self) -> Result<Sequential, ModelError> {
        let shapes = self.summary()?.shapes();
        let steps = steps(&self.layers);
        let first_dense = steps
            .iter()
            .position(|(_, step)| matches!(step, Step::Layer(LayerSpec::Dense(_))));
        let mut weights = Vec::new();
        let mut frames = vec![Frame {
            layers: Vec::new(),
            prefix: String::new(),
        }];
        // The inputs of the residual blocks entered and not yet joined.
        let mut kept = Vec::new();
        let (mut maps, mut flat) = (0, 0);
        let mut index = 0;
        while index < steps.len() {
            let on_maps = !matches!(steps[index].1, Step::Layer(LayerSpec::Dense(_)))
                && matches!(shapes[index], FeatureShape::Maps(_));
            let module = match on_maps {
                true => format!("features.{maps}"),
                false => format!("head.{flat}"),
            };
            *(if on_maps { &mut maps } else { &mut flat }) += 1;
            let used = fused_len(&steps, index);
            for j in index..index + used {
                let (input, output) = (shapes[j], shapes[j + 1]);
                let frame = frames.last_mut().expect("the network's frame stays");
                let layer = match &steps[j].1 {
                    Step::Layer(layer) => layer,
                    Step::Fork(_) => {
                        kept.push(input);
                        let prefix = format!("{}.body.", frame.path());
                        frames.push(Frame {
                            layers: Vec::new(),
                            prefix,
                        });
                        continue;
                    }
                    &Step::Join(kind) => {
                        let body = frames.pop().expect("every join follows its fork");
                        let frame = frames.last_mut().expect("a block sits in a list");
                        let from = kept.pop().expect("every join follows its fork");
                        let path = format!("{}.shortcut", frame.path());
                        let shortcut = shortcut(kind, from, output, &module, &path, &mut weights);
                        frame.layers.push(TorchLayer::Residual {
                            body: body.layers,
                            shortcut,
                        });
                        continue;
                    }
                };
                if Some(j) == first_dense {
                    frame.layers.push(TorchLayer::Flatten);
                }
                let (torch, has_weights) = match *layer {
                    LayerSpec::Conv(conv) => (
                        TorchLayer::Conv2d {
                            in_channels: input.features(),
                            out_channels: conv.filters,
                            kernel_size: conv.kernel,
                            stride: conv.stride,
                            padding: conv.padding,
                            bias: conv.bias,
                        },
                        Some(format!("{module}.conv")),
                    ),
                    LayerSpec::Pool { window, stride } => (
                        TorchLayer::MaxPool2d {
                            kernel_size: window,
                            stride,
                        },
                        None,
                    ),
                    LayerSpec::AvgPool { window, stride } => (
                        TorchLayer::AvgPool2d {
                            kernel_size: window,
                            stride,
                        },
                        None,
                    ),
                    LayerSpec::GlobalPool(super::GlobalPool::Avg) => {
                        (TorchLayer::AdaptiveAvgPool2d { output_size: 1 }, None)
                    }
                    LayerSpec::GlobalPool(super::GlobalPool::Max) => {
                        (TorchLayer::AdaptiveMaxPool2d { output_size: 1 }, None)
                    }
                    LayerSpec::Dense(_) => (
                        TorchLayer::Linear {
                            in_features: input.values(),
                            out_features: output.values(),
                        },
                        Some(module.clone()),
                    ),
                    LayerSpec::Relu => (TorchLayer::ReLU, None),
                    LayerSpec::Gelu => (TorchLayer::GELU, None),
                    LayerSpec::Silu => (TorchLayer::SiLU, None),
                    LayerSpec::Dropout(p) => (TorchLayer::Dropout { p }, None),
                    // Without scale and shift it still holds its running statistics.
                    LayerSpec::BatchNorm(norm) => {
                        (TorchLayer::batch_norm(input, norm), Some(module.clone()))
                    }
                    LayerSpec::Residual(_) => unreachable!("residual blocks are opened into steps"),
                };
                let torch_path = frame.path();
                if let Some(module) = has_weights {
                    weights.push(TorchWeights {
                        module,
                        torch: torch_path,
                    });
                }
                frame.layers.push(torch);
            }
            index += used;
        }
        let layers = frames.pop().expect("the network's frame stays").layers;
        Ok(Sequential { layers, weights })
    }
}

/// The PyTorch layers of a block's `kind` of shortcut from maps `from` to `to`, whose
/// weights (those of cubenet's join `module`) are listed in `weights` under `path`.
fn shortcut(
    kind: Shortcut,
    from: FeatureShape,
    to: FeatureShape,
    module: &str,
    path: &str,
    weights: &mut Vec<TorchWeights>,
) -> Vec<TorchLayer> {
    let (FeatureShape::Maps(from), FeatureShape::Maps(to)) = (from, to) else {
        unreachable!("the summary refuses a flat residual block")
    };
    let stride = shortcut_stride(from, to).expect("the summary checked the stride");
    match kind {
        Shortcut::Identity => Vec::new(),
        Shortcut::Conv => {
            weights.push(TorchWeights {
                module: format!("{module}.projection.conv.conv"),
                torch: format!("{path}.0"),
            });
            weights.push(TorchWeights {
                module: format!("{module}.projection.norm"),
                torch: format!("{path}.1"),
            });
            vec![
                TorchLayer::Conv2d {
                    in_channels: from[0],
                    out_channels: to[0],
                    kernel_size: 1,
                    stride,
                    padding: 0,
                    bias: false,
                },
                TorchLayer::batch_norm(FeatureShape::Maps(to), NormSpec::new()),
            ]
        }
        Shortcut::OptionA => {
            let added = to[0] - from[0];
            vec![TorchLayer::SubsamplePad {
                stride,
                before: added / 2,
                after: added - added / 2,
            }]
        }
    }
}
