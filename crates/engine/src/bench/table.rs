//! A report as markdown: step times per variant, speedups of cubenet's kernels over every
//! other column, the real epochs and the per-phase breakdowns.

use std::fmt::Write;

use super::report::{PhaseRecord, Report, StepRecord};
use super::sweep::{BenchModel, Point};
use super::variant::Variant;

/// Fewer timed steps than this are flagged in the tables (a median of fewer is noisy).
pub const FULL_RUNS: usize = 20;

/// The variants a GPU variant's speedups are given against, when present.
const GPU_BASELINES: [Variant; 4] = [
    Variant::Ndarray,
    Variant::NdarraySingleThread,
    Variant::PytorchEager,
    Variant::PytorchCompile,
];

/// The variants a TF32 or bf16 variant's speedups are given against: its own fp32 run and
/// PyTorch's fast settings, TF32 and bf16 autocast with channels_last.
const TENSOR_CORE_BASELINES: [Variant; 5] = [
    Variant::CudaCubenet,
    Variant::PytorchEagerTf32,
    Variant::PytorchCompileTf32,
    Variant::PytorchEagerBf16,
    Variant::PytorchCompileBf16,
];

/// The variants an all-cores CPU variant's speedups are given against: PyTorch on the same
/// cores. (A single-thread variant is compared with Burn's ops on one thread only.)
const CPU_BASELINES: [Variant; 1] = [Variant::PytorchCpu];

fn size_cells(point: Point) -> String {
    let d = point.filters.map_or("–".to_string(), |d| d.to_string());
    format!("| {d} | {} |", point.batch)
}

fn step_cell(step: Option<&StepRecord>) -> String {
    match step {
        Some(s) if s.timing.runs < FULL_RUNS => {
            format!(" {:.3}† |", s.timing.median_ms)
        }
        Some(s) => format!(" {:.3} |", s.timing.median_ms),
        None => " – |".to_string(),
    }
}

fn header(out: &mut String, columns: &[String]) {
    let _ = writeln!(out, "| d | batch | {} |", columns.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(columns.len()));
}

