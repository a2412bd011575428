//! The benchmark figure for every model: seconds per epoch against batch size and against
//! filter count, one line per variant, on a log scale (CPU and GPU differ by decades).

use std::path::{Path, PathBuf};

use super::report::{Report, StepRecord};
use super::sweep::{BenchModel, Point};
use crate::plot::{Axis, Panel, PlotError, Scale, Series, plot_panels};

/// The value most points share, e.g. the filter count of the batch sweep.
fn most_common<T: Copy + Eq>(values: impl Iterator<Item = T>) -> Option<T> {
    let values: Vec<T> = values.collect();
    values
        .iter()
        .copied()
        .max_by_key(|v| values.iter().filter(|w| *w == v).count())
}

impl Report {
    /// Lines of seconds per epoch over the points `keep` selects, x given by `x_of`.
    fn epoch_panel(
        &self,
        title: String,
        x_label: &str,
        keep: impl Fn(Point) -> bool,
        x_of: impl Fn(Point) -> usize,
    ) -> Panel {
        let series = self
            .variants()
            .into_iter()
            .map(|variant| {
                let mut points: Vec<(f64, f64)> = self
                    .steps
                    .iter()
                    .filter(|s| s.variant == variant && keep(s.point()))
                    .map(|s: &StepRecord| (x_of(s.point()) as f64, s.epoch_seconds()))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Series {
                    label: variant.to_string(),
                    points,
                    color: variant as usize,
                }
            })
            .filter(|s| s.points.len() > 1)
            .collect();
        Panel {
            title,
            x: Axis::new(x_label, Scale::Linear),
            y: Axis::new("seconds per epoch (log)", Scale::Log10),
            series,
        }
    }

    /// Draws `<dir>/<model>.png` for each model with a sweep; returns the files written.
    pub fn plot(&self, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
        let mut written = Vec::new();
        for model in BenchModel::ALL {
            let points = self.points(model);
            let mut panels = Vec::new();
            if let Some(filters) = most_common(points.iter().map(|p| p.filters)) {
                let at = filters.map_or(String::new(), |d| format!(", d={d}"));
                panels.push(self.epoch_panel(
                    format!("{model}{at}: epoch time vs batch"),
                    "batch size",
                    |p| p.model == model && p.filters == filters,
                    |p| p.batch,
                ));
            }
            if model.has_filters()
                && let Some(batch) = most_common(points.iter().map(|p| p.batch))
            {
                panels.push(self.epoch_panel(
                    format!("{model}, batch {batch}: epoch time vs filters"),
                    "filters d",
                    |p| p.model == model && p.batch == batch,
                    |p| p.filters.unwrap_or(0),
                ));
            }
            panels.retain(|p| !p.series.is_empty());
            if panels.is_empty() {
                continue;
            }
            let path = dir.join(format!("{model}.png"));
            plot_panels(&path, &panels)?;
            written.push(path);
        }
        Ok(written)
    }
}
