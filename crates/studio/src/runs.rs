//! The runs under the studio's runs folder, read from the artifact directories that
//! `cubenet train` writes: a row of the runs table for each, and a run's whole page (its
//! curves, progress, results, run file and log). A run is a folder directly in the runs
//! folder that holds a run's mark; nothing else there, and nothing outside it, is read.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use serde::Serialize;

use super::StudioError;
use super::confined;
use super::metric_curves::{
    Curves, MetricLogs, SPLITS, curves, epoch_mean, metric_logs, value_and_count,
};
use cubenet_engine::train::{CHECKPOINT_DIR, RunDir};

/// The lines of the run's log shown on its page.
const LOG_LINES: usize = 20;

/// The folder of runs the studio serves, canonical.
#[derive(Debug)]
pub struct RunsFolder {
    root: PathBuf,
    /// Each run's table row with the fingerprint of the folder it was read from: a row is
    /// read again only when its run has changed.
    rows: Mutex<HashMap<String, (u64, RunSummary)>>,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// A process holds the run's lock.
    Running,
    /// The run saved its final model.
    Finished,
    /// No process holds it and it has no final model: stopped, or it failed.
    Stopped,
}

/// A row of the runs table.
#[derive(Debug, Clone, Serialize)]
pub struct RunSummary {
    pub name: String,
    pub status: RunStatus,
    /// The data kind and where it comes from, e.g. `mnist`, `images: pets/`.
    pub data: String,
    /// The network's kind, e.g. `lenet`, `cnn`, `mlp`.
    pub network: String,
    pub epochs_done: usize,
    /// The epochs the run file asks for, where it says.
    pub epochs: Option<usize>,
    /// The best epoch mean of the validation accuracy (percent), else the lowest of the
    /// validation loss.
    pub best_valid: Option<BestValue>,
    /// The test split's accuracy (percent), for image runs that finished.
    pub test_accuracy: Option<f64>,
    /// When the latest process of the run took its folder, in seconds since the Unix epoch.
    pub started: Option<f64>,
    /// Seconds from then to the final model (finished), to now (running), or to the last
    /// metric written (stopped).
    pub duration: Option<f64>,
}

/// A run's best validation value of one metric.
#[derive(Debug, Clone, Serialize)]
pub struct BestValue {
    pub metric: String,
    pub value: f64,
    pub epoch: usize,
}

/// How far a run is through its epochs.
#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    /// Epochs done, with the share of the current one (from its iterations against the last
    /// full epoch's).
    pub epochs: f64,
    /// Seconds left at the pace so far, while running.
    pub eta: Option<f64>,
    /// Training images a second over the current epoch so far, while running.
    pub images_per_second: Option<f64>,
}

/// A test class's line of the results.
#[derive(Debug, Clone, Serialize)]
pub struct ClassResult {
    pub class: String,
    pub images: u64,
    pub accuracy: Option<f64>,
}

/// Everything a run's page shows.
#[derive(Debug, Clone, Serialize)]
pub struct RunDetail {
    pub summary: RunSummary,
    pub progress: Progress,
    /// `metric → curves`, e.g. `Loss`, `Accuracy`, `Learning Rate`.
    pub curves: BTreeMap<String, Curves>,
    pub per_class: Vec<ClassResult>,
    /// The resolved run file.
    pub run_file: Option<String>,
    /// The run file's settings, flattened: `training.epochs → 5`.
    pub settings: BTreeMap<String, String>,
    /// The last lines of burn-train's log.
    pub log_tail: Vec<String>,
}

impl RunsFolder {
    /// The runs folder at `path`, which must exist.
    pub fn open(path: &Path) -> Result<Self, StudioError> {
        let root = std::fs::canonicalize(path).map_err(|source| StudioError::RunsFolder {
            path: path.to_path_buf(),
            reason: source.to_string(),
        })?;
        if !root.is_dir() {
            return Err(StudioError::RunsFolder {
                path: path.to_path_buf(),
                reason: "not a folder".into(),
            });
        }
        Ok(Self {
            root,
            rows: Mutex::default(),
        })
    }

