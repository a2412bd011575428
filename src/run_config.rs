//! The `cubenet` run file: one TOML schema for image (MNIST) and tabular (CSV or generated)
//! runs, with sections `[data]`, `[model]`, `[optimizer]`, `[training]` and the top-level
//! `backend` and `artifact_dir`. Unknown keys are refused, naming the key. A file states
//! only what differs from the defaults; [`RunConfig::resolve`] fills in the rest (what
//! `cubenet train --print-config` prints) and turns it into the run's own settings. The
//! defaults are those of the settings' own configs ([`ImageTrainingConfig`],
//! [`TabularConfig`], [`SimpleCnnConfig`], [`LeNetConfig`]), read from them here; only the
//! settings that exist in run files alone (`artifact_dir`, a generated table's `rows` and
//! `seed`) have their defaults in this file.
//!
//! ```toml
//! backend = "ndarray"
//! artifact_dir = "artifacts/quadrants"
//! [data]
//! kind = "generated"
//! generator = "quadrants"
//! [model]
//! kind = "mlp"
//! task = "binary"
//! hidden = [16, 16]
//! activation = "tanh"
//! [optimizer]
//! kind = "sgd"
//! learning_rate = 0.05
//! momentum = 0.9
//! [training]
//! epochs = 100
//! batch_size = 32
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};

use crate::atomic_file::write_atomically;
use crate::backend::BackendKind;
use crate::data::{
    Augment, Generator, IMAGE_PIXELS, ImageSource, MnistSource, NUM_CLASSES, SplitRatios,
    TableSource,
};
use crate::model::{
    Activation, CnnConfig, ImageModelConfig, KernelPath, LayerSpecs, LeNetConfig, MlpConfig,
    Precision, SimpleCnnConfig, Task,
};
use crate::train::tabular::{OptimizerConfig, TabularConfig, TabularJob, TabularReport};
use crate::train::{
    ConfusionMatrix, ImageJob, ImageTrainingConfig, Run, RunError, RunJob, TrainError,
    accuracy_line, claim_artifact_dir,
};

/// The resolved run file a run saves in its artifact directory, from which `eval` and
/// `predict` rebuild the network and its data.
pub const RUN_FILE: &str = "run.toml";

/// A run file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {}{message}", path.display(), key.as_ref().map(|k| format!("`{k}`: ")).unwrap_or_default())]
    Parse {
        path: PathBuf,
        /// The key the message is about, where known.
        key: Option<String>,
        message: String,
    },
    #[error("`--set {0}` is not KEY=VALUE (e.g. training.epochs=5)")]
    Override(String),
    #[error("`--set {assignment}`: {message}")]
    BadOverride { assignment: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

/// Everything a `cubenet train` run is, as written in a run file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// `ndarray`, `cuda` or `wgpu` [default: cuda when compiled in, else ndarray].
    pub backend: Option<BackendKind>,
    /// Where the config, model, checkpoints, metric logs and curves go.
    #[serde(default = "default_artifact_dir")]
    pub artifact_dir: PathBuf,
    pub data: DataSection,
    #[serde(default)]
    pub model: ModelSection,
    /// [default: Adam at the learning rate of [`ImageTrainingConfig`] for images, the
    /// optimizer of [`TabularConfig`] for tables]
    pub optimizer: Option<OptimizerConfig>,
    #[serde(default)]
    pub training: TrainingSection,
}

fn default_artifact_dir() -> PathBuf {
    PathBuf::from("artifacts/run")
}

/// What the run trains on: images (`kind = "mnist"`, `"image_folder"`, `"idx"` or
/// `"cifar"`, each with the [`ImageOptions`] keys beside its own) or a table (`"csv"`,
/// `"generated"`).
#[derive(Debug, Clone, PartialEq)]
pub enum DataSection {
    /// MNIST from a directory of IDX files, or downloaded when `dir` is absent.
    Mnist {
        dir: Option<PathBuf>,
        options: ImageOptions,
    },
    /// Labelled images from class folders, IDX files or CIFAR-10's binary files.
    Images {
        source: ImageSource,
        options: ImageOptions,
    },
    /// A table of numbers.
    Table(TableSection),
}