impl Report {
    /// All tables, one section per model.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for model in BenchModel::ALL {
            let points = self.points(model);
            if points.is_empty() {
                continue;
            }
            let variants: Vec<Variant> = self
                .variants()
                .into_iter()
                .filter(|&v| points.iter().any(|&p| self.step(v, p).is_some()))
                .collect();
            let _ = writeln!(
                out,
                "### {model}: milliseconds per training step (median)\n"
            );
            header(
                &mut out,
                &variants.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
            );
            for &point in &points {
                out.push_str(&size_cells(point));
                for &v in &variants {
                    out.push_str(&step_cell(self.step(v, point)));
                }
                out.push('\n');
            }
            if self
                .steps
                .iter()
                .any(|s| s.model == model && s.timing.runs < FULL_RUNS)
            {
                let _ = writeln!(
                    out,
                    "\n† fewer than {FULL_RUNS} timed steps (capped CPU run)."
                );
            }
            out.push('\n');
            for cubenet in [
                Variant::CudaCubenet,
                Variant::CudaCubenetTf32,
                Variant::CudaCubenetBf16,
                Variant::WgpuCubenet,
                Variant::Ndarray,
                Variant::NdarraySingleThread,
            ] {
                self.speedups(&mut out, model, cubenet, &points);
            }
        }
        self.epochs_table(&mut out);
        self.scaling_table(&mut out);
        self.phases_tables(&mut out);
        out
    }

    /// How many times faster `cubenet` is than each baseline present.
    fn speedups(&self, out: &mut String, model: BenchModel, cubenet: Variant, points: &[Point]) {
        let baselines = if cubenet.is_single_thread() {
            &[][..]
        } else if matches!(cubenet, Variant::CudaCubenetTf32 | Variant::CudaCubenetBf16) {
            &TENSOR_CORE_BASELINES[..]
        } else if cubenet.is_cpu() {
            &CPU_BASELINES[..]
        } else {
            &GPU_BASELINES[..]
        };
        let baselines: Vec<Variant> = baselines
            .iter()
            .copied()
            .chain(cubenet.burn_twin())
            .filter(|b| points.iter().any(|&p| self.step(*b, p).is_some()))
            .collect();
        if baselines.is_empty() || !points.iter().any(|&p| self.step(cubenet, p).is_some()) {
            return;
        }
        let _ = writeln!(
            out,
            "### {model}: speedup of {cubenet} (baseline time / {cubenet} time)\n"
        );
        header(
            out,
            &baselines
                .iter()
                .map(|b| format!("vs {b}"))
                .collect::<Vec<_>>(),
        );
        for &point in points {
            let Some(ours) = self.step(cubenet, point) else {
                continue;
            };
            out.push_str(&size_cells(point));
            for &b in &baselines {
                match self.step(b, point) {
                    Some(base) => {
                        let _ = write!(
                            out,
                            " {:.2}× |",
                            base.timing.median_ms / ours.timing.median_ms
                        );
                    }
                    None => out.push_str(" – |"),
                }
            }
            out.push('\n');
        }
        out.push('\n');
    }

    fn epochs_table(&self, out: &mut String) {
        if self.epochs.is_empty() {
            return;
        }
        out.push_str("### One real epoch over MNIST (training images held on the device)\n\n");
        out.push_str("| model | d | batch | variant | images | seconds | test accuracy |\n");
        out.push_str("|---|---|---|---|---|---|---|\n");
        for e in &self.epochs {
            let d = e.filters.map_or("–".to_string(), |d| d.to_string());
            let _ = writeln!(
                out,
                "| {} | {d} | {} | {} | {} | {:.3} | {:.2}% |",
                e.model,
                e.batch,
                e.variant,
                e.images,
                e.seconds,
                e.test_accuracy * 100.0
            );
        }
        out.push('\n');
    }

    /// Each data-parallel run next to the same variant and point on its first device alone.
    fn scaling_table(&self, out: &mut String) {
        if self.scaling.is_empty() {
            return;
        }
        out.push_str(
            "### Data-parallel training (burn-train multi-device, generated images, \
             second epoch)\n\n",
        );
        out.push_str(
            "| model | d | batch per device | variant | devices | images/s | per device \
             | speed-up over one device |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        for s in &self.scaling {
            let one = self.scaling.iter().find(|o| {
                o.variant == s.variant && o.point() == s.point() && o.devices[..] == s.devices[..1]
            });
            let speedup = one.map_or("–".to_string(), |one| {
                format!("{:.2}×", s.images_per_second / one.images_per_second)
            });
            let d = s.filters.map_or("–".to_string(), |d| d.to_string());
            let _ = writeln!(
                out,
                "| {} | {d} | {} | {} | {:?} | {:.0} | {:.0} | {speedup} |",
                s.model,
                s.batch,
                s.variant,
                s.devices,
                s.images_per_second,
                s.per_device(),
            );
        }
        out.push('\n');
    }

    fn phases_tables(&self, out: &mut String) {
        let mut groups: Vec<(Variant, Point)> = Vec::new();
        for key in self.phases.iter().map(|p| (p.variant, p.point())) {
            if !groups.contains(&key) {
                groups.push(key);
            }
        }
        for (variant, point) in groups {
            let mut phases: Vec<&PhaseRecord> = Vec::new();
            for p in self.phases.iter() {
                // The first record of each phase, as for steps measured twice.
                if p.variant == variant
                    && p.point() == point
                    && !phases.iter().any(|q| q.phase == p.phase)
                {
                    phases.push(p);
                }
            }
            let total: f64 = phases.iter().map(|p| p.timing.median_ms).sum();
            let _ = writeln!(out, "### Phases of a {point} step on {variant}\n");
            out.push_str("| phase | median ms | share |\n|---|---|---|\n");
            for p in &phases {
                let ms = p.timing.median_ms;
                let _ = writeln!(
                    out,
                    "| {} | {ms:.3} | {:.0}% |",
                    p.phase,
                    100.0 * ms / total
                );
            }
            let _ = writeln!(out, "| sum (each phase synchronized) | {total:.3} | |");
            if let Some(step) = self.step(variant, point) {
                let _ = writeln!(
                    out,
                    "| whole step (one synchronization) | {:.3} | |",
                    step.timing.median_ms
                );
            }
            out.push('\n');
        }
    }
}
