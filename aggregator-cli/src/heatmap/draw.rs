//! Drawing measured panels into a PNG: the banner, the cells, the axis labels, the
//! title, the colour bar and the note on undefined cells.

use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;

use super::colour::UNDEFINED_NOTE;
use super::font::font_available;
use super::layout::{
    BANNER_SIZE, BAR_WIDTH, LABEL_SIZE, PANEL_GAP, Panel, PanelSpec, TITLE_SIZE, banner_lines,
    measure,
};
use super::{Banner, Layout, PlotError};

/// The error of a picture at `path` that could not be drawn.
pub(super) fn draw_failed(path: &Path) -> impl Fn(&dyn std::fmt::Display) -> PlotError + '_ {
    move |e| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// A white picture of `size` pixels to be written to `path`, with the banner's
/// `lines` drawn at its top.
pub(super) fn blank_picture<'a>(
    path: &'a Path,
    size: (u32, u32),
    banner: Option<Banner<'_>>,
    lines: &[String],
) -> Result<DrawingArea<BitMapBackend<'a>, plotters::coord::Shift>, PlotError> {
    let fail = draw_failed(path);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    draw_banner(&root, banner, lines).map_err(|e| fail(&e))?;
    Ok(root)
}

/// Draws the banner's `lines` at the top of `root`.
fn draw_banner<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    banner: Option<Banner<'_>>,
    lines: &[String],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let colour = if banner.is_some_and(|b| b.warning) {
        RGBColor(160, 20, 30)
    } else {
        BLACK
    };
    let style = ("sans-serif", BANNER_SIZE)
        .into_font()
        .color(&colour)
        .pos(Pos::new(HPos::Left, VPos::Top));
    for (k, line) in lines.iter().enumerate() {
        let y = 8 + k as u32 * (BANNER_SIZE + 4);
        root.draw(&Text::new(line.clone(), (10, y as i32), style.clone()))?;
    }
    Ok(())
}

