//! The burn-train settings every cubenet run shares, whatever it trains, and what is
//! checked when training returns.

use std::io::IsTerminal;

use burn::lr_scheduler::LrScheduler;
use burn::module::{AutodiffModule, Module};
use burn::optim::Optimizer;
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::{Adaptor, CudaMetric, ItemLazy};
use burn::train::{
    InferenceStep, LearningComponentsMarker, LearningResult, SupervisedTraining, TrainStep,
};

use crate::train::fit::dashboard::Dashboard;
use crate::train::fit::early_stopping::{PatienceStopping, patience_exhausted};
use crate::train::fit::experiment_log;
use crate::train::fit::stops;
use crate::train::fit::watch::{StepLoss, TrainingWatch};
use crate::train::run_dir::RunDir;
use crate::train::run_dir::artifacts::{BestEpoch, restore_best_epoch, valid_losses};
use crate::train::run_dir::checkpoints::SaveEveryEpoch;
use crate::train::run_dir::metric_logs::EpochMetricLogger;
use crate::train::run_dir::recorder::ModelRecorder;
use crate::train::run_dir::tensorboard::{TensorBoardLogger, TensorBoardRun};
use crate::train::{EpochLineRenderer, TrainError};

/// How long a run trains and where it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunLength {
    pub epochs: usize,
    /// Stop after this many epochs without a lower validation loss.
    pub patience: usize,
    /// The epoch a resumed run continues after (see
    /// [`crate::train::run_dir::resume::begin_run`]).
    pub resume_after: Option<usize>,
}

impl RunLength {
    /// The run's length; a resumed run whose early stopping had already fired at the resume
    /// point (its metric logs in `dir` say so) trains no further.
    pub fn new(
        dir: &RunDir,
        epochs: usize,
        patience: usize,
        resume_after: Option<usize>,
    ) -> Result<Self, TrainError> {
        let mut epochs = epochs;
        if let Some(after) = resume_after {
            let losses: Vec<f64> = valid_losses(dir)?
                .into_iter()
                .filter(|&(epoch, _)| epoch <= after)
                .map(|(_, loss)| loss)
                .collect();
            if patience_exhausted(&losses, patience) {
                epochs = epochs.min(after);
            }
        }
        Ok(Self {
            epochs,
            patience,
            resume_after,
        })
    }

    /// The first epoch this process trains.
    fn first_epoch(&self) -> usize {
        self.resume_after.map_or(1, |after| after + 1)
    }
}

/// Full-precision checkpoints of every epoch, written atomically ([`restore_best_epoch`]
/// reloads the best and prunes the others but the last), early stopping on the validation
/// loss, the resume point, metric logs that stop the run when a write fails and are
/// numbered by the true epoch after a resume ([`EpochMetricLogger`]), the
/// [`TrainingWatch`], burn-train's dashboard made safe to stop ([`Dashboard`]) with CUDA
/// statistics on a CUDA device when stdout is a terminal, one line per epoch otherwise,
/// TensorBoard's event files when `events` asks for them ([`TensorBoardLogger`]),
/// and burn-train's application log `experiment.log` in `dir`, installed by
/// [`experiment_log`] instead of burn-train's installer, whose filter made every CubeCL
/// trace span cost time. The log is global: only a process's first run installs it.
pub(crate) fn with_run_settings<B, LR, M, O>(
    training: SupervisedTraining<LearningComponentsMarker<B, LR, M, O>>,
    dir: &RunDir,
    length: RunLength,
    events: Option<TensorBoardRun>,
) -> (
    SupervisedTraining<LearningComponentsMarker<B, LR, M, O>>,
    TrainingWatch,
)
where
    B: AutodiffBackend,
    LR: LrScheduler + 'static,
    M: TrainStep + AutodiffModule<B> + core::fmt::Display + 'static,
    M::InnerModule: InferenceStep,
    O: Optimizer<M, B> + 'static,
    <M::Output as ItemLazy>::ItemSync: Adaptor<StepLoss> + Adaptor<()>,
    <<M::InnerModule as InferenceStep>::Output as ItemLazy>::ItemSync: Adaptor<StepLoss>,
{
    let watch = TrainingWatch::new(training.interrupter());
    // `false` only says that an earlier run of this process installed it.
    experiment_log::install(&dir.experiment_log());
    let mut training = training
        .with_application_logger(None)
        .with_metric_logger(EpochMetricLogger::new(
            dir,
            length.first_epoch(),
            watch.clone(),
        ))
        .with_file_checkpointer(ModelRecorder::stopping(watch.clone()))
        .with_checkpointing_strategy(SaveEveryEpoch)
        .early_stopping(PatienceStopping {
            patience: length.patience,
            first_epoch: length.first_epoch(),
            watch: watch.clone(),
        })
        .metric_train(watch.clone())
        .metric_valid(watch.for_validation())
        .num_epochs(length.epochs);
    if let Some(events) = events {
        let logger = TensorBoardLogger::new(dir, length.first_epoch(), events, watch.clone());
        training = training.with_metric_logger(logger);
    }
    if let Some(epoch) = length.resume_after {
        training = training.checkpoint(epoch);
    }
    if std::io::stdout().is_terminal() {
        // NVML statistics are a query per step: worth it on the dashboard, which shows them.
        if on_cuda::<B>() {
            training = training.metric_train(CudaMetric::new());
        }
        training = training.renderer(Dashboard::new(length.resume_after));
    } else {
        training = training.renderer(EpochLineRenderer::default());
    }
    (training, watch)
}

/// What a finished `launch` leaves: an error if the watch stopped it or a stop was requested
/// ([`stops`]), otherwise the best epoch's model restored from its checkpoint.
/// `learning_rate` goes into the hint.
pub(crate) fn finish_run<B, M>(
    dir: &RunDir,
    result: LearningResult<M>,
    watch: &TrainingWatch,
    learning_rate: f64,
    device: &B::Device,
) -> Result<BestEpoch<M>, TrainError>
where
    B: Backend,
    M: Module<B>,
{
    // Dropping the renderer closes the dashboard before anything else is printed.
    drop(result.renderer);
    if let Some(failed) = watch.take_write_failure() {
        return Err(failed.into());
    }
    if let Some(failure) = watch.failure() {
        return Err(TrainError::NonFiniteLoss {
            epoch: failure.epoch,
            step: failure.step,
            loss: failure.loss,
            learning_rate,
            last_good: dir.last_complete_checkpoint()?,
        });
    }
    if stops::requested() {
        return Err(stops::stopped());
    }
    restore_best_epoch(dir, result.model, device)
}

/// Whether `B` runs on an NVIDIA GPU through CUDA, where NVML has statistics to show.
#[cfg_attr(
    not(feature = "cuda"),
    expect(
        clippy::extra_unused_type_parameters,
        reason = "without CUDA compiled in, no backend is CUDA's"
    )
)]
fn on_cuda<B: Backend>() -> bool {
    #[cfg(feature = "cuda")]
    {
        use std::any::TypeId;
        TypeId::of::<B::Device>() == TypeId::of::<burn::backend::cuda::CudaDevice>()
    }
    #[cfg(not(feature = "cuda"))]
    {
        false
    }
}
