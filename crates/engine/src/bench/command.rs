//! `cubenet bench`, the backend benchmark, as a command: its arguments and the run that
//! measures every variant compiled in (ndarray on all cores and on one thread, CUDA and wgpu
//! with Burn's kernels and with cubenet's) over the batch and filter sweeps, plus per-phase
//! breakdowns and one real MNIST epoch, then writes tables, CSV, JSON and plots. The
//! single-thread variants run in a child process of the same executable, started with one
//! thread per pool, since both thread pools ndarray uses are sized once per process.
//!
//! ```text
//! cargo run --release --features cuda -- bench \
//!     --data-dir path/to/mnist --merge pytorch.json
//! ```
//! `pytorch/pytorch_reference.py` measures PyTorch on the same GPU with the same protocol and
//! schema; `--merge` puts its columns into the same tables.

use std::path::{Path, PathBuf};
use std::process::Command;

use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::{
    BenchModel, BenchPlan, EpochPlan, Measurement, Point, Protocol, Report, ReportError,
    ScalingError, ScalingPlan, Sweep, Variant, measurement_count, run_scaling, run_variant,
    this_run,
};
use crate::atomic_file::{WriteError, write_atomically};
use crate::data::{DataError, ImageSubset, MnistSource, MnistSplit};
use crate::device::BackendError;
use crate::plot::PlotError;
use crate::train::{RunDir, TrainError};

/// Why the benchmark could not measure or write its results.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Scaling(#[from] ScalingError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error(transparent)]
    Plot(#[from] PlotError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the benchmark's plan {}: {reason}", path.display())]
    Plan { path: PathBuf, reason: String },
    #[error("cannot start the single-thread run: {0}")]
    Child(#[source] std::io::Error),
    #[error("the single-thread run failed ({0})")]
    ChildFailed(String),
}

impl BenchError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BenchError + '_ {
        move |source| BenchError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The arguments a parent run hands its single-thread child.
fn read_child_plan(path: &Path) -> Result<BenchArgs, BenchError> {
    let plan = |reason: String| BenchError::Plan {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| plan(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| plan(e.to_string()))
}

/// The arguments of `cubenet bench`.
#[derive(Debug, Clone, clap::Args, Serialize, Deserialize)]
pub struct BenchArgs {
    /// Variants to run [default: every one compiled into this build]
    #[arg(long, value_enum, value_delimiter = ',')]
    variants: Vec<Variant>,
    /// Networks to time
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Sweep::default().models)]
    models: Vec<BenchModel>,
    /// Batch sizes of the batch sweep
    #[arg(long, value_delimiter = ',', default_values_t = Sweep::default().batches)]
    batches: Vec<usize>,
    /// Filter counts d of the single-conv CNN's filter sweep
    #[arg(long, value_delimiter = ',', default_values_t = Sweep::default().filters)]
    filters: Vec<usize>,
    /// Batch size of the filter sweep
    #[arg(long, default_value_t = Sweep::default().filter_sweep_batch)]
    sweep_filters_at_batch: usize,
    /// Filter count of the single-conv CNN in the batch sweep
    #[arg(long, default_value_t = Sweep::default().batch_sweep_filters)]
    sweep_batches_at_filters: usize,
    /// Untimed steps before timing (GPU variants)
    #[arg(long, default_value_t = 10)]
    warmup: usize,
    /// Timed steps, median reported (GPU variants)
    #[arg(long, default_value_t = 30)]
    repeats: usize,
    /// Untimed steps before timing (CPU variants)
    #[arg(long, default_value_t = 1)]
    cpu_warmup: usize,
    /// Timed steps (CPU variants; tables flag fewer than 20)
    #[arg(long, default_value_t = 5)]
    cpu_repeats: usize,
    /// CPU variants skip points with a larger batch
    #[arg(long)]
    cpu_max_batch: Option<usize>,
    /// CPU variants skip points with more filters
    #[arg(long)]
    cpu_max_filters: Option<usize>,
    /// Filter counts whose per-phase breakdown is timed (GPU variants)
    #[arg(long, value_delimiter = ',', default_value = "32,256")]
    phase_filters: Vec<usize>,
    /// Skip the per-phase breakdowns
    #[arg(long)]
    no_phases: bool,
    /// MNIST IDX directory: time one real epoch per variant (skipped without it)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Network of the real epoch
    #[arg(long, value_enum, default_value_t = BenchModel::Simple)]
    epoch_model: BenchModel,
    /// Batch size of the real epoch
    #[arg(long, default_value_t = 1000)]
    epoch_batch: usize,
    /// Filters of the real epoch's single-conv CNN
    #[arg(long, default_value_t = 256)]
    epoch_filters: usize,
    /// Train the real epoch on only the first N images
    #[arg(long, value_name = "N")]
    epoch_limit: Option<usize>,
    /// Time the real epoch on CPU variants too
    #[arg(long)]
    cpu_epoch: bool,
    /// Measure data-parallel training instead of single steps: each --models network at each
    /// --batches size per device, trained by burn-train on the first of these device indices
    /// alone, then on all of them
    #[arg(long, value_delimiter = ',')]
    devices: Vec<usize>,
    /// Optimizer steps per epoch of the data-parallel runs (the second epoch is timed; an
    /// epoch's fixed costs, its validation and checkpoint, weigh little at 200 steps)
    #[arg(long, default_value_t = 200)]
    scaling_steps: usize,
    /// Threads assembling each device's batches in the data-parallel runs (as `--workers`
    /// of a training run; 0 assembles them on the training thread)
    #[arg(long, default_value_t = 0)]
    scaling_workers: usize,
    /// Reports to merge into the tables (e.g. from pytorch/pytorch_reference.py)
    #[arg(long)]
    merge: Vec<PathBuf>,
    /// Measure nothing: only merge the --merge reports into tables and plots
    #[arg(long)]
    merge_only: bool,
    /// Directory for results.{json,csv,md} and the plots
    #[arg(long, default_value = "artifacts/bench")]
    out: PathBuf,
    /// Internal: run as the single-thread child, reading these arguments from JSON
    #[arg(long, hide = true)]
    child_plan: Option<PathBuf>,
}

