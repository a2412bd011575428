//! Settings of an image training run, saved in `config.json` next to the model.

use std::path::PathBuf;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

use crate::data::Augment;
use crate::model::ImageModelConfig;
use crate::train::{LrSchedule, OptimizerConfig, TrainError};

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
    /// The optimizer's peak learning rate, which `schedule` moves over the run.
    #[config(default = 1e-3)]
    pub learning_rate: f64,
    /// Which optimizer takes the steps [default: Adam].
    pub optimizer: Option<ImageOptimizer>,
    /// The L2 penalty λ added to every gradient as λ·w [default: none].
    pub weight_decay: Option<f64>,
    /// How the learning rate moves over the run [default: cosine].
    pub schedule: Option<LrSchedule>,
    /// Classify each test image as the mean of its and its mirror's logits (in the run's
    /// test, `cubenet eval` and `predict`) [default: false].
    pub test_flips: Option<bool>,
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

/// The optimizer of an image run; its learning rate and L2 penalty are the run's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ImageOptimizer {
    /// Burn's Adam, fused into one kernel.
    Adam,
    /// SGD with undampened momentum μ, Nesterov's if asked (PyTorch's `SGD`).
    Sgd { momentum: f64, nesterov: bool },
}

impl ImageOptimizer {
    /// The optimizer `settings` name (their learning rate and L2 penalty are the run's).
    pub fn of(settings: OptimizerConfig) -> Self {
        match settings {
            OptimizerConfig::Adam { .. } => ImageOptimizer::Adam,
            OptimizerConfig::Sgd {
                momentum, nesterov, ..
            } => ImageOptimizer::Sgd { momentum, nesterov },
        }
    }
}

impl ImageTrainingConfig {
    /// The optimizer, Adam for files of runs that did not name one.
    pub fn optimizer(&self) -> ImageOptimizer {
        self.optimizer.unwrap_or(ImageOptimizer::Adam)
    }

    /// The optimizer with its learning rate and L2 penalty, as `[optimizer]` names them.
    pub fn optimizer_settings(&self) -> OptimizerConfig {
        let (learning_rate, l2) = (self.learning_rate, self.weight_decay.unwrap_or(0.0));
        match self.optimizer() {
            ImageOptimizer::Adam => OptimizerConfig::Adam { learning_rate, l2 },
            ImageOptimizer::Sgd { momentum, nesterov } => OptimizerConfig::Sgd {
                learning_rate,
                momentum,
                nesterov,
                l2,
            },
        }
    }

    /// Whether test images are classified with their mirrors too.
    pub fn test_flips(&self) -> bool {
        self.test_flips.unwrap_or(false)
    }

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
        if let Some(augment) = self.augment {
            if augment.pad > 64 {
                return invalid("pad must be at most 64 pixels".into());
            }
            if augment.cutout > 1024 {
                return invalid("cutout must be at most 1024 pixels".into());
            }
            if !(0.0..1.0).contains(&augment.label_smoothing) {
                return invalid(format!(
                    "label_smoothing must be in [0, 1), got {}",
                    augment.label_smoothing
                ));
            }
        }
        self.optimizer_settings()
            .validate()
            .map_err(TrainError::Config)?;
        Ok(())
    }

    /// Images per optimizer step: `batch_size` on each device.
    pub fn images_per_step(&self) -> usize {
        self.batch_size * self.devices.len()
    }
}
