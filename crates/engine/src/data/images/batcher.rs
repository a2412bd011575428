//! Turns images into normalized tensors on the training device, augmented there when the
//! batcher is a training batcher with augmentation on.

use burn::data::dataloader::batcher::Batcher;
use burn::prelude::*;
use burn::tensor::ops::IntElem;

use crate::data::images::augment::batch_seed;
use crate::data::{Augment, ImageItem};

/// A batch of images `[n, c, h, w]` and their classes `[n]`.
#[derive(Debug, Clone)]
pub struct ImageBatch<B: Backend> {
    pub images: Tensor<B, 4>,
    pub targets: Tensor<B, 1, Int>,
    /// The label smoothing ε its loss applies to the targets (0 for one-hot targets).
    pub label_smoothing: f32,
}

/// Builds [`ImageBatch`]es with one host-to-device copy per tensor; pixels are normalized
/// with the statistics the items carry, then augmented on the device as `augment` says.
#[derive(Debug, Clone, Default)]
pub struct ImageBatcher {
    augment: Augment,
    seed: u64,
}

impl ImageBatcher {
    /// Batches for training: augmented as `augment` says, with draws seeded by `seed` and
    /// the batch's images.
    pub fn augmenting(augment: Augment, seed: u64) -> Self {
        Self { augment, seed }
    }
}

impl<B: Backend> Batcher<B, ImageItem, ImageBatch<B>> for ImageBatcher {
    fn batch(&self, items: Vec<ImageItem>, device: &B::Device) -> ImageBatch<B> {
        let n = items.len();
        let shape = match items.first() {
            Some(item) => item.set().shape(),
            None => crate::data::MNIST_SHAPE,
        };
        let mut pixels = Vec::with_capacity(n * shape.bytes());
        for item in &items {
            pixels.extend(item.normalization().normalize(item.pixels()));
        }
        let labels: Vec<i64> = items.iter().map(|item| i64::from(item.label())).collect();
        let dims = [n, shape.channels, shape.height, shape.width];
        let images = Tensor::from_data(TensorData::new(pixels, dims), device);
        let targets = TensorData::new(labels, [n]).convert::<IntElem<B>>();
        let images = match self.augment.changes_images() {
            false => images,
            true => {
                let seed = batch_seed(self.seed, items.iter().map(ImageItem::index));
                self.augment.apply(images, seed)
            }
        };
        ImageBatch {
            images,
            targets: Tensor::from_data(targets, device),
            label_smoothing: self.augment.label_smoothing,
        }
    }
}
