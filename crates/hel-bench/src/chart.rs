//! The README's chart: commit time, bytes written per commit and resume
//! time against session length (grow workload), one line per store, drawn
//! to a PNG with plotters.

use std::path::Path;

use plotters::prelude::*;

use crate::run::Row;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSansMono.ttf");

fn series(rows: &[Row], store: &str, value: impl Fn(&Row) -> f64) -> Vec<(f64, f64)> {
    rows.iter()
        .filter(|r| r.workload == "grow" && r.store == store && r.commits > 0)
        .map(|r| (r.n as f64, value(r).max(1e-3)))
        .collect()
}

fn bounds(points: &[(f64, f64)]) -> (f64, f64, f64, f64) {
    let xs = points.iter().map(|p| p.0);
    let ys = points.iter().map(|p| p.1);
    let (x0, x1) = (xs.clone().fold(f64::MAX, f64::min), xs.fold(0f64, f64::max));
    let (y0, y1) = (ys.clone().fold(f64::MAX, f64::min), ys.fold(0f64, f64::max));
    (x0 * 0.8, x1 * 1.25, y0 * 0.5, y1 * 2.0)
}

/// Title, y-axis label and the value plotted.
type Panel = (&'static str, &'static str, Box<dyn Fn(&Row) -> f64>);

/// Why the chart could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("the chart's font cannot be loaded")]
    Font,
    /// What plotters said (its error type is generic over the backend).
    #[error("cannot draw the chart: {0}")]
    Draw(String),
}

fn draw_err(e: impl std::fmt::Display) -> ChartError {
    ChartError::Draw(e.to_string())
}

/// Draw the chart to `path`.
pub fn draw(rows: &[Row], path: &Path) -> Result<(), ChartError> {
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| ChartError::Font)?;
    let root = BitMapBackend::new(path, (1980, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let areas = root.split_evenly((1, 3));
    let colors = [
        ("hel-store", RGBColor(200, 40, 40)),
        ("sqlite", RGBColor(150, 60, 170)),
        ("jsonl", RGBColor(30, 150, 60)),
        ("whole-file", RGBColor(40, 90, 200)),
    ];

    let panels: [Panel; 3] = [
        (
            "Commit time p50 vs session length",
            "µs per commit",
            Box::new(|r: &Row| r.commit_p50_us as f64),
        ),
        (
            "Bytes written per commit",
            "bytes per commit",
            Box::new(|r: &Row| r.bytes_per_commit as f64),
        ),
        (
            "Resume in a new process (median)",
            "ms",
            Box::new(|r: &Row| r.resume_ms),
        ),
    ];
    for (area, (title, ylabel, value)) in areas.iter().zip(panels.iter()) {
        let all: Vec<(f64, f64)> = colors
            .iter()
            .flat_map(|(s, _)| series(rows, s, value))
            .collect();
        if all.is_empty() {
            continue;
        }
        let (x0, x1, y0, y1) = bounds(&all);
        let mut chart = ChartBuilder::on(area)
            .caption(*title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc("messages in the session (log)")
            .y_desc(format!("{ylabel} (log)"))
            .label_style(("sans-serif", 13))
            .draw()
            .map_err(draw_err)?;
        for (store, color) in &colors {
            let pts = series(rows, store, value);
            if pts.is_empty() {
                continue;
            }
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                .map_err(draw_err)?
                .label(*store)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(3))
                });
            chart
                .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
                .map_err(draw_err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(draw_err)?;
    }
    root.present().map_err(draw_err)
}
