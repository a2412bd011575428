//! PNG line charts: the learning curves (error against epoch) and the benchmarks'
//! time-vs-size plots.

use std::io;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::atomic_file::write_atomically_with;

/// DejaVu Sans (Bitstream Vera license, see assets/), embedded so that plotting needs no
/// system font library on the machine that trains.
const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// One line: a label, its (x, y) points in drawing order, and its colour (an index into
/// the palette, so that a line keeps its colour across panels and figures).
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub color: usize,
}

/// How an axis maps values to positions and which ticks it labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Evenly spaced values, every tick labelled.
    Linear,
    /// Whole numbers such as epochs: only integer ticks are labelled.
    Integer,
    /// Values spanning decades (times from CPU to GPU): log-spaced, powers of ten labelled.
    Log10,
}

impl Scale {
    fn position(self, value: f64) -> f64 {
        match self {
            Scale::Log10 => value.log10(),
            Scale::Linear | Scale::Integer => value,
        }
    }

    fn label(self, position: f64) -> String {
        let whole = (position - position.round()).abs() < 1e-9;
        match self {
            Scale::Linear => {
                let text = format!("{position:.3}");
                text.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            Scale::Integer if whole => format!("{position:.0}"),
            Scale::Log10 if whole => format!("{}", 10f64.powi(position.round() as i32)),
            Scale::Integer | Scale::Log10 => String::new(),
        }
    }
}

/// One axis: what it shows and its scale.
#[derive(Debug, Clone)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
}

impl Axis {
    pub fn new(label: &str, scale: Scale) -> Self {
        Axis {
            label: label.to_string(),
            scale,
        }
    }
}

/// One chart of a figure: its title, axes and lines.
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
}

/// A figure that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {reason}")]
pub struct PlotError {
    path: String,
    reason: String,
}

/// Draws `panels` side by side into a PNG at `path`, written atomically (see
/// [`crate::atomic_file`]). Panels without points are skipped.
pub fn plot_panels(path: &Path, panels: &[Panel]) -> Result<(), PlotError> {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        let registered = register_font("sans-serif", FontStyle::Normal, FONT);
        assert!(
            registered.is_ok(),
            "the embedded font is a valid TrueType file"
        );
    });
    let fail = |reason: String| PlotError {
        path: path.display().to_string(),
        reason,
    };
    let panels: Vec<&Panel> = panels
        .iter()
        .filter(|p| p.series.iter().any(|s| !s.points.is_empty()))
        .collect();
    if panels.is_empty() {
        return Err(fail("no data points".into()));
    }
    write_atomically_with(path, |partial| {
        draw_figure(partial, &panels).map_err(|e| io::Error::other(e.to_string()))
    })
    .map_err(|e| fail(e.source.to_string()))
}

/// Draws `panels` side by side into the PNG at `path`.
fn draw_figure(
    path: &Path,
    panels: &[&Panel],
) -> Result<(), DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>> {
    let root = BitMapBackend::new(path, (560 * panels.len() as u32, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, panel) in root.split_evenly((1, panels.len())).iter().zip(panels) {
        draw_panel(area, panel)?;
    }
    root.present()
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (x_scale, y_scale) = (panel.x.scale, panel.y.scale);
    let positions = |series: &Series| -> Vec<(f64, f64)> {
        series
            .points
            .iter()
            .map(|&(x, y)| (x_scale.position(x), y_scale.position(y)))
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .collect()
    };
    let lines: Vec<(&Series, Vec<(f64, f64)>)> =
        panel.series.iter().map(|s| (s, positions(s))).collect();
    let points = || lines.iter().flat_map(|(_, points)| points.iter());
    let x_range = padded_range(points().map(|p| p.0), x_scale);
    let y_range = padded_range(points().map(|p| p.1), y_scale);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range, y_range)?;
    chart
        .configure_mesh()
        .x_labels(20)
        .y_labels(20)
        .x_label_formatter(&|x| x_scale.label(*x))
        .y_label_formatter(&|y| y_scale.label(*y))
        .x_desc(&panel.x.label)
        .y_desc(&panel.y.label)
        .draw()?;
    for (series, points) in &lines {
        let color = Palette99::pick(series.color).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(&series.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
}

/// The span of `positions` with a margin; integer axes get half a unit on each side, log
/// axes reach the enclosing powers of ten so that at least one tick is labelled.
fn padded_range(positions: impl Iterator<Item = f64>, scale: Scale) -> std::ops::Range<f64> {
    let (lo, hi) = positions.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    match scale {
        Scale::Integer => (lo - 0.5)..(hi + 0.5),
        Scale::Log10 => (lo.floor() - 0.05)..(hi.ceil() + 0.05),
        Scale::Linear => {
            let pad = ((hi - lo) * 0.08).max(1e-3);
            (lo - pad)..(hi + pad)
        }
    }
}
