//! burn-train's per-epoch metric logs (`train/epoch-<k>/Loss.log`, `valid/epoch-<k>/…`: one
//! serialized entry per line, the files burn-train's own `FileMetricLogger` writes), written
//! so that a failed write stops the run with one line instead of aborting it.
//!
//! Why not burn-train 0.21's `FileMetricLogger`: it writes each file on a thread of its own
//! that panics when a write fails (a full disk), and the logger's drop then panics again on
//! the dead thread; a panic during the first one's unwinding aborts the whole process. Here
//! the files are written in place, a failure goes to the [`TrainingWatch`] (which stops
//! training after the step and reports the path), and nothing is logged after it.
//!
//! Also, burn-train 0.21's event store numbers the epochs it logs from 1 in every run and
//! only takes the real number from the first epoch's end, so a resumed run would write
//! epoch 3's metrics over epoch 1's logs: every epoch before the run's first is logged as
//! its first.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use burn::train::logger::MetricLogger;
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};

use super::RunDir;
use crate::atomic_file::{WriteError, take_from_simulated_disk};
use crate::train::TrainingWatch;

/// How often the buffered log lines are written out: a full disk then stops the run within
/// about this long, not at the end of the epoch, at the cost of one write per log a second.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// The metric log files of a run's artifact directory.
pub(crate) struct EpochMetricLogger {
    dir: RunDir,
    /// The epoch a run starts at: 1, or the one after its resume point.
    first_epoch: usize,
    names: HashMap<MetricId, String>,
    /// The files of the epoch being logged, open for appending.
    open: HashMap<PathBuf, BufWriter<File>>,
    open_epoch: Option<usize>,
    /// When the open logs were last written out.
    flushed: Instant,
    watch: TrainingWatch,
    /// Set by the first failed write; nothing is written after it.
    failed: bool,
}

impl EpochMetricLogger {
    /// Logs of a run whose first epoch in this process is `first_epoch`.
    pub fn new(dir: &RunDir, first_epoch: usize, watch: TrainingWatch) -> Self {
        Self {
            dir: dir.clone(),
            first_epoch,
            names: HashMap::new(),
            open: HashMap::new(),
            open_epoch: None,
            flushed: Instant::now(),
            watch,
            failed: false,
        }
    }

    /// burn-train's path of metric `name`'s log in `epoch` of `split`.
    fn path(&self, name: &str, epoch: usize, split: &Split) -> PathBuf {
        let mut dir = self.dir.root().join(split.to_string());
        if let Split::Test(Some(tag)) = split {
            dir.push(tag.trim().replace(' ', "-").to_lowercase());
        }
        RunDir::epoch_logs(&dir, epoch).join(format!("{}.log", name.replace(' ', "_")))
    }

    /// Appends `line` to the log at `path`, which starts empty in each run.
    fn append(&mut self, path: PathBuf, line: &str) -> io::Result<()> {
        take_from_simulated_disk(line.len() as u64 + 1)?;
        let file = match self.open.entry(path) {
            Entry::Occupied(open) => open.into_mut(),
            Entry::Vacant(new) => {
                if let Some(dir) = new.key().parent() {
                    fs::create_dir_all(dir)?;
                }
                let file = File::create(new.key())?;
                new.insert(BufWriter::new(file))
            }
        };
        writeln!(file, "{line}")
    }

    /// Writes out and closes the open logs.
    fn close_all(&mut self) {
        self.flush();
        self.open.clear();
    }

    /// Writes out the open logs' buffered lines, failing the run at the first that cannot be.
    fn flush(&mut self) {
        self.flushed = Instant::now();
        let failed = self
            .open
            .iter_mut()
            .find_map(|(path, file)| file.flush().err().map(|source| (path.clone(), source)));
        if let Some((path, source)) = failed {
            self.fail(path, source);
        }
    }

    /// Stops the run at the first failed write; later writes are skipped.
    fn fail(&mut self, path: PathBuf, source: io::Error) {
        if !self.failed {
            self.failed = true;
            self.watch.write_failed(WriteError { path, source });
        }
    }
}

