//! A burn-train metric that watches every step: it stops the run at the first non-finite
//! training loss (before that epoch is validated or checkpointed, so the last good
//! checkpoint stays the newest) and notes when each epoch's last training or validation
//! step ended and how many images it trained on, so a run can report its first epoch
//! (kernel compilation and autotuning on a GPU, for the training and the validation shapes)
//! apart from the rest, and its training speed. It also says when an epoch's validation has
//! ended, so that early stopping reads a complete validation loss (see
//! [`TrainingWatch::wait_for_validation`]).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use burn::prelude::*;
use burn::train::metric::{Adaptor, Metric, MetricMetadata, MetricName, SerializedEntry};
use burn::train::{ClassificationOutput, Interrupter};

use crate::atomic_file::WriteError;
use crate::model::TabularOutput;

/// The loss of one step, read from the step's output after burn-train synced it, and the
/// step's batch size.
pub struct StepLoss {
    loss: f64,
    items: usize,
}

impl<B: Backend> Adaptor<StepLoss> for ClassificationOutput<B> {
    fn adapt(&self) -> StepLoss {
        StepLoss {
            loss: self.loss.clone().into_scalar().elem(),
            items: self.output.dims()[0],
        }
    }
}

impl<B: Backend> Adaptor<StepLoss> for TabularOutput<B> {
    fn adapt(&self) -> StepLoss {
        StepLoss {
            loss: self.loss.clone().into_scalar().elem(),
            items: self.scores.dims()[0],
        }
    }
}

/// The step where the loss stopped being a number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NonFiniteLoss {
    pub epoch: usize,
    pub step: usize,
    pub loss: f64,
}

/// The training phase of one epoch: its images (on all devices together) and its wall
/// time, from the previous epoch's last step (or the start) to its last training step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainingPhase {
    pub images: usize,
    pub seconds: f64,
}

/// How fast a run trained: images per second over the training phases of the epochs after
/// the first (which, on a GPU, also compiles and autotunes the kernels), or of the first
/// when it is the only one; on several devices, all of them together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainingSpeed {
    pub images_per_second: f64,
    pub devices: usize,
}

impl TrainingSpeed {
    /// The speed over `phases` on `devices` devices; none without a timed phase.
    pub fn of(phases: &[TrainingPhase], devices: usize) -> Option<Self> {
        let steady = phases.get(1..).filter(|later| !later.is_empty());
        let (images, seconds) = steady
            .unwrap_or(phases)
            .iter()
            .fold((0, 0.0), |(images, seconds), phase| {
                (images + phase.images, seconds + phase.seconds)
            });
        (seconds > 0.0).then(|| Self {
            images_per_second: images as f64 / seconds,
            devices,
        })
    }

    /// Images per second on each device.
    pub fn per_device(&self) -> f64 {
        self.images_per_second / self.devices as f64
    }
}

/// `training speed: 41230 images/s, 20615 per device on 2 devices`.
impl std::fmt::Display for TrainingSpeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "training speed: {:.0} images/s", self.images_per_second)?;
        match self.devices {
            1 => write!(f, " on 1 device"),
            n => write!(f, ", {:.0} per device on {n} devices", self.per_device()),
        }
    }
}

/// What the watch saw of one epoch.
#[derive(Debug)]
struct EpochRecord {
    epoch: usize,
    /// When its latest step, training or validation, ended.
    end: Instant,
    /// When its latest training step ended.
    training_end: Option<Instant>,
    /// Images its training steps took.
    trained: usize,
    /// Whether its validation has ended.
    validated: bool,
}

#[derive(Debug)]
struct Record {
    started: Instant,
    /// In epoch order.
    epochs: Vec<EpochRecord>,
    failure: Option<NonFiniteLoss>,
    /// The first checkpoint or metric log that could not be written.
    failed_write: Option<WriteError>,
    /// Whether [`TrainingWatch::stop`] stopped training.
    stopped: bool,
}