/// What every image run's `[data]` may set beside its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageOptions {
    /// Use only this many training images (before the train/valid split).
    pub limit_train: Option<usize>,
    /// Evaluate on only this many test images.
    pub limit_test: Option<usize>,
    #[serde(default = "default_valid_fraction")]
    pub valid_fraction: f64,
    /// Mirror training images left-right at random.
    #[serde(default)]
    pub flip: bool,
    /// Pad training images with this many zeros a side and crop them back at random.
    #[serde(default)]
    pub pad: usize,
}

/// The keys of [`ImageOptions`], taken out of `[data]` before its source is read.
const IMAGE_OPTION_KEYS: [&str; 5] = ["limit_train", "limit_test", "valid_fraction", "flip", "pad"];
/// `[data]` kinds of image runs.
const IMAGE_KINDS: [&str; 4] = ["mnist", "image_folder", "idx", "cifar"];

/// MNIST's own key.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct MnistKeys {
    dir: Option<PathBuf>,
}

/// A table's `[data]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TableSection {
    /// Columns of a CSV file with a header, by name.
    Csv {
        path: PathBuf,
        features: Vec<String>,
        targets: Vec<String>,
        #[serde(default = "default_split")]
        split: SplitRatios,
        #[serde(default = "default_standardize")]
        standardize: bool,
    },
    /// A table from one of the built-in generators (`cubenet::data::synthetic`): features
    /// are its leading columns, the target its last.
    Generated {
        generator: Generator,
        #[serde(default = "default_generated_rows")]
        rows: usize,
        #[serde(default)]
        seed: u64,
        #[serde(default = "default_split")]
        split: SplitRatios,
        #[serde(default = "default_standardize")]
        standardize: bool,
    },
}

impl TableSection {
    /// Where the table comes from, its feature columns and its target columns.
    fn columns(&self) -> (TableSource, Vec<String>, Vec<String>) {
        match self {
            TableSection::Csv {
                path,
                features,
                targets,
                ..
            } => (
                TableSource::Csv(path.clone()),
                features.clone(),
                targets.clone(),
            ),
            TableSection::Generated {
                generator,
                rows,
                seed,
                ..
            } => {
                let (features, target) = generator.columns();
                let data = TableSource::Generated {
                    generator: *generator,
                    rows: *rows,
                    seed: *seed,
                };
                (data, features, vec![target])
            }
        }
    }

    fn split(&self) -> SplitRatios {
        match self {
            TableSection::Csv { split, .. } | TableSection::Generated { split, .. } => *split,
        }
    }

    fn standardize(&self) -> bool {
        match self {
            TableSection::Csv { standardize, .. } | TableSection::Generated { standardize, .. } => {
                *standardize
            }
        }
    }
}

impl Serialize for DataSection {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (mut table, options) = match self {
            DataSection::Table(data) => return data.serialize(serializer),
            DataSection::Mnist { dir, options } => {
                let mut keys = to_table::<_, S::Error>(&MnistKeys { dir: dir.clone() })?;
                keys.insert("kind".into(), "mnist".into());
                (keys, options)
            }
            DataSection::Images { source, options } => (to_table::<_, S::Error>(source)?, options),
        };
        table.extend(to_table::<_, S::Error>(options)?);
        table.serialize(serializer)
    }
}

/// `value` as a TOML table.
fn to_table<T: Serialize, E: ser::Error>(value: &T) -> Result<toml::Table, E> {
    toml::Table::try_from(value).map_err(E::custom)
}

impl<'de> Deserialize<'de> for DataSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut table = toml::Table::deserialize(deserializer)?;
        let error = |e: toml::de::Error| de::Error::custom(e.message().trim_end());
        let kind = table
            .get("kind")
            .and_then(toml::Value::as_str)
            .map(str::to_owned);
        let kind = kind.as_deref();
        if !kind.is_some_and(|kind| IMAGE_KINDS.contains(&kind)) {
            return table
                .try_into()
                .map(DataSection::Table)
                .map_err(|e| match kind {
                    Some(kind) if !["csv", "generated"].contains(&kind) => {
                        de::Error::custom(format!(
                            "unknown variant `{kind}`, expected one of `mnist`, `image_folder`, \
                             `idx`, `cifar`, `csv`, `generated`"
                        ))
                    }
                    _ => error(e),
                });
        }
        let mut options = toml::Table::new();
        for key in IMAGE_OPTION_KEYS {
            if let Some(value) = table.remove(key) {
                options.insert(key.into(), value);
            }
        }
        let options: ImageOptions = options.try_into().map_err(error)?;
        if kind == Some("mnist") {
            table.remove("kind");
            let keys: MnistKeys = table.try_into().map_err(error)?;
            return Ok(DataSection::Mnist {
                dir: keys.dir,
                options,
            });
        }
        let source = table.try_into().map_err(error)?;
        Ok(DataSection::Images { source, options })
    }
}

