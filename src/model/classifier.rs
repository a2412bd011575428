//! The image classifiers as one Burn module, so that training and evaluation code is
//! written once for every architecture.

use burn::prelude::*;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};
use serde::{Deserialize, Serialize};

use super::{
    Cnn, CnnConfig, KernelPath, LeNetConfig, Mlp, MlpConfig, ModelError, Sequential,
    SimpleCnnConfig,
};
use crate::data::{ImageBatch, ImageShape};

/// Which network to build, with its settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImageModelConfig {
    /// The single-conv CNN (a preset of [`Cnn`]).
    Simple(SimpleCnnConfig),
    /// The two-conv, two-dense LeNet-style CNN (a preset of [`Cnn`]).
    Lenet(LeNetConfig),
    /// An MLP over the flattened pixels.
    Mlp(MlpConfig),
    /// A CNN defined layer by layer.
    Cnn(CnnConfig),
}

impl ImageModelConfig {
    /// Checks the geometry and initializes the network on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<ImageModel<B>, ModelError> {
        Ok(match self {
            ImageModelConfig::Simple(c) => ImageModel::Cnn(c.init(device)?),
            ImageModelConfig::Lenet(c) => ImageModel::Cnn(c.init(device)?),
            ImageModelConfig::Mlp(c) => ImageModel::Mlp(c.init(device)?),
            ImageModelConfig::Cnn(c) => ImageModel::Cnn(c.init(device)?),
        })
    }

    /// The network as a PyTorch `nn.Sequential` (see [`Sequential`]).
    pub fn sequential(&self) -> Result<Sequential, ModelError> {
        match self {
            ImageModelConfig::Simple(c) => c.cnn()?.sequential(),
            ImageModelConfig::Lenet(c) => c.cnn()?.sequential(),
            ImageModelConfig::Mlp(c) => c.sequential("dense", true),
            ImageModelConfig::Cnn(c) => c.sequential(),
        }
    }

    /// The same network sized for `classes` classes of images of `shape`: the CNN's input
    /// and classes, the MLP's inputs and outputs, the preset CNNs' image side and classes
    /// (they take square gray images only).
    pub fn fit(self, shape: ImageShape, classes: usize) -> Result<Self, ModelError> {
        let ImageShape {
            channels,
            height,
            width,
        } = shape;
        let square_gray = |model: &'static str| match channels == 1 && height == width {
            true => Ok(height),
            false => Err(ModelError::NotSquareGray {
                model,
                channels,
                height,
                width,
            }),
        };
        Ok(match self {
            ImageModelConfig::Simple(c) => ImageModelConfig::Simple(
                c.with_image_size(square_gray("simple")?)
                    .with_num_classes(classes),
            ),
            ImageModelConfig::Lenet(c) => ImageModelConfig::Lenet(
                c.with_image_size(square_gray("lenet")?)
                    .with_num_classes(classes),
            ),
            ImageModelConfig::Mlp(c) => ImageModelConfig::Mlp(MlpConfig {
                inputs: shape.bytes(),
                outputs: classes,
                ..c
            }),
            ImageModelConfig::Cnn(c) => ImageModelConfig::Cnn(CnnConfig {
                input: [channels, height, width],
                classes,
                ..c
            }),
        })
    }
}

/// An image classifier: images `[n, c, h, w]` in, class logits `[n, classes]` out.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // a run holds one model; the size gap costs nothing
pub enum ImageModel<B: Backend> {
    Mlp(Mlp<B>),
    /// Every CNN: defined layer by layer, or one of the presets.
    Cnn(Cnn<B>),
}

impl<B: Backend> ImageModel<B> {
    /// Which implementation runs the layers and the loss (the MLP is Burn's `Linear`s).
    pub fn kernels(&self) -> KernelPath {
        match self {
            ImageModel::Mlp(_) => KernelPath::Burn,
            ImageModel::Cnn(m) => m.kernels(),
        }
    }
}

impl<B: KernelBackend> ImageModel<B> {
    /// Class logits for a batch of images.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        match self {
            ImageModel::Mlp(m) => m.forward(images.flatten(1, 3)),
            ImageModel::Cnn(m) => m.forward(images),
        }
    }

    /// Logits and softmax cross-entropy loss against the batch's classes.
    pub fn forward_classification(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        let output = self.forward(batch.images);
        let loss = self
            .kernels()
            .cross_entropy(output.clone(), batch.targets.clone());
        ClassificationOutput {
            loss,
            output,
            targets: batch.targets,
        }
    }
}

impl<B: AutodiffKernelBackend> TrainStep for ImageModel<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let item = self.forward_classification(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl<B: KernelBackend> InferenceStep for ImageModel<B> {
    type Input = ImageBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        self.forward_classification(batch)
    }
}
