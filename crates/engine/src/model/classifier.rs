//! The image classifiers as one Burn module, so that training and evaluation code is
//! written once for every architecture.

use burn::prelude::*;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend, Precision};
use serde::{Deserialize, Serialize};

use super::{
    Cnn, CnnConfig, Kernels, LeNetConfig, Mlp, MlpConfig, ModelError, NetworkSize, Sequential,
    SimpleCnnConfig, StepOutputs, with_fresh_leaves,
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

    /// The precision the network asks cubenet's convolutions for: fp32 for the MLP (it has
    /// none) and on Burn's ops (they ignore the setting).
    pub fn precision(&self) -> Precision {
        let (kernels, precision) = match self {
            ImageModelConfig::Simple(c) => (c.kernels, c.precision),
            ImageModelConfig::Lenet(c) => (c.kernels, c.precision),
            ImageModelConfig::Mlp(_) => return Precision::Fp32,
            ImageModelConfig::Cnn(c) => (c.kernels, c.precision),
        };
        match kernels {
            Kernels::Custom => precision,
            Kernels::Burn => Precision::Fp32,
        }
    }

    /// The network with its convolutions multiplying in `precision` (the MLP has none).
    pub fn with_precision(self, precision: Precision) -> Self {
        match self {
            ImageModelConfig::Simple(c) => ImageModelConfig::Simple(c.with_precision(precision)),
            ImageModelConfig::Lenet(c) => ImageModelConfig::Lenet(c.with_precision(precision)),
            ImageModelConfig::Mlp(c) => ImageModelConfig::Mlp(c),
            ImageModelConfig::Cnn(c) => ImageModelConfig::Cnn(c.with_precision(precision)),
        }
    }

    /// Its parameters and the values an image passes through it, from its layer table.
    pub fn size(&self) -> Result<NetworkSize, ModelError> {
        Ok(match self {
            ImageModelConfig::Simple(c) => c.cnn()?.summary()?.size(),
            ImageModelConfig::Lenet(c) => c.cnn()?.summary()?.size(),
            ImageModelConfig::Mlp(c) => c.size(),
            ImageModelConfig::Cnn(c) => c.summary()?.size(),
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
    pub fn kernels(&self) -> Kernels {
        match self {
            ImageModel::Mlp(_) => Kernels::Burn,
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

    /// Class logits averaged over each image and its left-right mirror: the test-time
    /// flips of a run trained on flipped images.
    pub fn forward_with_flips(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let mirrored = images.clone().flip([3]);
        (self.forward(images) + self.forward(mirrored)).mul_scalar(0.5)
    }

    /// Logits and softmax cross-entropy loss against the batch's classes, with the
    /// batch's label smoothing.
    pub fn forward_classification(&self, batch: ImageBatch<B>) -> ClassificationOutput<B> {
        let output = self.forward(batch.images);
        let loss = self.kernels().smoothed_cross_entropy(
            output.clone(),
            batch.targets.clone(),
            batch.label_smoothing,
        );
        ClassificationOutput {
            loss,
            output,
            targets: batch.targets,
        }
    }
}

impl<B: AutodiffKernelBackend> TrainStep for ImageModel<B> {
    type Input = ImageBatch<B>;
    type Output = StepOutputs;

    /// Differentiates with respect to fresh leaves of the parameters' values, which drops
    /// burn-train's DDP marks (see [`with_fresh_leaves`]): cubenet's optimizers average the
    /// replicas' gradients themselves. The outputs' copy for the metrics is queued before
    /// the backward pass ([`StepOutputs`] says why).
    fn step(&self, batch: ImageBatch<B>) -> TrainOutput<StepOutputs> {
        let model = with_fresh_leaves(self);
        let item = model.forward_classification(batch);
        let outputs = StepOutputs::read_early(ClassificationOutput {
            output: item.output.inner(),
            loss: item.loss.clone().inner(),
            targets: item.targets.inner(),
        });
        TrainOutput::new(&model, item.loss.backward(), outputs)
    }
}

impl<B: KernelBackend> InferenceStep for ImageModel<B> {
    type Input = ImageBatch<B>;
    type Output = StepOutputs;

    fn step(&self, batch: ImageBatch<B>) -> StepOutputs {
        StepOutputs::read_early(self.forward_classification(batch))
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::module::{ModuleVisitor, Param};
    use burn::optim::GradientsParams;
    use burn::tensor::backend::AutodiffBackend;
    use burn::tensor::{Distribution, Tolerance};

    use super::*;

    type B = Autodiff<NdArray>;

    /// Compares each parameter's gradient in a training step's output with the one a plain
    /// backward pass through the model itself gives.
    struct SameGradients<'a> {
        step: &'a GradientsParams,
        plain: &'a <B as AutodiffBackend>::Gradients,
        compared: usize,
    }

    impl ModuleVisitor<B> for SameGradients<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let plain = param.val().grad(self.plain).expect("a plain gradient");
            let step = self
                .step
                .get::<NdArray, D>(param.id)
                .unwrap_or_else(|| panic!("the step gave parameter {} no gradient", param.id));
            step.into_data()
                .assert_approx_eq::<f32>(&plain.into_data(), Tolerance::default());
            self.compared += 1;
        }
    }

    #[test]
    fn a_training_step_gives_every_parameter_its_gradient() {
        let device = Default::default();
        let model =
            ImageModelConfig::Lenet(LeNetConfig::new().with_channels([3, 5]).with_hidden(7))
                .init::<B>(&device)
                .unwrap();
        let batch = ImageBatch {
            images: Tensor::random([3, 1, 28, 28], Distribution::Normal(0.0, 1.0), &device),
            targets: Tensor::from_ints([1, 7, 7], &device),
            label_smoothing: 0.1,
        };

        let output = TrainStep::step(&model, batch.clone());
        let plain = model.forward_classification(batch).loss.backward();

        let mut visitor = SameGradients {
            step: &output.grads,
            plain: &plain,
            compared: 0,
        };
        model.visit(&mut visitor);
        // Weight and bias of two convolutions and two dense layers.
        assert_eq!(visitor.compared, 8);
    }
}