fn default_generated_rows() -> usize {
    10_000
}

/// Every image setting at its default; the network is chosen by `[model]`.
fn image_defaults() -> ImageTrainingConfig {
    ImageTrainingConfig::new(ImageModelConfig::Simple(SimpleCnnConfig::new()))
}

/// Every table setting at its default; columns and task come from `[data]` and `[model]`.
fn table_defaults() -> TabularConfig {
    TabularConfig::new(Vec::new(), Vec::new(), Task::Regression)
}

fn default_valid_fraction() -> f64 {
    image_defaults().valid_fraction
}
fn default_split() -> SplitRatios {
    table_defaults().split
}
fn default_standardize() -> bool {
    table_defaults().standardize
}

/// The network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ModelSection {
    /// The single-conv CNN (images).
    Simple {
        #[serde(default = "default_filters")]
        filters: usize,
        #[serde(default = "default_kernels")]
        kernels: KernelPath,
        #[serde(default = "default_precision")]
        precision: Precision,
        /// Start from these weights (see [`ModelSection::init_from`]).
        init_from: Option<PathBuf>,
    },
    /// The LeNet-style CNN (images).
    Lenet {
        #[serde(default = "default_lenet_channels")]
        channels: [usize; 2],
        #[serde(default = "default_lenet_hidden")]
        hidden: usize,
        #[serde(default = "default_lenet_kernels")]
        kernels: KernelPath,
        #[serde(default = "default_precision")]
        precision: Precision,
        /// Start from these weights (see [`ModelSection::init_from`]).
        init_from: Option<PathBuf>,
    },
    /// A CNN defined layer by layer (images), e.g. `layers = [{ conv = 32, padding = 1 },
    /// { relu = true }, { pool = 2 }, { dense = "classes" }]`.
    Cnn {
        layers: LayerSpecs,
        #[serde(default = "default_cnn_kernels")]
        kernels: KernelPath,
        /// `tf32` or `bf16`: the multi-channel convolutions on the tensor cores (CUDA), an
        /// opt-in trade of exactness for speed; the presets take it too.
        #[serde(default = "default_precision")]
        precision: Precision,
        /// Start from these weights (see [`ModelSection::init_from`]).
        init_from: Option<PathBuf>,
    },
    /// An MLP (tables, or flattened images).
    Mlp {
        /// Tables only: `regression`, `binary` or `multiclass`.
        task: Option<Task>,
        #[serde(default)]
        hidden: Vec<usize>,
        #[serde(default = "default_activation")]
        activation: Activation,
        #[serde(default)]
        layer_activations: Vec<Activation>,
        /// Multi-class tables: class count [default: largest label + 1].
        classes: Option<usize>,
        /// Start from these weights (see [`ModelSection::init_from`]).
        init_from: Option<PathBuf>,
    },
}

impl ModelSection {
    /// `init_from`: a safetensors or PyTorch `.pt` file whose weights, named as PyTorch
    /// names the network's `nn.Sequential` (see `cubenet export`), the run starts from.
    pub fn init_from(&self) -> Option<&PathBuf> {
        match self {
            ModelSection::Simple { init_from, .. }
            | ModelSection::Lenet { init_from, .. }
            | ModelSection::Cnn { init_from, .. }
            | ModelSection::Mlp { init_from, .. } => init_from.as_ref(),
        }
    }

    /// Sets `init_from` (the `--init-from` flag).
    pub fn set_init_from(&mut self, weights: PathBuf) {
        match self {
            ModelSection::Simple { init_from, .. }
            | ModelSection::Lenet { init_from, .. }
            | ModelSection::Cnn { init_from, .. }
            | ModelSection::Mlp { init_from, .. } => *init_from = Some(weights),
        }
    }
}

