//! PNG heatmaps of a square (typically symmetric) matrix and of a vector, for looking
//! at a released covariance or correlation estimate and its mean.
//!
//! Colours follow a diverging scale centred at 0: white at 0, red for positive and blue
//! for negative entries, with symmetric limits ±max|a_ij| so that equal magnitudes get
//! equal intensities. A colour bar with tick labels sits to the right of the grid.
//! Axis labels are the variable names when given and fit, else 1-based indices, thinned
//! when the cells are too small to hold one label each.
//!
//! Text needs a font: plotters is built with `ab_glyph` (pure Rust, no system font
//! lookup), and [`font_available`] registers the first TrueType file found among
//! `$LDPCOV_PLOT_FONT` and a few common DejaVu / Liberation paths. Without one the
//! picture is drawn without any text (cells and colour bar only).
//!
//! ```no_run
//! use nalgebra::DMatrix;
//! use std::path::Path;
//!
//! let m = DMatrix::from_row_slice(2, 2, &[1.0, -0.5, -0.5, 2.0]);
//! let names = ["height".to_string(), "weight".to_string()];
//! let layout = ldpcov_cli::write_heatmap(
//!     Path::new("cov.png"), &m, "covariance", Some(&names))?;
//! assert_eq!(layout.rows, 2);
//! # Ok::<(), ldpcov_cli::PlotError>(())
//! ```

use nalgebra::DMatrix;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::OnceLock;
use thiserror::Error;

/// Why a picture could not be drawn. Every message is one line.
#[derive(Debug, Error)]
pub enum PlotError {
    /// There is nothing to draw.
    #[error("nothing to plot: no entries")]
    Empty,
    /// A heatmap of a matrix needs a square matrix.
    #[error("the matrix is {rows}×{cols}, not square")]
    NotSquare {
        /// Number of rows.
        rows: usize,
        /// Number of columns.
        cols: usize,
    },
    /// The names do not match the dimension.
    #[error("{given} names for {expected} variables")]
    Names {
        /// Number of names given.
        given: usize,
        /// Number of variables.
        expected: usize,
    },
    /// An entry is NaN or infinite.
    #[error("entry ({row}, {col}) is not finite")]
    NotFinite {
        /// Row (0-based).
        row: usize,
        /// Column (0-based).
        col: usize,
    },
    /// The backend failed (file not writable, …).
    #[error("drawing {path}: {message}")]
    Draw {
        /// The output file.
        path: String,
        /// The backend's reason.
        message: String,
    },
}

/// Where the grid of cells lies in the picture, so that callers (and tests) can find
/// the pixel of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Picture width in pixels.
    pub width: u32,
    /// Picture height in pixels.
    pub height: u32,
    /// x of the grid's left edge.
    pub left: u32,
    /// y of the grid's top edge.
    pub top: u32,
    /// Width of one cell in pixels.
    pub cell_width: u32,
    /// Height of one cell in pixels.
    pub cell_height: u32,
    /// Number of rows of cells.
    pub rows: usize,
    /// Number of columns of cells.
    pub cols: usize,
    /// Whether text (title, labels, colour bar ticks) was drawn.
    pub text: bool,
}

impl Layout {
    /// The pixel (x, y) at the centre of cell (`row`, `col`).
    pub fn cell_center(&self, row: usize, col: usize) -> (u32, u32) {
        (
            self.left + col as u32 * self.cell_width + self.cell_width / 2,
            self.top + row as u32 * self.cell_height + self.cell_height / 2,
        )
    }
}

/// Environment variable naming a TrueType font file to use for text.
pub const FONT_ENV: &str = "LDPCOV_PLOT_FONT";

