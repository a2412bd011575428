//! The command-line flags that override a run file's most used keys, shared by
//! `cubenet train` and the `mnist_cnn` example so the two cannot drift: each flag is a
//! shorthand for one run-file key, applied after the file (and its `--set` overrides).

use std::path::PathBuf;

use crate::{ConfigError, DataSection, RunConfig};
use cubenet_engine::device::BackendKind;
use cubenet_engine::train::tabular::OptimizerConfig;

/// Flags that override keys of a run file; an absent flag leaves the file's value.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunFlags {
    /// `backend` [default: cuda when compiled in, else ndarray]
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// `training.epochs`
    #[arg(long)]
    pub epochs: Option<usize>,
    /// `training.batch_size` (per device)
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// `optimizer.learning_rate` of the configured optimizer
    #[arg(long, allow_negative_numbers = true)]
    pub lr: Option<f64>,
    /// `training.seed`
    #[arg(long)]
    pub seed: Option<u64>,
    /// `training.devices`: device indices to train on, data-parallel, e.g. `0,1` (image
    /// runs; the batch size is per device)
    #[arg(long, value_delimiter = ',')]
    pub devices: Option<Vec<usize>>,
    /// `data.dir` of an MNIST run: the four IDX files, raw or .gz (absent in both: MNIST
    /// is downloaded)
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// `artifact_dir`: where the model, checkpoints, logs and curves go
    #[arg(long)]
    pub artifact_dir: Option<PathBuf>,
    /// `model.init_from`: start from these weights (safetensors or PyTorch `.pt`, named as
    /// `cubenet export` names them)
    #[arg(long)]
    pub init_from: Option<PathBuf>,
}

impl RunFlags {
    /// Writes the given flags into `config`.
    pub fn apply(&self, config: &mut RunConfig) -> Result<(), ConfigError> {
        let paths = [
            ("--artifact-dir", &self.artifact_dir),
            ("--data-dir", &self.data_dir),
            ("--init-from", &self.init_from),
        ];
        for (flag, path) in paths {
            // The resolved run file holds the path as text.
            if let Some(path) = path.as_ref().filter(|path| path.to_str().is_none()) {
                return Err(ConfigError::Invalid(format!(
                    "{flag} {}: the path is not valid UTF-8, which a run file cannot hold: \
                     rename it",
                    path.display()
                )));
            }
        }
        config.backend = self.backend.or(config.backend);
        config.artifact_dir = self
            .artifact_dir
            .clone()
            .unwrap_or(config.artifact_dir.clone());
        let training = &mut config.training;
        training.epochs = self.epochs.or(training.epochs);
        training.batch_size = self.batch_size.or(training.batch_size);
        training.seed = self.seed.or(training.seed);
        training.devices = self.devices.clone().or(training.devices.take());
        if let Some(weights) = &self.init_from {
            config.model.set_init_from(weights.clone());
        }
        if let Some(dir) = &self.data_dir {
            let DataSection::Mnist { dir: data_dir, .. } = &mut config.data else {
                return Err(ConfigError::Invalid(
                    "--data-dir is for MNIST runs; set the [data] paths of other runs with --set"
                        .into(),
                ));
            };
            *data_dir = Some(dir.clone());
        }
        if let Some(lr) = self.lr {
            let optimizer = config.optimizer.get_or_insert(match config.data {
                DataSection::Mnist { .. } | DataSection::Images { .. } => OptimizerConfig::Adam {
                    learning_rate: lr,
                    l2: 0.0,
                },
                DataSection::Table(_) => OptimizerConfig::default(),
            });
            match optimizer {
                OptimizerConfig::Sgd { learning_rate, .. }
                | OptimizerConfig::Adam { learning_rate, .. } => *learning_rate = lr,
            }
        }
        Ok(())
    }
}