fn default_filters() -> usize {
    SimpleCnnConfig::new().network.filters
}
fn default_kernels() -> KernelPath {
    SimpleCnnConfig::new().kernels
}
fn default_lenet_channels() -> [usize; 2] {
    LeNetConfig::new().network.channels
}
fn default_lenet_hidden() -> usize {
    LeNetConfig::new().network.hidden
}
fn default_lenet_kernels() -> KernelPath {
    LeNetConfig::new().kernels
}
fn default_cnn_kernels() -> KernelPath {
    CnnConfig::new([1, 1, 1], 1, LayerSpecs::default()).kernels
}
/// The layer-by-layer CNN's, which the presets share.
fn default_precision() -> Precision {
    CnnConfig::new([1, 1, 1], 1, LayerSpecs::default()).precision
}
/// The tabular MLP's default, for flattened images too.
fn default_activation() -> Activation {
    table_defaults().activation
}

impl Default for ModelSection {
    fn default() -> Self {
        ModelSection::Simple {
            filters: default_filters(),
            kernels: default_kernels(),
            precision: default_precision(),
            init_from: None,
        }
    }
}

/// How long and in what steps; absent values take the run kind's defaults, those of
/// [`ImageTrainingConfig`] for images and [`TabularConfig`] for tables (where an absent
/// batch size means the whole training split).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainingSection {
    pub epochs: Option<usize>,
    /// Rows or images per step.
    pub batch_size: Option<usize>,
    /// Epochs without a lower validation loss before stopping.
    pub patience: Option<usize>,
    /// Seeds weights, splits and shuffling.
    pub seed: Option<u64>,
    /// Images: threads assembling batches.
    pub workers: Option<usize>,
    /// Images: the largest training set (in megabytes) kept on the device.
    pub device_data_mb: Option<usize>,
    /// Images: the backend's devices to train on, data-parallel with `batch_size` images
    /// on each (tables train on one device).
    pub devices: Option<Vec<usize>>,
}

