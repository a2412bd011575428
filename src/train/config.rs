//! Settings of an image training run, saved in `config.json` next to the model.

use burn::prelude::*;

use super::TrainError;
use crate::data::Augment;
use crate::model::ImageModelConfig;

/// Everything that decides what an image run computes, apart from its data.
#[derive(Config, Debug)]
pub struct ImageTrainingConfig {
    /// The network.
    pub model: ImageModelConfig,
    /// Passes over the training images (early stopping may end sooner).
    #[config(default = 3)]
    pub epochs: usize,
    /// Images per optimizer step.
    #[config(default = 64)]
    pub batch_size: usize,
    /// Adam's peak learning rate, annealed (cosine) to 0 over the run.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// Seeds weight init, the train/valid split and batch shuffling.
    #[config(default = 42)]
    pub seed: u64,
    /// Share of the training images held out for validation.
    #[config(default = 0.1)]
    pub valid_fraction: f64,
    /// Stop after this many epochs without a lower validation loss.
    #[config(default = 3)]
    pub patience: usize,
    /// Extra threads that assemble batches; 0 assembles them on the training thread, which
    /// costs nothing measurable for small images and keeps every GPU tensor on one stream.
    #[config(default = 0)]
    pub workers: usize,
    /// Use only this many images of the training file (before the train/valid split).
    pub limit_train: Option<usize>,
    /// Evaluate on only this many test images.
    pub limit_test: Option<usize>,
    /// Augmentation of the training batches (flips, padded random crops) [default: none].
    pub augment: Option<Augment>,
}

impl ImageTrainingConfig {
    /// Refuses settings that cannot train, naming the setting.
    pub fn validate(&self) -> Result<(), TrainError> {
        let invalid = |msg: String| Err(TrainError::Config(msg));
        if self.epochs == 0 {
            return invalid("epochs must be at least 1".into());
        }
        if self.batch_size == 0 {
            return invalid("batch-size must be at least 1".into());
        }
        if !(self.learning_rate > 0.0 && self.learning_rate <= 1.0) {
            return invalid(format!("lr must be in (0, 1], got {}", self.learning_rate));
        }
        if !(self.valid_fraction > 0.0 && self.valid_fraction < 1.0) {
            return invalid(format!(
                "valid-fraction must be between 0 and 1 (exclusive), got {}",
                self.valid_fraction
            ));
        }
        if self.patience == 0 {
            return invalid("patience must be at least 1".into());
        }
        if self.limit_train.is_some_and(|n| n < 2) {
            return invalid("limit-train must leave at least 2 images (train and valid)".into());
        }
        if self.limit_test == Some(0) {
            return invalid("limit-test must be at least 1".into());
        }
        if self.augment.is_some_and(|augment| augment.pad > 64) {
            return invalid("pad must be at most 64 pixels".into());
        }
        Ok(())
    }
}