    /// The run called `name`: a folder directly in the runs folder, not a link, with a run's
    /// mark. `None` for every other name (`..`, paths, links, plain folders).
    pub fn find(&self, name: &str) -> Option<RunDir> {
        let path = confined::child(&self.root, name)?;
        let dir = RunDir::open(path);
        (confined::is_real_dir(dir.root()) && confined::is_real_file(&dir.marker())).then_some(dir)
    }

    /// Every run, the latest started first.
    pub fn summaries(&self) -> Vec<RunSummary> {
        let mut rows = self
            .rows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let names = confined::entries(&self.root);
        rows.retain(|name, _| names.contains(name));
        let mut runs: Vec<RunSummary> = names
            .into_iter()
            .filter_map(|name| {
                let fingerprint = self.fingerprint(&name)?;
                if let Some((seen, row)) = rows.get(&name)
                    && *seen == fingerprint
                {
                    return Some(row.clone());
                }
                let dir = self.find(&name)?;
                let row = summary(name.clone(), &dir, &metric_logs(&dir));
                rows.insert(name, (fingerprint, row.clone()));
                Some(row)
            })
            .collect();
        runs.sort_by(|a, b| {
            b.started
                .unwrap_or(0.0)
                .total_cmp(&a.started.unwrap_or(0.0))
        });
        runs
    }

    /// The page of the run called `name` (see [`RunsFolder::find`]).
    pub fn detail(&self, name: &str) -> Option<RunDetail> {
        let dir = self.find(name)?;
        let logs = metric_logs(&dir);
        let summary = summary(name.to_string(), &dir, &logs);
        let progress = progress(&dir, &summary, &logs);
        let curves = logs
            .iter()
            .map(|(metric, splits)| (metric.clone(), curves(splits)))
            .collect();
        let log_tail = confined::read_text(&dir.experiment_log())
            .map(|text| {
                let lines: Vec<&str> = text.lines().collect();
                let from = lines.len().saturating_sub(LOG_LINES);
                lines[from..].iter().map(|line| line.to_string()).collect()
            })
            .unwrap_or_default();
        let run_file = confined::read_text(&dir.run_file()).ok();
        let mut settings = BTreeMap::new();
        if let Some(table) = run_file
            .as_deref()
            .and_then(|text| text.parse::<toml::Table>().ok())
        {
            flatten("", &toml::Value::Table(table), &mut settings);
        }
        Some(RunDetail {
            progress,
            curves,
            per_class: per_class(&dir),
            run_file,
            settings,
            log_tail,
            summary,
        })
    }

    /// A fingerprint of what a run's page shows: it changes when a metric is logged, the run
    /// ends or its results are written.
    pub fn fingerprint(&self, name: &str) -> Option<u64> {
        let dir = self.find(name)?;
        let mut files = vec![
            dir.run_file(),
            dir.model(),
            dir.per_class_accuracy(),
            dir.experiment_log(),
        ];
        for split in SPLITS {
            let split_dir = dir.root().join(split);
            for epoch in confined::entries(&split_dir) {
                let epoch_dir = split_dir.join(&epoch);
                files.extend(
                    confined::entries(&epoch_dir)
                        .into_iter()
                        .map(|file| epoch_dir.join(file)),
                );
            }
        }
        let claimed = dir.last_claimed().map_or(0.0, seconds_since_epoch);
        let mut hash = u64::from(dir.is_running()) ^ claimed.to_bits();
        for file in files {
            if let Ok(meta) = std::fs::symlink_metadata(&file) {
                let modified = meta.modified().ok().map_or(0.0, seconds_since_epoch);
                hash = hash
                    .wrapping_mul(1_000_003)
                    .wrapping_add(meta.len() ^ modified.to_bits());
            }
        }
        Some(hash)
    }
}

