//! A trained model waiting on its device behind a trait object ([`ImageClassifier`],
//! [`RowModel`]): the commands that use it are not generic over the backend, so the library
//! compiles the model's code once per backend, beside the training code it shares, instead
//! of every caller compiling it again (a release build does not share generic code between
//! crates; docs/perf-log/2026-11-28-ci-build-time.md).

use std::path::Path;

use burn::prelude::*;
use burn::tensor::activation::softmax;
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

use super::export::{ExportFormat, export_image_model, export_tabular_model};
use crate::data::{ImageSubset, Table};
use crate::device::{BackendKind, BackendTask, run_on};
use crate::model::ImageModel;
use crate::train::fit::run::Run;
use crate::train::jobs::images::{SavedImageConfig, evaluate};
use crate::train::jobs::tabular::{
    self, TabularConfig, TabularModel, TabularReport, TabularSplits, TestMetrics,
};
use crate::train::run_dir::RunDir;
use crate::train::run_dir::confusion::ConfusionMatrix;
use crate::train::{RunError, TrainError};

/// Images per forward pass when classifying.
pub(crate) const CLASSIFY_BATCH: usize = 1000;

/// A trained image model on its device.
pub trait ImageClassifier {
    /// Its settings, classes, image shape and normalization.
    fn saved(&self) -> &SavedImageConfig;
    /// How it classifies `images`: true against predicted class, counted per pair.
    fn evaluate(&self, images: &ImageSubset) -> ConfusionMatrix;
    /// The most likely class of each image (CHW pixels of the model's shape) and its
    /// probability.
    fn classify(&self, images: &[&[u8]]) -> Vec<(usize, f32)>;
    /// Writes it to `output` in `format`, and the sidecar.
    fn export(&self, output: &Path, format: ExportFormat) -> Result<(), TrainError>;
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
    /// Writes it to `output` in `format`, and the sidecar.
    fn export(&self, output: &Path, format: ExportFormat) -> Result<(), TrainError>;
}

/// A dense layer's learned values, on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseValues {
    /// `[outputs, inputs]`, row-major.
    pub weight: Vec<f32>,
    /// `[outputs]`.
    pub bias: Vec<f32>,
}

/// An image model on its device, with what reading new images for it takes.
pub(crate) struct ImageOnDevice<B: Backend> {
    pub(crate) model: ImageModel<B>,
    pub(crate) saved: SavedImageConfig,
    pub(crate) device: B::Device,
}

/// A tabular model on its device.
pub(crate) struct RowsOnDevice<B: Backend> {
    pub(crate) model: TabularModel<B>,
    pub(crate) device: B::Device,
}

/// Trains `config` on `splits` built in code (XOR's four points, say) on `backend`, writing
/// the artifacts into `artifact_dir` (claimed first); returns the trained model on its device
/// with the report. Not generic, like [`TabularJob::launch`](crate::train::tabular::TabularJob::launch), so that the training code is
/// compiled once, in this crate, for all callers.
pub fn train_splits(
    config: &TabularConfig,
    splits: &TabularSplits,
    artifact_dir: &Path,
    backend: BackendKind,
) -> Result<(Box<dyn RowModel>, TabularReport), RunError> {
    let run = Run::fresh(RunDir::claim(artifact_dir, &[])?);
    let task = TrainSplits {
        config,
        splits,
        run,
    };
    Ok(run_on(backend, task)??)
}

/// [`train_splits`] on the backend [`run_on`] picks.
struct TrainSplits<'a> {
    config: &'a TabularConfig,
    splits: &'a TabularSplits,
    run: Run,
}

impl BackendTask for TrainSplits<'_> {
    type Output = Result<(Box<dyn RowModel>, TabularReport), TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
        let (model, report) = tabular::train::<B>(self.config, self.splits, &self.run, &device)?;
        Ok((Box::new(RowsOnDevice { model, device }), report))
    }
}

impl<B: KernelBackend> ImageClassifier for ImageOnDevice<B> {
    fn saved(&self) -> &SavedImageConfig {
        &self.saved
    }

    fn evaluate(&self, images: &ImageSubset) -> ConfusionMatrix {
        let test_flips = self.saved.config.test_flips();
        evaluate(&self.model, images, &self.device, test_flips)
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
            let logits = match saved.config.test_flips() {
                true => self.model.forward_with_flips(batch),
                false => self.model.forward(batch),
            };
            let probabilities = softmax(logits, 1)
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

    fn export(&self, output: &Path, format: ExportFormat) -> Result<(), TrainError> {
        export_image_model(&self.model, &self.saved, output, format)
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

    fn export(&self, output: &Path, format: ExportFormat) -> Result<(), TrainError> {
        export_tabular_model(&self.model, output, format)
    }
}
