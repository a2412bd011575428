//! A whole run — its artifact directory, its data, training, evaluation — for either kind of
//! job, on a backend chosen at run time: [`Run`] is what every run has (where it writes,
//! whether it resumes), a [`RunJob`] what it trains ([`crate::train::ImageJob`],
//! [`crate::train::tabular::TabularJob`]).

use std::path::Path;

use cubenet_kernels::AutodiffKernelBackend;

use crate::device::{BackendKind, BackendTask, run_on};
use crate::train::{RunDir, RunError, TrainError};

/// A run: the artifact directory it claimed, whether it continues from the last complete
/// checkpoint there instead of starting afresh (which clears earlier checkpoints and logs),
/// whether it writes TensorBoard's event files beside its metric logs, and the run file it
/// came from, if any: saved as [`RunDir::run_file`] only once every check has passed, so that
/// a refused run leaves the run file of the run it would have replaced.
#[derive(Debug, Clone)]
pub struct Run {
    pub dir: RunDir,
    pub resume: bool,
    pub tensorboard: bool,
    pub run_file: Option<String>,
}

impl Run {
    /// A fresh run into `dir`, with TensorBoard's event files.
    pub fn fresh(dir: RunDir) -> Self {
        Self {
            dir,
            resume: false,
            tensorboard: true,
            run_file: None,
        }
    }
}

/// What a run trains: the data, the network and its settings.
pub trait RunJob {
    /// What the run returns once trained and evaluated.
    type Report;

    /// The files and folders the job reads, which its artifact directory must keep clear of
    /// ([`RunDir::claim`]).
    fn inputs(&self) -> Vec<&Path>;

    /// Trains on backend `B` (`kind` at run time) from `device`.
    fn train<B: AutodiffKernelBackend>(
        self,
        run: &Run,
        device: B::Device,
        kind: BackendKind,
    ) -> Result<Self::Report, TrainError>;
}

/// Runs `job` on `backend`: what each job's `launch` does. Generic code is compiled in the
/// crate that names its concrete types, so callers outside this crate get a concrete
/// `launch` per job (`ImageJob::launch`, `TabularJob::launch`): the training code is then
/// compiled once, here, and not again in every example and test binary. A run that fails
/// before writing anything withdraws its claim ([`RunDir::withdraw`]).
pub(crate) fn launch<J: RunJob>(
    job: J,
    run: Run,
    backend: BackendKind,
) -> Result<J::Report, RunError> {
    let dir = run.dir.clone();
    let result = run_on(backend, Launch { job, run })
        .map_err(RunError::from)
        .and_then(|trained| trained.map_err(RunError::from));
    if result.is_err() {
        dir.withdraw();
    }
    result
}

/// A job and its run, before the backend is chosen.
struct Launch<J> {
    job: J,
    run: Run,
}

impl<J: RunJob> BackendTask for Launch<J> {
    type Output = Result<J::Report, TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output {
        self.job.train::<B>(&self.run, device, kind)
    }
}
