//! An image classification run (MNIST, image folders, IDX, CIFAR-10): load and split the
//! data, fit the network to the images, train with burn-train, save the artifacts, evaluate
//! on the test set.

use std::path::Path;
use std::sync::Arc;

use burn::data::dataloader::batcher::Batcher;
use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::data::dataset::Dataset;
use burn::optim::Optimizer;
use burn::prelude::*;
use burn::train::metric::{AccuracyMetric, LearningRateMetric, LossMetric};
use burn::train::{ExecutionStrategy, MultiDeviceOptim, SupervisedTraining};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};
use serde::{Deserialize, Serialize};

use crate::data::{
    ChannelStats, DeviceImages, EpochShuffled, ImageBatch, ImageBatcher, ImageShape, ImageSource,
    ImageSubset, MNIST_SHAPE, Pass, mnist_classes, mnist_normalization,
};
use crate::device::BackendKind;
use crate::model::{ImageModel, ImageModelConfig, Precision};
use crate::train::fit::data_parallel::{self, DataParallel};
use crate::train::fit::memory_check;
use crate::train::fit::run::{Run, RunJob, launch};
use crate::train::fit::train_loop::{LoopResult, TrainLoop};
use crate::train::jobs::image_splits::ImageSplits;
use crate::train::run_dir::RunDir;
use crate::train::run_dir::artifacts::{
    load_settings, plot_learning_curves, save_config, save_model,
};
use crate::train::run_dir::confusion::ConfusionMatrix;
use crate::train::{
    ImageTrainingConfig, OptimizerConfig, RunError, RunSchedule, TrainError, TrainingSpeed,
    read_weights,
};

/// Images per batch when evaluating (no gradients, so larger than training batches).
const EVAL_BATCH: usize = 1000;

/// What `config.json` holds for an image run: its settings and what a prediction needs
/// besides the weights. Files of runs from before class names were saved read as MNIST's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SavedImageConfig {
    #[serde(flatten)]
    pub config: ImageTrainingConfig,
    /// Class names, in label order.
    #[serde(default = "mnist_classes")]
    pub classes: Vec<String>,
    /// The images the model takes.
    #[serde(default = "mnist_shape")]
    pub shape: ImageShape,
    /// What the pixels (scaled to 0..1) are normalized with.
    #[serde(default = "mnist_normalization")]
    pub normalization: ChannelStats,
}

fn mnist_shape() -> ImageShape {
    MNIST_SHAPE
}

impl SavedImageConfig {
    /// Reads `config.json` from the artifact directory `dir`.
    pub fn load(dir: &RunDir) -> Result<Self, TrainError> {
        load_settings(&dir.config())
    }
}

/// Trains the configured model on `splits.train` (validating on `splits.valid`) on
/// `devices` (the model's first; several train data-parallel), writes the artifacts into
/// the run's directory, prints the training speed, and returns the model of the epoch with
/// the lowest validation loss and the speed (none when a resumed run had no epoch left to
/// train).
pub fn train<B: AutodiffKernelBackend>(
    config: &ImageTrainingConfig,
    splits: &ImageSplits,
    run: &Run,
    devices: &[B::Device],
) -> Result<(ImageModel<B::InnerBackend>, Option<TrainingSpeed>), TrainError> {
    config.validate()?;
    let device = &devices[0];
    B::seed(device, config.seed);
    let precision = config.model.precision();
    let computed = B::conv_precision(precision, device);
    if !matches!(config.model, ImageModelConfig::Mlp(_)) {
        println!("{}", precision_line(precision, computed));
    }
    let model = config.model.init::<B>(device)?;
    let model = match &config.init_from {
        Some(weights) => read_weights(model, &config.model.sequential()?, weights)?,
        None => model,
    };
    let replicated = match devices.len() {
        1 => None,
        _ => data_parallel::registered::<B>(),
    };
    let steps = config.epochs * schedule_steps_per_epoch(splits.train.len(), config, replicated);
    let scheduler = config
        .schedule
        .unwrap_or_default()
        .init(config.learning_rate, steps)
        .map_err(TrainError::Config)?;
    let average = replicated.map(|replicated| replicated.average);
    let LoopResult { best, watch } = match config.optimizer_settings() {
        OptimizerConfig::Adam { l2, .. } => {
            let adam = OptimizerConfig::adam(l2).init();
            let adam = match average {
                Some(average) => adam.averaging_over_replicas(average),
                None => adam,
            };
            fit(
                config, splits, run, devices, model, adam, scheduler, replicated,
            )?
        }
        OptimizerConfig::Sgd {
            momentum,
            nesterov,
            l2,
            ..
        } => {
            let sgd = OptimizerConfig::sgd(momentum, nesterov, l2).init();
            let sgd = match average {
                Some(average) => sgd.averaging_over_replicas(average),
                None => sgd,
            };
            fit(
                config, splits, run, devices, model, sgd, scheduler, replicated,
            )?
        }
    };
    let model = best.model;
    let speed = TrainingSpeed::of(&watch.training_phases(), devices.len());
    if let Some(speed) = speed {
        println!("{speed}");
    }
    // `config.json` says how the convolutions multiplied.
    let mut ran = config.clone();
    ran.model = ran.model.with_precision(computed);
    let saved = SavedImageConfig {
        config: ran,
        classes: splits.classes().to_vec(),
        shape: splits.shape(),
        normalization: (**splits.train.normalization()).clone(),
    };
    save_config(&run.dir, &saved)?;
    save_model(&run.dir, model.clone())?;
    plot_learning_curves(&run.dir, &[("Loss", "cross-entropy"), ("Accuracy", "%")])?;
    Ok((model, speed))
}