impl MetricLogger for EpochMetricLogger {
    fn log(&mut self, update: MetricsUpdate, epoch: usize, split: &Split) {
        if self.failed {
            return;
        }
        let epoch = epoch.max(self.first_epoch);
        if self.open_epoch != Some(epoch) {
            self.close_all();
            self.open_epoch = Some(epoch);
            if self.failed {
                return;
            }
        }
        let entries = update
            .entries
            .iter()
            .chain(update.entries_numeric.iter().map(|numeric| &numeric.entry));
        for entry in entries {
            let Some(name) = self.names.get(&entry.metric_id) else {
                continue;
            };
            let path = self.path(name, epoch, split);
            if let Err(source) = self.append(path.clone(), &entry.serialized_entry.serialized) {
                self.fail(path, source);
                return;
            }
        }
        if self.flushed.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    fn read_numeric(
        &mut self,
        name: &str,
        epoch: usize,
        split: &Split,
    ) -> Result<Vec<NumericEntry>, String> {
        let path = self.path(name, epoch, split);
        if let Some(file) = self.open.get_mut(&path)
            && let Err(source) = file.flush()
        {
            self.fail(path.clone(), source);
        }
        // A metric never logged in that epoch has no file: no entries, as in burn-train.
        let text = fs::read_to_string(&path).unwrap_or_default();
        text.lines()
            .filter(|line| !line.is_empty())
            .map(|line| {
                NumericEntry::deserialize(line).map_err(|err| format!("{}: {err}", path.display()))
            })
            .collect()
    }

    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.names.insert(definition.metric_id, definition.name);
    }

    fn log_epoch_summary(&mut self, _: EpochSummary) {
        self.close_all();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use burn::train::Interrupter;
    use burn::train::metric::{MetricAttributes, MetricEntry, SerializedEntry};

    use super::*;

    /// A metric named `name`, as burn-train defines one.
    pub(crate) fn definition(name: &str) -> MetricDefinition {
        MetricDefinition {
            metric_id: MetricId::new(name.to_string().into()),
            name: name.into(),
            description: None,
            attributes: MetricAttributes::None,
        }
    }

    fn update(definition: &MetricDefinition, value: f64) -> MetricsUpdate {
        let entry = MetricEntry::new(
            definition.metric_id.clone(),
            SerializedEntry::new(format!("{value}"), value.to_string()),
        );
        MetricsUpdate::new(vec![entry], Vec::new())
    }

    #[test]
    fn entries_are_read_back_from_burn_trains_files_numbered_from_the_first_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let interrupter = Interrupter::new();
        let mut logger = EpochMetricLogger::new(
            &RunDir::open(dir.path()),
            3,
            TrainingWatch::new(interrupter.clone()),
        );
        let loss = definition("Loss");
        logger.log_metric_definition(loss.clone());
        // burn-train calls a resumed run's first epoch 1; it is epoch 3.
        logger.log(update(&loss, 0.5), 1, &Split::Valid);
        logger.log(update(&loss, 0.25), 1, &Split::Valid);
        let read = logger.read_numeric("Loss", 3, &Split::Valid).unwrap();
        assert_eq!(
            read.iter().map(NumericEntry::current).collect::<Vec<_>>(),
            [0.5, 0.25]
        );
        logger.log_epoch_summary(EpochSummary::new(3, Split::Valid));
        let written = fs::read_to_string(dir.path().join("valid/epoch-3/Loss.log")).unwrap();
        assert_eq!(written, "0.5\n0.25\n");
        assert!(
            logger
                .read_numeric("Loss", 4, &Split::Valid)
                .unwrap()
                .is_empty()
        );
        assert!(!interrupter.should_stop());
    }

    #[test]
    fn a_failed_write_stops_training_and_names_the_file_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the split's folder belongs: its logs cannot be created.
        fs::write(dir.path().join("train"), "not a folder").unwrap();
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let mut logger = EpochMetricLogger::new(&RunDir::open(dir.path()), 1, watch.clone());
        let loss = definition("Loss");
        logger.log_metric_definition(loss.clone());
        logger.log(update(&loss, 1.0), 1, &Split::Train);
        logger.log(update(&loss, 2.0), 1, &Split::Train);
        logger.log_epoch_summary(EpochSummary::new(1, Split::Train));
        assert!(interrupter.should_stop());
        let failed = watch.take_write_failure().expect("the failure is kept");
        assert_eq!(failed.path, dir.path().join("train/epoch-1/Loss.log"));
        assert!(watch.take_write_failure().is_none(), "reported once");
        drop(logger);
        assert_eq!(
            fs::read_to_string(dir.path().join("train")).unwrap(),
            "not a folder"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_full_disk_stops_training_within_a_flush_not_at_the_epochs_end() {
        let dir = tempfile::tempdir().unwrap();
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let mut logger = EpochMetricLogger::new(&RunDir::open(dir.path()), 1, watch.clone());
        let loss = definition("Loss");
        logger.log_metric_definition(loss.clone());
        logger.log(update(&loss, 1.0), 1, &Split::Train);
        // The log's file now lies on a full disk: /dev/full takes no byte.
        let path = logger.path("Loss", 1, &Split::Train);
        let full = File::options().write(true).open("/dev/full").unwrap();
        logger.open.insert(path.clone(), BufWriter::new(full));
        logger.flushed = Instant::now().checked_sub(2 * FLUSH_EVERY).unwrap();
        logger.log(update(&loss, 2.0), 1, &Split::Train);
        assert!(interrupter.should_stop(), "stopped in the epoch");
        assert_eq!(watch.take_write_failure().expect("reported").path, path);
    }
}
