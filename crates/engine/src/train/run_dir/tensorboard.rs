//! A run's metrics as TensorBoard event files in `<artifact_dir>/tensorboard/`, so that
//! `tensorboard --logdir <folder of runs>` shows and compares them: each metric per epoch
//! (`Loss/train`, `Loss/valid`, at step = epoch, the mean burn-train's summary takes) and per
//! logged iteration (`Loss/train/iteration`, at step = the split's iteration since the run's
//! first epoch), the training speed per epoch, and the run's settings as TensorBoard hparams.
//!
//! Each process writes a file of its own. A resumed run first takes out of the earlier files
//! what the epochs after its resume point logged ([`discard_events_after`]), as it does with
//! the metric logs, so that TensorBoard shows each step once. A write that fails stops the
//! run, as a metric log's does ([`TrainingWatch::write_failed`]).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use burn::train::logger::MetricLogger;
use burn::train::metric::store::{EpochSummary, MetricsUpdate, Split};
use burn::train::metric::{MetricDefinition, MetricId, NumericEntry};
use prost::Message;
use serde_json::Value;

use super::RunDir;
use super::event_file::{
    Event, EventWriter, HParamValue, HParamsPluginData, Kind, PluginData, SessionStartInfo,
    Summary, SummaryMetadata, SummaryValue, What, encode_record, read_events,
};
use crate::atomic_file::{PARTIAL_PREFIX, WriteError, write_atomically};
use crate::train::TrainingWatch;

/// The start of every event file's name cubenet writes; TensorBoard reads files whose name
/// holds `tfevents`.
const EVENT_FILE_PREFIX: &str = "events.out.tfevents.";
/// What ends the tag of a metric's per-iteration values.
const ITERATION_SUFFIX: &str = "/iteration";
/// The hparams plugin's tag and name for a session's start.
const SESSION_START_TAG: &str = "_hparams_/session_start_info";
const HPARAMS_PLUGIN: &str = "hparams";
/// How often buffered events are written out, as the metric logs are.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Iterations of each split in one epoch: where a resumed run's iteration steps continue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EpochIterations {
    pub train: usize,
    pub valid: usize,
}

impl EpochIterations {
    /// One epoch's steps over `[train, valid]` examples in batches of `[train, valid]`.
    pub fn of(examples: [usize; 2], batches: [usize; 2]) -> Self {
        let [train, valid] = [0, 1].map(|split| examples[split].div_ceil(batches[split].max(1)));
        Self { train, valid }
    }

    fn of_split(&self, split: &str) -> usize {
        match split {
            "train" => self.train,
            _ => self.valid,
        }
    }
}

/// What a run's event files record besides its metrics.
pub(crate) struct TensorBoardRun {
    pub iterations: EpochIterations,
    /// What one example is, for the speed's tag: `images`, `rows`.
    pub examples: &'static str,
    /// The run's settings, as saved beside its checkpoints: its hparams.
    pub settings: Value,
}

/// The TensorBoard side of a run's metric logs.
pub(crate) struct TensorBoardLogger {
    dir: PathBuf,
    writer: Option<EventWriter>,
    hparams: BTreeMap<String, HParamValue>,
    /// The epoch this process starts at (see [`super::metric_logs`] for why it is needed).
    first_epoch: usize,
    iterations: EpochIterations,
    /// What one example is, for the speed's tag: `images`, `rows`.
    examples: &'static str,
    names: HashMap<MetricId, String>,
    /// This epoch's iterations logged per split, and each metric's sum and count.
    epoch_steps: HashMap<String, usize>,
    /// The last iteration step logged per split.
    last_steps: HashMap<String, usize>,
    epoch_sums: BTreeMap<(String, String), (f64, usize)>,
    /// The training examples of this epoch after its first step, and when that step was
    /// logged: the epoch's speed.
    speed: Option<(Instant, usize)>,
    flushed: Instant,
    watch: TrainingWatch,
    failed: bool,
}