/// The run's line on how its convolutions multiply: `computed`, on this device, for the
/// `asked` precision.
fn precision_line(asked: Precision, computed: Precision) -> String {
    let detail = match computed {
        Precision::Fp32 => "",
        Precision::Tf32 | Precision::Bf16 => {
            " on the tensor cores (a layer too small for them, such as a single-channel 3×3, \
             stays fp32); model.precision = \"fp32\" multiplies all in exact fp32"
        }
    };
    match asked == computed {
        true => format!("convolutions multiply in {computed}{detail}"),
        false => format!(
            "convolutions multiply in {computed}: precision {asked} asked, but this device has no \
             {asked} matrix units"
        ),
    }
}

/// The training loop of [`train`] with its optimizer.
#[allow(clippy::too_many_arguments)]
fn fit<B, O>(
    config: &ImageTrainingConfig,
    splits: &ImageSplits,
    run: &Run,
    devices: &[B::Device],
    model: ImageModel<B>,
    optimizer: O,
    scheduler: RunSchedule,
    replicated: Option<&DataParallel<B>>,
) -> Result<LoopResult<ImageModel<B::InnerBackend>>, TrainError>
where
    B: AutodiffKernelBackend,
    O: Optimizer<ImageModel<B>, B> + 'static,
{
    let train_loop = TrainLoop {
        run,
        settings: config,
        split_sizes: [splits.train.len(), splits.valid.len(), splits.test.len()],
        model,
        optimizer,
        scheduler,
        devices,
        epochs: config.epochs,
        patience: config.patience,
        batch_size: config.batch_size,
        learning_rate: config.learning_rate,
        valid_batch_size: valid_batch_size(config),
        examples: "images",
    };
    train_loop.run(|resume_after| {
        let (train_loader, valid_loader) = loaders::<B>(config, splits, &devices[0], resume_after);
        let (train_loader, strategy) = strategy(config, splits, devices, replicated, train_loader)?;
        let mut training = SupervisedTraining::new(run.dir.root(), train_loader, valid_loader)
            .metrics((AccuracyMetric::new(), LossMetric::new()))
            .metric_train_numeric(LearningRateMetric::new());
        if let Some(strategy) = strategy {
            training = training.with_training_strategy(strategy.into());
        }
        Ok(training)
    })
}

/// The training loader a run on `devices` reads, and burn-train's strategy for more than one
/// device: a `replicated` one (DDP) where the build registers it, else burn-train's own.
#[allow(clippy::type_complexity)]
fn strategy<B: AutodiffKernelBackend>(
    config: &ImageTrainingConfig,
    splits: &ImageSplits,
    devices: &[B::Device],
    replicated: Option<&DataParallel<B>>,
    train_loader: Arc<dyn DataLoader<B, ImageBatch<B>>>,
) -> Result<
    (
        Arc<dyn DataLoader<B, ImageBatch<B>>>,
        Option<ExecutionStrategy<B>>,
    ),
    TrainError,
