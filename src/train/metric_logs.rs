//! burn-train's per-epoch metric logs (`train/epoch-<k>/`, `valid/epoch-<k>/`), numbered by
//! the true epoch after a resume. burn-train 0.21's event store numbers the epochs it logs
//! from 1 in every run and only takes the real number from the first epoch's end, so a run
//! resumed after epoch 2 writes epoch 3's metrics over epoch 1's logs; the best epoch is
//! then chosen from wrong losses, and its checkpoint may already be pruned.

use std::path::Path;

use burn::train::logger::{FileMetricLogger, MetricLogger};
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{MetricDefinition, NumericEntry};

/// burn-train's file metric logger, with every epoch before `first_epoch` taken as
/// `first_epoch`: the epoch a run starts at (1, or the one after its resume point).
pub(super) struct EpochMetricLogger {
    files: FileMetricLogger,
    first_epoch: usize,
}

impl EpochMetricLogger {
    pub fn new(artifact_dir: &Path, resume_after: Option<usize>) -> Self {
        Self {
            files: FileMetricLogger::new(artifact_dir),
            first_epoch: resume_after.map_or(1, |epoch| epoch + 1),
        }
    }
}

impl MetricLogger for EpochMetricLogger {
    fn log(&mut self, update: MetricsUpdate, epoch: usize, split: &Split) {
        self.files.log(update, epoch.max(self.first_epoch), split);
    }

    fn read_numeric(
        &mut self,
        name: &str,
        epoch: usize,
        split: &Split,
    ) -> Result<Vec<NumericEntry>, String> {
        self.files.read_numeric(name, epoch, split)
    }

    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.files.log_metric_definition(definition);
    }

    fn log_epoch_summary(&mut self, summary: EpochSummary) {
        self.files.log_epoch_summary(summary);
    }
}
