//! The run file's sections as serde reads and writes them, with the defaults that exist in
//! run files alone.

use std::path::PathBuf;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de, ser};

use cubenet_engine::data::{Generator, ImageSource, SplitRatios, TableSource};
use cubenet_engine::model::{
    Activation, CnnConfig, ImageModelConfig, Kernels, LayerSpecs, LeNetConfig, Precision,
    SimpleCnnConfig, Task,
};
use cubenet_engine::train::tabular::TabularConfig;
use cubenet_engine::train::{ImageTrainingConfig, LrSchedule};

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
    /// Zero a square of this side at a random place of each training image.
    #[serde(default)]
    pub cutout: usize,
}

/// The keys of [`ImageOptions`], taken out of `[data]` before its source is read.
const IMAGE_OPTION_KEYS: [&str; 6] = [
    "limit_train",
    "limit_test",
    "valid_fraction",
    "flip",
    "pad",
    "cutout",
];
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
    pub(super) fn columns(&self) -> (TableSource, Vec<String>, Vec<String>) {
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

    pub(super) fn split(&self) -> SplitRatios {
        match self {
            TableSection::Csv { split, .. } | TableSection::Generated { split, .. } => *split,
        }
    }

    pub(super) fn standardize(&self) -> bool {
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
pub(super) fn image_defaults() -> ImageTrainingConfig {
    ImageTrainingConfig::new(ImageModelConfig::Simple(SimpleCnnConfig::new()))
}

/// Every table setting at its default; columns and task come from `[data]` and `[model]`.
pub(super) fn table_defaults() -> TabularConfig {
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
        kernels: Kernels,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precision: Option<Precision>,
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
        kernels: Kernels,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precision: Option<Precision>,
        /// Start from these weights (see [`ModelSection::init_from`]).
        init_from: Option<PathBuf>,
    },
    /// A CNN defined layer by layer (images), e.g. `layers = [{ conv = 32, padding = 1 },
    /// { relu = true }, { pool = 2 }, { dense = "classes" }]`.
    Cnn {
        layers: LayerSpecs,
        #[serde(default = "default_cnn_kernels")]
        kernels: Kernels,
        /// How the multi-channel convolutions multiply: `fp32`, or `tf32` or `bf16` on the
        /// tensor cores (CUDA); absent, the backend's default
        /// ([`cubenet_engine::device::BackendKind::default_precision`]). The presets take it too.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        precision: Option<Precision>,
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

    /// Where a CNN's `precision` is kept (none for the MLP).
    pub fn precision_mut(&mut self) -> Option<&mut Option<Precision>> {
        match self {
            ModelSection::Simple { precision, .. }
            | ModelSection::Lenet { precision, .. }
            | ModelSection::Cnn { precision, .. } => Some(precision),
            ModelSection::Mlp { .. } => None,
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
fn default_kernels() -> Kernels {
    SimpleCnnConfig::new().kernels
}
fn default_lenet_channels() -> [usize; 2] {
    LeNetConfig::new().network.channels
}
fn default_lenet_hidden() -> usize {
    LeNetConfig::new().network.hidden
}
fn default_lenet_kernels() -> Kernels {
    LeNetConfig::new().kernels
}
fn default_cnn_kernels() -> Kernels {
    CnnConfig::new([1, 1, 1], 1, LayerSpecs::default()).kernels
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
            precision: None,
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
    /// TensorBoard's event files in `<artifact_dir>/tensorboard/` [default: true].
    pub tensorboard: Option<bool>,
    /// Images: how the learning rate moves over the run [default: cosine].
    pub schedule: Option<LrSchedule>,
    /// Images: label smoothing ε of the training loss [default: 0].
    pub label_smoothing: Option<f32>,
    /// Images: classify test images with their mirrors too [default: false].
    pub test_flips: Option<bool>,
}
