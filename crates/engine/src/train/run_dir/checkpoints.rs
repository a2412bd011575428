//! A run's checkpoint directory, `<artifact dir>/checkpoint/`, and the one place that knows
//! its layout. burn-train's file checkpointer writes the model, optimizer and scheduler
//! records of epoch `k` there as `model-k.mpk`, `optim-k.mpk` and `scheduler-k.mpk`
//! (through [`ModelRecorder`], so each appears whole or as a `.partial-*` file), and
//! [`super::resume::begin_run`] keeps the run's settings beside them in `run-settings.json`.
//!
//! Which epochs are kept: during training every epoch is saved ([`SaveEveryEpoch`]);
//! afterwards [`crate::train::restore_best_epoch`] reads the best one from the metric logs and
//! prunes the rest down to the best and the last. burn-train 0.21's own strategies choose
//! the best epoch from its event store while the current epoch's validation metrics may
//! still be in flight (seen on wgpu: the epoch kept was not the one with the lowest logged
//! loss), and its composition of last-N and best-metric can delete the best epoch's files.

use std::fs;
use std::path::{Path, PathBuf};

use burn::lr_scheduler::LrScheduler;
use burn::module::{AutodiffModule, Module};
use burn::optim::Optimizer;
use burn::prelude::Backend;
use burn::tensor::backend::AutodiffBackend;
use burn::train::checkpoint::{CheckpointingAction, CheckpointingStrategy};
use burn::train::metric::store::EventStoreClient;

use crate::atomic_file::PARTIAL_PREFIX;
use crate::train::TrainError;
use crate::train::run_dir::recorder::{RECORD_EXTENSION, load_checked, load_record};

/// The settings a run was started with, inside the checkpoint folder.
const RUN_SETTINGS_FILE: &str = "run-settings.json";
/// The records burn-train's checkpointer writes for each epoch, by its names for them.
const PARTS: [&str; 3] = [MODEL, OPTIMIZER, SCHEDULER];
const MODEL: &str = "model";
const OPTIMIZER: &str = "optim";
const SCHEDULER: &str = "scheduler";

/// The checkpoint directory of one artifact directory.
#[derive(Debug, Clone)]
pub(crate) struct Checkpoints {
    dir: PathBuf,
}

