//! The digit classifiers as one Burn module, so that training and evaluation code is written
//! once for every architecture.

use burn::prelude::*;
use burn::train::{ClassificationOutput, InferenceStep, TrainOutput, TrainStep};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};
use serde::{Deserialize, Serialize};

use super::{
    KernelPath, LeNet, LeNetConfig, Mlp, MlpConfig, ModelError, SimpleCnn, SimpleCnnConfig,
};
use crate::data::MnistBatch;

/// Which network to build, with its settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MnistModelConfig {
    /// The single-conv seed CNN.
    Simple(SimpleCnnConfig),
    /// The two-conv, two-linear LeNet-style CNN.
    Lenet(LeNetConfig),
    /// An MLP over the flattened pixels.
    Mlp(MlpConfig),
}

impl MnistModelConfig {
    /// Checks the geometry and initializes the network on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<MnistModel<B>, ModelError> {
        Ok(match self {
            MnistModelConfig::Simple(c) => MnistModel::Simple(c.init(device)?),
            MnistModelConfig::Lenet(c) => MnistModel::Lenet(c.init(device)?),
            MnistModelConfig::Mlp(c) => MnistModel::Mlp(c.init(device)?),
        })
    }
}

/// An image classifier: images `[n, 1, h, w]` in, class logits `[n, classes]` out.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)] // a run holds one model; the size gap costs nothing
pub enum MnistModel<B: Backend> {
    Simple(SimpleCnn<B>),
    Lenet(LeNet<B>),
    Mlp(Mlp<B>),
}

impl<B: Backend> MnistModel<B> {
    /// Which implementation runs the layers and the loss (the MLP is Burn's `Linear`s).
    pub fn kernels(&self) -> KernelPath {
        match self {
            MnistModel::Simple(m) => m.kernels(),
            MnistModel::Lenet(m) => m.kernels(),
            MnistModel::Mlp(_) => KernelPath::Burn,
        }
    }
}

impl<B: KernelBackend> MnistModel<B> {
    /// Class logits for a batch of images.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        match self {
            MnistModel::Simple(m) => m.forward(images),
            MnistModel::Lenet(m) => m.forward(images),
            MnistModel::Mlp(m) => m.forward(images.flatten(1, 3)),
        }
    }

    /// Logits and softmax cross-entropy loss against the batch's digits.
    pub fn forward_classification(&self, batch: MnistBatch<B>) -> ClassificationOutput<B> {
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

impl<B: AutodiffKernelBackend> TrainStep for MnistModel<B> {
    type Input = MnistBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: MnistBatch<B>) -> TrainOutput<ClassificationOutput<B>> {
        let item = self.forward_classification(batch);
        TrainOutput::new(self, item.loss.backward(), item)
    }
}

impl<B: KernelBackend> InferenceStep for MnistModel<B> {
    type Input = MnistBatch<B>;
    type Output = ClassificationOutput<B>;

    fn step(&self, batch: MnistBatch<B>) -> ClassificationOutput<B> {
        self.forward_classification(batch)
    }
}