fn summary(name: String, dir: &RunDir, logs: &MetricLogs) -> RunSummary {
    let run_file = confined::read_text(&dir.run_file())
        .ok()
        .and_then(|text| text.parse::<toml::Table>().ok())
        .unwrap_or_default();
    let status = if dir.is_running() {
        RunStatus::Running
    } else if confined::is_real_file(&dir.model()) {
        RunStatus::Finished
    } else {
        RunStatus::Stopped
    };
    let epochs_done = logs
        .values()
        .filter_map(|splits| splits.get("valid").or_else(|| splits.get("train")))
        .filter_map(|epochs| epochs.iter().map(|(epoch, _)| *epoch).max())
        .max()
        .unwrap_or(0);
    let started = dir.last_claimed().map(seconds_since_epoch);
    let ended = match status {
        RunStatus::Running => Some(seconds_since_epoch(SystemTime::now())),
        RunStatus::Finished => modified(&dir.model()),
        RunStatus::Stopped => last_logged(dir),
    };
    RunSummary {
        data: data_label(&run_file),
        network: lookup(&run_file, &["model", "kind"])
            .and_then(|value| value.as_str().map(str::to_string))
            .unwrap_or_else(|| "?".into()),
        epochs: lookup(&run_file, &["training", "epochs"])
            .and_then(toml::Value::as_integer)
            .and_then(|epochs| usize::try_from(epochs).ok()),
        best_valid: best_valid(logs),
        test_accuracy: test_accuracy(dir),
        duration: started
            .zip(ended)
            .map(|(start, end)| (end - start).max(0.0)),
        started,
        epochs_done,
        status,
        name,
    }
}

/// Every leaf of `value` under its dotted key, arrays and values as TOML writes them.
fn flatten(key: &str, value: &toml::Value, into: &mut BTreeMap<String, String>) {
    match value {
        toml::Value::Table(table) => {
            for (name, value) in table {
                let key = match key {
                    "" => name.clone(),
                    _ => format!("{key}.{name}"),
                };
                flatten(&key, value, into);
            }
        }
        toml::Value::String(text) => {
            into.insert(key.to_string(), text.clone());
        }
        other => {
            into.insert(key.to_string(), other.to_string());
        }
    }
}

fn lookup<'a>(table: &'a toml::Table, keys: &[&str]) -> Option<&'a toml::Value> {
    let (first, rest) = keys.split_first()?;
    rest.iter()
        .try_fold(table.get(*first)?, |value, key| value.get(key))
}

/// `mnist`, `images: DIR`, `csv: FILE`, `generated: xor`.
fn data_label(run_file: &toml::Table) -> String {
    let text = |keys: &[&str]| lookup(run_file, keys).and_then(|v| v.as_str().map(str::to_string));
    let kind = text(&["data", "kind"]).unwrap_or_else(|| "?".into());
    let place = text(&["data", "dir"])
        .or_else(|| text(&["data", "path"]))
        .or_else(|| text(&["data", "generator"]));
    match place {
        Some(place) => format!("{kind}: {place}"),
        None => kind,
    }
}

fn best_valid(logs: &MetricLogs) -> Option<BestValue> {
    let means = |metric: &str| -> Vec<(usize, f64)> {
        logs.get(metric)
            .and_then(|splits| splits.get("valid"))
            .into_iter()
            .flatten()
            .filter_map(|(epoch, entries)| Some((*epoch, epoch_mean(entries)?)))
            .filter(|(_, mean)| mean.is_finite())
            .collect()
    };
    let best = |metric: &str, higher_is_better: bool| {
        means(metric)
            .into_iter()
            .max_by(|a, b| match higher_is_better {
                true => a.1.total_cmp(&b.1),
                false => b.1.total_cmp(&a.1),
            })
            .map(|(epoch, value)| BestValue {
                metric: metric.to_string(),
                value,
                epoch,
            })
    };
    best("Accuracy", true).or_else(|| best("Loss", false))
}

