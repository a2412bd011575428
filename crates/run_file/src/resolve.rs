//! Resolving a run file: every default written out, and the job it describes in the
//! settings of the code that trains it.

use std::path::Path;

use cubenet_engine::data::{Augment, IMAGE_PIXELS, ImageSource, MnistSource, NUM_CLASSES};
use cubenet_engine::device::BackendKind;
use cubenet_engine::model::{
    CnnConfig, ImageModelConfig, LeNetConfig, MlpConfig, Precision, SimpleCnnConfig,
};
use cubenet_engine::train::tabular::{TabularConfig, TabularJob, TabularReport};
use cubenet_engine::train::{
    ConfusionMatrix, ImageJob, ImageOptimizer, ImageTrainingConfig, OptimizerConfig, Run, RunError,
    RunJob, accuracy_line,
};

use super::*;

/// The run a config describes, in the settings of the code that trains it.
#[derive(Debug, Clone)]
pub enum Job {
    /// An image run; its network is sized to the images when they are loaded
    /// ([`ImageModelConfig::fit`]).
    Image(ImageJob),
    Tabular(TabularJob),
}

impl Job {
    /// The files and folders the run reads.
    pub fn inputs(&self) -> Vec<&Path> {
        match self {
            Job::Image(job) => job.inputs(),
            Job::Tabular(job) => job.inputs(),
        }
    }

    /// Trains on `backend` in `run`.
    pub fn launch(self, run: Run, backend: BackendKind) -> Result<RunReport, RunError> {
        Ok(match self {
            Job::Image(job) => RunReport::Image(job.launch(run, backend)?),
            Job::Tabular(job) => RunReport::Tabular(job.launch(run, backend)?),
        })
    }
}

/// What a finished run measured on its test split.
#[derive(Debug, Clone)]
pub enum RunReport {
    Image(ConfusionMatrix),
    Tabular(TabularReport),
}

/// The per-class table and the `test accuracy:` line, or the table's test metrics.
impl std::fmt::Display for RunReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunReport::Image(confusion) => {
                write!(f, "{confusion}{}", accuracy_line(confusion.accuracy()))
            }
            RunReport::Tabular(report) => write!(f, "{report}"),
        }
    }
}

impl RunConfig {
    /// The config with every default written out (what `--print-config` prints), and the
    /// run it describes.
    pub fn resolve(&self) -> Result<(RunConfig, Job), ConfigError> {
        let mut resolved = self.clone();
        resolved.backend = Some(self.backend.unwrap_or_else(BackendKind::default_for_build));
        let job = match &self.data {
            DataSection::Mnist { dir, options } => {
                let source =
                    ImageSource::Mnist(dir.clone().map_or(MnistSource::Download, MnistSource::Dir));
                self.resolve_images(source, options, &mut resolved)?
            }
            DataSection::Images { source, options } => {
                self.resolve_images(source.clone(), options, &mut resolved)?
            }
            DataSection::Table(table) => self.resolve_table(table, &mut resolved)?,
        };
        Ok((resolved, job))
    }

    /// An image run: the network, its optimizer and the training settings, each
    /// absent value taken from [`ImageTrainingConfig`]'s defaults and written into `resolved`.
    fn resolve_images(
        &self,
        source: ImageSource,
        options: &ImageOptions,
        resolved: &mut RunConfig,
    ) -> Result<Job, ConfigError> {
        let defaults = image_defaults();
        let optimizer = self.optimizer.unwrap_or(OptimizerConfig::Adam {
            learning_rate: defaults.learning_rate,
            l2: 0.0,
        });
        resolved.optimizer = Some(optimizer);
        let t = &self.training;
        let augment = Augment {
            flip: options.flip,
            pad: options.pad,
            cutout: options.cutout,
            label_smoothing: t.label_smoothing.unwrap_or(0.0),
        };
        let backend = self.backend.unwrap_or_else(BackendKind::default_for_build);
        // The MLP has no convolutions: its precision is moot.
        let precision = match resolved.model.precision_mut() {
            Some(precision) => *precision.get_or_insert(backend.default_precision()),
            None => Precision::Fp32,
        };
        let config = ImageTrainingConfig::new(self.image_model(precision)?)
            .with_epochs(t.epochs.unwrap_or(defaults.epochs))
            .with_batch_size(t.batch_size.unwrap_or(defaults.batch_size))
            .with_patience(t.patience.unwrap_or(defaults.patience))
            .with_seed(t.seed.unwrap_or(defaults.seed))
            .with_workers(t.workers.unwrap_or(defaults.workers))
            .with_device_data_mb(t.device_data_mb.unwrap_or(defaults.device_data_mb))
            .with_learning_rate(optimizer.learning_rate())
            .with_optimizer(Some(ImageOptimizer::of(optimizer)))
            .with_weight_decay(Some(optimizer.l2()))
            .with_schedule(Some(t.schedule.unwrap_or_default()))
            .with_test_flips(Some(t.test_flips.unwrap_or(false)))
            .with_valid_fraction(options.valid_fraction)
            .with_limit_train(options.limit_train)
            .with_limit_test(options.limit_test)
            .with_augment((!augment.is_off()).then_some(augment))
            .with_devices(t.devices.clone().unwrap_or(defaults.devices))
            .with_init_from(self.model.init_from().cloned());
        resolved.training = TrainingSection {
            epochs: Some(config.epochs),
            batch_size: Some(config.batch_size),
            patience: Some(config.patience),
            seed: Some(config.seed),
            workers: Some(config.workers),
            device_data_mb: Some(config.device_data_mb),
            devices: Some(config.devices.clone()),
            tensorboard: Some(t.tensorboard.unwrap_or(true)),
            schedule: config.schedule,
            label_smoothing: Some(augment.label_smoothing),
            test_flips: config.test_flips,
        };
        config
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(Job::Image(ImageJob { config, source }))
    }

