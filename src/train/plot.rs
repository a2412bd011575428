//! PNG line charts of per-epoch metrics (the seeds' error-vs-epoch figure).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

/// DejaVu Sans (Bitstream Vera license, see assets/), embedded so that plotting needs no
/// system font library on the machine that trains.
const FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// One line: a label and its (epoch, value) points.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One chart of a figure: its title, y-axis label and lines.
#[derive(Debug, Clone)]
pub struct Panel {
    pub title: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// A figure that could not be drawn or written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {reason}")]
pub struct PlotError {
    path: String,
    reason: String,
}

/// Draws `panels` side by side into a PNG at `path`. Panels without points are skipped.
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
    let root = BitMapBackend::new(path, (560 * panels.len() as u32, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
    for (area, panel) in root.split_evenly((1, panels.len())).iter().zip(panels) {
        draw_panel(area, panel).map_err(|e| fail(e.to_string()))?;
    }
    root.present().map_err(|e| fail(e.to_string()))
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let points = || panel.series.iter().flat_map(|s| s.points.iter());
    let x_max = points().map(|p| p.0).fold(1.0, f64::max);
    let (y_min, y_max) = points().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    let pad = ((y_max - y_min) * 0.08).max(1e-3);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.5..x_max + 0.5, (y_min - pad)..(y_max + pad))?;
    // Epochs are whole numbers: label only the integer ticks.
    chart
        .configure_mesh()
        .x_labels(2 * x_max as usize + 2)
        .x_label_formatter(&|x| {
            if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .x_desc("epoch")
        .y_desc(&panel.y_label)
        .draw()?;
    for (i, series) in panel.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                series.points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(&series.label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(
            series
                .points
                .iter()
                .map(|&p| Circle::new(p, 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()
}