impl BenchArgs {
    fn plan(&self) -> BenchPlan {
        BenchPlan {
            sweep: Sweep {
                models: self.models.clone(),
                batches: self.batches.clone(),
                batch_sweep_filters: self.sweep_batches_at_filters,
                filters: self.filters.clone(),
                filter_sweep_batch: self.sweep_filters_at_batch,
            },
            gpu: Protocol {
                warmup: self.warmup,
                repeats: self.repeats,
            },
            cpu: Protocol {
                warmup: self.cpu_warmup,
                repeats: self.cpu_repeats,
            },
            cpu_max_batch: self.cpu_max_batch,
            cpu_max_filters: self.cpu_max_filters,
            phase_filters: if self.no_phases {
                Vec::new()
            } else {
                self.phase_filters.clone()
            },
        }
    }

    /// The data-parallel runs, when `--devices` asks for them.
    fn scaling_plan(&self) -> Result<Option<ScalingPlan>, BenchError> {
        if self.devices.is_empty() {
            return Ok(None);
        }
        if self.scaling_steps == 0 {
            return Err(BenchError::Invalid(
                "--scaling-steps must be at least 1".into(),
            ));
        }
        let sweep = Sweep {
            filters: Vec::new(),
            ..self.plan().sweep
        };
        Ok(Some(ScalingPlan {
            points: sweep.points(),
            devices: self.devices.clone(),
            steps: self.scaling_steps,
            workers: self.scaling_workers,
            dir: self.out.join("data-parallel"),
        }))
    }

