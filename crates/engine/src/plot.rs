//! PNG figures: line charts (the learning curves, the benchmarks' time-vs-size plots) and
//! heatmaps (confusion matrices).

use std::io;
use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
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
    let panels: Vec<&Panel> = panels
        .iter()
        .filter(|p| p.series.iter().any(|s| !s.points.is_empty()))
        .collect();
    if panels.is_empty() {
        return Err(PlotError {
            path: path.display().to_string(),
            reason: "no data points".into(),
        });
    }
    write_png(path, |partial| draw_figure(partial, &panels))
}

/// A grid of cells shaded by their value (0 to 1), each labelled with its text: the
/// confusion matrix of a classifier.
#[derive(Debug, Clone)]
pub struct Heatmap {
    pub title: String,
    /// What the rows and the columns stand for.
    pub row_title: String,
    pub column_title: String,
    pub row_labels: Vec<String>,
    pub column_labels: Vec<String>,
    /// `shade[row][column]`, 0 (white) to 1 (darkest).
    pub shade: Vec<Vec<f64>>,
    /// `text[row][column]`, printed in the cell.
    pub text: Vec<Vec<String>>,
}

/// Draws `heatmap` into a PNG at `path`, written atomically.
pub fn plot_heatmap(path: &Path, heatmap: &Heatmap) -> Result<(), PlotError> {
    write_png(path, |partial| draw_heatmap(partial, heatmap))
}

/// Registers the embedded font, then lets `draw` write the PNG under a temporary name that
/// replaces `path` once it is complete.
fn write_png<E: std::error::Error>(
    path: &Path,
    draw: impl FnOnce(&Path) -> Result<(), E>,
) -> Result<(), PlotError> {
    static FONT_ONCE: Once = Once::new();
    FONT_ONCE.call_once(|| {
        let registered = register_font("sans-serif", FontStyle::Normal, FONT);
        assert!(
            registered.is_ok(),
            "the embedded font is a valid TrueType file"
        );
    });
    write_atomically_with(path, |partial| {
        draw(partial).map_err(|e| io::Error::other(e.to_string()))
    })
    .map_err(|e| PlotError {
        path: path.display().to_string(),
        reason: e.source.to_string(),
    })
}

type BitmapError = DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>;

/// Cells of 44 pixels (up to 16 rows or columns), smaller beyond so that the figure stays
/// under ~1000 pixels; cell texts are printed while cells can hold them. Columns are
/// labelled by number when a label is wider than a cell, and rows then read `number name`.
fn draw_heatmap(path: &Path, heatmap: &Heatmap) -> Result<(), BitmapError> {
    let (rows, columns) = (heatmap.row_labels.len(), heatmap.column_labels.len());
    let cell = (700 / rows.max(columns).max(1)).clamp(4, 44) as i32;
    let label_font = ("sans-serif", 13.0);
    let char_width = 7;
    let by_number = heatmap
        .column_labels
        .iter()
        .any(|label| label.chars().count() as i32 * char_width > cell - 4);
    let row_labels: Vec<String> = heatmap
        .row_labels
        .iter()
        .enumerate()
        .map(|(r, label)| match by_number {
            true => format!("{r} {label}"),
            false => label.clone(),
        })
        .collect();
    let column_labels: Vec<String> = match by_number {
        true => (0..columns).map(|c| c.to_string()).collect(),
        false => heatmap.column_labels.clone(),
    };
    let widest = row_labels
        .iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0) as i32;
    let (left, top) = (widest * char_width + 24, 76);
    let size = (
        (left + cell * columns as i32 + 20) as u32,
        (top + cell * rows as i32 + 30) as u32,
    );
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let centered = |font: (&'static str, f64)| {
        font.into_font()
            .into_text_style(&root)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    let middle = size.0 as i32 / 2;
    root.draw(&Text::new(
        heatmap.title.clone(),
        (middle, 18),
        centered(("sans-serif", 20.0)),
    ))?;
    root.draw(&Text::new(
        format!(
            "rows: {} · columns: {}",
            heatmap.row_title, heatmap.column_title
        ),
        (middle, 42),
        centered(label_font),
    ))?;
    let cell_font = centered(("sans-serif", (cell as f64 * 0.32).max(8.0)));
    for (r, (shades, texts)) in heatmap.shade.iter().zip(&heatmap.text).enumerate() {
        let y = top + r as i32 * cell;
        for (c, (&shade, text)) in shades.iter().zip(texts).enumerate() {
            let x = left + c as i32 * cell;
            let level = (255.0 * (1.0 - 0.8 * shade.clamp(0.0, 1.0))) as u8;
            root.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                RGBColor(level, level, 255).filled(),
            ))?;
            root.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                RGBColor(220, 220, 230),
            ))?;
            if cell >= 24 {
                let ink = if shade > 0.6 { WHITE } else { BLACK };
                let center = (x + cell / 2, y + cell / 2);
                root.draw(&Text::new(text.clone(), center, cell_font.color(&ink)))?;
            }
        }
        let label_style = label_font
            .into_font()
            .into_text_style(&root)
            .pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(
            row_labels[r].clone(),
            (left - 8, y + cell / 2),
            label_style,
        ))?;
    }
    for (c, label) in column_labels.into_iter().enumerate() {
        let x = left + c as i32 * cell + cell / 2;
        root.draw(&Text::new(label, (x, top - 12), centered(label_font)))?;
    }
    root.present()
}

/// Draws `panels` side by side into the PNG at `path`.
fn draw_figure(path: &Path, panels: &[&Panel]) -> Result<(), BitmapError> {
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