> {
    let count = devices.len();
    Ok(match replicated {
        _ if count == 1 => (train_loader, None),
        Some(replicated) => {
            // Every replica must take as many steps as the others, or the last all-reduce
            // of an epoch waits forever: each device gets an equal slice of the epoch's
            // order, and the few images past the last whole share sit out that epoch.
            let even = splits.train.len() - splits.train.len() % count;
            let train_loader = train_loader.slice(0, even);
            println!(
                "{}",
                data_parallel_line(config, devices, replicated.description)
            );
            let strategy =
                (replicated.strategy)(devices.to_vec()).map_err(TrainError::DataParallel)?;
            (train_loader, Some(strategy))
        }
        None => {
            // burn-train slices the training loader, one slice per device; each step takes
            // a batch from every slice and sums their gradients on the first device.
            let summed = "the devices' gradients are summed on the first device";
            println!("{}", data_parallel_line(config, devices, summed));
            let strategy =
                ExecutionStrategy::MultiDevice(devices.to_vec(), MultiDeviceOptim::OptimMainDevice);
            (train_loader, Some(strategy))
        }
    })
}

/// The training and validation batches: from the device when both sets fit in
/// `device_data_mb` ([`DeviceImages`]), else assembled on the host by `workers` threads. The
/// choice is printed; the batches are the same either way.
#[allow(clippy::type_complexity)]
fn loaders<B: AutodiffKernelBackend>(
    config: &ImageTrainingConfig,
    splits: &ImageSplits,
    device: &B::Device,
    resume_after: Option<usize>,
) -> (
    Arc<dyn DataLoader<B, ImageBatch<B>>>,
    Arc<dyn DataLoader<B::InnerBackend, ImageBatch<B::InnerBackend>>>,
) {
    let augment = config.augment.unwrap_or_default();
    let first_epoch = resume_after.map_or(1, |epoch| epoch + 1);
    let valid_batch = valid_batch_size(config);
    let bytes = DeviceImages::<B>::device_bytes(&splits.train)
        + DeviceImages::<B>::device_bytes(&splits.valid);
    let megabytes = bytes.div_ceil(1 << 20);
    if megabytes <= config.device_data_mb {
        println!(
            "training data on the device: {} + {} images, {megabytes} MB",
            splits.train.len(),
            splits.valid.len()
        );
        let pass = Pass::Training {
            seed: config.seed,
            augment,
        };
        let train = DeviceImages::<B>::new(
            splits.train.clone(),
            pass,
            config.batch_size,
            device,
            first_epoch,
        );
        let valid = DeviceImages::<B::InnerBackend>::new(
            splits.valid.clone(),
            Pass::InOrder,
            valid_batch,
            device,
            1,
        );
        return (Arc::new(train), Arc::new(valid));
    }
    println!(
        "training data streamed from the host by {} worker threads: {megabytes} MB is more than \
         training.device_data_mb ({})",
        config.workers, config.device_data_mb
    );
    let train = EpochShuffled::build(
        DataLoaderBuilder::new(ImageBatcher::augmenting(augment, config.seed))
            .batch_size(config.batch_size)
            .num_workers(config.workers)
            .set_device(device.clone()),
        splits.train.clone(),
        config.seed,
        first_epoch,
    );
    let valid = DataLoaderBuilder::new(ImageBatcher::default())
        .batch_size(valid_batch)
        .num_workers(config.workers)
        .set_device(device.clone())
        .build(splits.valid.clone());
    (train, valid)
}

/// Learning-rate schedule steps in an epoch of `images`: one per batch on one device. On
/// several under burn-train's multi-device strategy, one per round of a batch from each
/// device's slice, as many as the largest slice (the last, which burn-train gives the
/// remainder) has batches. Under a `replicated` strategy (DDP) every replica steps its
/// schedule once per device for each of its batches, so that all replicas' rates follow the
/// one-device run's curve over the epoch.
fn schedule_steps_per_epoch<B: AutodiffKernelBackend>(
    images: usize,
    config: &ImageTrainingConfig,
    replicated: Option<&DataParallel<B>>,
) -> usize {
    let devices = config.devices.len();
    let share = images / devices;
    match replicated {
        Some(_) if devices > 1 => devices * share.div_ceil(config.batch_size),
        _ => (images - (devices - 1) * share).div_ceil(config.batch_size),
    }
}

