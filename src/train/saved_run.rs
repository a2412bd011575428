//! A finished run read back from its directory — the artifact directory of a `cubenet train`,
//! or what `cubenet export` wrote — onto the backend chosen at run time, for `eval`,
//! `predict` and `export`.
//!
//! The model waits on its device behind a trait object ([`ImageClassifier`],
//! [`RowModel`]): the commands that use it are not generic over the backend, so the
//! library compiles the model's code once per backend, beside the training code it shares,
//! instead of every caller compiling it again (a release build does not share generic
//! code between crates; docs/perf-log/2026-11-28-ci-build-time.md).

use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn::tensor::activation::softmax;
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

use super::images::{SavedImageConfig, evaluate};
use super::tabular::{PREPROCESSING_FILE, TabularConfig, TabularModel, TestMetrics};
use super::{
    CONFIG_FILE, ConfusionMatrix, Export, ExportedRun, TrainError, export_image_model,
    export_tabular_model, load_model, read_weights,
};
use crate::backend::{BackendError, BackendKind, BackendTask, run_on};
use crate::data::{ImageSubset, Table};
use crate::model::ImageModel;
use crate::run_config::{ConfigError, RUN_FILE, RunConfig};

/// Images per forward pass when classifying.
const CLASSIFY_BATCH: usize = 1000;

/// Why a trained run could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum SavedRunError {
    #[error(
        "{} holds no trained run (no {CONFIG_FILE}); pass the artifact directory of a finished \
         `cubenet train`, or what `cubenet export` wrote",
        dir.display()
    )]
    NoRun { dir: PathBuf },
    #[error("{} holds an image run, where a tabular one was asked for", dir.display())]
    NotTabular { dir: PathBuf },
    #[error(transparent)]
    RunFile(#[from] ConfigError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A trained model on its device, with the run file it was trained from when there is one.
pub struct SavedRun {
    pub model: SavedModel,
    pub run: Option<RunConfig>,
}

/// A trained model of either kind.
pub enum SavedModel {
    Image(Box<dyn ImageClassifier>),
    Tabular(Box<dyn RowModel>),
}

/// A trained image model on its device.
pub trait ImageClassifier {
    /// Its settings, classes, image shape and normalization.
    fn saved(&self) -> &SavedImageConfig;
    /// How it classifies `images`: true against predicted class, counted per pair.
    fn evaluate(&self, images: &ImageSubset) -> ConfusionMatrix;
    /// The most likely class of each image (CHW pixels of the model's shape) and its
    /// probability.
    fn classify(&self, images: &[&[u8]]) -> Vec<(usize, f32)>;
    /// Writes its weights as safetensors under PyTorch's names, and the sidecar.
    fn export(&self, weights: &Path) -> Result<(), TrainError>;
}

/// A trained tabular model on its device.
pub trait RowModel {
    /// Its run's config, with `classes` resolved.
    fn config(&self) -> &TabularConfig;
    /// Its test metrics on `features` against `targets`.
    fn evaluate(&self, features: &Table, targets: &Table) -> TestMetrics;
    /// Its predictions for `features` (raw, in the config's feature order), in the columns
    /// `predict_csv` writes.
    fn predict(&self, features: &Table) -> Table;
    /// Predicts every row of the CSV `input` into the CSV `output`; the rows written.
    fn predict_csv(&self, input: &Path, output: &Path) -> Result<usize, TrainError>;
    /// Each dense layer's learned values, the first layer first: what a linear fit's
    /// coefficients are read from.
    fn dense_layers(&self) -> Vec<DenseValues>;
    /// Writes its weights as safetensors under PyTorch's names, and the sidecar.
    fn export(&self, weights: &Path) -> Result<(), TrainError>;
}

/// A dense layer's learned values, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseValues {
    /// `[outputs, inputs]`, row-major.
    pub weight: Vec<f32>,
    /// `[outputs]`.
    pub bias: Vec<f32>,
}

impl SavedRun {
    /// Loads the run in `dir` onto `backend`; by default the backend it trained on (its
    /// run.toml), else `train`'s default. Loads without autodiff.
    pub fn load(dir: &Path, backend: Option<BackendKind>) -> Result<Self, SavedRunError> {
        // What `dir` holds is read, and a directory without a run reported, before any
        // device is opened.
        let stored = Stored::find(dir)?;
        let run_path = dir.join(RUN_FILE);
        let run = match stored {
            Stored::Export(_) => None,
            Stored::Image | Stored::Tabular => run_path
                .is_file()
                .then(|| RunConfig::load(&run_path, &[]))
                .transpose()?,
        };
        let backend = backend
            .or_else(|| run.as_ref().and_then(|run| run.backend))
            .unwrap_or_else(BackendKind::default_for_build);
        let model = run_on(backend, LoadModel { dir, stored })??;
        Ok(Self { model, run })
    }

    /// Loads the tabular model in `dir` onto `backend`, as [`SavedRun::load`], for callers
    /// that only predict rows; an image run is [`SavedRunError::NotTabular`].
    pub fn load_tabular(
        dir: &Path,
        backend: Option<BackendKind>,
    ) -> Result<Box<dyn RowModel>, SavedRunError> {
        match Self::load(dir, backend)?.model {
            SavedModel::Tabular(model) => Ok(model),
            SavedModel::Image(_) => Err(SavedRunError::NotTabular {
                dir: dir.to_path_buf(),
            }),
        }
    }
}