/// Why a run file's run failed: the file, or the run.
#[derive(Debug, thiserror::Error)]
pub enum RunFileError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Run(#[from] RunError),
}

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
            Job::Image(job) => job.source.inputs(),
            Job::Tabular(job) => Vec::from_iter(job.data.input()),
        }
    }

    /// Trains on `backend` into `artifact_dir`, continuing its last checkpoint if `resume`.
    pub fn launch(
        self,
        artifact_dir: &Path,
        resume: bool,
        backend: BackendKind,
    ) -> Result<RunReport, RunError> {
        fn run<J: RunJob>(job: J, artifact_dir: &Path, resume: bool) -> Run<J> {
            let artifact_dir = artifact_dir.to_path_buf();
            Run {
                job,
                artifact_dir,
                resume,
            }
        }
        Ok(match self {
            Job::Image(job) => RunReport::Image(run(job, artifact_dir, resume).launch(backend)?),
            Job::Tabular(job) => {
                RunReport::Tabular(run(job, artifact_dir, resume).launch(backend)?)
            }
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
    /// Parses a run file's text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::from_value(parse_value(text, path)?, path)
    }

    /// Reads a run file, applying `overrides` (`section.key=value`, the value in TOML
    /// syntax or a bare string) on top of it.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::with_overrides(&text, path, overrides)
    }

    /// Like [`RunConfig::load`], for a run file's text held in memory.
    pub fn load_str(text: &str, overrides: &[String]) -> Result<Self, ConfigError> {
        Self::with_overrides(text, Path::new("(built-in run)"), overrides)
    }

    fn with_overrides(text: &str, path: &Path, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut value = parse_value(text, path)?;
        let mut applied = Vec::new();
        for assignment in overrides {
            applied.push(set(&mut value, assignment)?);
        }
        Self::from_value(value, path).map_err(|error| match error {
            ConfigError::Parse {
                key: Some(key),
                message,
                ..
            } => blame_override(&applied, &key, &message).unwrap_or_else(|| ConfigError::Parse {
                path: path.to_path_buf(),
                key: Some(key),
                message,
            }),
            other => other,
        })
    }

    /// The run file's table as a config; an error names the key it is about (`training.epochs`)
    /// where serde can tell.
    fn from_value(value: toml::Table, path: &Path) -> Result<Self, ConfigError> {
        serde_path_to_error::deserialize(value).map_err(|e| {
            let key = e.path().to_string();
            ConfigError::Parse {
                path: path.to_path_buf(),
                key: (key != ".").then_some(key),
                message: e.inner().message().trim_end().to_string(),
            }
        })
    }

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

    /// An image run: the network, Adam's learning rate and the training settings, each
    /// absent value taken from [`ImageTrainingConfig`]'s defaults and written into `resolved`.
    fn resolve_images(
        &self,
        source: ImageSource,
        options: &ImageOptions,
        resolved: &mut RunConfig,
    ) -> Result<Job, ConfigError> {
        let defaults = image_defaults();
        let learning_rate = match self.optimizer {
            None => defaults.learning_rate,
            Some(OptimizerConfig::Adam {
                learning_rate,
                l2: 0.0,
            }) => learning_rate,
            Some(_) => {
                return Err(ConfigError::Invalid(
                    "image runs train with Adam (cosine-annealed, no L2): set [optimizer] \
                     kind = \"adam\" and only learning_rate"
                        .into(),
                ));
            }
        };
        resolved.optimizer = Some(OptimizerConfig::Adam {
            learning_rate,
            l2: 0.0,
        });
        let augment = Augment {
            flip: options.flip,
            pad: options.pad,
        };
        let t = &self.training;
        let config = ImageTrainingConfig::new(self.image_model()?)
            .with_epochs(t.epochs.unwrap_or(defaults.epochs))
            .with_batch_size(t.batch_size.unwrap_or(defaults.batch_size))
            .with_patience(t.patience.unwrap_or(defaults.patience))
            .with_seed(t.seed.unwrap_or(defaults.seed))
            .with_workers(t.workers.unwrap_or(defaults.workers))
            .with_device_data_mb(t.device_data_mb.unwrap_or(defaults.device_data_mb))
            .with_learning_rate(learning_rate)
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
        };
        config
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(Job::Image(ImageJob { config, source }))
    }

    /// The `[model]` section as an image network, before it is sized to the images
    /// ([`ImageModelConfig::fit`] sets the input shape and the classes).
    fn image_model(&self) -> Result<ImageModelConfig, ConfigError> {
        Ok(match &self.model {
            ModelSection::Simple {
                filters,
                kernels,
                precision,
                ..
            } => ImageModelConfig::Simple(
                SimpleCnnConfig::new()
                    .with_filters(*filters)
                    .with_kernels(*kernels)
                    .with_precision(*precision),
            ),
            ModelSection::Lenet {
                channels,
                hidden,
                kernels,
                precision,
                ..
            } => ImageModelConfig::Lenet(
                LeNetConfig::new()
                    .with_channels(*channels)
                    .with_hidden(*hidden)
                    .with_kernels(*kernels)
                    .with_precision(*precision),
            ),
            ModelSection::Cnn {
                layers,
                kernels,
                precision,
                ..
            } => ImageModelConfig::Cnn(
                CnnConfig::new([1, 28, 28], NUM_CLASSES, layers.clone())
                    .with_kernels(*kernels)
                    .with_precision(*precision),
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
        if t.workers.is_some() || t.device_data_mb.is_some() {
            return invalid("[training] workers and device_data_mb are for image runs");
        }
        if t.devices.as_ref().is_some_and(|devices| devices.len() > 1) {
            return invalid("tabular runs train on one device: give training.devices one index");
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
        };
        Ok(Job::Tabular(TabularJob { config, data }))
    }

    /// Trains the run this file describes: resolves it, claims its artifact directory,
    /// saves the resolved file there as [`RUN_FILE`], then trains and evaluates on the
    /// file's backend.
    pub fn train(&self, resume: bool) -> Result<RunReport, RunFileError> {
        let (resolved, job) = self.resolve()?;
        let dir = &resolved.artifact_dir;
        claim_artifact_dir(dir, &job.inputs()).map_err(RunError::from)?;
        write_atomically(&dir.join(RUN_FILE), resolved.to_toml().as_bytes())
            .map_err(|e| RunError::from(TrainError::from(e)))?;
        let backend = resolved
            .backend
            .unwrap_or_else(BackendKind::default_for_build);
        Ok(job.launch(dir, resume, backend)?)
    }

    /// The config as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("run configs serialize to TOML")
    }
}

/// The TOML table of a run file; a syntax error becomes one line naming where it is.
fn parse_value(text: &str, path: &Path) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>().map_err(|e| {
        let place = e.span().map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: ")
        });
        ConfigError::Parse {
            path: path.to_path_buf(),
            key: None,
            message: format!(
                "{}{}",
                place.unwrap_or_default(),
                e.message().trim_end().replace('\n', " ")
            ),
        }
    })
}