impl TensorBoardLogger {
    /// Events into `dir`'s TensorBoard folder of a run whose first epoch in this process is
    /// `first_epoch`.
    pub fn new(
        dir: &RunDir,
        first_epoch: usize,
        run: TensorBoardRun,
        watch: TrainingWatch,
    ) -> Self {
        let mut hparams = BTreeMap::new();
        flatten_settings("", &run.settings, &mut hparams);
        Self {
            dir: dir.tensorboard(),
            writer: None,
            hparams,
            first_epoch,
            iterations: run.iterations,
            examples: run.examples,
            names: HashMap::new(),
            epoch_steps: HashMap::new(),
            last_steps: HashMap::new(),
            epoch_sums: BTreeMap::new(),
            speed: None,
            flushed: Instant::now(),
            watch,
            failed: false,
        }
    }

    /// Appends `event`, opening this process's file (and writing the hparams) first.
    fn write(&mut self, event: Event) {
        if self.failed {
            return;
        }
        if let Err((path, source)) = self.try_write(&event) {
            self.failed = true;
            self.watch.write_failed(WriteError { path, source });
        }
    }

    fn try_write(&mut self, event: &Event) -> Result<(), (PathBuf, io::Error)> {
        if self.writer.is_none() {
            let writer = self.open().map_err(|e| (self.dir.clone(), e))?;
            self.writer = Some(writer);
        }
        let writer = self.writer.as_mut().expect("opened");
        let fail = |writer: &EventWriter, e| (writer.path().to_path_buf(), e);
        writer.write(event).map_err(|e| fail(writer, e))?;
        if self.flushed.elapsed() >= FLUSH_EVERY {
            self.flushed = Instant::now();
            writer.flush().map_err(|e| fail(writer, e))?;
        }
        Ok(())
    }

    /// Creates a new event file named by the time and process, its first event the hparams.
    fn open(&self) -> io::Result<EventWriter> {
        fs::create_dir_all(&self.dir)?;
        let now = wall_time();
        let start = HParamsPluginData {
            version: 0,
            session_start_info: Some(SessionStartInfo {
                hparams: self.hparams.clone(),
                start_time_secs: now,
            }),
        };
        let metadata = SummaryMetadata {
            plugin_data: Some(PluginData {
                plugin_name: HPARAMS_PLUGIN.into(),
                content: start.encode_to_vec(),
            }),
        };
        let hparams = summary_event(
            0,
            SummaryValue {
                tag: SESSION_START_TAG.into(),
                simple_value: None,
                metadata: Some(metadata),
            },
        );
        let mut attempt = 0;
        loop {
            let name = format!(
                "{EVENT_FILE_PREFIX}{:.0}.cubenet.{}.{attempt}",
                now.floor(),
                std::process::id()
            );
            match EventWriter::create(self.dir.join(name), now, std::slice::from_ref(&hparams)) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => attempt += 1,
                other => return other,
            }
        }
    }

    fn scalar(&mut self, step: usize, tag: String, value: f64) {
        let value = SummaryValue {
            tag,
            simple_value: Some(value as f32),
            metadata: None,
        };
        self.write(summary_event(step as i64, value));
    }
}

/// `settings` as hparams: nested tables' keys joined by dots, lists as their JSON.
fn flatten_settings(prefix: &str, settings: &Value, into: &mut BTreeMap<String, HParamValue>) {
    let kind = match settings {
        Value::Object(map) => {
            for (key, value) in map {
                let key = match prefix {
                    "" => key.clone(),
                    _ => format!("{prefix}.{key}"),
                };
                flatten_settings(&key, value, into);
            }
            return;
        }
        Value::Null => return,
        Value::Bool(value) => Kind::Bool(*value),
        Value::Number(number) => Kind::Number(number.as_f64().unwrap_or(f64::NAN)),
        Value::String(text) => Kind::Text(text.clone()),
        Value::Array(_) => Kind::Text(settings.to_string()),
    };
    into.insert(prefix.to_string(), HParamValue { kind: Some(kind) });
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |since| since.as_secs_f64())
}

fn summary_event(step: i64, value: SummaryValue) -> Event {
    Event {
        wall_time: wall_time(),
        step,
        what: Some(What::Summary(Summary { value: vec![value] })),
    }
}

/// burn-train's name of `split` (`train`, `valid`), which the tags use.
fn split_name(split: &Split) -> String {
    split.to_string()
}

