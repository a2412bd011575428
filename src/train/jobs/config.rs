//! Settings of an image training run, saved in `config.json` next to the model.

use std::path::PathBuf;

use burn::prelude::*;

use crate::data::Augment;
use crate::model::ImageModelConfig;
use crate::train::TrainError;

/// The largest device index (Burn numbers a backend's devices with 16 bits).
const MAX_DEVICE_INDEX: usize = u16::MAX as usize;

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
    /// keeps every GPU tensor on one stream but waits for each batch, so a set streamed from
    /// the host trains faster with a few workers.
    #[config(default = 0)]
    pub workers: usize,
    /// Training and validation sets up to this many megabytes (normalized, 4 bytes a pixel
    /// value: MNIST 188, CIFAR-10 614) are uploaded to the device once and batched there;
    /// larger ones are assembled on the host by the `workers` threads. 0 keeps every set
    /// on the host.
    #[config(default = 4096)]
    pub device_data_mb: usize,
    /// Use only this many images of the training file (before the train/valid split).
    pub limit_train: Option<usize>,
    /// Evaluate on only this many test images.
    pub limit_test: Option<usize>,
    /// Augmentation of the training batches (flips, padded random crops) [default: none].
    pub augment: Option<Augment>,
    /// The backend's devices to train on, by index; with more than one, data-parallel:
    /// every device takes `batch_size` images a step and the first holds the optimizer.
    #[config(default = "vec![0]")]
    pub devices: Vec<usize>,
    /// Start from these weights (safetensors or PyTorch `.pt`, PyTorch's names; see
    /// `cubenet export`) instead of random ones.
    pub init_from: Option<PathBuf>,
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
        if self.devices.is_empty() {
            return invalid("devices must name at least one device".into());
        }
        if let Some(index) = self.devices.iter().find(|&&i| i > MAX_DEVICE_INDEX) {
            return invalid(format!(
                "device {index} is past the last index a backend numbers ({MAX_DEVICE_INDEX})"
            ));
        }
        let mut sorted = self.devices.clone();
        sorted.sort_unstable();
        if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return invalid(format!("device {} is listed twice", pair[0]));
        }
        if self.augment.is_some_and(|augment| augment.pad > 64) {
            return invalid("pad must be at most 64 pixels".into());
        }
        Ok(())
    }

    /// Images per optimizer step: `batch_size` on each device.
    pub fn images_per_step(&self) -> usize {
        self.batch_size * self.devices.len()
    }
}