impl Checkpoints {
    /// The checkpoints in `dir` (see [`crate::train::RunDir::checkpoints`]).
    pub(crate) fn in_dir(dir: PathBuf) -> Self {
        Self { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the run's settings are kept.
    pub fn run_settings(&self) -> PathBuf {
        self.dir.join(RUN_SETTINGS_FILE)
    }

    /// Loads the model record of `epoch` into `model` (see [`load_record`]).
    pub fn load_model<B: Backend, M: Module<B>>(
        &self,
        epoch: usize,
        model: M,
        device: &B::Device,
    ) -> Result<M, TrainError> {
        load_record(&self.dir.join(file_name(MODEL, epoch)), model, device)
    }

    /// Whether a run saved its settings here: the mark of a cubenet run's directory.
    pub fn is_run(&self) -> bool {
        self.run_settings().is_file()
    }

    /// Every epoch with all of its records, oldest first.
    pub fn complete_epochs(&self) -> Result<Vec<usize>, TrainError> {
        if !self.dir.is_dir() {
            return Ok(Vec::new());
        }
        let found: Vec<(String, usize)> = self
            .files()?
            .into_iter()
            .filter_map(|(_, name)| parse(&name).map(|(part, epoch)| (part.to_string(), epoch)))
            .collect();
        let complete = |epoch: usize| {
            PARTS
                .iter()
                .all(|part| found.contains(&(part.to_string(), epoch)))
        };
        let mut epochs: Vec<usize> = found
            .iter()
            .map(|&(_, epoch)| epoch)
            .filter(|&epoch| complete(epoch))
            .collect();
        epochs.sort_unstable();
        epochs.dedup();
        Ok(epochs)
    }

    /// The newest epoch with all of its records, if any.
    pub fn last_complete(&self) -> Result<Option<usize>, TrainError> {
        Ok(self.complete_epochs()?.last().copied())
    }

    /// Checks that each record of `epoch` loads: the model's into `model`, the optimizer's
    /// and the scheduler's as `O`'s and `S`'s records. burn-train panics on a record it
    /// cannot load; this names the file instead.
    pub fn check_epoch<B, M, O, S>(
        &self,
        epoch: usize,
        model: &M,
        device: &B::Device,
    ) -> Result<(), TrainError>
    where
        B: AutodiffBackend,
        M: AutodiffModule<B>,
        O: Optimizer<M, B>,
        S: LrScheduler,
    {
        self.load_model(epoch, model.clone(), device)?;
        let path = |part| self.dir.join(file_name(part, epoch));
        load_checked::<B, O::Record>(&path(OPTIMIZER), device)?;
        load_checked::<B, S::Record<B>>(&path(SCHEDULER), device)?;
        Ok(())
    }

    /// Deletes the records of every epoch not in `keep`.
    pub fn prune(&self, keep: &[usize]) -> Result<(), TrainError> {
        self.remove_where(|name| parse(name).is_some_and(|(_, epoch)| !keep.contains(&epoch)))
    }

    /// Deletes the records of the epochs after `epoch` and every file left half-written:
    /// what a run killed during epoch `epoch + 1` leaves behind (with 0, every record).
    pub fn discard_after(&self, epoch: usize) -> Result<(), TrainError> {
        self.remove_where(|name| {
            name.starts_with(PARTIAL_PREFIX) || parse(name).is_some_and(|(_, e)| e > epoch)
        })
    }

    fn remove_where(&self, doomed: impl Fn(&str) -> bool) -> Result<(), TrainError> {
        if !self.dir.is_dir() {
            return Ok(());
        }
        for (path, name) in self.files()? {
            if doomed(&name) {
                fs::remove_file(&path).map_err(TrainError::io(&path))?;
            }
        }
        Ok(())
    }

    /// Every entry of the directory, with its file name.
    fn files(&self) -> Result<Vec<(PathBuf, String)>, TrainError> {
        let mut files = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(TrainError::read(&self.dir))? {
            let path = entry.map_err(TrainError::read(&self.dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let name = name.to_string();
            files.push((path, name));
        }
        Ok(files)
    }
}

impl super::RunDir {
    /// The newest epoch whose checkpoint is complete, if any: where `--resume` continues.
    pub fn last_complete_checkpoint(&self) -> Result<Option<usize>, TrainError> {
        self.checkpoints().last_complete()
    }
}

/// `model-3.mpk`: the name burn-train's checkpointer gives `part` of `epoch`.
fn file_name(part: &str, epoch: usize) -> String {
    format!("{part}-{epoch}.{RECORD_EXTENSION}")
}

/// `("model", 3)` for `model-3.mpk`: the inverse of [`file_name`].
fn parse(file_name: &str) -> Option<(&str, usize)> {
    let stem = file_name
        .strip_suffix(RECORD_EXTENSION)?
        .strip_suffix('.')?;
    let (part, epoch) = stem.rsplit_once('-')?;
    let epoch = epoch.parse().ok()?;
    PARTS.contains(&part).then_some((part, epoch))
}

/// Saves every epoch and deletes nothing (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct SaveEveryEpoch;

impl CheckpointingStrategy for SaveEveryEpoch {
    fn checkpointing(
        &mut self,
        _epoch: usize,
        _store: &EventStoreClient,
    ) -> Vec<CheckpointingAction> {
        vec![CheckpointingAction::Save]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        assert_eq!(parse(&file_name("model", 12)), Some(("model", 12)));
        assert_eq!(parse("optim-1.mpk"), Some(("optim", 1)));
        assert_eq!(parse(".partial-model-3.mpk"), None);
        assert_eq!(parse("model-x.mpk"), None);
        assert_eq!(parse("model-3mpk"), None);
        assert_eq!(parse("run-settings.json"), None);
    }

    #[test]
    fn last_complete_needs_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = crate::train::RunDir::open(dir.path()).checkpoints();
        assert_eq!(checkpoints.last_complete().unwrap(), None);
        fs::create_dir_all(checkpoints.dir()).unwrap();
        assert_eq!(checkpoints.last_complete().unwrap(), None);
        for name in ["model-1", "optim-1", "scheduler-1", "model-2", "optim-2"] {
            fs::write(checkpoints.dir().join(format!("{name}.mpk")), b"x").unwrap();
        }
        fs::write(checkpoints.dir().join(".partial-scheduler-2.mpk"), b"x").unwrap();
        assert_eq!(checkpoints.last_complete().unwrap(), Some(1));
    }

    #[test]
    fn pruning_and_discarding_touch_only_their_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = crate::train::RunDir::open(dir.path()).checkpoints();
        fs::create_dir_all(checkpoints.dir()).unwrap();
        let names = [
            "model-1.mpk",
            "optim-1.mpk",
            "model-2.mpk",
            "model-3.mpk",
            ".partial-optim-3.mpk",
            RUN_SETTINGS_FILE,
        ];
        for name in names {
            fs::write(checkpoints.dir().join(name), b"x").unwrap();
        }
        let left = || {
            let mut names: Vec<String> = checkpoints
                .files()
                .unwrap()
                .into_iter()
                .map(|(_, n)| n)
                .collect();
            names.sort();
            names
        };
        checkpoints.discard_after(2).unwrap();
        assert_eq!(
            left(),
            [
                "model-1.mpk",
                "model-2.mpk",
                "optim-1.mpk",
                RUN_SETTINGS_FILE
            ]
        );
        checkpoints.prune(&[2]).unwrap();
        assert_eq!(left(), ["model-2.mpk", RUN_SETTINGS_FILE]);
    }
}
