//! Where and how a run trains, apart from what it computes: the settings (a config) and
//! the data are the other arguments of a `train` function.

use std::path::PathBuf;

use burn::prelude::Backend;

/// The artifact directory a run writes into, whether it continues from the last complete
/// checkpoint there, and the device it trains on.
#[derive(Debug, Clone)]
pub struct RunContext<B: Backend> {
    /// Receives the config, the checkpoints, burn-train's metric logs, the model and the
    /// learning curves.
    pub artifact_dir: PathBuf,
    /// Continue from the last complete checkpoint in `artifact_dir` instead of starting
    /// afresh (which clears earlier checkpoints and logs there).
    pub resume: bool,
    pub device: B::Device,
}

impl<B: Backend> RunContext<B> {
    /// A fresh run into `artifact_dir` on `device`.
    pub fn new(artifact_dir: impl Into<PathBuf>, device: B::Device) -> Self {
        Self {
            artifact_dir: artifact_dir.into(),
            resume: false,
            device,
        }
    }

    /// The same run, resumed when `resume` is true.
    pub fn with_resume(self, resume: bool) -> Self {
        Self { resume, ..self }
    }
}