impl MetricLogger for TensorBoardLogger {
    fn log(&mut self, update: MetricsUpdate, epoch: usize, split: &Split) {
        let epoch = epoch.max(self.first_epoch);
        let split = split_name(split);
        let index = {
            let steps = self.epoch_steps.entry(split.clone()).or_default();
            *steps += 1;
            *steps
        };
        // Rising even where the epoch has more steps than expected.
        let last = self.last_steps.get(&split).copied().unwrap_or(0);
        let step = ((epoch - 1) * self.iterations.of_split(&split) + index).max(last + 1);
        self.last_steps.insert(split.clone(), step);
        let mut examples = 0;
        for numeric in &update.entries_numeric {
            let Some(name) = self.names.get(&numeric.entry.metric_id).cloned() else {
                continue;
            };
            let (value, count) = match numeric.numeric_entry {
                NumericEntry::Value(value) => (value, 1),
                NumericEntry::Aggregated {
                    aggregated_value,
                    count,
                } => (aggregated_value, count),
            };
            examples = examples.max(count);
            let sum = self
                .epoch_sums
                .entry((split.clone(), name.clone()))
                .or_default();
            *sum = (sum.0 + value * count as f64, sum.1 + count);
            self.scalar(step, format!("{name}/{split}{ITERATION_SUFFIX}"), value);
        }
        if split == "train" {
            let speed = self.speed.get_or_insert((Instant::now(), 0));
            if index > 1 {
                speed.1 += examples;
            }
        }
    }

    fn read_numeric(&mut self, _: &str, _: usize, _: &Split) -> Result<Vec<NumericEntry>, String> {
        Err("TensorBoard's event files are not read back".into())
    }

    fn log_metric_definition(&mut self, definition: MetricDefinition) {
        self.names.insert(definition.metric_id, definition.name);
    }

    fn log_epoch_summary(&mut self, summary: EpochSummary) {
        let epoch = summary.epoch_number.max(self.first_epoch);
        let split = split_name(&summary.split);
        self.epoch_steps.remove(&split);
        let ended: Vec<_> = self
            .epoch_sums
            .keys()
            .filter(|(of, _)| *of == split)
            .cloned()
            .collect();
        for key in ended {
            let (sum, count) = self.epoch_sums.remove(&key).expect("listed");
            if count > 0 {
                self.scalar(epoch, format!("{}/{split}", key.1), sum / count as f64);
            }
        }
        if split == "train"
            && let Some((since, examples)) = self.speed.take()
            && examples > 0
        {
            let seconds = since.elapsed().as_secs_f64().max(f64::MIN_POSITIVE);
            let tag = format!("Speed/{}_per_second", self.examples);
            self.scalar(epoch, tag, examples as f64 / seconds);
        }
        if let Some(writer) = self.writer.as_mut()
            && !self.failed
            && let Err(source) = writer.flush()
        {
            let path = writer.path().to_path_buf();
            self.failed = true;
            self.watch.write_failed(WriteError { path, source });
        }
    }
}

/// Clears what a run's event files in `dir` hold of epochs after `keep`: every event file
/// cubenet wrote there when `keep` is 0 (a fresh run), else each file rewritten without the
/// later epochs' events (each rewrite atomic, so a kill leaves the old file or the new).
/// Files cubenet did not write are left alone.
pub(crate) fn discard_events_after(
    dir: &Path,
    keep: usize,
    iterations: EpochIterations,
) -> Result<(), WriteError> {
    let fail = |path: &Path| {
        let path = path.to_path_buf();
        move |source| WriteError { path, source }
    };
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(fail(dir)(e)),
    };
    for entry in entries {
        let path = entry.map_err(fail(dir))?.path();
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let partial = name
            .strip_prefix(PARTIAL_PREFIX)
            .is_some_and(is_cubenet_event_file);
        if partial || (keep == 0 && is_cubenet_event_file(name)) {
            fs::remove_file(&path).map_err(fail(&path))?;
        } else if is_cubenet_event_file(name) {
            let events = read_events(&path).map_err(fail(&path))?;
            let kept: Vec<&Event> = events
                .iter()
                .filter(|event| event_epoch(event, iterations) <= keep)
                .collect();
            if kept.len() < events.len() {
                let bytes: Vec<u8> = kept.into_iter().flat_map(encode_record).collect();
                write_atomically(&path, &bytes)?;
            }
        }
    }
    Ok(())
}

