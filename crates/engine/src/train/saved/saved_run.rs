//! A finished run read back from its directory — the artifact directory of a `cubenet train`,
//! or what `cubenet export` wrote — onto the backend chosen at run time, for `eval`,
//! `predict` and `export`; the model waits on its device behind a trait object
//! ([`super::on_device`]).

use std::path::{Path, PathBuf};

use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

use crate::model::{ImageModel, ImageModelConfig};

use super::export::Export;
use super::on_device::{CLASSIFY_BATCH, ImageClassifier, ImageOnDevice, RowModel, RowsOnDevice};
use super::sidecar::ExportedRun;
use super::torch_names::read_weights;
use crate::device::{BackendError, BackendKind, BackendTask, run_on};
use crate::train::TrainError;
use crate::train::fit::memory_check;
use crate::train::jobs::images::SavedImageConfig;
use crate::train::jobs::tabular::TabularModel;
use crate::train::run_dir::artifacts::load_model;
use crate::train::run_dir::{CONFIG_FILE, RunDir};

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
    Train(#[from] TrainError),
    #[error(transparent)]
    Backend(#[from] BackendError),
}

/// A trained model of either kind, on its device.
pub enum SavedModel {
    Image(Box<dyn ImageClassifier>),
    Tabular(Box<dyn RowModel>),
}

impl SavedModel {
    /// The run file of the trained run in `dir`, where it has one (an export has none). A
    /// directory that holds no trained run is an error here, before any run file is read.
    pub fn run_file(dir: &Path) -> Result<Option<PathBuf>, SavedRunError> {
        Ok(match RunDirContents::find(dir)? {
            RunDirContents::Export(_) => None,
            RunDirContents::Image | RunDirContents::Tabular => {
                Some(RunDir::open(dir).run_file()).filter(|path| path.is_file())
            }
        })
    }

    /// Loads the trained model in `dir` onto `backend` (by default `train`'s), without
    /// autodiff.
    pub fn load(dir: &Path, backend: Option<BackendKind>) -> Result<Self, SavedRunError> {
        // What `dir` holds is read, and a directory without a run reported, before any
        // device is opened.
        let contents = RunDirContents::find(dir)?;
        let backend = backend.unwrap_or_else(BackendKind::default_for_build);
        Ok(run_on(backend, LoadModel { dir, contents })??)
    }

    /// Loads the tabular model in `dir` onto `backend`, as [`SavedModel::load`], for callers
    /// that only predict rows; an image run is [`SavedRunError::NotTabular`].
    pub fn load_tabular(
        dir: &Path,
        backend: Option<BackendKind>,
    ) -> Result<Box<dyn RowModel>, SavedRunError> {
        match Self::load(dir, backend)? {
            SavedModel::Tabular(model) => Ok(model),
            SavedModel::Image(_) => Err(SavedRunError::NotTabular {
                dir: dir.to_path_buf(),
            }),
        }
    }
}

/// What a directory given as a trained run holds.
enum RunDirContents {
    /// What `cubenet export` wrote.
    Export(Box<Export>),
    /// The artifact directory of an image run.
    Image,
    /// The artifact directory of a tabular run (it has `preprocessing.json`).
    Tabular,
}

impl RunDirContents {
    fn find(dir: &Path) -> Result<Self, SavedRunError> {
        if let Some(export) = Export::find(dir)? {
            return Ok(RunDirContents::Export(Box::new(export)));
        }
        let run_dir = RunDir::open(dir);
        if run_dir.preprocessing().is_file() {
            return Ok(RunDirContents::Tabular);
        }
        if !run_dir.config().is_file() {
            return Err(SavedRunError::NoRun {
                dir: dir.to_path_buf(),
            });
        }
        Ok(RunDirContents::Image)
    }
}

/// Loads the model of `dir` on the backend [`run_on`] picks.
struct LoadModel<'a> {
    dir: &'a Path,
    contents: RunDirContents,
}

impl BackendTask for LoadModel<'_> {
    type Output = Result<SavedModel, TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output {
        load_on::<B::InnerBackend>(&RunDir::open(self.dir), self.contents, device, kind)
    }
}

/// The model `contents` names in `dir`, read onto `device` of backend `B` (of `kind`) once
/// its layer table says it fits there.
fn load_on<B: KernelBackend>(
    dir: &RunDir,
    contents: RunDirContents,
    device: B::Device,
    kind: BackendKind,
) -> Result<SavedModel, TrainError> {
    let fits = |model: &ImageModelConfig| -> Result<(), TrainError> {
        memory_check::check_inference(model.size()?, CLASSIFY_BATCH, kind)
    };
    match contents {
        RunDirContents::Export(export) => match &export.sidecar.cubenet {
            ExportedRun::Tabular(config) => Ok(SavedModel::Tabular(Box::new(RowsOnDevice {
                model: export.tabular_model::<B>(config, &device)?,
                device,
            }))),
            ExportedRun::Image(saved) => {
                fits(&saved.config.model)?;
                let model = saved.config.model.init::<B>(&device)?;
                let model =
                    read_weights(model, &saved.config.model.sequential()?, &export.weights)?;
                Ok(image(model, saved.clone(), device))
            }
        },
        RunDirContents::Tabular => Ok(SavedModel::Tabular(Box::new(RowsOnDevice {
            model: TabularModel::<B>::load(dir, &device)?,
            device,
        }))),
        RunDirContents::Image => {
            let saved = SavedImageConfig::load(dir)?;
            fits(&saved.config.model)?;
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