const FONT_PATHS: [&str; 4] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// Registers a font as plotters' `sans-serif` once (from `$LDPCOV_PLOT_FONT`, else the
/// first of a few common paths); whether text can be drawn.
pub fn font_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let env = std::env::var(FONT_ENV).ok();
        let candidates = env.iter().map(String::as_str).chain(FONT_PATHS);
        for path in candidates {
            if let Ok(bytes) = std::fs::read(path) {
                // plotters keeps the font for the life of the process.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    tracing::debug!(path, "plot font registered");
                    return true;
                }
            }
        }
        tracing::warn!("no TrueType font found (set {FONT_ENV}): plots carry no text");
        false
    })
}

/// The diverging colour of `value` on the scale ±`limit`: white at 0, linearly to red
/// (178, 24, 43) at +`limit` and to blue (33, 102, 172) at −`limit`; values beyond the
/// limits get the end colours.
pub fn diverging_color(value: f64, limit: f64) -> RGBColor {
    const RED: (f64, f64, f64) = (178.0, 24.0, 43.0);
    const BLUE: (f64, f64, f64) = (33.0, 102.0, 172.0);
    let t = if limit > 0.0 {
        (value / limit).clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let end = if t >= 0.0 { RED } else { BLUE };
    let a = t.abs();
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    RGBColor(mix(end.0), mix(end.1), mix(end.2))
}

/// Writes a heatmap of the square matrix `matrix` (p from 2 to a few hundred) to the
/// PNG file `path`, with `title` above and `names` (one per variable) on both axes.
/// The picture is widened, when text is drawn, to hold the whole title.
pub fn write_heatmap(
    path: &Path,
    matrix: &DMatrix<f64>,
    title: &str,
    names: Option<&[String]>,
) -> Result<Layout, PlotError> {
    let layouts = write_heatmaps(path, &[(matrix, title)], names)?;
    Ok(layouts[0])
}

/// Writes heatmaps of square matrices of one dimension side by side (for example a
/// covariance and its correlation) to the PNG file `path`, each with its title and
/// its own colour bar, `names` on both axes of each; the layouts of the panels, in
/// picture coordinates (`width` and `height`: the whole picture's).
pub fn write_heatmaps(
    path: &Path,
    panels: &[(&DMatrix<f64>, &str)],
    names: Option<&[String]>,
) -> Result<Vec<Layout>, PlotError> {
    let Some((first, _)) = panels.first() else {
        return Err(PlotError::Empty);
    };
    let rows = first.nrows();
    for (matrix, _) in panels {
        let (r, c) = matrix.shape();
        if r != c || r != rows {
            return Err(PlotError::NotSquare { rows: r, cols: c });
        }
    }
    // Two panels share the width one had.
    let budget = if panels.len() > 1 { 560 } else { 720 };
    let cell = (budget / rows.max(1) as u32).clamp(3, 60);
    let grid = Grid {
        rows,
        cols: rows,
        cell_width: cell,
        cell_height: cell,
        row_labels: true,
    };
    let panels: Vec<PanelSpec<'_>> = panels
        .iter()
        .map(|&(m, title)| {
            let value: Box<dyn Fn(usize, usize) -> f64> = Box::new(move |i, j| m[(i, j)]);
            PanelSpec {
                grid: grid.clone(),
                value,
                title,
                row_names: names,
                col_names: names,
            }
        })
        .collect();
    draw(path, &panels)
}

/// Writes a vector (for instance the mean) as a one-row heatmap on the same diverging
/// scale to the PNG file `path`, with `names` (one per entry) under the cells.
pub fn write_vector(
    path: &Path,
    values: &[f64],
    title: &str,
    names: Option<&[String]>,
) -> Result<Layout, PlotError> {
    let cell = (720 / values.len().max(1) as u32).clamp(3, 60);
    let grid = Grid {
        rows: 1,
        cols: values.len(),
        cell_width: cell,
        cell_height: 40,
        row_labels: false,
    };
    let value: Box<dyn Fn(usize, usize) -> f64> = Box::new(|_, j| values[j]);
    let panel = PanelSpec {
        grid,
        value,
        title,
        row_names: None,
        col_names: names,
    };
    let layouts = draw(path, &[panel])?;
    Ok(layouts[0])
}

/// Writes principal components to the PNG file `path`: on the left a scree plot (one
/// bar per component, its explained-variance ratio, dark where the component stands
/// above the noise edge and grey where it does not), on the right the loadings as a
/// `p × K` heatmap with the variables' `names` on its rows and `PC1`… on its columns.
/// `ratios` holds each component's (explained-variance ratio, above the noise edge),
/// `loadings` one column per component.
pub fn write_components(
    path: &Path,
    ratios: &[(f64, bool)],
    loadings: &DMatrix<f64>,
    title: &str,
    names: Option<&[String]>,
) -> Result<Layout, PlotError> {
    let (p, k) = loadings.shape();
    if k != ratios.len() {
        return Err(PlotError::Names {
            given: ratios.len(),
            expected: k,
        });
    }
    if let Some(bad) = ratios.iter().position(|(r, _)| !r.is_finite()) {
        return Err(PlotError::NotFinite { row: 0, col: bad });
    }
    let pcs: Vec<String> = (1..=k).map(|c| format!("PC{c}")).collect();
    let cell = (560 / p.max(1) as u32).clamp(3, 40);
    let spec = PanelSpec {
        grid: Grid {
            rows: p,
            cols: k,
            cell_width: 48,
            cell_height: cell,
            row_labels: true,
        },
        value: Box::new(|i, j| loadings[(i, j)]),
        title: "loadings",
        row_names: names,
        col_names: Some(&pcs),
    };
    let text = font_available();
    let panel = measure(&spec, text)?;
    // The scree plot: bars 36 px wide in 48 px slots, as tall as the loadings' grid.
    let slot = 48u32;
    let scree_w = 20 + slot * k as u32 + 20;
    let title_h = if text { 10 + TITLE_SIZE + 12 } else { 10 };
    let width = scree_w + PANEL_GAP + panel.layout.width;
    let height =
        panel.layout.height.max(title_h + 200 + 40) + if text { TITLE_SIZE + 8 } else { 0 };
    let fail = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    // Everything moves down by a line for the figure's title.
    let shift = if text { TITLE_SIZE + 8 } else { 0 };
    let px = |v: u32| v as i32;
    let plot_top = shift + title_h;
    let plot_h = panel.layout.height.saturating_sub(title_h + 40).max(160);
    let top_ratio = ratios
        .iter()
        .map(|(r, _)| *r)
        .fold(0.0f64, f64::max)
        .max(1e-12);
    for (c, (ratio, above)) in ratios.iter().enumerate() {
        let h = ((ratio.max(0.0) / top_ratio) * f64::from(plot_h)).round() as u32;
        let x = 20 + slot * c as u32 + 6;
        let colour = if *above {
            RGBColor(33, 102, 172)
        } else {
            RGBColor(170, 170, 170)
        };
        let bar = Rectangle::new(
            [
                (px(x), px(plot_top + plot_h - h)),
                (px(x + slot - 12), px(plot_top + plot_h)),
            ],
            colour.filled(),
        );
        root.draw(&bar).map_err(|e| fail(&e))?;
    }
    let axis = PathElement::new(
        vec![
            (px(16), px(plot_top + plot_h)),
            (px(scree_w - 10), px(plot_top + plot_h)),
        ],
        BLACK,
    );
    root.draw(&axis).map_err(|e| fail(&e))?;
    if text {
        let font = ("sans-serif", LABEL_SIZE).into_font();
        let big = ("sans-serif", TITLE_SIZE).into_font();
        let at = |h: HPos, v: VPos| font.color(&BLACK).pos(Pos::new(h, v));
        root.draw(&Text::new(
            title.to_string(),
            (10, 6),
            big.color(&BLACK).pos(Pos::new(HPos::Left, VPos::Top)),
        ))
        .map_err(|e| fail(&e))?;
        root.draw(&Text::new(
            "explained variance (grey: within the noise)".to_string(),
            (px(20), px(shift + 10)),
            at(HPos::Left, VPos::Top),
        ))
        .map_err(|e| fail(&e))?;
        for (c, (ratio, _)) in ratios.iter().enumerate() {
            let x = 20 + slot * c as u32 + slot / 2;
            let h = ((ratio.max(0.0) / top_ratio) * f64::from(plot_h)).round() as u32;
            root.draw(&Text::new(
                format!("{:.0}%", 100.0 * ratio),
                (px(x), px(plot_top + plot_h - h) - 2),
                at(HPos::Center, VPos::Bottom),
            ))
            .map_err(|e| fail(&e))?;
            root.draw(&Text::new(
                pcs[c].clone(),
                (px(x), px(plot_top + plot_h + 4)),
                at(HPos::Center, VPos::Top),
            ))
            .map_err(|e| fail(&e))?;
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

/// The cells' shape.
#[derive(Clone)]
struct Grid {
    rows: usize,
    cols: usize,
    cell_width: u32,
    cell_height: u32,
    /// Whether rows carry labels (a matrix) or not (a vector).
    row_labels: bool,
}

/// Labels of one axis: the text of every `step`-th cell, written across the axis
/// (`vertical`: turned a quarter, for column names wider than their cells).
struct AxisLabels {
    texts: Vec<String>,
    step: usize,
    width: u32,
    vertical: bool,
}

const LABEL_SIZE: u32 = 12;
const TITLE_SIZE: u32 = 18;
const BAR_WIDTH: u32 = 16;
const MAX_NAME_CHARS: usize = 24;
/// Horizontal space between two panels.
const PANEL_GAP: u32 = 24;

/// One panel measured: its layout relative to its own top-left corner, its labels,
/// ticks and colour limit.
struct Panel {
    layout: Layout,
    col_labels: AxisLabels,
    row_labels: Option<AxisLabels>,
    tick_texts: Vec<String>,
    limit: f64,
    bar_h: u32,
}

/// Measures one panel of `grid` with values `value` and `title`.
fn measure(spec: &PanelSpec<'_>, text: bool) -> Result<Panel, PlotError> {
    let (grid, value, title) = (&spec.grid, spec.value.as_ref(), spec.title);
    let (rows, cols) = (grid.rows, grid.cols);
    if rows == 0 || cols == 0 {
        return Err(PlotError::Empty);
    }
    for (names, expected) in [(spec.col_names, cols), (spec.row_names, rows)] {
        if let Some(n) = names
            && n.len() != expected
        {
            return Err(PlotError::Names {
                given: n.len(),
                expected,
            });
        }
    }
    let mut limit = 0.0f64;
    for i in 0..rows {
        for j in 0..cols {
            let v = value(i, j);
            if !v.is_finite() {
                return Err(PlotError::NotFinite { row: i, col: j });
            }
            limit = limit.max(v.abs());
        }
    }
    let font = ("sans-serif", LABEL_SIZE).into_font();
    let measure_text = |s: &str| -> u32 {
        font.box_size(s)
            .map(|(w, _)| w)
            .unwrap_or(s.chars().count() as u32 * LABEL_SIZE * 3 / 5)
    };
    let shorten = |n: &[String]| -> Vec<String> {
        n.iter()
            .map(|s| s.chars().take(MAX_NAME_CHARS).collect())
            .collect()
    };
    let names: Option<Vec<String>> = spec.col_names.map(shorten);
    let row_names: Option<Vec<String>> = spec.row_names.map(shorten);
    let indices: Vec<String> = (1..=cols).map(|k| k.to_string()).collect();
    let row_indices: Vec<String> = (1..=rows).map(|k| k.to_string()).collect();
    let widest = |texts: &[String]| texts.iter().map(|s| measure_text(s)).max().unwrap_or(0);
    // Columns: names across the cells if each fits its cell, names turned a quarter
    // if a cell is as wide as a line of text, else indices every `step`-th.
    let col_labels = match &names {
        Some(n) if widest(n) + 2 <= grid.cell_width => AxisLabels {
            width: LABEL_SIZE,
            texts: n.clone(),
            step: 1,
            vertical: false,
        },
        Some(n) if grid.cell_width >= LABEL_SIZE + 2 => AxisLabels {
            width: widest(n),
            texts: n.clone(),
            step: 1,
            vertical: true,
        },
        _ => AxisLabels {
            width: LABEL_SIZE,
            step: (widest(&indices) + 6).div_ceil(grid.cell_width) as usize,
            texts: indices.clone(),
            vertical: false,
        },
    };
    // Rows: names (prefixed with the index when the columns show indices) if a cell is
    // tall enough for a line of text, else indices every `step`-th.
    let row_labels = if !grid.row_labels {
        None
    } else {
        let texts = match &row_names {
            Some(n) if grid.cell_height >= LABEL_SIZE - 2 => {
                if row_names != names || (col_labels.step == 1 && col_labels.texts == *n) {
                    n.clone()
                } else {
                    n.iter()
                        .enumerate()
                        .map(|(k, s)| format!("{} {s}", k + 1))
                        .collect()
                }
            }
            _ => row_indices.clone(),
        };
        let step = (LABEL_SIZE + 2).div_ceil(grid.cell_height) as usize;
        Some(AxisLabels {
            width: widest(&texts),
            texts,
            step,
            vertical: false,
        })
    };
    let grid_w = grid.cell_width * cols as u32;
    let grid_h = grid.cell_height * rows as u32;
    let bar_h = grid_h.max(120);
    let tick_texts: Vec<String> = [1.0, 0.5, 0.0, -0.5, -1.0]
        .iter()
        .map(|t| tick(t * limit, limit))
        .collect();
    let (left, top, bottom, right) = if text {
        (
            10 + row_labels.as_ref().map_or(0, |l| l.width + 6),
            10 + TITLE_SIZE + 12,
            10 + col_labels.width + 6,
            20 + BAR_WIDTH + 6 + widest(&tick_texts) + 10,
        )
    } else {
        (10, 10, 10, 20 + BAR_WIDTH + 10)
    };
    // Wide enough for the title, which starts at the grid's left edge.
    let title_width = if text {
        ("sans-serif", TITLE_SIZE)
            .into_font()
            .box_size(title)
            .map(|(w, _)| w)
            .unwrap_or(0)
    } else {
        0
    };
    let width = (left + grid_w + right).max(left + title_width + 10);
    let height = top + grid_h.max(bar_h) + bottom;
    Ok(Panel {
        layout: Layout {
            width,
            height,
            left,
            top,
            cell_width: grid.cell_width,
            cell_height: grid.cell_height,
            rows,
            cols,
            text,
        },
        col_labels,
        row_labels,
        tick_texts,
        limit,
        bar_h,
    })
}

/// One panel to draw: its cells, their values, its title and the names of its rows
/// and columns.
struct PanelSpec<'a> {
    grid: Grid,
    value: Box<dyn Fn(usize, usize) -> f64 + 'a>,
    title: &'a str,
    row_names: Option<&'a [String]>,
    col_names: Option<&'a [String]>,
}

/// Draws the panels side by side into one PNG; their layouts in picture coordinates.
fn draw(path: &Path, panels: &[PanelSpec<'_>]) -> Result<Vec<Layout>, PlotError> {
    let text = font_available();
    let measured: Vec<Panel> = panels
        .iter()
        .map(|spec| measure(spec, text))
        .collect::<Result<_, _>>()?;
    let width = measured.iter().map(|p| p.layout.width).sum::<u32>()
        + PANEL_GAP * (measured.len().saturating_sub(1)) as u32;
    let height = measured.iter().map(|p| p.layout.height).max().unwrap_or(0);
    let fail = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut layouts = Vec::with_capacity(measured.len());
    let mut x0 = 0;
    for (spec, panel) in panels.iter().zip(&measured) {
        let mut layout = panel.layout;
        layout.left += x0;
        draw_panel(&root, spec, panel, &layout).map_err(|e| fail(&e))?;
        // The picture's size, which a caller reads from any panel.
        layout.width = width;
        layout.height = height;
        layouts.push(layout);
        x0 += panel.layout.width + PANEL_GAP;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(layouts)
}

/// Draws one measured panel whose grid starts at `layout.left`, `layout.top`.
fn draw_panel<DB: DrawingBackend>(
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
                diverging_color(value(i, j), limit).filled(),
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

    // Colour bar: +limit at the top, −limit at the bottom.
    let bar_x = left + grid_w + 20;
    for y in 0..bar_h {
        let v = limit * (1.0 - 2.0 * f64::from(y) / f64::from(bar_h - 1));
        let line = Rectangle::new(
            [
                (px(bar_x), px(top + y)),
                (px(bar_x + BAR_WIDTH), px(top + y + 1)),
            ],
            diverging_color(v, limit).filled(),
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
        for (k, t) in panel.tick_texts.iter().enumerate() {
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

/// A colour-bar tick label: fixed point for moderate limits, scientific otherwise.
fn tick(v: f64, limit: f64) -> String {
    if limit == 0.0 || (0.01..1000.0).contains(&limit) {
        format!("{v:.3}")
    } else {
        format!("{v:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes an 8-bit RGB(A) PNG: (width, height, pixel accessor data, channels).
    fn decode(path: &Path) -> (u32, u32, Vec<u8>, usize) {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let channels = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("unexpected colour type {other:?}"),
        };
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf, channels)
    }

    fn pixel(img: &(u32, u32, Vec<u8>, usize), (x, y): (u32, u32)) -> (u8, u8, u8) {
        let (w, _, buf, c) = img;
        let k = (y as usize * *w as usize + x as usize) * c;
        (buf[k], buf[k + 1], buf[k + 2])
    }

    fn reddish((r, g, b): (u8, u8, u8)) -> bool {
        r > 150 && g < 100 && b < 100
    }

    fn bluish((r, g, b): (u8, u8, u8)) -> bool {
        b > 150 && r < 100 && g < 150
    }

    fn whiteish((r, g, b): (u8, u8, u8)) -> bool {
        r >= 245 && g >= 245 && b >= 245
    }

    #[test]
    fn heatmap_colours_follow_the_sign_and_size_matches() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("h.png");
        // +2 at (0, 1), −2 at (2, 3): limits ±2; (0, 4) is 0.
        let mut m = DMatrix::<f64>::identity(5, 5);
        for (i, j, v) in [(0, 1, 2.0), (2, 3, -2.0), (1, 4, 0.7)] {
            m[(i, j)] = v;
            m[(j, i)] = v;
        }
        let names: Vec<String> = ["a", "bb", "ccc", "d", "e"].map(String::from).to_vec();
        let layout = write_heatmap(&file, &m, "test", Some(&names)).unwrap();
        let img = decode(&file);
        assert_eq!((img.0, img.1), (layout.width, layout.height));
        assert_eq!(layout.cell_width, 60);
        for (i, j) in [(0, 1), (1, 0)] {
            let c = pixel(&img, layout.cell_center(i, j));
            assert!(reddish(c), "({i},{j}) = +max is {c:?}");
        }
        for (i, j) in [(2, 3), (3, 2)] {
            let c = pixel(&img, layout.cell_center(i, j));
            assert!(bluish(c), "({i},{j}) = −max is {c:?}");
        }
        let c = pixel(&img, layout.cell_center(0, 4));
        assert!(whiteish(c), "(0,4) = 0 is {c:?}");
        // The identity's diagonal is +½·max: between white and red.
        let (r, g, b) = pixel(&img, layout.cell_center(2, 2));
        assert!(
            r > 200 && g > 100 && g < 200 && b > 100 && b < 200,
            "{:?}",
            (r, g, b)
        );
    }

    #[test]
    fn heatmap_sizes_stay_sensible_from_2_to_200() {
        let dir = tempfile::tempdir().unwrap();
        for p in [2usize, 30, 200] {
            let file = dir.path().join(format!("h{p}.png"));
            let m = DMatrix::from_fn(p, p, |i, j| 0.5f64.powi((i as i32 - j as i32).abs()));
            let layout = write_heatmap(&file, &m, "banded", None).unwrap();
            let img = decode(&file);
            assert_eq!((img.0, img.1), (layout.width, layout.height));
            assert!(
                layout.width <= 1000 && layout.height <= 900,
                "{p}: {layout:?}"
            );
            assert!(layout.cell_width >= 3, "{p}: {layout:?}");
            assert!(reddish(pixel(&img, layout.cell_center(p - 1, p - 1))));
        }
    }

    #[test]
    fn a_long_title_widens_the_picture_to_fit() {
        let dir = tempfile::tempdir().unwrap();
        let m = DMatrix::<f64>::identity(2, 2);
        let short = write_heatmap(&dir.path().join("s.png"), &m, "c", None).unwrap();
        let title = "covariance of a-collection-with-a-long-id, n = 1000000, cv(diagonal=exempt)";
        let file = dir.path().join("l.png");
        let long = write_heatmap(&file, &m, title, None).unwrap();
        let img = decode(&file);
        assert_eq!((img.0, img.1), (long.width, long.height));
        if long.text {
            let font = ("sans-serif", TITLE_SIZE).into_font();
            let (w, _) = font.box_size(title).unwrap();
            assert!(long.width >= long.left + w, "{long:?}, title {w} px");
            assert!(long.width > short.width, "{long:?} vs {short:?}");
        } else {
            assert_eq!(long, short);
        }
        // Only the width changes: the grid stays where it was.
        assert_eq!(
            (long.left, long.top, long.height),
            (short.left, short.top, short.height)
        );
    }

    #[test]
    fn vector_as_one_row() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("v.png");
        let names: Vec<String> = ["x", "y", "z"].map(String::from).to_vec();
        let layout = write_vector(&file, &[-3.0, 0.0, 3.0], "mean", Some(&names)).unwrap();
        let img = decode(&file);
        assert_eq!((img.0, img.1), (layout.width, layout.height));
        assert_eq!((layout.rows, layout.cols), (1, 3));
        assert!(bluish(pixel(&img, layout.cell_center(0, 0))));
        assert!(whiteish(pixel(&img, layout.cell_center(0, 1))));
        assert!(reddish(pixel(&img, layout.cell_center(0, 2))));
    }

    #[test]
    fn bad_input_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("x.png");
        let m = DMatrix::<f64>::zeros(2, 3);
        assert_eq!(
            write_heatmap(&file, &m, "", None).unwrap_err().to_string(),
            "the matrix is 2×3, not square"
        );
        let mut m = DMatrix::<f64>::zeros(2, 2);
        m[(1, 0)] = f64::NAN;
        assert_eq!(
            write_heatmap(&file, &m, "", None).unwrap_err().to_string(),
            "entry (1, 0) is not finite"
        );
        let names = vec!["a".to_string()];
        assert_eq!(
            write_vector(&file, &[1.0, 2.0], "", Some(&names))
                .unwrap_err()
                .to_string(),
            "1 names for 2 variables"
        );
        assert!(matches!(
            write_vector(&file, &[], "", None),
            Err(PlotError::Empty)
        ));
        assert!(!file.exists());
    }

    #[test]
    fn diverging_scale_endpoints() {
        assert_eq!(diverging_color(0.0, 1.0), RGBColor(255, 255, 255));
        assert_eq!(diverging_color(1.0, 1.0), RGBColor(178, 24, 43));
        assert_eq!(diverging_color(-5.0, 1.0), RGBColor(33, 102, 172));
        assert_eq!(diverging_color(0.0, 0.0), RGBColor(255, 255, 255));
    }
}