    fn epoch_plan(&self) -> Result<Option<EpochPlan>, BenchError> {
        let Some(dir) = &self.data_dir else {
            return Ok(None);
        };
        let load = |split| -> Result<ImageSubset, BenchError> {
            Ok(MnistSource::Dir(dir.clone()).subset(split)?)
        };
        if self.epoch_model.input() != BenchModel::Simple.input() {
            return Err(BenchError::Invalid(format!(
                "the real epoch trains on MNIST, and --epoch-model {} takes {:?} images; pick \
                 simple, lenet or mlp",
                self.epoch_model,
                self.epoch_model.input()
            )));
        }
        let filters = self.epoch_model.has_filters().then_some(self.epoch_filters);
        Ok(Some(EpochPlan {
            train: load(MnistSplit::Train)?.limit(self.epoch_limit),
            test: load(MnistSplit::Test)?,
            point: Point {
                model: self.epoch_model,
                batch: self.epoch_batch,
                filters,
            },
            on_cpu: self.cpu_epoch,
        }))
    }

    /// The variants to run, checked against this build.
    fn variants(&self) -> Result<Vec<Variant>, BenchError> {
        if self.merge_only {
            return Ok(Vec::new());
        }
        if self.variants.is_empty() {
            return Ok(Variant::compiled());
        }
        for &v in &self.variants {
            match v.burn_setup() {
                None => {
                    return Err(BenchError::Invalid(format!(
                        "{v} is measured by pytorch/pytorch_reference.py; pass its JSON with \
                         --merge"
                    )));
                }
                Some(setup) if !setup.backend.is_compiled() => {
                    Err(BackendError::NotCompiled(setup.backend))?
                }
                Some(_) => {}
            }
        }
        Ok(self.variants.clone())
    }
}

const RESULTS_JSON: &str = "results.json";

/// Both thread pools ndarray uses are sized once per process from these variables.
const THREAD_VARS: [&str; 2] = ["RAYON_NUM_THREADS", "MATMUL_NUM_THREADS"];

fn single_threaded() -> bool {
    THREAD_VARS
        .iter()
        .all(|var| std::env::var(var).is_ok_and(|v| v == "1"))
}

/// Runs the single-thread CPU `variants` in a child process started with one thread per
/// pool; their results (partial ones too) land in `<out>/single-thread/`.
fn run_single_thread_child(args: &BenchArgs, variants: Vec<Variant>) -> Result<Report, BenchError> {
    let out = args.out.join("single-thread");
    RunDir::claim(&out, &[])?;
    let results = out.join(RESULTS_JSON);
    if results.exists() {
        // An earlier run's results must not pass for this one's.
        std::fs::remove_file(&results).map_err(BenchError::io(&results))?;
    }
    let plan_path = out.join("plan.json");
    let child_args = BenchArgs {
        variants,
        out,
        merge: Vec::new(),
        ..args.clone()
    };
    let plan = serde_json::to_string(&child_args).expect("the arguments serialize to JSON");
    write_atomically(&plan_path, plan.as_bytes())?;
    let exe = std::env::current_exe().map_err(BenchError::Child)?;
    let mut command = Command::new(exe);
    command.args(["bench", "--child-plan"]).arg(&plan_path);
    for var in THREAD_VARS {
        command.env(var, "1");
    }
    let status = command.status().map_err(BenchError::Child)?;
    if !status.success() {
        return Err(BenchError::ChildFailed(status.to_string()));
    }
    Ok(Report::read(&results)?)
}

/// Adds each measurement to a report as it is made, printing its line and rewriting
/// `<out>/results.json`, so that a run stopped by a time limit keeps what it measured.
struct Recorder<'a> {
    report: &'a mut Report,
    partial: PathBuf,
    bar: ProgressBar,
    write_error: Option<ReportError>,
}

impl Recorder<'_> {
    fn record(&mut self, measurement: Measurement) {
        let line = measurement.to_string();
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
        self.bar.inc(1);
        self.report.add(measurement);
        if let Err(error) = self.report.write_json(&self.partial) {
            self.write_error.get_or_insert(error);
        }
    }

    /// The first failed write, if any.
    fn finish(self) -> Result<(), BenchError> {
        self.bar.finish_and_clear();
        match self.write_error {
            Some(error) => Err(error.into()),
            None => Ok(self.report.write_json(&self.partial)?),
        }
    }
}

