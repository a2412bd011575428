//! The burn-train settings every cubenet run shares, whatever it trains.

use std::io::IsTerminal;

use burn::lr_scheduler::LrScheduler;
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;
use burn::train::metric::store::{Aggregate, Direction, Split};
use burn::train::metric::{CudaMetric, LossMetric};
use burn::train::{
    InferenceStep, LearningComponentsMarker, MetricEarlyStoppingStrategy, StoppingCondition,
    SupervisedTraining, TrainStep,
};

use super::artifacts::ModelRecorder;
use super::checkpoints::SaveEveryEpoch;
use crate::backend::BackendKind;

/// Full-precision checkpoints of every epoch ([`super::restore_best_epoch`] reloads the best
/// and prunes the others but the last), early stopping
/// after `patience` epochs without a lower validation loss, CUDA statistics on CUDA, and
/// one line per epoch instead of the dashboard when stdout is not a terminal.
pub fn with_run_settings<B, LR, M, O>(
    training: SupervisedTraining<LearningComponentsMarker<B, LR, M, O>>,
    epochs: usize,
    patience: usize,
    backend: BackendKind,
) -> SupervisedTraining<LearningComponentsMarker<B, LR, M, O>>
where
    B: AutodiffBackend,
    LR: LrScheduler + 'static,
    M: TrainStep + AutodiffModule<B> + core::fmt::Display + 'static,
    M::InnerModule: InferenceStep,
    O: Optimizer<M, B> + 'static,
{
    let mut training = training
        .with_file_checkpointer(ModelRecorder::new())
        .with_checkpointing_strategy(SaveEveryEpoch)
        .early_stopping(MetricEarlyStoppingStrategy::new(
            &LossMetric::<B>::new(),
            Aggregate::Mean,
            Direction::Lowest,
            Split::Valid,
            StoppingCondition::NoImprovementSince { n_epochs: patience },
        ))
        .num_epochs(epochs);
    if backend == BackendKind::Cuda {
        training = training.metric_train(CudaMetric::new());
    }
    if !std::io::stdout().is_terminal() {
        training = training.renderer(super::EpochLineRenderer::default());
    }
    training
}
