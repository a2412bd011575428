//! Turns MNIST items into normalized tensors on the training device.

use burn::data::dataloader::batcher::Batcher;
use burn::prelude::*;
use burn::tensor::ops::IntElem;

use super::mnist::{IMAGE_PIXELS, IMAGE_SIDE, MnistItem};

/// Mean and standard deviation of MNIST pixels scaled to [0, 1] (the usual constants).
const PIXEL_MEAN: f32 = 0.1307;
const PIXEL_STD: f32 = 0.3081;

/// Maps a raw pixel to the zero-mean, unit-variance scale the models train on.
pub fn normalize_pixel(pixel: u8) -> f32 {
    (f32::from(pixel) / 255.0 - PIXEL_MEAN) / PIXEL_STD
}

/// A batch of images `[n, 1, 28, 28]` and their digits `[n]`.
#[derive(Debug, Clone)]
pub struct MnistBatch<B: Backend> {
    pub images: Tensor<B, 4>,
    pub targets: Tensor<B, 1, Int>,
}

/// Builds [`MnistBatch`]es; one host-to-device copy per tensor.
#[derive(Debug, Clone, Default)]
pub struct MnistBatcher;

impl<B: Backend> Batcher<B, MnistItem, MnistBatch<B>> for MnistBatcher {
    fn batch(&self, items: Vec<MnistItem>, device: &B::Device) -> MnistBatch<B> {
        let n = items.len();
        let mut pixels = Vec::with_capacity(n * IMAGE_PIXELS);
        for item in &items {
            pixels.extend(item.pixels.iter().map(|&p| normalize_pixel(p)));
        }
        let labels: Vec<i64> = items.iter().map(|item| i64::from(item.label)).collect();
        let images = TensorData::new(pixels, [n, 1, IMAGE_SIDE, IMAGE_SIDE]);
        let targets = TensorData::new(labels, [n]).convert::<IntElem<B>>();
        MnistBatch {
            images: Tensor::from_data(images, device),
            targets: Tensor::from_data(targets, device),
        }
    }
}