impl Record {
    /// When each epoch began: the start, then the previous epoch's end.
    fn epoch_starts(&self) -> impl Iterator<Item = Instant> + '_ {
        std::iter::once(self.started).chain(self.epochs.iter().map(|e| e.end))
    }
}

/// The name the watch has among burn-train's metrics, whose logs hold its checks rather
/// than a measurement.
pub const WATCH_METRIC: &str = "Loss check";

/// What the watch saw; cloned into the metrics, read after training.
#[derive(Clone)]
pub struct TrainingWatch {
    /// The record, and the signal of each epoch's end of validation.
    record: Arc<(Mutex<Record>, Condvar)>,
    interrupter: Interrupter,
    name: MetricName,
    /// Training steps are checked and counted; validation steps only mark the time.
    training: bool,
}

impl TrainingWatch {
    /// A watch that stops training through `interrupter`; its clock starts now.
    pub fn new(interrupter: Interrupter) -> Self {
        Self {
            record: Arc::new((
                Mutex::new(Record {
                    started: Instant::now(),
                    epochs: Vec::new(),
                    failure: None,
                    failed_write: None,
                    stopped: false,
                }),
                Condvar::new(),
            )),
            interrupter,
            name: Arc::new(WATCH_METRIC.into()),
            training: true,
        }
    }

    /// Stops training after the current step for a failure outside the loss (a failed GPU
    /// allocation, the dashboard's kill key): the epoch is neither validated nor checkpointed,
    /// and a wait for a validation's end ([`Self::wait_for_validation`]) ends, since the
    /// failure may have ended the thread that reports it.
    pub fn stop(&self, reason: &str) {
        self.interrupter.stop(Some(reason));
        self.lock().stopped = true;
        self.record.1.notify_all();
    }

    /// Stops training at a checkpoint or metric log that could not be written (a full
    /// disk), keeping the first such error for [`Self::take_write_failure`].
    pub fn write_failed(&self, error: WriteError) {
        self.lock().failed_write.get_or_insert(error);
        self.interrupter.stop(Some("a file could not be written"));
    }

    /// The first checkpoint or metric-log write that failed, if one did.
    pub fn take_write_failure(&self) -> Option<WriteError> {
        self.lock().failed_write.take()
    }

