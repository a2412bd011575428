//! burn-train's per-epoch metric logs (`train/epoch-<k>/`, `valid/epoch-<k>/`), numbered by
//! the true epoch after a resume. burn-train 0.21's event store numbers the epochs it logs
//! from 1 in every run and only takes the real number from the first epoch's end, so a run
//! resumed after epoch 2 writes epoch 3's metrics over epoch 1's logs; the best epoch is
//! then chosen from wrong losses, and its checkpoint may already be pruned.
//!
//! burn-train's file logger panics when a write fails (a full disk); here that stops the
//! run through the [`TrainingWatch`] with the error and the folder, and logs nothing more.

use std::io;
use std::path::{Path, PathBuf};

use burn::train::logger::{FileMetricLogger, MetricLogger};
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{MetricDefinition, NumericEntry};

use super::TrainingWatch;
use crate::atomic_file::WriteError;
use crate::quiet_panic::{catch_quietly, first_line};

/// burn-train's file metric logger, with every epoch before `first_epoch` taken as
/// `first_epoch`: the epoch a run starts at (1, or the one after its resume point).
pub(super) struct EpochMetricLogger {
    files: FileMetricLogger,
    first_epoch: usize,
    artifact_dir: PathBuf,
    /// Told when a write fails; nothing is logged after that.
    watch: TrainingWatch,
    failed: bool,
}

impl EpochMetricLogger {
    pub fn new(artifact_dir: &Path, resume_after: Option<usize>, watch: TrainingWatch) -> Self {
        Self {
            files: FileMetricLogger::new(artifact_dir),
            first_epoch: resume_after.map_or(1, |epoch| epoch + 1),
            artifact_dir: artifact_dir.to_path_buf(),
            watch,
            failed: false,
        }
    }
}

impl MetricLogger for EpochMetricLogger {
    fn log(&mut self, update: MetricsUpdate, epoch: usize, split: &Split) {
        if self.failed {
            return;
        }
        let epoch = epoch.max(self.first_epoch);
        if let Err(panic) = catch_quietly(|| self.files.log(update, epoch, split)) {
            self.failed = true;
            let folder = match split {
                Split::Train => "train",
                Split::Valid => "valid",
                Split::Test(_) => "test",
            };
            self.watch.write_failed(WriteError {
                path: self
                    .artifact_dir
                    .join(folder)
                    .join(format!("epoch-{epoch}")),
                source: io::Error::other(os_reason(&panic)),
            });
        }
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

/// The OS's words in the panic message of a failed log write (`Can log an item.: Os { code:
/// 28, kind: StorageFull, message: "No space left on device" }`), else its first line.
fn os_reason(panic: &str) -> String {
    let quoted = panic
        .split_once("message: \"")
        .and_then(|(_, rest)| rest.split_once('"'));
    match quoted {
        Some((message, _)) => message.to_string(),
        None => first_line(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::os_reason;

    #[test]
    fn the_os_reason_is_taken_from_the_panic() {
        let panic = "Can log an item.: Os { code: 28, kind: StorageFull, message: \"No space \
                     left on device\" }";
        assert_eq!(os_reason(panic), "No space left on device");
        assert_eq!(os_reason("disk gone\nmore"), "disk gone");
    }
}
