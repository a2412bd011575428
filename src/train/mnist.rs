//! An MNIST run: load and split the data, train with burn-train, save the artifacts,
//! evaluate on the test set.

use std::path::PathBuf;
use std::sync::Arc;

use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataloader::batcher::Batcher;
use burn::data::dataset::Dataset;
use burn::lr_scheduler::cosine::CosineAnnealingLrSchedulerConfig;
use burn::optim::AdamConfig;
use burn::prelude::*;
use burn::train::metric::{AccuracyMetric, LearningRateMetric, LossMetric};
use burn::train::{Learner, SupervisedTraining};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

use super::artifacts::{plot_learning_curves, save_config, save_model};
use super::learner_setup::{RunLength, finish_run, with_run_settings};
use super::out_of_memory::fail_on_out_of_memory;
use super::resume::{begin_run, check_checkpoint_fits};
use super::{MnistTrainingConfig, RunContext, RunError, TrainError};
use crate::backend::{BackendKind, BackendTask};
use crate::data::{
    DataError, EpochShuffled, MnistBatcher, MnistData, MnistSource, MnistSubset, Split,
};
use crate::model::MnistModel;

/// Images per batch when evaluating (no gradients, so larger than training batches).
const EVAL_BATCH: usize = 1000;

/// The three sets of one run.
#[derive(Debug, Clone)]
pub struct MnistSplits {
    pub train: MnistSubset,
    pub valid: MnistSubset,
    pub test: MnistSubset,
}

impl MnistSplits {
    /// Loads MNIST from `source` and cuts it as `config` says: the training file is limited,
    /// shuffled with the seed and split into train and valid; the test file is limited.
    pub fn load(source: &MnistSource, config: &MnistTrainingConfig) -> Result<Self, DataError> {
        let train_file = Arc::new(MnistData::load(source, Split::Train)?);
        let test_file = Arc::new(MnistData::load(source, Split::Test)?);
        let (train, valid) = MnistSubset::all(train_file)
            .limit(config.limit_train)
            .split_off(config.valid_fraction, config.seed);
        let test = MnistSubset::all(test_file).limit(config.limit_test);
        Ok(Self { train, valid, test })
    }
}

/// Trains the configured model on `splits.train` (validating on `splits.valid`), writes the
/// artifacts into `run.artifact_dir` and returns the model of the epoch with the lowest
/// validation loss.
pub fn train<B: AutodiffKernelBackend>(
    config: &MnistTrainingConfig,
    splits: &MnistSplits,
    run: &RunContext<B>,
) -> Result<MnistModel<B::InnerBackend>, TrainError> {
    config.validate()?;
    let (artifact_dir, device) = (run.artifact_dir.as_path(), &run.device);
    let resume_after = begin_run(artifact_dir, config, run.resume)?;
    B::seed(device, config.seed);
    let model = config.model.init::<B>(device)?;
    if let Some(epoch) = resume_after {
        check_checkpoint_fits(artifact_dir, epoch, &model, device)?;
    }

    let train_loader = EpochShuffled::build(
        DataLoaderBuilder::new(MnistBatcher)
            .batch_size(config.batch_size)
            .num_workers(config.workers)
            .set_device(device.clone()),
        splits.train.clone(),
        config.seed,
        resume_after.map_or(1, |epoch| epoch + 1),
    );
    let valid_loader = DataLoaderBuilder::new(MnistBatcher)
        .batch_size(EVAL_BATCH.max(config.batch_size))
        .num_workers(config.workers)
        .set_device(device.clone())
        .build(splits.valid.clone());

    let training = SupervisedTraining::new(artifact_dir, train_loader, valid_loader)
        .metrics((AccuracyMetric::new(), LossMetric::new()))
        .metric_train_numeric(LearningRateMetric::new());
    let length = RunLength::new(artifact_dir, config.epochs, config.patience, resume_after)?;
    let (training, watch) = with_run_settings(training, artifact_dir, length);
    let optimizer = AdamConfig::new().init();
    // Adam with the learning rate annealed from `learning_rate` to 0 over the whole run.
    let steps = config.epochs * splits.train.len().div_ceil(config.batch_size);
    let schedule = CosineAnnealingLrSchedulerConfig::new(config.learning_rate, steps)
        .init()
        .map_err(TrainError::Config)?;
    let result = fail_on_out_of_memory(config.batch_size, &watch, || {
        training.launch(Learner::new(model, optimizer, schedule))
    })?;
    let model = finish_run(artifact_dir, result, &watch, config.learning_rate, device)?.model;
    save_config(artifact_dir, config)?;
    save_model(artifact_dir, model.clone())?;
    plot_learning_curves(
        artifact_dir,
        &[("Loss", "cross-entropy"), ("Accuracy", "%")],
    )?;
    Ok(model)
}

/// A whole run as one [`BackendTask`]: load the data, train, save, then measure test
/// accuracy.
#[derive(Debug, Clone)]
pub struct MnistRun {
    pub config: MnistTrainingConfig,
    pub source: MnistSource,
    pub artifact_dir: PathBuf,
    /// Continue from the last complete checkpoint in `artifact_dir`.
    pub resume: bool,
}

impl MnistRun {
    /// Runs on `backend` and returns the test accuracy (0 to 1). Not generic, so the
    /// training code is compiled once, here, for every backend in the build.
    pub fn launch(self, backend: BackendKind) -> Result<f64, RunError> {
        Ok(crate::backend::run_on(backend, self)??)
    }
}

impl BackendTask for MnistRun {
    /// Test accuracy, 0 to 1.
    type Output = Result<f64, TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
        self.config.validate()?;
        let splits = MnistSplits::load(&self.source, &self.config)?;
        let run = RunContext::<B>::new(self.artifact_dir, device).with_resume(self.resume);
        let model = train(&self.config, &splits, &run)?;
        Ok(evaluate(&model, &splits.test, &run.device))
    }
}

/// Share (0 to 1) of `images` whose digit `model` predicts correctly.
pub fn evaluate<B: KernelBackend>(
    model: &MnistModel<B>,
    images: &MnistSubset,
    device: &B::Device,
) -> f64 {
    let mut correct = 0;
    for start in (0..images.len()).step_by(EVAL_BATCH) {
        let items = (start..images.len().min(start + EVAL_BATCH))
            .filter_map(|i| images.get(i))
            .collect();
        let batch = Batcher::<B, _, _>::batch(&MnistBatcher, items, device);
        let predicted = model.forward(batch.images).argmax(1).flatten::<1>(0, 1);
        correct += predicted
            .equal(batch.targets)
            .int()
            .sum()
            .into_scalar()
            .elem::<i64>();
    }
    correct as f64 / images.len().max(1) as f64
}

/// The line tools read at the end of a run: `test accuracy: 98.76%`.
pub fn accuracy_line(accuracy: f64) -> String {
    format!("test accuracy: {:.2}%", accuracy * 100.0)
}

#[cfg(test)]
mod tests {
    use super::accuracy_line;

    #[test]
    fn accuracy_line_format() {
        assert_eq!(accuracy_line(0.98765), "test accuracy: 98.77%");
        assert_eq!(accuracy_line(1.0), "test accuracy: 100.00%");
    }
}
