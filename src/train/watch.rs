//! A burn-train metric that watches every step: it stops the run at the first non-finite
//! training loss (before that epoch is validated or checkpointed, so the last good
//! checkpoint stays the newest) and notes when each epoch's last training or validation
//! step ended, so a run can report its first epoch (kernel compilation and autotuning on a
//! GPU, for the training and the validation shapes) apart from the rest.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use burn::prelude::*;
use burn::train::metric::{Adaptor, Metric, MetricMetadata, MetricName, SerializedEntry};
use burn::train::{ClassificationOutput, Interrupter};

use crate::model::TabularOutput;

/// The loss of one step, read from the step's output after burn-train synced it.
pub struct StepLoss(f64);

impl<B: Backend> Adaptor<StepLoss> for ClassificationOutput<B> {
    fn adapt(&self) -> StepLoss {
        StepLoss(self.loss.clone().into_scalar().elem())
    }
}

impl<B: Backend> Adaptor<StepLoss> for TabularOutput<B> {
    fn adapt(&self) -> StepLoss {
        StepLoss(self.loss.clone().into_scalar().elem())
    }
}

/// The step where the loss stopped being a number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonFiniteLoss {
    pub epoch: usize,
    pub step: usize,
    pub loss: f64,
}

#[derive(Debug)]
struct Record {
    started: Instant,
    /// `(epoch, when its latest step ended)`, in epoch order.
    epoch_ends: Vec<(usize, Instant)>,
    failure: Option<NonFiniteLoss>,
}

/// What the watch saw; cloned into the metrics, read after training.
#[derive(Clone)]
pub struct TrainingWatch {
    record: Arc<Mutex<Record>>,
    interrupter: Interrupter,
    name: MetricName,
    /// Training steps are checked; validation steps only mark the time.
    checks_loss: bool,
}

impl TrainingWatch {
    /// A watch that stops training through `interrupter`; its clock starts now.
    pub fn new(interrupter: Interrupter) -> Self {
        Self {
            record: Arc::new(Mutex::new(Record {
                started: Instant::now(),
                epoch_ends: Vec::new(),
                failure: None,
            })),
            interrupter,
            name: Arc::new("Loss check".into()),
            checks_loss: true,
        }
    }

    /// Stops training after the current step for a failure outside the loss (a failed GPU
    /// allocation): the epoch is neither validated nor checkpointed.
    pub fn stop(&self, reason: &str) {
        self.interrupter.stop(Some(reason));
    }

    /// The same watch, for validation steps: they end an epoch but stop nothing.
    pub fn for_validation(&self) -> Self {
        Self {
            checks_loss: false,
            ..self.clone()
        }
    }

    /// The first non-finite loss, if training hit one.
    pub fn failure(&self) -> Option<NonFiniteLoss> {
        self.lock().failure
    }

    /// Wall seconds of each epoch trained in this process (for a resumed run, the epochs
    /// after the checkpoint), validation included: from the previous epoch's last step (or
    /// the start) to this epoch's last step.
    pub fn epoch_seconds(&self) -> Vec<f64> {
        let record = self.lock();
        let mut previous = record.started;
        record
            .epoch_ends
            .iter()
            .map(|&(_, end)| {
                let seconds = (end - previous).as_secs_f64();
                previous = end;
                seconds
            })
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Metric for TrainingWatch {
    type Input = StepLoss;

    fn name(&self) -> MetricName {
        self.name.clone()
    }

    fn update(&mut self, loss: &StepLoss, metadata: &MetricMetadata) -> SerializedEntry {
        let epoch = metadata.global_progress.items_processed;
        let mut record = self.lock();
        match record.epoch_ends.last_mut() {
            Some((last, end)) if *last == epoch => *end = Instant::now(),
            _ => record.epoch_ends.push((epoch, Instant::now())),
        }
        if !self.checks_loss || loss.0.is_finite() {
            return SerializedEntry::new("finite".into(), "1".into());
        }
        if record.failure.is_none() {
            record.failure = Some(NonFiniteLoss {
                epoch,
                step: metadata.iteration.unwrap_or(0),
                loss: loss.0,
            });
            self.interrupter.stop(Some("non-finite loss"));
        }
        SerializedEntry::new(format!("{}", loss.0), "0".into())
    }

    fn clear(&mut self) {}
}