/// What a directory given as a trained run holds.
enum Stored {
    /// What `cubenet export` wrote.
    Export(Box<Export>),
    /// The artifact directory of an image run.
    Image,
    /// The artifact directory of a tabular run (it has `preprocessing.json`).
    Tabular,
}

impl Stored {
    fn find(dir: &Path) -> Result<Self, SavedRunError> {
        if let Some(export) = Export::find(dir)? {
            return Ok(Stored::Export(Box::new(export)));
        }
        if dir.join(PREPROCESSING_FILE).is_file() {
            return Ok(Stored::Tabular);
        }
        if !dir.join(CONFIG_FILE).is_file() {
            return Err(SavedRunError::NoRun {
                dir: dir.to_path_buf(),
            });
        }
        Ok(Stored::Image)
    }
}

/// Loads the model of `dir` on the backend [`run_on`] picks.
struct LoadModel<'a> {
    dir: &'a Path,
    stored: Stored,
}

impl BackendTask for LoadModel<'_> {
    type Output = Result<SavedModel, TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
        load_on::<B::InnerBackend>(self.dir, self.stored, device)
    }
}

/// The model `stored` in `dir`, read onto `device` of backend `B`.
fn load_on<B: KernelBackend>(
    dir: &Path,
    stored: Stored,
    device: B::Device,
) -> Result<SavedModel, TrainError> {
    match stored {
        Stored::Export(export) => match &export.sidecar.cubenet {
            ExportedRun::Tabular(config) => Ok(SavedModel::Tabular(Box::new(RowsOnDevice {
                model: export.tabular_model::<B>(config, &device)?,
                device,
            }))),
            ExportedRun::Image(saved) => {
                let model = saved.config.model.init::<B>(&device)?;
                let model =
                    read_weights(model, &saved.config.model.sequential()?, &export.weights)?;
                Ok(image(model, saved.clone(), device))
            }
        },
        Stored::Tabular => Ok(SavedModel::Tabular(Box::new(RowsOnDevice {
            model: TabularModel::<B>::load(dir, &device)?,
            device,
        }))),
        Stored::Image => {
            let saved = SavedImageConfig::load(dir)?;
            let model = saved.config.model.init::<B>(&device)?;
            let model = load_model(dir, model, &device)?;
            Ok(image(model, saved, device))
        }
    }
}

/// An image model with its saved settings, on its device.
fn image<B: KernelBackend>(
    model: ImageModel<B>,
    saved: SavedImageConfig,
    device: B::Device,
) -> SavedModel {
    SavedModel::Image(Box::new(ImageOnDevice {
        model,
        saved,
        device,
    }))
}

/// An image model on its device, with what reading new images for it takes.
struct ImageOnDevice<B: Backend> {
    model: ImageModel<B>,
    saved: SavedImageConfig,
    device: B::Device,
}

/// A tabular model on its device.
pub(super) struct RowsOnDevice<B: Backend> {
    pub(super) model: TabularModel<B>,
    pub(super) device: B::Device,
}

impl<B: KernelBackend> ImageClassifier for ImageOnDevice<B> {
    fn saved(&self) -> &SavedImageConfig {
        &self.saved
    }

    fn evaluate(&self, images: &ImageSubset) -> ConfusionMatrix {
        evaluate(&self.model, images, &self.device)
    }

    fn classify(&self, images: &[&[u8]]) -> Vec<(usize, f32)> {
        let saved = &self.saved;
        let shape = saved.shape;
        let classes = saved.classes.len();
        let mut predictions = Vec::with_capacity(images.len());
        for chunk in images.chunks(CLASSIFY_BATCH) {
            let pixels: Vec<f32> = chunk
                .iter()
                .flat_map(|image| saved.normalization.normalize(image))
                .collect();
            let dims = [chunk.len(), shape.channels, shape.height, shape.width];
            let batch = Tensor::<B, 4>::from_data(TensorData::new(pixels, dims), &self.device);
            let probabilities = softmax(self.model.forward(batch), 1)
                .into_data()
                .convert::<f32>()
                .to_vec::<f32>()
                .expect("f32 outputs");
            predictions.extend(probabilities.chunks(classes).map(|row| {
                let (class, p) = row
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .expect("at least one class");
                (class, *p)
            }));
        }
        predictions
    }

    fn export(&self, weights: &Path) -> Result<(), TrainError> {
        export_image_model(&self.model, &self.saved, weights)
    }
}

impl<B: KernelBackend> RowModel for RowsOnDevice<B> {
    fn config(&self) -> &TabularConfig {
        &self.model.config
    }

    fn evaluate(&self, features: &Table, targets: &Table) -> TestMetrics {
        self.model.evaluate(features, targets, &self.device)
    }

    fn predict(&self, features: &Table) -> Table {
        self.model.predict(features, &self.device)
    }

    fn predict_csv(&self, input: &Path, output: &Path) -> Result<usize, TrainError> {
        self.model.predict_csv(input, output, &self.device)
    }

    fn dense_layers(&self) -> Vec<DenseValues> {
        let host = |data: TensorData| data.iter::<f32>().collect();
        self.model
            .net
            .mlp
            .layers()
            .iter()
            .map(|layer| DenseValues {
                weight: host(layer.weight().into_data()),
                bias: host(layer.bias().into_data()),
            })
            .collect()
    }

    fn export(&self, weights: &Path) -> Result<(), TrainError> {
        export_tabular_model(&self.model, weights)
    }
}
