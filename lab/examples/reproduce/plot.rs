//! Log–log line plots as PNG with `plotters`' bitmap backend.
//!
//! Text needs a font: plotters is built with `ab_glyph` (pure Rust, no system font
//! lookup), and the CLI's `ldpcov_aggregator_cli::font_available` registers the first TrueType
//! file found among `LDPCOV_PLOT_FONT` and a few common DejaVu / Liberation paths.
//! Without one the plot is drawn without any text (axes, grid and lines only) and the
//! caller describes it in the markdown.

use anyhow::{Result, anyhow};
use ldpcov_aggregator_cli::font_available;
use plotters::prelude::*;
use std::path::Path;

/// One line: points (x, y) with x, y > 0.
pub(crate) struct Series {
    /// Legend label.
    pub(crate) label: String,
    /// Palette index (same index, same colour).
    pub(crate) color: usize,
    /// Drawn dashed (points only joined by a thinner line).
    pub(crate) dashed: bool,
    /// The points.
    pub(crate) points: Vec<(f64, f64)>,
}

/// Draws `series` on log–log axes into `file` (800×560 PNG). Returns whether text
/// (title, axis labels, legend) was drawn.
pub(crate) fn draw(file: &Path, title: &str, series: &[Series]) -> Result<bool> {
    let text = font_available();
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts.filter(|(x, y)| *x > 0.0 && *y > 0.0) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Err(anyhow!("nothing to plot"));
    }
    let root = BitMapBackend::new(file, (800, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(15);
    if text {
        builder
            .caption(title, ("sans-serif", 20))
            .x_label_area_size(40)
            .y_label_area_size(60);
    }
    let mut chart = builder.build_cartesian_2d(
        (x0 / 1.5..x1 * 1.5).log_scale(),
        (y0 / 1.5..y1 * 1.5).log_scale(),
    )?;
    if text {
        chart
            .configure_mesh()
            .x_desc("n (users)")
            .y_desc("relative error")
            .x_label_formatter(&|x| format!("{x:.0e}"))
            .y_label_formatter(&|y| format!("{y:.2}"))
            .draw()?;
    } else {
        chart
            .configure_mesh()
            .x_labels(0)
            .y_labels(0)
            .disable_x_mesh()
            .disable_y_mesh()
            .draw()?;
    }
    for s in series {
        let color = Palette99::pick(s.color).to_rgba();
        let width = if s.dashed { 1 } else { 3 };
        let drawn = chart.draw_series(LineSeries::new(
            s.points.iter().copied(),
            color.stroke_width(width),
        ))?;
        if text {
            drawn.label(s.label.clone()).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
            });
        }
        chart.draw_series(
            s.points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )?;
    }
    if text {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 13))
            .draw()?;
    }
    root.present()?;
    Ok(text)
}
