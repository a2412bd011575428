//! Time to accuracy on MNIST: train a network from scratch for a fixed schedule with the
//! whole training set already on the device, the clock running only while training (each
//! epoch ends with a device synchronization; the test evaluation after it is not timed).
//!
//! Kernels are compiled and autotuned before the clock starts, by a few untimed steps of a
//! throwaway network of the same shapes. Each step is cubenet's loss and fused SGD with
//! momentum; the learning rate rises linearly from zero over the warm-up fraction of the run
//! (if any), then decays linearly to zero at its end; batches are consecutive
//! slices of a per-epoch permutation of the images (gathered on the device); a last partial
//! batch is dropped, so every step has the same shapes.

use std::ops::Range;
use std::time::Instant;

use burn::data::dataset::Dataset;
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::prelude::*;
use cubenet_kernels::AutodiffKernelBackend;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use super::epoch::on_device;
use super::step::train_step;
use super::timing::sync;
use crate::data::{ImageBatch, ImageSubset};
use crate::device::{BackendKind, BackendTask, run_on};
use crate::model::{ImageModel, ImageModelConfig, ModelError};
use crate::train::{FusedSgdConfig, RunError, TrainError, evaluate};

/// Untimed steps that compile the kernels before the clock starts.
const WARMUP_STEPS: usize = 3;

/// The network and schedule of a speedrun; the schedule's defaults are the fastest to 99%
/// we measured (docs/perf-log/2026-11-25-v17-speedrun-schedule.md).
#[derive(Config, Debug)]
pub struct SpeedrunConfig {
    pub model: ImageModelConfig,
    #[config(default = 256)]
    pub batch_size: usize,
    #[config(default = 2)]
    pub epochs: usize,
    /// Peak learning rate, reached at the end of the warm-up.
    #[config(default = 0.1)]
    pub lr: f64,
    #[config(default = 0.9)]
    pub momentum: f64,
    /// Fraction of the run's steps over which the learning rate rises from zero to `lr`
    /// (0: the run starts at the peak). Half the run, a triangle: at batch 256 a run that
    /// starts at its peak needs a lower one and ends 0.3 points less accurate.
    #[config(default = 0.5)]
    pub warmup: f64,
}

impl SpeedrunConfig {
    /// The learning rate after `done` of the run's `total` steps: a linear rise over the
    /// warm-up, then a linear decay to zero.
    pub fn lr_at(&self, done: usize, total: usize) -> f64 {
        let progress = done as f64 / total as f64;
        if progress < self.warmup {
            self.lr * progress / self.warmup
        } else {
            self.lr * (1.0 - progress) / (1.0 - self.warmup)
        }
    }
}

/// Where a run stood at the end of an epoch.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct EpochMark {
    pub epoch: usize,
    /// Training wall time since the clock started, synchronized.
    pub train_seconds: f64,
    pub test_accuracy: f64,
}

/// One seed's run.
#[derive(Debug, Clone, Serialize)]
pub struct SpeedrunResult {
    pub seed: u64,
    pub marks: Vec<EpochMark>,
}

impl SpeedrunResult {
    /// The last epoch's mark: the run's time and accuracy.
    pub fn last(&self) -> EpochMark {
        *self.marks.last().expect("a run has at least one epoch")
    }

    /// Training time at the first epoch end with at least `accuracy`.
    pub fn time_to(&self, accuracy: f64) -> Option<f64> {
        self.marks
            .iter()
            .find(|mark| mark.test_accuracy >= accuracy)
            .map(|mark| mark.train_seconds)
    }
}

/// [`speedrun`] on the backend `kind`. Not generic, so that its callers (the speedrun
/// example, the tests) do not compile the training code again for every backend: generic
/// code is compiled in the crate that names its concrete types, here once for all of them.
pub fn speedrun_on(
    kind: BackendKind,
    config: &SpeedrunConfig,
    train: &ImageSubset,
    test: &ImageSubset,
    seeds: Range<u64>,
    report: &mut dyn FnMut(&SpeedrunResult),
) -> Result<Vec<SpeedrunResult>, RunError> {
    struct Task<'a> {
        config: &'a SpeedrunConfig,
        train: &'a ImageSubset,
        test: &'a ImageSubset,
        seeds: Range<u64>,
        report: &'a mut dyn FnMut(&SpeedrunResult),
    }
    impl BackendTask for Task<'_> {
        type Output = Result<Vec<SpeedrunResult>, ModelError>;

        fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
            speedrun::<B>(
                &device,
                self.config,
                self.train,
                self.test,
                self.seeds,
                self.report,
            )
        }
    }
    let task = Task {
        config,
        train,
        test,
        seeds,
        report,
    };
    Ok(run_on(kind, task)?.map_err(TrainError::from)?)
}