/// Draws the panels side by side into one PNG under `banner`; their layouts in picture
/// coordinates.
pub(super) fn draw(
    path: &Path,
    panels: &[PanelSpec<'_>],
    banner: Option<Banner<'_>>,
) -> Result<Vec<Layout>, PlotError> {
    let text = font_available();
    let measured: Vec<Panel> = panels
        .iter()
        .map(|spec| measure(spec, text))
        .collect::<Result<_, _>>()?;
    let width = measured.iter().map(|p| p.layout.width).sum::<u32>()
        + PANEL_GAP * (measured.len().saturating_sub(1)) as u32;
    let (lines, banner_h) = banner_lines(banner, width, text);
    let height = banner_h + measured.iter().map(|p| p.layout.height).max().unwrap_or(0);
    let fail = draw_failed(path);
    let root = blank_picture(path, (width, height), banner, &lines)?;
    let body = root
        .clone()
        .shrink((0, banner_h), (width, height - banner_h));
    let mut layouts = Vec::with_capacity(measured.len());
    let mut x0 = 0;
    for (spec, panel) in panels.iter().zip(&measured) {
        let mut layout = panel.layout;
        layout.left += x0;
        draw_panel(&body, spec, panel, &layout).map_err(|e| fail(&e))?;
        // The picture's size, which a caller reads from any panel.
        layout.top += banner_h;
        layout.width = width;
        layout.height = height;
        layouts.push(layout);
        x0 += panel.layout.width + PANEL_GAP;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(layouts)
}

/// Draws one measured panel whose grid starts at `layout.left`, `layout.top`.
pub(super) fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    spec: &PanelSpec<'_>,
    panel: &Panel,
    layout: &Layout,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (grid, value, title) = (&spec.grid, spec.value.as_ref(), spec.title);
    let (rows, cols) = (grid.rows, grid.cols);
    let (left, top) = (layout.left, layout.top);
    let grid_w = grid.cell_width * cols as u32;
    let grid_h = grid.cell_height * rows as u32;
    let (limit, bar_h) = (panel.limit, panel.bar_h);
    let px = |v: u32| v as i32;
    for i in 0..rows {
        for j in 0..cols {
            let (x0, y0) = (
                left + j as u32 * grid.cell_width,
                top + i as u32 * grid.cell_height,
            );
            let rect = Rectangle::new(
                [
                    (px(x0), px(y0)),
                    (px(x0 + grid.cell_width), px(y0 + grid.cell_height)),
                ],
                spec.scale.color(value(i, j), limit).filled(),
            );
            root.draw(&rect)?;
        }
    }
    // A thin frame around the grid so that white cells at the edge stay visible.
    let frame = Rectangle::new(
        [
            (px(left) - 1, px(top) - 1),
            (px(left + grid_w), px(top + grid_h)),
        ],
        BLACK.stroke_width(1),
    );
    root.draw(&frame)?;

    // Colour bar: the limit at the top, −limit (diverging) or 0 (sequential) at the
    // bottom.
    let bar_x = left + grid_w + 20;
    let [high, .., low] = spec.scale.ticks();
    for y in 0..bar_h {
        let t = high + (low - high) * f64::from(y) / f64::from(bar_h - 1);
        let line = Rectangle::new(
            [
                (px(bar_x), px(top + y)),
                (px(bar_x + BAR_WIDTH), px(top + y + 1)),
            ],
            spec.scale.color(t * limit, limit).filled(),
        );
        root.draw(&line)?;
    }
    let bar_frame = Rectangle::new(
        [
            (px(bar_x), px(top)),
            (px(bar_x + BAR_WIDTH), px(top + bar_h)),
        ],
        BLACK.stroke_width(1),
    );
    root.draw(&bar_frame)?;

    if layout.text {
        let font = ("sans-serif", LABEL_SIZE).into_font();
        let style = |h: HPos, v: VPos| font.color(&BLACK).pos(Pos::new(h, v));
        let title_style = ("sans-serif", TITLE_SIZE)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Left, VPos::Top));
        root.draw(&Text::new(title.to_string(), (px(left), 10), title_style))?;
        if panel.undefined {
            let note = Text::new(
                UNDEFINED_NOTE.to_string(),
                (px(left), px(panel.note_y)),
                style(HPos::Left, VPos::Top),
            );
            root.draw(&note)?;
        }
        for (k, t) in panel.tick_texts.iter().enumerate() {
            if t.is_empty() {
                continue;
            }
            let y = top + (bar_h - 1) * k as u32 / 4;
            let mark = PathElement::new(
                vec![
                    (px(bar_x + BAR_WIDTH), px(y)),
                    (px(bar_x + BAR_WIDTH + 4), px(y)),
                ],
                BLACK,
            );
            root.draw(&mark)?;
            let label = Text::new(
                t.clone(),
                (px(bar_x + BAR_WIDTH + 6), px(y)),
                style(HPos::Left, VPos::Center),
            );
            root.draw(&label)?;
        }
        let cl = &panel.col_labels;
        for (j, s) in cl.texts.iter().enumerate() {
            if j % cl.step != 0 {
                continue;
            }
            let x = left + j as u32 * grid.cell_width + grid.cell_width / 2;
            let label = if cl.vertical {
                // Turned a quarter clockwise and read top to bottom, starting under the
                // column.
                let vertical = ("sans-serif", LABEL_SIZE)
                    .into_font()
                    .transform(FontTransform::Rotate90)
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center));
                Text::new(s.clone(), (px(x), px(top + grid_h + 4)), vertical)
            } else {
                Text::new(
                    s.clone(),
                    (px(x), px(top + grid_h + 4)),
                    style(HPos::Center, VPos::Top),
                )
            };
            root.draw(&label)?;
        }
        if let Some(rl) = &panel.row_labels {
            for (i, s) in rl.texts.iter().enumerate() {
                if i % rl.step != 0 {
                    continue;
                }
                let y = top + i as u32 * grid.cell_height + grid.cell_height / 2;
                let label = Text::new(
                    s.clone(),
                    (px(left) - 6, px(y)),
                    style(HPos::Right, VPos::Center),
                );
                root.draw(&label)?;
            }
        }
    }
    Ok(())
}
