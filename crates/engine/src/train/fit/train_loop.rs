//! burn-train's fit sequence, written once for every job. Its order matters: the artifact
//! directory is prepared (and the resume point found) before the loaders are built, since
//! they start at the epoch after it; the run's length reads the metric logs of that resume
//! point; the pinned pages that checkpoints read through are allocated before the first
//! epoch; and the best epoch is restored only after the loop returned without a failure or a
//! stop request. From the resume point on, a request to stop the run stops its loop at the
//! next step ([`crate::train::fit::stops`]), and the terminal is given back from the dashboard
//! however the loop ends.

use burn::lr_scheduler::LrScheduler;
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::{Adaptor, ItemLazy};
use burn::train::{
    InferenceStep, Learner, LearningComponentsMarker, SupervisedTraining, TrainStep,
};
use serde::Serialize;

use crate::atomic_file::write_atomically;
use crate::train::fit::dashboard::TerminalGuard;
use crate::train::fit::launch_guard::guard_launch;
use crate::train::fit::learner_setup::{RunLength, finish_run, with_run_settings};
use crate::train::fit::pinned_warmup::warm_pinned_reads;
use crate::train::fit::stops::{StopAtStep, TrainingPhase};
use crate::train::fit::watch::{StepLoss, TrainingWatch};
use crate::train::run_dir::artifacts::BestEpoch;
use crate::train::run_dir::data_identity::DataIdentity;
use crate::train::run_dir::resume::begin_run;
use crate::train::run_dir::tensorboard::{EpochIterations, TensorBoardRun, discard_events_after};
use crate::train::{Run, TrainError};

/// burn-train's loop as a job sets it up: the network, optimizer and learning-rate schedule it
/// starts from, and what the loop's settings and messages need.
pub(crate) struct TrainLoop<'a, B: AutodiffBackend, M, O, S, T> {
    pub run: &'a Run,
    /// The settings saved beside the checkpoints, which a resume must match.
    pub settings: &'a T,
    /// Examples in the training, validation and test splits, saved with the identity of the
    /// data files, which a resume must match too.
    pub split_sizes: [usize; 3],
    pub model: M,
    pub optimizer: O,
    pub scheduler: S,
    /// Every device the run trains on, the model's first.
    pub devices: &'a [B::Device],
    pub epochs: usize,
    pub patience: usize,
    /// Named in the message when the GPU runs out of memory.
    pub batch_size: usize,
    /// The validation loader's batch size.
    pub valid_batch_size: usize,
    /// Named in the message when the loss stops being finite.
    pub learning_rate: f64,
    /// What one example is (`images`, `rows`), for the speed TensorBoard shows.
    pub examples: &'static str,
}

/// What the loop leaves: the best epoch's model, and the watch that timed the run.
pub(crate) struct LoopResult<M> {
    pub best: BestEpoch<M>,
    pub watch: TrainingWatch,
}

impl<B, M, O, S, T> TrainLoop<'_, B, M, O, S, T>
where
    B: AutodiffBackend,
    S: LrScheduler + 'static,
    M: TrainStep + AutodiffModule<B> + core::fmt::Display + 'static,
    M::InnerModule: InferenceStep,
    O: Optimizer<M, B> + 'static,
    T: Serialize,
    <M::Output as ItemLazy>::ItemSync: Adaptor<StepLoss> + Adaptor<()>,
    <<M::InnerModule as InferenceStep>::Output as ItemLazy>::ItemSync: Adaptor<StepLoss>,
{
    /// Prepares the artifact directory, has `training` build burn-train's loop (loaders,
    /// metrics, strategy) from the epoch the run continues after, and runs it.
    pub(crate) fn run(
        self,
        training: impl FnOnce(
            Option<usize>,
        ) -> Result<
            SupervisedTraining<LearningComponentsMarker<B, StopAtStep<S>, M, O>>,
            TrainError,
        >,
    ) -> Result<LoopResult<M::InnerModule>, TrainError> {
        let dir = &self.run.dir;
        let device = &self.devices[0];
        let data = DataIdentity::of(dir.inputs(), self.split_sizes)?;
        let resume_after = begin_run::<B, M, O, S, T>(
            dir,
            self.settings,
            &data,
            self.run.resume,
            &self.model,
            device,
        )?;
        let iterations = EpochIterations::of(
            [self.split_sizes[0], self.split_sizes[1]],
            [self.batch_size, self.valid_batch_size],
        );
        discard_events_after(&dir.tensorboard(), resume_after.unwrap_or(0), iterations)?;
        let events = self.run.tensorboard.then(|| TensorBoardRun {
            iterations,
            examples: self.examples,
            settings: serde_json::to_value(self.settings).expect("settings serialize to JSON"),
        });
        let _training_phase = TrainingPhase::begin(dir, self.epochs);
        let _terminal = TerminalGuard;
        let training = training(resume_after)?;
        let length = RunLength::new(dir, self.epochs, self.patience, resume_after)?;
        let (training, watch) = with_run_settings(training, dir, length, events);
        if let Some(run_file) = &self.run.run_file {
            write_atomically(&dir.run_file(), run_file.as_bytes())?;
        }
        let warmup = warm_pinned_reads(&self.model, self.devices);
        let scheduler = StopAtStep::new(self.scheduler, training.interrupter());
        let (model, optimizer) = (self.model, self.optimizer);
        let result = guard_launch(self.batch_size, dir.root(), &watch, || {
            training.launch(Learner::new(model, optimizer, scheduler))
        })?;
        drop(warmup);
        let best = finish_run(dir, result, &watch, self.learning_rate, device)?;
        Ok(LoopResult { best, watch })
    }
}