/// Runs `config` once per seed on `device`; `report` sees each run as it finishes.
pub fn speedrun<B: AutodiffKernelBackend>(
    device: &B::Device,
    config: &SpeedrunConfig,
    train: &ImageSubset,
    test: &ImageSubset,
    seeds: impl IntoIterator<Item = u64>,
    mut report: impl FnMut(&SpeedrunResult),
) -> Result<Vec<SpeedrunResult>, ModelError> {
    let data = on_device::<B>(train, device);
    let run = Trainer {
        config,
        data: &data,
        steps_per_epoch: train.len() / config.batch_size,
    };
    run.warm_up(device)?;
    let mut results = Vec::new();
    for seed in seeds {
        let result = run.train(device, test, seed)?;
        report(&result);
        results.push(result);
    }
    Ok(results)
}

struct Trainer<'a, B: AutodiffKernelBackend> {
    config: &'a SpeedrunConfig,
    data: &'a ImageBatch<B>,
    steps_per_epoch: usize,
}

impl<B: AutodiffKernelBackend> Trainer<'_, B> {
    /// A freshly initialized network and its optimizer (seed the backend first).
    fn fresh(
        &self,
        device: &B::Device,
    ) -> Result<(ImageModel<B>, impl Optimizer<ImageModel<B>, B> + use<B>), ModelError> {
        let model = self.config.model.init::<B>(device)?;
        let optimizer = FusedSgdConfig::new()
            .with_momentum(self.config.momentum)
            .init::<B>();
        Ok((model, optimizer))
    }

    fn warm_up(&self, device: &B::Device) -> Result<(), ModelError> {
        let (mut model, mut optimizer) = self.fresh(device)?;
        let epoch = self.shuffled(device, u64::MAX, 0);
        for step in 0..WARMUP_STEPS.min(self.steps_per_epoch) {
            model = self.step(model, &mut optimizer, &epoch, step, self.config.lr);
        }
        sync::<B>(device);
        Ok(())
    }

    fn train(
        &self,
        device: &B::Device,
        test: &ImageSubset,
        seed: u64,
    ) -> Result<SpeedrunResult, ModelError> {
        B::seed(device, seed);
        let (mut model, mut optimizer) = self.fresh(device)?;
        let total = self.config.epochs * self.steps_per_epoch;
        let mut marks = Vec::with_capacity(self.config.epochs);
        let mut train_seconds = 0.0;
        sync::<B>(device);
        for epoch in 0..self.config.epochs {
            let start = Instant::now();
            let batches = self.shuffled(device, seed, epoch);
            for step in 0..self.steps_per_epoch {
                let lr = self
                    .config
                    .lr_at(epoch * self.steps_per_epoch + step, total);
                model = self.step(model, &mut optimizer, &batches, step, lr);
            }
            sync::<B>(device);
            train_seconds += start.elapsed().as_secs_f64();
            marks.push(EpochMark {
                epoch: epoch + 1,
                train_seconds,
                test_accuracy: evaluate(&model.valid(), test, device, false).accuracy(),
            });
        }
        Ok(SpeedrunResult { seed, marks })
    }

    /// The images of epoch `epoch`'s batches in run `seed`, in order, gathered on the device.
    /// Only whole batches are kept: Burn's CubeCL backend slices a batch out in place only
    /// when both of its ends lie on the allocation alignment (512 bytes on CUDA), which
    /// the targets of batches of 128 do only if no partial batch trails them.
    fn shuffled(&self, device: &B::Device, seed: u64, epoch: usize) -> ImageBatch<B> {
        let images = self.data.targets.dims()[0];
        let mut order: Vec<i64> = (0..images as i64).collect();
        order.shuffle(&mut StdRng::seed_from_u64(
            seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64),
        ));
        let kept = self.steps_per_epoch * self.config.batch_size;
        order.truncate(kept);
        let order = Tensor::<B, 1, Int>::from_data(TensorData::new(order, [kept]), device);
        ImageBatch {
            images: self.data.images.clone().select(0, order.clone()),
            targets: self.data.targets.clone().select(0, order),
            label_smoothing: 0.0,
        }
    }

    fn step(
        &self,
        model: ImageModel<B>,
        optimizer: &mut impl Optimizer<ImageModel<B>, B>,
        epoch: &ImageBatch<B>,
        step: usize,
        lr: f64,
    ) -> ImageModel<B> {
        let rows = step * self.config.batch_size..(step + 1) * self.config.batch_size;
        let images = epoch.images.clone().slice(rows.clone());
        let targets = epoch.targets.clone().slice(rows);
        train_step(model, optimizer, images, targets, lr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::LeNetConfig;

    fn schedule(warmup: f64) -> SpeedrunConfig {
        SpeedrunConfig::new(ImageModelConfig::Lenet(LeNetConfig::new()))
            .with_lr(0.1)
            .with_warmup(warmup)
    }

    #[test]
    fn learning_rate_rises_over_the_warmup_then_decays_to_zero() {
        let warm = schedule(0.25);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(warm.lr_at(0, 100), 0.0));
        assert!(close(warm.lr_at(10, 100), 0.04));
        assert!(close(warm.lr_at(25, 100), 0.1));
        assert!(close(warm.lr_at(50, 100), 0.1 * 0.5 / 0.75));
        assert!(close(warm.lr_at(100, 100), 0.0));

        let cold = schedule(0.0);
        assert!(close(cold.lr_at(0, 100), 0.1));
        assert!(close(cold.lr_at(75, 100), 0.025));
    }
}
