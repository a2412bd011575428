//! Data-parallel scaling: a network trained by burn-train's multi-device strategy (what
//! `--devices` runs) at a batch per device, on the first device alone and on all of them,
//! over generated images. The training images per second of the second epoch are the
//! measure: the first compiles and autotunes the kernels, and the data loading, the
//! gradients' trip to the first device and the optimizer step all count, as in a real run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cubenet_kernels::AutodiffKernelBackend;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::report::ScalingRecord;
use super::sweep::{BenchModel, Point};
use super::variant::{BurnSetup, Variant};
use crate::data::{ChannelStats, ImageSet, ImageShape, ImageSubset, NUM_CLASSES};
use crate::device::{BackendError, BackendKind, BackendTask, devices_at, run_on};
use crate::train::{ImageSplits, ImageTrainingConfig, Run, RunDir, TrainError, train};

/// Seeds the generated images and the networks' weights.
const SEED: u64 = 7;

/// What to scale: every point on the first of `devices`, then on all of them.
#[derive(Debug, Clone)]
pub struct ScalingPlan {
    /// The networks and batch sizes per device.
    pub points: Vec<Point>,
    /// Device indices of the backend; the first alone is the baseline.
    pub devices: Vec<usize>,
    /// Optimizer steps in each (warm-up, then timed) epoch.
    pub steps: usize,
    /// Threads assembling each device's batches (see [`ImageTrainingConfig::workers`]).
    pub workers: usize,
    /// Where the runs' artifact directories go.
    pub dir: PathBuf,
}

impl ScalingPlan {
    /// The device lists each point trains on: the first device, then all (once when
    /// they are the same).
    pub fn device_sets(&self) -> Vec<Vec<usize>> {
        let mut sets = vec![self.devices[..1].to_vec(), self.devices.clone()];
        sets.dedup();
        sets
    }
}

/// `images` random images of `model`'s input with random labels, split into a training
/// set of `train` images and a validation (and test) set of the rest.
fn generated_splits(model: BenchModel, images: usize, train: usize) -> ImageSplits {
    let [channels, height, width] = model.input();
    let shape = ImageShape {
        channels,
        height,
        width,
    };
    let mut rng = StdRng::seed_from_u64(SEED);
    let pixels = (0..images * shape.bytes()).map(|_| rng.random()).collect();
    let labels = (0..images)
        .map(|_| rng.random_range(0..NUM_CLASSES as u32))
        .collect();
    let classes = (0..NUM_CLASSES).map(|class| class.to_string()).collect();
    let set = Arc::new(ImageSet::new(pixels, labels, shape, classes));
    let all = ImageSubset::all(set, ChannelStats::unit(channels));
    let (train, valid) = all.split_off(1.0 - train as f64 / images as f64, SEED);
    ImageSplits {
        train,
        test: valid.clone(),
        valid,
        test_is_valid: true,
    }
}

struct ScalingRun<'a> {
    variant: Variant,
    setup: BurnSetup,
    plan: &'a ScalingPlan,
    measured: &'a mut dyn FnMut(ScalingRecord),
}

impl ScalingRun<'_> {
    /// Trains `point` for two epochs of `plan.steps` steps on `devices`; the images per
    /// second of the second.
    fn images_per_second<B: AutodiffKernelBackend>(
        &self,
        default: &B::Device,
        kind: BackendKind,
        point: Point,
        devices: &[usize],
        dir: &Path,
    ) -> Result<f64, TrainError> {
        let setup = self.setup;
        let train_images = self.plan.steps * point.batch * devices.len();
        let splits = generated_splits(point.model, train_images + point.batch, train_images);
        let mut config = ImageTrainingConfig::new(point.model.config(
            point.filters,
            setup.kernels,
            setup.precision,
        ))
        .with_epochs(2)
        .with_batch_size(point.batch)
        .with_seed(SEED)
        .with_workers(self.plan.workers)
        .with_devices(devices.to_vec());
        config.model = config.model.fit(splits.shape(), splits.classes().len())?;
        let run = Run::fresh(RunDir::claim(dir, &[])?);
        let devices = devices_at::<B>(kind, default, devices)?;
        let (_, speed) = train::<B>(&config, &splits, &run, &devices)?;
        Ok(speed.expect("two epochs trained").images_per_second)
    }
}

impl BackendTask for ScalingRun<'_> {
    type Output = Result<(), TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output {
        for &point in &self.plan.points {
            for devices in self.plan.device_sets() {
                let dir = self.plan.dir.join(format!(
                    "{}-{}-b{}-on-{}",
                    self.variant,
                    point.model,
                    point.batch,
                    devices.len()
                ));
                let images_per_second =
                    self.images_per_second::<B>(&device, kind, point, &devices, &dir)?;
                (self.measured)(ScalingRecord {
                    model: point.model,
                    variant: self.variant,
                    batch: point.batch,
                    filters: point.filters,
                    devices,
                    images_per_second,
                });
            }
        }
        Ok(())
    }
}

/// A scaling run that failed: the backend, or a run's training.
#[derive(Debug, thiserror::Error)]
pub enum ScalingError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Train(#[from] TrainError),
}

/// Runs `plan` on `variant`'s backend, handing each record to `measured` as it is made.
pub fn run_scaling(
    variant: Variant,
    plan: &ScalingPlan,
    measured: &mut dyn FnMut(ScalingRecord),
) -> Result<(), ScalingError> {
    let Some(setup) = variant.burn_setup() else {
        return Err(BackendError::NotRunnable(variant.to_string()).into());
    };
    let task = ScalingRun {
        variant,
        setup,
        plan,
        measured,
    };
    Ok(run_on(setup.backend, task)??)
}
