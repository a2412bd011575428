//! The two named CNNs, as presets of the layer-by-layer [`Cnn`]: the single-conv CNN and
//! the LeNet-style CNN. One config type, [`PresetConfig`], holds what every preset has (input
//! size, classes, kernels, precision); its network part holds the settings run files and
//! saved runs name (`filters`, `channels`, `hidden`) and expands to the layers.

use burn::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use cubenet_kernels::Precision;

use super::{Cnn, CnnConfig, ConvSpec, Kernels, LayerSpec, ModelError, Width};

/// What tells one preset from another: its own settings, and the layers they give.
pub trait PresetNetwork:
    Clone + std::fmt::Debug + Default + Serialize + DeserializeOwned + Send + Sync
{
    /// The layers, ending in a dense layer to the classes.
    fn layers(&self) -> Vec<LayerSpec>;
}

/// The single-conv CNN: conv 3x3 (1→d) → ReLU → 2x2 max-pool → dense to the classes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SingleConv {
    /// Convolution filters `d`.
    pub filters: usize,
}

impl Default for SingleConv {
    fn default() -> Self {
        Self { filters: 32 }
    }
}

impl PresetNetwork for SingleConv {
    fn layers(&self) -> Vec<LayerSpec> {
        vec![
            LayerSpec::Conv(ConvSpec::new(self.filters)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Dense(Width::Classes),
        ]
    }
}

/// The LeNet-style CNN: conv 5x5 (padding 2) → ReLU → 2x2 pool → conv 5x5 → ReLU → 2x2
/// pool → dense `hidden` → ReLU → dense to the classes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeNet {
    /// Filters of the first and second convolution.
    pub channels: [usize; 2],
    /// Width of the hidden dense layer.
    pub hidden: usize,
}

impl Default for LeNet {
    fn default() -> Self {
        Self {
            channels: [32, 64],
            hidden: 128,
        }
    }
}

impl PresetNetwork for LeNet {
    fn layers(&self) -> Vec<LayerSpec> {
        let [c1, c2] = self.channels;
        vec![
            LayerSpec::Conv(ConvSpec::new(c1).with_kernel(5).with_padding(2)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Conv(ConvSpec::new(c2).with_kernel(5)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Dense(Width::Units(self.hidden)),
            LayerSpec::Relu,
            LayerSpec::Dense(Width::Classes),
        ]
    }
}

/// A preset CNN on square gray images. Saved as one flat object (the network's settings
/// beside the shared ones), as configs of earlier runs are.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PresetConfig<N> {
    #[serde(flatten)]
    pub network: N,
    /// Side of the square gray input images.
    pub image_size: usize,
    /// Output classes.
    pub num_classes: usize,
    /// Refuse an input whose conv outputs the 2x2 pool windows do not tile exactly.
    pub exact_pooling: bool,
    /// Which implementation runs the conv·ReLU·pool blocks and the dense layers.
    pub kernels: Kernels,
    /// How cubenet's kernels multiply in the convolutions (see [`CnnConfig::precision`]).
    pub precision: Precision,
}

/// The single-conv CNN's config.
pub type SimpleCnnConfig = PresetConfig<SingleConv>;
/// The LeNet-style CNN's config.
pub type LeNetConfig = PresetConfig<LeNet>;

impl<N: PresetNetwork> burn::config::Config for PresetConfig<N> {}

impl<N: PresetNetwork> Default for PresetConfig<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: PresetNetwork> PresetConfig<N> {
    /// The network at its defaults, for 28×28 gray images in 10 classes, on cubenet's
    /// kernels in fp32.
    pub fn new() -> Self {
        Self {
            network: N::default(),
            image_size: 28,
            num_classes: 10,
            exact_pooling: true,
            kernels: Kernels::Custom,
            precision: Precision::Fp32,
        }
    }

    pub fn with_image_size(self, image_size: usize) -> Self {
        Self { image_size, ..self }
    }

    pub fn with_num_classes(self, num_classes: usize) -> Self {
        Self {
            num_classes,
            ..self
        }
    }

    pub fn with_exact_pooling(self, exact_pooling: bool) -> Self {
        Self {
            exact_pooling,
            ..self
        }
    }

    pub fn with_kernels(self, kernels: Kernels) -> Self {
        Self { kernels, ..self }
    }

    pub fn with_precision(self, precision: Precision) -> Self {
        Self { precision, ..self }
    }

    /// The layers of this network; with `exact_pooling`, refused if its pools do not tile
    /// the conv outputs.
    pub fn cnn(&self) -> Result<CnnConfig, ModelError> {
        let input = [1, self.image_size, self.image_size];
        let cnn = CnnConfig::new(input, self.num_classes, self.network.layers().into())
            .with_kernels(self.kernels)
            .with_precision(self.precision);
        if self.exact_pooling {
            cnn.check_exact_pooling()?;
        }
        Ok(cnn)
    }

    /// Checks the geometry and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Cnn<B>, ModelError> {
        self.cnn()?.init(device)
    }
}

impl SimpleCnnConfig {
    pub fn with_filters(self, filters: usize) -> Self {
        Self {
            network: SingleConv { filters },
            ..self
        }
    }
}

impl LeNetConfig {
    pub fn with_channels(self, channels: [usize; 2]) -> Self {
        Self {
            network: LeNet {
                channels,
                ..self.network
            },
            ..self
        }
    }

    pub fn with_hidden(self, hidden: usize) -> Self {
        Self {
            network: LeNet {
                hidden,
                ..self.network
            },
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::NdArray;

    use super::*;

    /// Their layers are checked against run-file layers in `cnn.rs`; here their sizes.
    #[test]
    fn presets_have_their_parameter_counts() {
        let params = |config: CnnConfig| {
            let summary = config.summary().unwrap().params();
            let cnn = config.init::<NdArray>(&Default::default()).unwrap();
            assert_eq!(cnn.num_params(), summary);
            summary
        };
        // 8·9 + 8 conv, 13·13·8·10 + 10 dense.
        assert_eq!(
            params(SimpleCnnConfig::new().with_filters(8).cnn().unwrap()),
            13_610
        );
        // 832 + 51,264 conv, 204,928 + 1,290 dense.
        assert_eq!(params(LeNetConfig::new().cnn().unwrap()), 258_314);
    }

    #[test]
    fn inexact_pooling_is_refused_unless_allowed() {
        // 27 → conv 3 → 25, which 2x2 windows do not tile.
        let odd = SimpleCnnConfig::new().with_image_size(27);
        assert_eq!(
            odd.cnn().unwrap_err().to_string(),
            "layer `3 (pool 2)`: 2x2 windows with stride 2x2 do not tile the 25x25 input exactly"
        );
        assert!(odd.with_exact_pooling(false).cnn().is_ok());
        let odd = LeNetConfig::new().with_image_size(30);
        assert!(odd.cnn().is_err());
        assert!(odd.with_exact_pooling(false).cnn().is_ok());
    }
}
