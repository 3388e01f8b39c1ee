//! The principal components' picture: a scree plot beside the loadings' heatmap.

use nalgebra::DMatrix;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

use super::draw::{blank_picture, draw_failed, draw_panel};
use super::font::font_available;
use super::layout::{Grid, LABEL_SIZE, PANEL_GAP, PanelSpec, TITLE_SIZE, banner_lines, measure};
use super::{Banner, Layout, PlotError, Scale, tick_label};

/// One bar of a scree plot: a principal component's explained-variance ratio, whether
/// it stands above the noise edge, and the raw eigenvalue that flag tests (when
/// known).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScreeBar {
    /// The explained-variance ratio.
    pub ratio: f64,
    /// Whether the raw eigenvalue stands above the noise edge.
    pub above_noise_edge: bool,
    /// The raw matrix's eigenvalue of the same rank, which the flag compares with the
    /// noise edge.
    pub raw_eigenvalue: Option<f64>,
}

/// Writes principal components to the PNG file `path`: on the left a scree plot (one
/// bar per component, its explained-variance ratio, dark where the component stands
/// above the noise edge and grey where it does not, the raw eigenvalue under it and
/// the `noise_edge` it was compared with), on the right the loadings as a `p × K`
/// heatmap with the variables' `names` on its rows and `PC1`… on its columns, titled
/// with its shape. `bars` holds one [`ScreeBar`] per component, `loadings` one column
/// per component; `banner` runs across the top.
pub fn write_components(
    path: &Path,
    bars: &[ScreeBar],
    noise_edge: f64,
    loadings: &DMatrix<f64>,
    title: &str,
    names: Option<&[String]>,
    banner: Option<Banner<'_>>,
) -> Result<Layout, PlotError> {
    let (p, k) = loadings.shape();
    if k != bars.len() {
        return Err(PlotError::Names {
            given: bars.len(),
            expected: k,
        });
    }
    if let Some(bad) = bars.iter().position(|b| !b.ratio.is_finite()) {
        return Err(PlotError::NotFinite { row: 0, col: bad });
    }
    let pcs: Vec<String> = (1..=k).map(|c| format!("PC{c}")).collect();
    let cell = (560 / p.max(1) as u32).clamp(3, 40);
    let loadings_title = format!("loadings ({p} × {k})");
    let spec = PanelSpec {
        grid: Grid {
            rows: p,
            cols: k,
            cell_width: 48,
            cell_height: cell,
            row_labels: true,
        },
        value: Box::new(|i, j| loadings[(i, j)]),
        title: &loadings_title,
        scale: Scale::Diverging,
        row_names: names,
        col_names: Some(&pcs),
    };
    let text = font_available();
    let panel = measure(&spec, text)?;
    let font = ("sans-serif", LABEL_SIZE).into_font();
    let text_width = |s: &str| {
        if text {
            font.box_size(s).map_or(0, |(w, _)| w)
        } else {
            0
        }
    };
    let caption = "explained variance (grey: within the noise)";
    let edge_note = format!(
        "above: raw eigenvalue; noise edge {}",
        tick_label(noise_edge)
    );
    let raw_texts: Vec<String> = bars
        .iter()
        .map(|b| b.raw_eigenvalue.map_or_else(|| "?".into(), tick_label))
        .collect();
    // The scree plot: bars 12 px narrower than their slots, the slot as wide as the
    // widest raw eigenvalue; as wide as its captions, which never reach the loadings.
    let slot = raw_texts
        .iter()
        .map(|t| text_width(t) + 8)
        .fold(48u32, u32::max);
    let scree_w = (20 + slot * k as u32 + 20)
        .max(20 + text_width(caption) + 10)
        .max(20 + text_width(&edge_note) + 10);
    let title_h = if text { 10 + TITLE_SIZE + 12 } else { 10 };
    // Under the axis: the PC labels, the raw eigenvalues and the edge's note.
    let under = if text { 3 * (LABEL_SIZE + 6) + 8 } else { 10 };
    let figure_title = if text { TITLE_SIZE + 16 } else { 0 };
    let width = (scree_w + PANEL_GAP + panel.layout.width).max(10 + text_width(title) + 10);
    let (lines, banner_h) = banner_lines(banner, width, text);
    let body_h = panel.layout.height.max(title_h + 160 + under);
    let height = banner_h + figure_title + body_h;
    let fail = draw_failed(path);
    let root = blank_picture(path, (width, height), banner, &lines)?;
    // Everything moves down by the banner and the figure's title.
    let shift = banner_h + figure_title;
    let px = |v: u32| v as i32;
    let plot_top = shift + title_h;
    let plot_h = body_h.saturating_sub(title_h + under).max(160);
    let top_ratio = bars
        .iter()
        .map(|b| b.ratio)
        .fold(0.0f64, f64::max)
        .max(1e-12);
    let bar_h = |ratio: f64| ((ratio.max(0.0) / top_ratio) * f64::from(plot_h)).round() as u32;
    for (c, bar) in bars.iter().enumerate() {
        let h = bar_h(bar.ratio);
        let x = 20 + slot * c as u32 + 6;
        let colour = if bar.above_noise_edge {
            RGBColor(33, 102, 172)
        } else {
            RGBColor(170, 170, 170)
        };
        let rect = Rectangle::new(
            [
                (px(x), px(plot_top + plot_h - h)),
                (px(x + slot - 12), px(plot_top + plot_h)),
            ],
            colour.filled(),
        );
        root.draw(&rect).map_err(|e| fail(&e))?;
    }
    let axis = PathElement::new(
        vec![
            (px(16), px(plot_top + plot_h)),
            (px(20 + slot * k as u32 + 10), px(plot_top + plot_h)),
        ],
        BLACK,
    );
    root.draw(&axis).map_err(|e| fail(&e))?;
    if text {
        let big = ("sans-serif", TITLE_SIZE).into_font();
        let at = |h: HPos, v: VPos| font.color(&BLACK).pos(Pos::new(h, v));
        let texts = [
            (
                title.to_string(),
                10,
                banner_h + 6,
                big.color(&BLACK).pos(Pos::new(HPos::Left, VPos::Top)),
            ),
            (
                caption.to_string(),
                20,
                shift + 10,
                at(HPos::Left, VPos::Top),
            ),
            (
                edge_note.clone(),
                20,
                plot_top + plot_h + 4 + 2 * (LABEL_SIZE + 6),
                at(HPos::Left, VPos::Top),
            ),
        ];
        for (s, x, y, style) in texts {
            root.draw(&Text::new(s, (px(x), px(y)), style))
                .map_err(|e| fail(&e))?;
        }
        for (c, bar) in bars.iter().enumerate() {
            let x = 20 + slot * c as u32 + slot / 2;
            let bottom = plot_top + plot_h + 4;
            let labels = [
                (
                    format!("{:.0}%", 100.0 * bar.ratio),
                    plot_top + plot_h - bar_h(bar.ratio) - 2,
                    VPos::Bottom,
                ),
                (pcs[c].clone(), bottom, VPos::Top),
                (raw_texts[c].clone(), bottom + LABEL_SIZE + 6, VPos::Top),
            ];
            for (s, y, v) in labels {
                root.draw(&Text::new(s, (px(x), px(y)), at(HPos::Center, v)))
                    .map_err(|e| fail(&e))?;
            }
        }
    }
    let mut layout = panel.layout;
    layout.left += scree_w + PANEL_GAP;
    layout.top += shift;
    layout.width = width;
    layout.height = height;
    let shifted = root.clone().shrink((0, shift), (width, height - shift));
    let mut local = panel.layout;
    local.left += scree_w + PANEL_GAP;
    draw_panel(&shifted, &spec, &panel, &local).map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(layout)
}
