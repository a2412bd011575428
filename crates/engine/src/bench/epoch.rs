//! One real epoch over MNIST's 60,000 training images, held on the device as one tensor
//! before the clock starts: the end-to-end number next to the per-step timings.

use std::time::Instant;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::module::AutodiffModule;
use burn::prelude::*;
use cubenet_kernels::AutodiffKernelBackend;

use super::step::{SgdStep, bench_model};
use super::sweep::Point;
use super::timing::sync;
use super::variant::BurnSetup;
use crate::data::{ImageBatch, ImageBatcher, ImageSubset};
use crate::model::ImageModel;
use crate::train::evaluate;

/// What one timed epoch gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochResult {
    pub images: usize,
    pub seconds: f64,
    /// Test accuracy after the epoch, in [0, 1] (evaluation not timed).
    pub test_accuracy: f64,
}

/// The whole subset as one batch on `device`.
pub(super) fn on_device<B: Backend>(subset: &ImageSubset, device: &B::Device) -> ImageBatch<B> {
    let items = subset.iter().collect();
    Batcher::<B, _, _>::batch(&ImageBatcher::default(), items, device)
}

/// Trains `point`'s network for one epoch over `train` in order (plain SGD, as the step
/// benchmark), after `warmup` untimed steps on the first batch, then evaluates on `test`.
pub fn time_epoch<B: AutodiffKernelBackend>(
    device: &B::Device,
    point: Point,
    setup: BurnSetup,
    warmup: usize,
    train: &ImageSubset,
    test: &ImageSubset,
) -> EpochResult {
    let data = on_device::<B>(train, device);
    let images = train.len();
    let mut model = bench_model::<B>(point, setup, device);
    let mut sgd = SgdStep::new(setup.kernels);
    let mut step = |model: ImageModel<B>, start: usize| {
        let end = images.min(start + point.batch);
        let x = data.images.clone().slice(start..end);
        let y = data.targets.clone().slice(start..end);
        sgd.run(model, x, y)
    };
    for _ in 0..warmup {
        model = step(model, 0);
    }
    sync::<B>(device);
    let start = Instant::now();
    for first in (0..images).step_by(point.batch) {
        model = step(model, first);
    }
    sync::<B>(device);
    let seconds = start.elapsed().as_secs_f64();
    EpochResult {
        images,
        seconds,
        test_accuracy: evaluate(&model.valid(), test, device, false).accuracy(),
    }
}
