//! Training wiring: burn-train with a dashboard or epoch lines, artifacts, evaluation; MNIST
//! runs here, tabular (CSV) runs in [`tabular`].

mod artifacts;
mod checkpoints;
mod config;
mod epoch_lines;
mod learner_setup;
mod mnist;
pub mod tabular;

use std::path::PathBuf;

pub use artifacts::{
    BestEpoch, CONFIG_FILE, CURVES_FILE, MODEL_FILE, ModelRecorder, load_model,
    plot_learning_curves, restore_best_epoch, save_config, save_model, write_atomically,
};
pub use checkpoints::SaveEveryEpoch;
pub use config::MnistTrainingConfig;
pub use epoch_lines::{EpochLineRenderer, EpochMeans, epoch_line};
pub use mnist::{MnistRun, MnistSplits, accuracy_line, evaluate, train};

use crate::data::DataError;
use crate::model::ModelError;
use crate::plot::PlotError;

/// Why a run could not train or save its results.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid setting: {0}")]
    Config(String),
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
    #[error("cannot save the model to {}: {reason}", path.display())]
    Record { path: PathBuf, reason: String },
    #[error("cannot load a model from {}: {reason}", path.display())]
    Load { path: PathBuf, reason: String },
    #[error("cannot read the metric logs in {}: {reason}", dir.display())]
    Logs { dir: PathBuf, reason: String },
    #[error(transparent)]
    Plot(#[from] PlotError),
}
