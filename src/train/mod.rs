//! Training wiring: burn-train with a dashboard or epoch lines, artifacts, evaluation; image
//! runs here, tabular (CSV) runs in [`tabular`].

mod artifact_dir;
mod artifacts;
mod checkpoint_reads;
mod checkpoints;
mod config;
mod confusion;
pub mod data_parallel;
mod early_stopping;
mod epoch_lines;
mod experiment_log;
mod fused_adam;
mod fused_sgd;
mod fused_update;
mod images;
mod launch_guard;
mod learner_setup;
mod metric_logs;
mod recorder;
mod resume;
mod run;
mod run_context;
mod saved_run;
pub mod tabular;
mod torch_weights;
mod watch;

use std::path::PathBuf;

pub use artifact_dir::{MARKER_FILE, claim_artifact_dir};
pub use artifacts::{
    BestEpoch, CONFIG_FILE, CURVES_FILE, MODEL_FILE, load_model, plot_learning_curves,
    restore_best_epoch, save_config, save_model, valid_losses,
};
pub use checkpoints::{CHECKPOINT_DIR, SaveEveryEpoch, last_complete_checkpoint};
pub use config::ImageTrainingConfig;
pub use confusion::{
    CONFUSION_MATRIX_FILE, ConfusionError, ConfusionMatrix, PER_CLASS_ACCURACY_FILE,
};
pub use early_stopping::{PatienceStopping, patience_exhausted};
pub use epoch_lines::{EpochLineRenderer, EpochMeans, epoch_line};
pub use fused_adam::{FusedAdam, FusedAdamConfig};
pub use fused_sgd::{FusedSgd, FusedSgdConfig};
pub use images::{
    IMAGE_CACHE_DIR, ImageJob, ImageSplits, SavedImageConfig, accuracy_line, evaluate, train,
};
pub use learner_setup::{RunLength, finish_run, with_run_settings};
pub use recorder::{ModelRecorder, RecordError, decode_model_record, decode_record};
pub use resume::{Resumable, begin_run};
pub use run::{Run, RunJob};
pub use run_context::RunContext;
pub use saved_run::{DenseValues, ImageClassifier, RowModel, SavedModel, SavedRun, SavedRunError};
pub use torch_weights::{
    EXPORT_DIR, EXPORT_FORMAT, EXPORT_WEIGHTS, Export, ExportSidecar, ExportedRun, Preprocessing,
    export_image_model, export_tabular_model, read_weights, sidecar_path,
};
pub use watch::{NonFiniteLoss, StepLoss, TrainingPhase, TrainingSpeed, TrainingWatch};

use crate::atomic_file::WriteError;
use crate::data::DataError;
use crate::model::ModelError;
use crate::plot::PlotError;

/// Why a whole run (backend chosen at run time) failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Backend(#[from] crate::backend::BackendError),
    #[error(transparent)]
    Train(#[from] TrainError),
}

/// Why a run could not train or save its results.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid setting: {0}")]
    Config(String),
    #[error("cannot train data-parallel: {0}")]
    DataParallel(String),
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("will not use {} as the artifact directory: {reason}", dir.display())]
    ArtifactDir { dir: PathBuf, reason: String },
    #[error("cannot save the model to {}: {reason}", path.display())]
    Record { path: PathBuf, reason: String },
    #[error("cannot load a model from {}: {reason}", path.display())]
    Load { path: PathBuf, reason: String },
    #[error("cannot load {}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: RecordError,
    },
    #[error("cannot read the metric logs in {}: {reason}", dir.display())]
    Logs { dir: PathBuf, reason: String },
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    Confusion(#[from] ConfusionError),
    #[error(transparent)]
    Device(#[from] crate::backend::BackendError),
    #[error("cannot resume the run in {}: {reason}", dir.display())]
    Resume { dir: PathBuf, reason: String },
    #[error(
        "training stopped: the loss became {loss} at epoch {epoch}, step {step}; the likely \
         cause is a learning rate too high for this model ({learning_rate}): lower it{}",
        match last_good {
            Some(epoch) => format!(" and --resume from the last good checkpoint (epoch {epoch})"),
            None => String::new(),
        }
    )]
    NonFiniteLoss {
        epoch: usize,
        step: usize,
        loss: f64,
        learning_rate: f64,
        last_good: Option<usize>,
    },
    #[error(
        "out of GPU memory at batch size {batch_size}: lower --batch-size (or \
         training.batch_size in the run file)"
    )]
    OutOfGpuMemory { batch_size: usize },
}

impl TrainError {
    /// Maps an I/O error writing `path` (`.map_err(TrainError::io(&path))`).
    pub fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
        move |source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Maps a record that `path` does not hold (`.map_err(TrainError::record(&path))`).
    pub fn record(path: &std::path::Path) -> impl FnOnce(RecordError) -> TrainError + '_ {
        move |source| TrainError::Unreadable {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Maps an I/O error reading `path` (`.map_err(TrainError::read(&path))`).
    pub fn read(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> TrainError + '_ {
        move |source| TrainError::Read {
            path: path.to_path_buf(),
            source,
        }
    }
}

impl From<WriteError> for TrainError {
    fn from(WriteError { path, source }: WriteError) -> Self {
        TrainError::Io { path, source }
    }
}
