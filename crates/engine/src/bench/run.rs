//! Runs a benchmark plan on one variant: the step sweep, the phase breakdowns and the real
//! epoch, reporting progress as each measurement finishes.

use std::fmt;

use cubenet_kernels::AutodiffKernelBackend;

use super::epoch::time_epoch;
use super::phases::{PHASES, time_phases};
use super::report::{EpochRecord, PhaseRecord, Report, ScalingRecord, Source, StepRecord};
use super::step::time_training_step;
use super::sweep::{BenchPlan, Point};
use super::variant::Variant;
use crate::data::ImageSubset;
use crate::device::{BackendError, BackendKind, BackendTask, run_on};

/// One finished measurement, handed over as soon as it is made so that a run cut off by a
/// time limit keeps what it measured.
#[derive(Debug, Clone, PartialEq)]
pub enum Measurement {
    Step(StepRecord),
    Phases(Vec<PhaseRecord>),
    Epoch(EpochRecord),
    Scaling(ScalingRecord),
}

impl fmt::Display for Measurement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Measurement::Step(s) => {
                write!(
                    f,
                    "{} {}: {:.3} ms/step",
                    s.variant,
                    s.point(),
                    s.timing.median_ms
                )
            }
            Measurement::Phases(phases) => {
                let Some(first) = phases.first() else {
                    return Ok(());
                };
                write!(f, "{} {} phases:", first.variant, first.point())?;
                phases
                    .iter()
                    .try_for_each(|p| write!(f, " {} {:.3} ms;", p.phase, p.timing.median_ms))
            }
            Measurement::Epoch(e) => write!(
                f,
                "{} {}: one MNIST epoch ({} images) in {:.3} s, test accuracy {:.2}%",
                e.variant,
                e.point(),
                e.images,
                e.seconds,
                e.test_accuracy * 100.0
            ),
            Measurement::Scaling(s) => write!(
                f,
                "{} {} on devices {:?}: {:.0} images/s ({:.0} per device)",
                s.variant,
                s.point(),
                s.devices,
                s.images_per_second,
                s.per_device()
            ),
        }
    }
}

impl Report {
    /// Adds one measurement.
    pub fn add(&mut self, measurement: Measurement) {
        match measurement {
            Measurement::Step(step) => self.steps.push(step),
            Measurement::Phases(phases) => self.phases.extend(phases),
            Measurement::Epoch(epoch) => self.epochs.push(epoch),
            Measurement::Scaling(record) => self.scaling.push(record),
        }
    }
}

/// MNIST for the real-epoch measurement, and the one configuration it trains.
#[derive(Debug, Clone)]
pub struct EpochPlan {
    pub train: ImageSubset,
    pub test: ImageSubset,
    pub point: Point,
    /// Time the epoch on CPU variants too (minutes at the seed sizes).
    pub on_cpu: bool,
}

impl EpochPlan {
    /// Whether `variant` times the epoch.
    pub fn applies_to(&self, variant: Variant) -> bool {
        self.on_cpu || !variant.is_cpu()
    }
}

/// Measurements `variant` will make under `plan`: for a progress bar's length.
pub fn measurement_count(plan: &BenchPlan, epoch: Option<&EpochPlan>, variant: Variant) -> usize {
    let epochs = epoch.is_some_and(|e| e.applies_to(variant));
    plan.points(variant).len() + plan.phase_points(variant).len() + usize::from(epochs)
}

struct VariantRun<'a> {
    variant: Variant,
    plan: &'a BenchPlan,
    epoch: Option<&'a EpochPlan>,
    measured: &'a mut dyn FnMut(Measurement),
}

impl BackendTask for VariantRun<'_> {
    type Output = ();

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, _kind: BackendKind) {
        let VariantRun {
            variant,
            plan,
            epoch,
            measured,
        } = self;
        let setup = variant.burn_setup().expect("only Burn variants run here");
        let protocol = plan.protocol(variant);
        for point in plan.points(variant) {
            let timing = time_training_step::<B>(&device, point, setup, protocol);
            measured(Measurement::Step(StepRecord {
                model: point.model,
                variant,
                batch: point.batch,
                filters: point.filters,
                warmup: protocol.warmup,
                timing,
            }));
        }
        for point in plan.phase_points(variant) {
            let filters = point.filters.expect("phase points are seed-CNN points");
            let timings = time_phases::<B>(&device, filters, point.batch, setup.kernels, protocol);
            let phases = PHASES
                .iter()
                .zip(timings)
                .map(|(phase, timing)| PhaseRecord {
                    model: point.model,
                    variant,
                    batch: point.batch,
                    filters: point.filters,
                    phase: phase.to_string(),
                    timing,
                });
            measured(Measurement::Phases(phases.collect()));
        }
        if let Some(epoch) = epoch.filter(|e| e.applies_to(variant)) {
            let point = epoch.point;
            let result = time_epoch::<B>(
                &device,
                point,
                setup,
                protocol.warmup,
                &epoch.train,
                &epoch.test,
            );
            measured(Measurement::Epoch(EpochRecord {
                model: point.model,
                variant,
                batch: point.batch,
                filters: point.filters,
                images: result.images,
                seconds: result.seconds,
                test_accuracy: result.test_accuracy,
            }));
        }
    }
}

/// Runs `plan` on `variant`'s backend, handing each measurement to `measured` as it is made.
///
/// The single-thread variants ([`Variant::is_single_thread`]) only mean one thread when the
/// process was started with `RAYON_NUM_THREADS=1` and `MATMUL_NUM_THREADS=1` (both pools
/// are global and sized once); `cubenet bench` starts such a child process for them.
pub fn run_variant(
    variant: Variant,
    plan: &BenchPlan,
    epoch: Option<&EpochPlan>,
    measured: &mut dyn FnMut(Measurement),
) -> Result<(), BackendError> {
    let Some(setup) = variant.burn_setup() else {
        return Err(BackendError::NotRunnable(variant.to_string()));
    };
    run_on(
        setup.backend,
        VariantRun {
            variant,
            plan,
            epoch,
            measured,
        },
    )
}

/// Describes this run for the report: devices, versions, command and date.
pub fn this_run(command: String, variants: &[Variant]) -> Source {
    let mut devices = vec![format!("{} ({} threads)", cpu_name(), num_threads())];
    if variants.iter().any(|v| !v.is_cpu()) {
        devices.insert(0, gpu_name());
    }
    Source {
        tool: "cubenet bench".into(),
        device: devices.join(", "),
        software: format!(
            "cubenet {}, burn 0.21.0, cubecl 0.10",
            env!("CARGO_PKG_VERSION")
        ),
        command,
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    }
}

/// The CPU's model name (Linux), for the report.
fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|name| name.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

fn num_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// The first GPU's name as the NVIDIA driver reports it (wgpu runs on NVIDIA GPUs here too).
fn gpu_name() -> String {
    std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=name", "--format=csv,noheader"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown NVIDIA GPU".into())
}