/// A `--set` applied to a run file's table.
struct Applied<'a> {
    assignment: &'a str,
    /// `training.epochs`.
    key: String,
    /// The section it created, which the run file did not have.
    new_section: Option<String>,
}

/// The error about `key` (`message`) told as the fault of the `--set` that wrote the key or
/// created its section, if one did.
fn blame_override(applied: &[Applied], key: &str, message: &str) -> Option<ConfigError> {
    applied.iter().rev().find_map(|set| {
        let within = |prefix: &str| key == prefix || key.starts_with(&format!("{prefix}."));
        let message = match &set.new_section {
            _ if key == set.key => message.to_string(),
            Some(section) if within(section) => format!(
                "the run file has no [{section}] section, and a new one needs more than this \
                 key: {message}"
            ),
            _ => return None,
        };
        Some(ConfigError::BadOverride {
            assignment: set.assignment.to_string(),
            message,
        })
    })
}

/// Applies `section.key=value` to `table`; a value that is not TOML is taken as a string.
fn set<'a>(table: &mut toml::Table, assignment: &'a str) -> Result<Applied<'a>, ConfigError> {
    let bad = || ConfigError::Override(assignment.to_string());
    let (key, raw) = assignment.split_once('=').ok_or_else(bad)?;
    let path: Vec<&str> = key.trim().split('.').collect();
    if path.iter().any(|part| part.is_empty()) {
        return Err(bad());
    }
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.trim().to_string()));
    let (last, parents) = path.split_last().expect("split yields at least one part");
    let new_section =
        (!parents.is_empty() && !table.contains_key(parents[0])).then(|| parents[0].to_string());
    let mut current = table;
    for part in parents {
        current = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()))
            .as_table_mut()
            .ok_or_else(bad)?;
    }
    current.insert(last.to_string(), value);
    Ok(Applied {
        assignment,
        key: path.join("."),
        new_section,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RunConfig, ConfigError> {
        RunConfig::parse(text, Path::new("run.toml"))
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = parse("[data]\nkind = \"mnist\"\n[training]\nepoch = 3\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `epoch`"), "{err}");
        let err = parse("[data]\nkind = \"mnist\"\ncolor = 1\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `color`"), "{err}");
        let err = parse("[data]\nkind = \"mnist\"\n[model]\nkind = \"simple\"\nfilter = 3\n")
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `filter`"), "{err}");
        let err = parse("bakend = \"cuda\"\n[data]\nkind = \"mnist\"\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `bakend`"), "{err}");
    }

    #[test]
    fn defaults_resolve_per_run_kind() {
        let (image, job) = parse("[data]\nkind = \"mnist\"\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(image.training.epochs, Some(3));
        assert!(matches!(job, Job::Image(_)));
        let text = "[data]\nkind = \"generated\"\ngenerator = \"xor\"\n\
                    [model]\nkind = \"mlp\"\ntask = \"binary\"\nhidden = [4]\n";
        let (table, job) = parse(text).unwrap().resolve().unwrap();
        assert_eq!(table.training.epochs, Some(100));
        let Job::Tabular(TabularJob { config, .. }) = job else {
            panic!("a tabular job")
        };
        assert_eq!(config.features, ["x1", "x2"]);
        assert_eq!(config.targets, ["y"]);
        // The printed config parses back to itself.
        assert_eq!(parse(&table.to_toml()).unwrap(), table);
    }

    #[test]
    fn overrides_are_checked_like_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(&path, "[data]\nkind = \"mnist\"\n").unwrap();
        let set = |s: &str| RunConfig::load(&path, &[s.to_string()]);
        assert_eq!(set("training.epochs=7").unwrap().training.epochs, Some(7));
        assert_eq!(
            set("backend=wgpu").unwrap().backend,
            Some(BackendKind::Wgpu)
        );
        assert!(
            set("training.epocs=7")
                .unwrap_err()
                .to_string()
                .contains("epocs")
        );
        assert!(matches!(set("epochs"), Err(ConfigError::Override(_))));
        assert_eq!(
            set("training.epochs=three").unwrap_err().to_string(),
            "`--set training.epochs=three`: invalid type: string \"three\", expected usize"
        );
        let no_section = set("optimizer.learning_rate=0.1").unwrap_err().to_string();
        assert!(
            no_section.starts_with(
                "`--set optimizer.learning_rate=0.1`: the run file has no [optimizer] section"
            ) && no_section.contains("`kind`"),
            "{no_section}"
        );
    }

    #[test]
    fn type_errors_name_the_key() {
        let err = parse("[data]\nkind = \"mnist\"\n[training]\nepochs = \"three\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "run.toml: `training.epochs`: invalid type: string \"three\", expected usize"
        );
    }

    #[test]
    fn precision_reaches_every_cnn_and_defaults_to_fp32() {
        let precision = |model: &str| {
            let (resolved, job) = parse(&format!("[data]\nkind = \"mnist\"\n[model]\n{model}"))
                .unwrap()
                .resolve()
                .unwrap();
            assert_eq!(parse(&resolved.to_toml()).unwrap(), resolved);
            let Job::Image(ImageJob { config, .. }) = job else {
                panic!("an image job")
            };
            match config.model {
                ImageModelConfig::Simple(c) => c.precision,
                ImageModelConfig::Lenet(c) => c.precision,
                ImageModelConfig::Cnn(c) => c.precision,
                ImageModelConfig::Mlp(_) => panic!("a CNN"),
            }
        };
        let cnn = "kind = \"cnn\"\nlayers = [{ conv = 8 }, { dense = \"classes\" }]\n";
        assert_eq!(precision("kind = \"lenet\"\n"), Precision::Fp32);
        assert_eq!(
            precision("kind = \"simple\"\nprecision = \"tf32\"\n"),
            Precision::Tf32
        );
        assert_eq!(
            precision("kind = \"lenet\"\nprecision = \"tf32\"\n"),
            Precision::Tf32
        );
        assert_eq!(
            precision(&format!("{cnn}precision = \"tf32\"\n")),
            Precision::Tf32
        );
        assert_eq!(
            precision("kind = \"lenet\"\nprecision = \"bf16\"\n"),
            Precision::Bf16
        );
        let err =
            parse("[data]\nkind = \"mnist\"\n[model]\nkind = \"lenet\"\nprecision = \"fp16\"\n")
                .unwrap_err();
        assert!(err.to_string().contains("unknown variant `fp16`"), "{err}");
    }

    #[test]
    fn image_kinds_take_the_image_options_and_print_back() {
        let text = "[data]\nkind = \"image_folder\"\nroot = \"photos\"\nsize = [32, 32]\n\
                    flip = true\npad = 4\nlimit_train = 100\n\
                    [model]\nkind = \"cnn\"\n\
                    layers = [{ conv = 8, padding = 1 }, { relu = true }, { pool = 2 }, \
                    { dense = \"classes\" }]\n";
        let (resolved, job) = parse(text).unwrap().resolve().unwrap();
        let Job::Image(ImageJob { config, source }) = job else {
            panic!("an image job")
        };
        assert!(matches!(source, ImageSource::ImageFolder { .. }));
        assert_eq!(config.augment, Some(Augment { flip: true, pad: 4 }));
        assert_eq!(config.limit_train, Some(100));
        assert!(matches!(config.model, ImageModelConfig::Cnn(_)));
        assert_eq!(parse(&resolved.to_toml()).unwrap(), resolved);

        let (mnist, _) = parse("[data]\nkind = \"mnist\"\ndir = \"m\"\nflip = true\n")
            .unwrap()
            .resolve()
            .unwrap();
        assert_eq!(parse(&mnist.to_toml()).unwrap(), mnist);

        let err = parse("[data]\nkind = \"cifar\"\ndir = \"c\"\nflp = true\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `flp`"), "{err}");
        let err = parse("[data]\nkind = \"pictures\"\n").unwrap_err();
        assert!(err.to_string().contains("`image_folder`"), "{err}");
    }

    #[test]
    fn mismatched_sections_are_refused() {
        let err = parse("[data]\nkind = \"generated\"\ngenerator = \"xor\"\n")
            .unwrap()
            .resolve()
            .unwrap_err();
        assert!(err.to_string().contains("MLP"), "{err}");
        let err =
            parse("[data]\nkind = \"mnist\"\n[optimizer]\nkind = \"sgd\"\nlearning_rate = 0.1\n")
                .unwrap()
                .resolve()
                .unwrap_err();
        assert!(err.to_string().contains("Adam"), "{err}");
    }
}
