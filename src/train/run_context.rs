//! Where and how a run trains, apart from what it computes: the settings (a config) and
//! the data are the other arguments of a `train` function.

use std::path::PathBuf;

use burn::prelude::Backend;

/// The artifact directory a run writes into, whether it continues from the last complete
/// checkpoint there, and the devices it trains on.
#[derive(Debug, Clone)]
pub struct RunContext<B: Backend> {
    /// Receives the config, the checkpoints, burn-train's metric logs, the model and the
    /// learning curves.
    pub artifact_dir: PathBuf,
    /// Continue from the last complete checkpoint in `artifact_dir` instead of starting
    /// afresh (which clears earlier checkpoints and logs there).
    pub resume: bool,
    /// Holds the model and the optimizer, and validates.
    pub device: B::Device,
    /// Further devices, each training on its own share of every step's batches
    /// (data-parallel); none for a one-device run.
    pub data_parallel: Vec<B::Device>,
}

impl<B: Backend> RunContext<B> {
    /// A fresh run into `artifact_dir` on `device`.
    pub fn new(artifact_dir: impl Into<PathBuf>, device: B::Device) -> Self {
        Self {
            artifact_dir: artifact_dir.into(),
            resume: false,
            device,
            data_parallel: Vec::new(),
        }
    }

    /// The same run on `devices`, the first holding the model.
    pub fn on_devices(self, devices: Vec<B::Device>) -> Self {
        let mut devices = devices.into_iter();
        let Some(device) = devices.next() else {
            return self;
        };
        Self {
            device,
            data_parallel: devices.collect(),
            ..self
        }
    }

    /// Every device the run trains on, the model's first.
    pub fn devices(&self) -> Vec<B::Device> {
        std::iter::once(self.device.clone())
            .chain(self.data_parallel.iter().cloned())
            .collect()
    }

    /// The same run, resumed when `resume` is true.
    pub fn with_resume(self, resume: bool) -> Self {
        Self { resume, ..self }
    }
}