fn is_cubenet_event_file(name: &str) -> bool {
    name.starts_with(EVENT_FILE_PREFIX) && name.contains(".cubenet.")
}

/// The epoch an event was logged in: 0 for the file's version and the hparams.
fn event_epoch(event: &Event, iterations: EpochIterations) -> usize {
    let Some(What::Summary(summary)) = &event.what else {
        return 0;
    };
    let step = usize::try_from(event.step).unwrap_or(0);
    let Some(tag) = summary.value.first().map(|value| value.tag.as_str()) else {
        return 0;
    };
    if tag == SESSION_START_TAG {
        return 0;
    }
    match tag.strip_suffix(ITERATION_SUFFIX) {
        Some(metric) => {
            let split = metric.rsplit('/').next().unwrap_or_default();
            step.div_ceil(iterations.of_split(split).max(1))
        }
        None => step,
    }
}

#[cfg(test)]
mod tests {
    use burn::train::Interrupter;
    use burn::train::metric::store::NumericMetricUpdate;
    use burn::train::metric::{MetricEntry, SerializedEntry};
    use serde_json::json;

    use super::super::metric_logs::tests::definition;
    use super::*;

    /// One step's `value` of `definition`, over `count` examples.
    fn update(definition: &MetricDefinition, value: f64, count: usize) -> MetricsUpdate {
        let numeric = NumericEntry::Aggregated {
            aggregated_value: value,
            count,
        };
        let entry = MetricEntry::new(
            definition.metric_id.clone(),
            SerializedEntry::new(value.to_string(), numeric.serialize()),
        );
        let update = NumericMetricUpdate {
            entry,
            numeric_entry: numeric.clone(),
            running_entry: numeric,
        };
        MetricsUpdate::new(Vec::new(), vec![update])
    }

    /// Every scalar in `dir`'s event files: `(tag, step, value)`.
    fn scalars(dir: &Path) -> Vec<(String, i64, f32)> {
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .flat_map(|file| read_events(file).unwrap())
            .filter_map(|event| match event.what {
                Some(What::Summary(summary)) => {
                    let value = summary.value.into_iter().next()?;
                    Some((value.tag, event.step, value.simple_value?))
                }
                _ => None,
            })
            .collect()
    }

    const ITERATIONS: EpochIterations = EpochIterations { train: 2, valid: 1 };

    /// A logger into `dir` starting at `first_epoch`, with the Loss metric defined.
    fn logger(dir: &RunDir, first_epoch: usize, watch: TrainingWatch) -> TensorBoardLogger {
        let run = TensorBoardRun {
            iterations: ITERATIONS,
            examples: "images",
            settings: json!({ "epochs": 3, "model": { "kind": "lenet", "channels": [6, 16] } }),
        };
        let mut logger = TensorBoardLogger::new(dir, first_epoch, run, watch);
        logger.log_metric_definition(definition("Loss"));
        logger
    }

    /// Logs one epoch of two training steps and one validation step.
    fn epoch(logger: &mut TensorBoardLogger, burn_epoch: usize, epoch: usize, losses: [f64; 3]) {
        let loss = definition("Loss");
        logger.log(update(&loss, losses[0], 4), burn_epoch, &Split::Train);
        logger.log(update(&loss, losses[1], 2), burn_epoch, &Split::Train);
        logger.log_epoch_summary(EpochSummary::new(epoch, Split::Train));
        logger.log(update(&loss, losses[2], 3), burn_epoch, &Split::Valid);
        logger.log_epoch_summary(EpochSummary::new(epoch, Split::Valid));
    }

