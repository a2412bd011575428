//! Training: the jobs (`jobs/`: images, and tables in [`tabular`]) → one fit sequence around
//! burn-train (`fit/`: the loop's settings, the watch, epoch lines, early stopping,
//! data-parallel strategies) → the artifact directory ([`RunDir`] in `run_dir/`: its paths,
//! checkpoints, metric logs, resume, the model and figures) with the fused optimizers
//! (`optim/`); `saved/` reads a finished run back and exports it.

mod fit;
mod jobs;
mod optim;
mod run_dir;
mod saved;

pub use fit::data_parallel;
pub use jobs::tabular;

use std::path::PathBuf;

pub use fit::early_stopping::{PatienceStopping, patience_exhausted};
pub use fit::epoch_lines::{EpochLineRenderer, EpochMeans, epoch_line};
pub use fit::run::{Run, RunJob};
pub use fit::stop_now::end_now;
pub use fit::stops::{StopPoint, StopRequest, handle_stop_signals, request_stop};
pub use fit::watch::{
    NonFiniteLoss, StepLoss, TrainingPhase, TrainingSpeed, TrainingWatch, WATCH_METRIC,
};
pub use jobs::config::{ImageOptimizer, ImageTrainingConfig};
pub use jobs::image_splits::ImageSplits;
pub use jobs::images::{ImageJob, SavedImageConfig, accuracy_line, evaluate, train};
pub use optim::fused_adam::{FusedAdam, FusedAdamConfig};
pub use optim::fused_sgd::{FusedSgd, FusedSgdConfig};
pub use optim::optimizer_config::OptimizerConfig;
pub use optim::schedule::{LrSchedule, RunSchedule};
pub use run_dir::artifacts::{
    BestEpoch, load_model, load_settings, plot_learning_curves, restore_best_epoch, save_config,
    save_model, valid_losses,
};
pub use run_dir::checkpoints::SaveEveryEpoch;
pub use run_dir::confusion::{ConfusionError, ConfusionMatrix};
pub use run_dir::record_frame::{FrameError, frame_record};
pub use run_dir::recorder::{ModelRecorder, RecordError, decode_model_record, decode_record};
pub use run_dir::{
    CHECKPOINT_DIR, CONFIG_FILE, CONFUSION_MATRIX_FILE, CURVES_FILE, EXPORT_DIR, IMAGE_CACHE_DIR,
    MARKER_FILE, MODEL_FILE, PER_CLASS_ACCURACY_FILE, PREPROCESSING_FILE, RUN_FILE, RunDir,
};
pub use saved::export::{
    EXPORT_WEIGHTS, Export, ExportFormat, export_image_model, export_tabular_model,
};
pub use saved::on_device::{DenseValues, ImageClassifier, RowModel, train_splits};
pub use saved::saved_run::{SavedModel, SavedRunError};
pub use saved::sidecar::{
    EXPORT_FORMAT, ExportSidecar, ExportedRun, ONNX_EXPORT_FORMAT, OnnxSidecar, Preprocessing,
    onnx_sidecar_path, sidecar_path,
};
pub use saved::torch_names::read_weights;

use crate::atomic_file::WriteError;
use crate::data::DataError;
use crate::model::ModelError;
use crate::plot::PlotError;

/// Why a whole run (backend chosen at run time) failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Backend(#[from] crate::device::BackendError),
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
    #[error("{message}")]
    TooLarge { message: String },
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
    Device(#[from] crate::device::BackendError),
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
    /// Stopped at the user's request: not a success, and not a failure of the run.
    #[error("{0}")]
    Stopped(StopPoint),
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