/// What a data-parallel run does with its batches and its learning rate.
fn data_parallel_line<D: std::fmt::Debug>(
    config: &ImageTrainingConfig,
    devices: &[D],
    gradients: &str,
) -> String {
    format!(
        "data-parallel on {} devices {devices:?}: batch {} per device, {} images a step; \
         {gradients}, and the learning rate ({}) is not scaled",
        devices.len(),
        config.batch_size,
        config.images_per_step(),
        config.learning_rate
    )
}

/// An image classification job: load the data, fit the network to it, train, save, then
/// measure test accuracy. Its report is the test set's confusion matrix (also saved in the
/// artifact directory).
#[derive(Debug, Clone)]
pub struct ImageJob {
    pub config: ImageTrainingConfig,
    pub source: ImageSource,
}

impl ImageJob {
    /// Trains on `backend` in `run`, then measures test accuracy. Not generic, so that the
    /// training code is compiled once, in this crate, for all callers.
    pub fn launch(self, run: Run, backend: BackendKind) -> Result<ConfusionMatrix, RunError> {
        launch(self, run, backend)
    }
}

impl RunJob for ImageJob {
    type Report = ConfusionMatrix;

    fn inputs(&self) -> Vec<&Path> {
        self.source.inputs()
    }

    fn train<B: AutodiffKernelBackend>(
        self,
        run: &Run,
        device: B::Device,
        kind: BackendKind,
    ) -> Result<ConfusionMatrix, TrainError> {
        let mut config = self.config;
        config.validate()?;
        let devices = crate::device::devices_at::<B>(kind, &device, &config.devices)?;
        let splits = ImageSplits::load(&self.source, &config, Some(&run.dir.image_cache()))?;
        config.model = config.model.fit(splits.shape(), splits.classes().len())?;
        if let ImageModelConfig::Cnn(cnn) = &config.model {
            print!("{}", cnn.summary()?);
        }
        memory_check::check_training(config.model.size()?, config.batch_size, kind)?;
        if splits.test_is_valid {
            println!("no test split: test accuracy is measured on the validation images");
        }
        let (model, _) = train::<B>(&config, &splits, run, &devices)?;
        let confusion = evaluate(&model, &splits.test, &devices[0], config.test_flips());
        confusion.save(&run.dir)?;
        Ok(confusion)
    }
}

/// How `model` classifies `images`: true against predicted class, counted per pair; with
/// `test_flips`, by the logits of each image and its mirror ([`ImageModel::forward_with_flips`]).
pub fn evaluate<B: KernelBackend>(
    model: &ImageModel<B>,
    images: &ImageSubset,
    device: &B::Device,
    test_flips: bool,
) -> ConfusionMatrix {
    let labels = |tensor: Tensor<B, 1, Int>| -> Vec<usize> {
        tensor
            .into_data()
            .iter::<i64>()
            .map(|label| label as usize)
            .collect()
    };
    let mut confusion = ConfusionMatrix::new(images.set().classes().to_vec());
    for start in (0..images.len()).step_by(EVAL_BATCH) {
        let items = (start..images.len().min(start + EVAL_BATCH))
            .filter_map(|i| images.get(i))
            .collect();
        let batch = Batcher::<B, _, _>::batch(&ImageBatcher::default(), items, device);
        let logits = match test_flips {
            true => model.forward_with_flips(batch.images),
            false => model.forward(batch.images),
        };
        let predicted = logits.argmax(1).flatten::<1>(0, 1);
        confusion.add(&labels(batch.targets), &labels(predicted));
    }
    confusion
}

/// The validation loader's batch: large, since validation keeps no activations for a backward
/// pass, and never smaller than training's.
fn valid_batch_size(config: &ImageTrainingConfig) -> usize {
    EVAL_BATCH.max(config.batch_size)
}

/// The line tools read at the end of a run: `test accuracy: 98.76%`.
pub fn accuracy_line(accuracy: f64) -> String {
    format!("test accuracy: {:.2}%", accuracy * 100.0)
}

#[cfg(test)]
mod tests {
    use crate::train::accuracy_line;

    #[test]
    fn accuracy_line_format() {
        assert_eq!(accuracy_line(0.98765), "test accuracy: 98.77%");
        assert_eq!(accuracy_line(1.0), "test accuracy: 100.00%");
    }
}