    #[test]
    fn scalars_per_iteration_and_epoch_and_the_settings_as_hparams() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::open(dir.path());
        let interrupter = Interrupter::new();
        let mut logger = logger(&run, 1, TrainingWatch::new(interrupter.clone()));
        epoch(&mut logger, 1, 1, [1.0, 4.0, 0.5]);
        drop(logger);
        let read = scalars(&run.tensorboard());
        let tags: Vec<(&str, i64, f32)> = read
            .iter()
            .filter(|(tag, ..)| !tag.starts_with("Speed"))
            .map(|(tag, step, value)| (tag.as_str(), *step, *value))
            .collect();
        assert_eq!(
            tags,
            [
                ("Loss/train/iteration", 1, 1.0),
                ("Loss/train/iteration", 2, 4.0),
                // (1·4 + 4·2) / 6, weighted by the steps' examples.
                ("Loss/train", 1, 2.0),
                ("Loss/valid/iteration", 1, 0.5),
                ("Loss/valid", 1, 0.5),
            ]
        );
        // Two examples after the first step.
        assert!(
            read.iter()
                .any(|(tag, step, speed)| tag == "Speed/images_per_second"
                    && *step == 1
                    && *speed > 0.0)
        );
        let file = fs::read_dir(run.tensorboard()).unwrap().next().unwrap();
        let events = read_events(&file.unwrap().path()).unwrap();
        let Some(What::Summary(summary)) = &events[1].what else {
            panic!("the hparams come first");
        };
        let content = &summary.value[0]
            .metadata
            .as_ref()
            .unwrap()
            .plugin_data
            .as_ref();
        let start = HParamsPluginData::decode(content.unwrap().content.as_slice())
            .unwrap()
            .session_start_info
            .unwrap();
        let hparam = |key: &str| start.hparams[key].kind.clone();
        assert_eq!(hparam("epochs"), Some(Kind::Number(3.0)));
        assert_eq!(hparam("model.kind"), Some(Kind::Text("lenet".into())));
        assert_eq!(hparam("model.channels"), Some(Kind::Text("[6,16]".into())));
        assert!(!interrupter.should_stop());
    }

    #[test]
    fn a_resume_drops_the_lost_epochs_events_and_continues_their_steps() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::open(dir.path());
        let watch = TrainingWatch::new(Interrupter::new());
        let mut first = logger(&run, 1, watch.clone());
        epoch(&mut first, 1, 1, [1.0, 1.0, 1.0]);
        epoch(&mut first, 2, 2, [2.0, 2.0, 2.0]);
        // Killed in epoch 3, after one step.
        first.log(update(&definition("Loss"), 3.0, 4), 3, &Split::Train);
        drop(first);
        let foreign = run.tensorboard().join("events.out.tfevents.1.someone-else");
        fs::write(&foreign, "theirs").unwrap();
        // Resumed after epoch 1: epoch 2's and 3's events go; burn-train calls epoch 2 "1".
        discard_events_after(&run.tensorboard(), 1, ITERATIONS).unwrap();
        let mut resumed = logger(&run, 2, watch);
        epoch(&mut resumed, 1, 2, [5.0, 5.0, 5.0]);
        drop(resumed);
        fs::remove_file(&foreign).unwrap();
        let steps = |tag: &str| -> Vec<(i64, f32)> {
            scalars(&run.tensorboard())
                .into_iter()
                .filter(|(t, ..)| t == tag)
                .map(|(_, step, value)| (step, value))
                .collect()
        };
        assert_eq!(
            steps("Loss/train/iteration"),
            [(1, 1.0), (2, 1.0), (3, 5.0), (4, 5.0)]
        );
        assert_eq!(steps("Loss/valid"), [(1, 1.0), (2, 5.0)]);
        // A fresh run removes cubenet's files only.
        fs::write(&foreign, "theirs").unwrap();
        discard_events_after(&run.tensorboard(), 0, ITERATIONS).unwrap();
        let left: Vec<_> = fs::read_dir(run.tensorboard()).unwrap().collect();
        assert_eq!(left.len(), 1);
        assert_eq!(fs::read_to_string(&foreign).unwrap(), "theirs");
    }

    #[test]
    fn a_failed_write_stops_training_and_names_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::open(dir.path());
        fs::write(run.tensorboard(), "not a folder").unwrap();
        let interrupter = Interrupter::new();
        let watch = TrainingWatch::new(interrupter.clone());
        let mut logger = logger(&run, 1, watch.clone());
        epoch(&mut logger, 1, 1, [1.0, 1.0, 1.0]);
        assert!(interrupter.should_stop());
        assert_eq!(watch.take_write_failure().unwrap().path, run.tensorboard());
        assert_eq!(
            fs::read_to_string(run.tensorboard()).unwrap(),
            "not a folder"
        );
    }
}
