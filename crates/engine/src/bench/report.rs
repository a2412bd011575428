//! The results of a backend benchmark as one JSON schema, written by `cubenet bench` and
//! by `pytorch/pytorch_reference.py` alike, so that runs merge into one table.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::sweep::{BenchModel, Point};
use super::timing::Timing;
use super::variant::Variant;
use crate::atomic_file::{WriteError, write_atomically};

/// Training images in one MNIST epoch: converts step times to seconds per epoch.
pub const EPOCH_IMAGES: usize = 60_000;

/// Who measured, where, and how to measure again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub tool: String,
    /// GPU and CPU names.
    pub device: String,
    /// Framework versions.
    pub software: String,
    /// The exact command line.
    pub command: String,
    /// UTC time of the run, RFC 3339.
    pub date: String,
}

/// The median training step of one variant at one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepRecord {
    pub model: BenchModel,
    pub variant: Variant,
    pub batch: usize,
    pub filters: Option<usize>,
    pub warmup: usize,
    pub timing: Timing,
}

/// One phase of the single-conv CNN's step (see `phases`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseRecord {
    pub model: BenchModel,
    pub variant: Variant,
    pub batch: usize,
    pub filters: Option<usize>,
    pub phase: String,
    pub timing: Timing,
}

/// One timed epoch over real MNIST.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EpochRecord {
    pub model: BenchModel,
    pub variant: Variant,
    pub batch: usize,
    pub filters: Option<usize>,
    pub images: usize,
    pub seconds: f64,
    pub test_accuracy: f64,
}

/// Training speed of one network on a set of devices (see `scaling`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalingRecord {
    pub model: BenchModel,
    pub variant: Variant,
    /// Images per step on each device.
    pub batch: usize,
    pub filters: Option<usize>,
    /// The backend's device indices.
    pub devices: Vec<usize>,
    /// All devices together.
    pub images_per_second: f64,
}

/// Everything one or more runs measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub sources: Vec<Source>,
    pub steps: Vec<StepRecord>,
    #[serde(default)]
    pub phases: Vec<PhaseRecord>,
    #[serde(default)]
    pub epochs: Vec<EpochRecord>,
    #[serde(default)]
    pub scaling: Vec<ScalingRecord>,
}

/// A report that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot access {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a benchmark report: {reason}", path.display())]
    Schema { path: PathBuf, reason: String },
}

impl From<WriteError> for ReportError {
    fn from(WriteError { path, source }: WriteError) -> Self {
        ReportError::Io { path, source }
    }
}

/// `point()` for the records, which spell the point's fields out (the schema is flat).
macro_rules! record_point {
    ($($record:ty),*) => {$(
        impl $record {
            /// The sweep point this record measured.
            pub fn point(&self) -> Point {
                Point {
                    model: self.model,
                    batch: self.batch,
                    filters: self.filters,
                }
            }
        }
    )*};
}

record_point!(StepRecord, PhaseRecord, EpochRecord, ScalingRecord);

impl ScalingRecord {
    /// Images per second on each device.
    pub fn per_device(&self) -> f64 {
        self.images_per_second / self.devices.len() as f64
    }
}

impl StepRecord {
    /// Seconds per MNIST epoch at this step time (the y-axis of the benchmark plots).
    pub fn epoch_seconds(&self) -> f64 {
        self.timing.median_ms * EPOCH_IMAGES.div_ceil(self.batch) as f64 / 1e3
    }
}

impl Report {
    /// Appends another run's results (e.g. PyTorch's on the same GPU).
    pub fn merge(&mut self, other: Report) {
        self.sources.extend(other.sources);
        self.steps.extend(other.steps);
        self.phases.extend(other.phases);
        self.epochs.extend(other.epochs);
        self.scaling.extend(other.scaling);
    }

    /// The step timing of `variant` at `point`, if measured.
    pub fn step(&self, variant: Variant, point: Point) -> Option<&StepRecord> {
        self.steps
            .iter()
            .find(|s| s.variant == variant && s.point() == point)
    }

    /// Variant and point pairs with more than one step record (e.g. a report merged twice).
    pub fn duplicate_steps(&self) -> Vec<(Variant, Point)> {
        let mut keys: Vec<(Variant, Point)> =
            self.steps.iter().map(|s| (s.variant, s.point())).collect();
        keys.sort();
        let mut duplicates: Vec<(Variant, Point)> = keys
            .windows(2)
            .filter(|pair| pair[0] == pair[1])
            .map(|pair| pair[0])
            .collect();
        duplicates.dedup();
        duplicates
    }

    /// The variants present, in table order.
    pub fn variants(&self) -> Vec<Variant> {
        let mut variants: Vec<Variant> = self.steps.iter().map(|s| s.variant).collect();
        variants.sort();
        variants.dedup();
        variants
    }

    /// The points of `model` that any variant measured, in table order.
    pub fn points(&self, model: BenchModel) -> Vec<Point> {
        let mut points: Vec<Point> = self
            .steps
            .iter()
            .filter(|s| s.model == model)
            .map(StepRecord::point)
            .collect();
        points.sort();
        points.dedup();
        points
    }

    /// Reads a report written by either tool.
    pub fn read(path: &Path) -> Result<Report, ReportError> {
        let text = fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| ReportError::Schema {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
    }

    /// Writes the report as pretty JSON.
    pub fn write_json(&self, path: &Path) -> Result<(), ReportError> {
        let text = serde_json::to_string_pretty(self).expect("reports serialize");
        Ok(write_atomically(path, text.as_bytes())?)
    }

    /// Writes the step timings as CSV, one row per variant and point.
    pub fn write_csv(&self, path: &Path) -> Result<(), ReportError> {
        #[derive(Serialize)]
        struct Row {
            model: BenchModel,
            variant: Variant,
            batch: usize,
            filters: Option<usize>,
            warmup: usize,
            runs: usize,
            median_ms: f64,
            min_ms: f64,
            max_ms: f64,
            epoch_s: f64,
        }
        let mut writer = csv::Writer::from_writer(Vec::new());
        for s in &self.steps {
            writer
                .serialize(Row {
                    model: s.model,
                    variant: s.variant,
                    batch: s.batch,
                    filters: s.filters,
                    warmup: s.warmup,
                    runs: s.timing.runs,
                    median_ms: s.timing.median_ms,
                    min_ms: s.timing.min_ms,
                    max_ms: s.timing.max_ms,
                    epoch_s: s.epoch_seconds(),
                })
                .expect("rows of numbers serialize");
        }
        let bytes = writer.into_inner().expect("writing to memory cannot fail");
        Ok(write_atomically(path, &bytes)?)
    }
}