    /// The `[model]` section as an image network whose convolutions multiply in
    /// `precision`, before it is sized to the images ([`ImageModelConfig::fit`] sets the
    /// input shape and the classes).
    fn image_model(&self, precision: Precision) -> Result<ImageModelConfig, ConfigError> {
        Ok(match &self.model {
            ModelSection::Simple {
                filters, kernels, ..
            } => ImageModelConfig::Simple(
                SimpleCnnConfig::new()
                    .with_filters(*filters)
                    .with_kernels(*kernels)
                    .with_precision(precision),
            ),
            ModelSection::Lenet {
                channels,
                hidden,
                kernels,
                ..
            } => ImageModelConfig::Lenet(
                LeNetConfig::new()
                    .with_channels(*channels)
                    .with_hidden(*hidden)
                    .with_kernels(*kernels)
                    .with_precision(precision),
            ),
            ModelSection::Cnn {
                layers, kernels, ..
            } => ImageModelConfig::Cnn(
                CnnConfig::new([1, 28, 28], NUM_CLASSES, layers.clone())
                    .with_kernels(*kernels)
                    .with_precision(precision),
            ),
            ModelSection::Mlp { task: Some(_), .. }
            | ModelSection::Mlp {
                classes: Some(_), ..
            } => {
                return Err(ConfigError::Invalid(
                    "[model] task and classes are for tables; an image MLP has one output per \
                     class of its images"
                        .into(),
                ));
            }
            ModelSection::Mlp {
                hidden,
                activation,
                layer_activations,
                ..
            } => ImageModelConfig::Mlp(
                MlpConfig::new(IMAGE_PIXELS, hidden.clone(), NUM_CLASSES)
                    .with_activation(*activation)
                    .with_layer_activations(layer_activations.clone()),
            ),
        })
    }

    /// A tabular run: the MLP, its optimizer and the training settings, each absent value
    /// taken from [`TabularConfig`]'s defaults and written into `resolved`.
    fn resolve_table(
        &self,
        table: &TableSection,
        resolved: &mut RunConfig,
    ) -> Result<Job, ConfigError> {
        let invalid = |message: &str| Err(ConfigError::Invalid(message.into()));
        let ModelSection::Mlp {
            task,
            hidden,
            activation,
            layer_activations,
            classes,
            init_from,
        } = &self.model
        else {
            return invalid("tabular data trains an MLP: set [model] kind = \"mlp\" and a task");
        };
        let Some(task) = *task else {
            return invalid("set [model] task = \"regression\", \"binary\" or \"multiclass\"");
        };
        let t = &self.training;
        let image_keys = [
            t.workers.is_some(),
            t.device_data_mb.is_some(),
            t.schedule.is_some(),
            t.label_smoothing.is_some(),
            t.test_flips.is_some(),
        ];
        if image_keys.contains(&true) {
            return invalid(
                "[training] workers, device_data_mb, schedule, label_smoothing and test_flips \
                 are for image runs",
            );
        }
        if t.devices.as_ref().is_some_and(|devices| devices != &[0]) {
            return invalid(
                "tabular runs train on the backend's first device: leave training.devices out \
                 (or give [0])",
            );
        }
        let (data, features, targets) = table.columns();
        let defaults = table_defaults();
        let optimizer = self.optimizer.unwrap_or(defaults.optimizer);
        resolved.optimizer = Some(optimizer);
        let config = TabularConfig::new(features, targets, task)
            .with_classes(*classes)
            .with_hidden(hidden.clone())
            .with_activation(*activation)
            .with_layer_activations(layer_activations.clone())
            .with_optimizer(optimizer)
            .with_epochs(t.epochs.unwrap_or(defaults.epochs))
            .with_batch_size(t.batch_size.or(defaults.batch_size))
            .with_patience(t.patience.unwrap_or(defaults.patience))
            .with_seed(t.seed.unwrap_or(defaults.seed))
            .with_split(table.split())
            .with_standardize(table.standardize())
            .with_init_from(init_from.clone());
        config
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        resolved.training = TrainingSection {
            epochs: Some(config.epochs),
            batch_size: config.batch_size,
            patience: Some(config.patience),
            seed: Some(config.seed),
            workers: None,
            device_data_mb: None,
            devices: None,
            tensorboard: Some(t.tensorboard.unwrap_or(true)),
            ..TrainingSection::default()
        };
        Ok(Job::Tabular(TabularJob { config, data }))
    }
}