/// Runs every variant into `report`, showing progress and rewriting `<out>/results.json`
/// after each measurement. With `--devices`, the data-parallel runs replace the step sweep,
/// phases and epoch, for every variant but the single-thread ones (one thread is not
/// shared between devices).
fn measure(args: &BenchArgs, variants: &[Variant], report: &mut Report) -> Result<(), BenchError> {
    let plan = args.plan();
    let epoch = args.epoch_plan()?;
    let scaling = args.scaling_plan()?;
    // The benchmark's output folder is cubenet's as an artifact directory is: a folder of
    // other files is refused, never written into.
    RunDir::claim(&args.out, &[])?;
    let total = match &scaling {
        Some(scaling) => scaling.points.len() * scaling.device_sets().len() * variants.len(),
        None => variants
            .iter()
            .map(|&v| measurement_count(&plan, epoch.as_ref(), v))
            .sum::<usize>(),
    };
    let bar = ProgressBar::new(total as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
            .expect("the template is valid"),
    );
    let mut recorder = Recorder {
        report,
        partial: args.out.join(RESULTS_JSON),
        bar: bar.clone(),
        write_error: None,
    };
    if let Some(scaling) = &scaling {
        for &variant in variants.iter().filter(|v| !v.is_single_thread()) {
            bar.set_message(variant.to_string());
            run_scaling(variant, scaling, &mut |record| {
                recorder.record(Measurement::Scaling(record))
            })?;
        }
        return recorder.finish();
    }
    let (single_thread, variants): (Vec<Variant>, Vec<Variant>) = variants
        .iter()
        .partition(|v| v.is_single_thread() && !single_threaded());
    if !single_thread.is_empty() {
        bar.set_message("single-thread child");
        let count: usize = single_thread
            .iter()
            .map(|&v| measurement_count(&plan, epoch.as_ref(), v))
            .sum();
        let child = bar.suspend(|| run_single_thread_child(args, single_thread))?;
        bar.inc(count as u64);
        recorder.report.merge(child);
        recorder.report.write_json(&recorder.partial)?;
    }
    for variant in variants {
        bar.set_message(variant.to_string());
        run_variant(variant, &plan, epoch.as_ref(), &mut |measurement| {
            recorder.record(measurement)
        })?;
    }
    recorder.finish()
}

fn write_outputs(report: &Report, dir: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).map_err(BenchError::io(dir))?;
    report.write_json(&dir.join(RESULTS_JSON))?;
    report.write_csv(&dir.join("results.csv"))?;
    write_atomically(&dir.join("results.md"), report.markdown().as_bytes())?;
    if !report.steps.is_empty() {
        for path in report.plot(dir)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// Measures, merges and writes the tables and plots.
pub fn run_bench(args: BenchArgs) -> Result<(), BenchError> {
    if let Some(plan) = &args.child_plan {
        let child: BenchArgs = read_child_plan(plan)?;
        return measure(&child, &child.variants()?, &mut Report::default());
    }
    let variants = args.variants()?;
    let merged = args
        .merge
        .iter()
        .map(|path| Report::read(path))
        .collect::<Result<Vec<_>, _>>()?;
    let mut report = Report::default();
    let mut failure = None;
    if !variants.is_empty() {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        report.sources.push(this_run(command, &variants));
        // A variant that fails (a GPU missing) still leaves the others' tables and plots.
        failure = measure(&args, &variants, &mut report).err();
    }
    if let Some(error) = failure.take_if(|_| report.steps.is_empty() && report.scaling.is_empty()) {
        return Err(error); // nothing measured: the error is the whole story
    }
    for other in merged {
        report.merge(other);
    }
    for (variant, point) in report.duplicate_steps() {
        eprintln!("warning: {variant} {point} is measured twice; the tables show the first");
    }
    write_outputs(&report, &args.out)?;
    println!("{}", report.markdown());
    eprintln!("results in {}", args.out.display());
    failure.map_or(Ok(()), Err)
}
