//! The two named CNNs, as presets of the layer-by-layer [`Cnn`]: the seed's single-conv CNN
//! and the LeNet-style CNN. Their configs keep the settings run files and saved runs name
//! (`filters`, `channels`, `hidden`, …) and expand to the layers.

use burn::prelude::*;

use cubenet_kernels::Precision;

use super::{Cnn, CnnConfig, ConvSpec, KernelPath, LayerSpec, ModelError, Width};

/// The single-conv CNN: conv 3x3 (1→d) → ReLU → 2x2 max-pool → dense to the classes.
#[derive(Config, Debug)]
pub struct SimpleCnnConfig {
    /// Convolution filters `d`.
    #[config(default = 32)]
    pub filters: usize,
    /// Side of the square gray input images.
    #[config(default = 28)]
    pub image_size: usize,
    /// Output classes.
    #[config(default = 10)]
    pub num_classes: usize,
    /// Refuse an input whose conv output the 2x2 pool windows do not tile exactly.
    #[config(default = true)]
    pub exact_pooling: bool,
    /// Which implementation runs the conv·ReLU·pool block and the dense layer.
    #[config(default = "KernelPath::Custom")]
    pub kernels: KernelPath,
    /// How cubenet's kernels multiply in the convolution (see [`CnnConfig::precision`]).
    #[config(default = "Precision::Fp32")]
    pub precision: Precision,
}

impl SimpleCnnConfig {
    /// The layers of this network; with `exact_pooling`, refused if its pool does not tile
    /// the conv output.
    pub fn cnn(&self) -> Result<CnnConfig, ModelError> {
        let layers = vec![
            LayerSpec::Conv(ConvSpec::new(self.filters)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Dense(Width::Classes),
        ];
        preset(
            layers,
            self.image_size,
            self.num_classes,
            (self.kernels, self.precision),
            self.exact_pooling,
        )
    }

    /// Checks the geometry and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Cnn<B>, ModelError> {
        self.cnn()?.init(device)
    }
}

/// The LeNet-style CNN: conv 5x5 (padding 2) → ReLU → 2x2 pool → conv 5x5 → ReLU → 2x2
/// pool → dense `hidden` → ReLU → dense to the classes.
#[derive(Config, Debug)]
pub struct LeNetConfig {
    /// Filters of the first and second convolution.
    #[config(default = "[32, 64]")]
    pub channels: [usize; 2],
    /// Width of the hidden dense layer.
    #[config(default = 128)]
    pub hidden: usize,
    /// Side of the square gray input images.
    #[config(default = 28)]
    pub image_size: usize,
    /// Output classes.
    #[config(default = 10)]
    pub num_classes: usize,
    /// Refuse inputs whose conv outputs the 2x2 pool windows do not tile exactly.
    #[config(default = true)]
    pub exact_pooling: bool,
    /// Which implementation runs the conv·ReLU·pool blocks and the dense layers.
    #[config(default = "KernelPath::Custom")]
    pub kernels: KernelPath,
    /// How cubenet's kernels multiply in the convolutions (see [`CnnConfig::precision`]).
    #[config(default = "Precision::Fp32")]
    pub precision: Precision,
}

impl LeNetConfig {
    /// The layers of this network; with `exact_pooling`, refused if its pools do not tile
    /// the conv outputs.
    pub fn cnn(&self) -> Result<CnnConfig, ModelError> {
        let [c1, c2] = self.channels;
        let layers = vec![
            LayerSpec::Conv(ConvSpec::new(c1).with_kernel(5).with_padding(2)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Conv(ConvSpec::new(c2).with_kernel(5)),
            LayerSpec::Relu,
            LayerSpec::pool(2),
            LayerSpec::Dense(Width::Units(self.hidden)),
            LayerSpec::Relu,
            LayerSpec::Dense(Width::Classes),
        ];
        preset(
            layers,
            self.image_size,
            self.num_classes,
            (self.kernels, self.precision),
            self.exact_pooling,
        )
    }

    /// Checks the geometry and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Cnn<B>, ModelError> {
        self.cnn()?.init(device)
    }
}

/// A preset's layers on square gray `image_size` images, checked for exact pooling if asked.
fn preset(
    layers: Vec<LayerSpec>,
    image_size: usize,
    classes: usize,
    (kernels, precision): (KernelPath, Precision),
    exact_pooling: bool,
) -> Result<CnnConfig, ModelError> {
    let input = [1, image_size, image_size];
    let cnn = CnnConfig::new(input, classes, layers.into())
        .with_kernels(kernels)
        .with_precision(precision);
    if exact_pooling {
        cnn.check_exact_pooling()?;
    }
    Ok(cnn)
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
