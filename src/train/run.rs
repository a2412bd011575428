//! A whole run — claim the artifact directory, load the data, train, evaluate — for either
//! kind of job, on a backend chosen at run time: [`Run`] holds what every run has (where
//! it writes, whether it resumes), a [`RunJob`] what it trains ([`super::ImageJob`],
//! [`super::tabular::TabularJob`]).

use std::path::PathBuf;

use cubenet_kernels::AutodiffKernelBackend;

use super::{RunError, TrainError};
use crate::backend::{BackendKind, BackendTask, run_on};

/// What a run trains: the data, the network and its settings.
pub trait RunJob {
    /// What the run returns once trained and evaluated.
    type Report;

    /// Trains on backend `B` (`kind` at run time) from `device`, writing into
    /// `artifact_dir` (claimed first) and continuing its last checkpoint if `resume`.
    fn train<B: AutodiffKernelBackend>(
        self,
        artifact_dir: PathBuf,
        resume: bool,
        device: B::Device,
        kind: BackendKind,
    ) -> Result<Self::Report, TrainError>;
}

/// A job with its artifact directory.
#[derive(Debug, Clone)]
pub struct Run<J> {
    pub job: J,
    pub artifact_dir: PathBuf,
    /// Continue from the last complete checkpoint in `artifact_dir`.
    pub resume: bool,
}

impl<J: RunJob> Run<J> {
    /// A fresh run of `job` into `artifact_dir`.
    pub fn new(job: J, artifact_dir: impl Into<PathBuf>) -> Self {
        Self {
            job,
            artifact_dir: artifact_dir.into(),
            resume: false,
        }
    }

    /// Runs on `backend`: what each job's `launch` does. Generic code is compiled in the
    /// crate that names its concrete types, so callers outside this crate get a concrete
    /// `launch` per job (`Run<ImageJob>`, `Run<TabularJob>`): the training code is then
    /// compiled once, here, and not again in every example and test binary (about 6 minutes
    /// of release build each).
    pub(crate) fn launch_on(self, backend: BackendKind) -> Result<J::Report, RunError> {
        Ok(run_on(backend, self)??)
    }
}

impl<J: RunJob> BackendTask for Run<J> {
    type Output = Result<J::Report, TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output {
        self.job
            .train::<B>(self.artifact_dir, self.resume, device, kind)
    }
}