    /// The same watch, for validation steps: they end an epoch but stop nothing.
    pub fn for_validation(&self) -> Self {
        Self {
            training: false,
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
        record
            .epochs
            .iter()
            .zip(record.epoch_starts())
            .map(|(epoch, start)| (epoch.end - start).as_secs_f64())
            .collect()
    }

    /// The training phase of each epoch trained in this process.
    pub fn training_phases(&self) -> Vec<TrainingPhase> {
        let record = self.lock();
        record
            .epochs
            .iter()
            .zip(record.epoch_starts())
            .filter_map(|(epoch, start)| {
                let end = epoch.training_end?;
                Some(TrainingPhase {
                    images: epoch.trained,
                    seconds: (end - start).as_secs_f64(),
                })
            })
            .collect()
    }

    /// Waits until `epoch`'s validation has ended, `deadline` has passed or training was
    /// stopped ([`Self::stop`]), and says whether it ended. burn-train logs the last validation step's metrics and the epoch's
    /// end before it clears the validation metrics, which is when the watch learns of it: a
    /// read of the event store after this returns sees the epoch's whole validation.
    pub fn wait_for_validation(&self, epoch: usize, deadline: Instant) -> bool {
        let (_, ended) = &*self.record;
        let mut record = self.lock();
        loop {
            if record
                .epochs
                .iter()
                .any(|e| e.epoch == epoch && e.validated)
            {
                return true;
            }
            if record.stopped {
                return false;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            record = ended
                .wait_timeout(record, left)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record
            .0
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
        let now = Instant::now();
        let mut record = self.lock();
        if record.epochs.last().is_none_or(|last| last.epoch != epoch) {
            record.epochs.push(EpochRecord {
                epoch,
                end: now,
                training_end: None,
                trained: 0,
                validated: false,
            });
        }
        let current = record.epochs.last_mut().expect("pushed above");
        current.end = now;
        if self.training {
            current.training_end = Some(now);
            current.trained += loss.items;
        }
        if !self.training || loss.loss.is_finite() {
            return SerializedEntry::new("finite".into(), "1".into());
        }
        if record.failure.is_none() {
            record.failure = Some(NonFiniteLoss {
                epoch,
                step: metadata.iteration.unwrap_or(0),
                loss: loss.loss,
            });
            self.interrupter.stop(Some("non-finite loss"));
        }
        SerializedEntry::new(format!("{}", loss.loss), "0".into())
    }

    /// burn-train clears the validation metrics at the end of each epoch's validation.
    fn clear(&mut self) {
        if self.training {
            return;
        }
        if let Some(last) = self.lock().epochs.last_mut() {
            last.validated = true;
        }
        self.record.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use burn::data::dataloader::Progress;

    use super::*;

    fn phase(images: usize, seconds: f64) -> TrainingPhase {
        TrainingPhase { images, seconds }
    }

    #[test]
    fn speed_leaves_out_the_first_epoch_unless_it_is_the_only_one() {
        let phases = [phase(1000, 10.0), phase(1000, 0.5), phase(1000, 1.5)];
        let speed = TrainingSpeed::of(&phases, 2).unwrap();
        assert_eq!(speed.images_per_second, 1000.0);
        assert_eq!(speed.per_device(), 500.0);
        assert_eq!(
            speed.to_string(),
            "training speed: 1000 images/s, 500 per device on 2 devices"
        );
        let only = TrainingSpeed::of(&phases[..1], 1).unwrap();
        assert_eq!(only.to_string(), "training speed: 100 images/s on 1 device");
        assert_eq!(TrainingSpeed::of(&[], 1), None);
    }

    /// The metadata of a step of `epoch` (of 2).
    fn step(epoch: usize) -> MetricMetadata {
        MetricMetadata {
            progress: Progress::new(1, 1),
            global_progress: Progress::new(epoch, 2),
            iteration: Some(1),
            lr: None,
        }
    }

    #[test]
    fn an_epochs_validation_ends_when_burn_train_clears_the_validation_metrics() {
        let watch = TrainingWatch::new(Interrupter::new());
        let (mut training, mut validation) = (watch.clone(), watch.for_validation());
        let loss = StepLoss {
            loss: 0.5,
            items: 8,
        };
        let soon = || Instant::now() + std::time::Duration::from_millis(20);
        training.update(&loss, &step(1));
        // The training metrics' end of epoch says nothing about validation.
        training.clear();
        validation.update(&loss, &step(1));
        assert!(!watch.wait_for_validation(1, soon()));
        // Another thread waits; the end of the validation wakes it.
        let waiting = {
            let watch = watch.clone();
            std::thread::spawn(move || {
                watch.wait_for_validation(1, Instant::now() + std::time::Duration::from_secs(60))
            })
        };
        validation.clear();
        assert!(waiting.join().unwrap());
        assert!(watch.wait_for_validation(1, soon()));
        training.update(&loss, &step(2));
        assert!(!watch.wait_for_validation(2, soon()));
    }

    #[test]
    fn phases_count_training_images_and_end_at_the_last_training_step() {
        let watch = TrainingWatch::new(Interrupter::new());
        let (mut training, mut validation) = (watch.clone(), watch.for_validation());
        let loss = |items| StepLoss { loss: 0.5, items };
        training.update(&loss(64), &step(1));
        training.update(&loss(36), &step(1));
        validation.update(&loss(1000), &step(1));
        training.update(&loss(64), &step(2));
        let phases = watch.training_phases();
        assert_eq!(
            phases.iter().map(|p| p.images).collect::<Vec<_>>(),
            [100, 64]
        );
        let epochs = watch.epoch_seconds();
        // The second epoch's training began when the first epoch's validation ended.
        assert!(phases[1].seconds <= epochs[1]);
        assert!(phases[0].seconds <= epochs[0]);
    }
}