/// The test accuracy in percent from the run's per-class results.
fn test_accuracy(dir: &RunDir) -> Option<f64> {
    let classes = per_class(dir);
    let images: u64 = classes.iter().map(|class| class.images).sum();
    let correct: f64 = classes
        .iter()
        .map(|class| class.accuracy.unwrap_or(0.0) * class.images as f64)
        .sum();
    (images > 0).then(|| correct / images as f64 * 100.0)
}

fn per_class(dir: &RunDir) -> Vec<ClassResult> {
    let Ok(bytes) = confined::read(&dir.per_class_accuracy()) else {
        return Vec::new();
    };
    csv::Reader::from_reader(bytes.as_slice())
        .records()
        .flatten()
        .filter_map(|record| {
            Some(ClassResult {
                class: record.get(0)?.to_string(),
                images: record.get(1)?.parse().ok()?,
                accuracy: record.get(2).and_then(|a| a.parse().ok()),
            })
        })
        .collect()
}

fn progress(dir: &RunDir, summary: &RunSummary, logs: &MetricLogs) -> Progress {
    let mut progress = Progress {
        epochs: summary.epochs_done as f64,
        eta: None,
        images_per_second: None,
    };
    let train = logs.get("Loss").and_then(|splits| splits.get("train"));
    let Some((current, entries)) = train.and_then(|train| train.last()) else {
        return progress;
    };
    if summary.status != RunStatus::Running || *current <= summary.epochs_done {
        return progress;
    }
    let full_epoch = train
        .into_iter()
        .flatten()
        .rev()
        .find(|(epoch, _)| epoch < current)
        .map(|(_, entries)| entries.len())
        .filter(|&n| n > 0);
    if let Some(full) = full_epoch {
        progress.epochs += (entries.len() as f64 / full as f64).min(1.0);
    }
    // An epoch's folder is made as its first metrics are logged.
    let epoch_started = modified(&RunDir::epoch_logs(&dir.root().join("train"), *current));
    let now = seconds_since_epoch(SystemTime::now());
    if let Some(started) = epoch_started.filter(|&started| now > started) {
        let images: usize = entries.iter().map(|entry| value_and_count(entry).1).sum();
        progress.images_per_second = Some(images as f64 / (now - started));
    }
    if let (Some(total), Some(started)) = (summary.epochs, summary.started) {
        // The pace of this process's epochs: a resumed run's earlier ones took no time here.
        let train_dir = dir.root().join("train");
        let before = train
            .into_iter()
            .flatten()
            .filter(|(epoch, _)| {
                modified(&RunDir::epoch_logs(&train_dir, *epoch)).is_some_and(|at| at < started)
            })
            .count();
        let done_here = progress.epochs - before as f64;
        if done_here > 0.0 && now > started {
            progress.eta =
                Some((total as f64 - progress.epochs).max(0.0) * (now - started) / done_here);
        }
    }
    progress
}

/// When the metric logs were last written, in seconds since the Unix epoch.
fn last_logged(dir: &RunDir) -> Option<f64> {
    SPLITS
        .iter()
        .flat_map(|split| {
            let split_dir = dir.root().join(split);
            confined::entries(&split_dir)
                .into_iter()
                .map(move |epoch| split_dir.join(epoch))
        })
        .flat_map(|epoch_dir| {
            confined::entries(&epoch_dir)
                .into_iter()
                .map(move |file| epoch_dir.join(file))
        })
        .chain([dir.root().join(CHECKPOINT_DIR)])
        .filter_map(|path| modified(&path))
        .max_by(f64::total_cmp)
}

fn modified(path: &Path) -> Option<f64> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.modified().ok().map(seconds_since_epoch)
}

fn seconds_since_epoch(time: SystemTime) -> f64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}
