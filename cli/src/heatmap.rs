//! PNG heatmaps of a square (typically symmetric) matrix and of a vector, for looking
//! at a released covariance or correlation estimate and its mean.
//!
//! Colours follow a diverging scale centred at 0 for signed matrices ([`Scale`]):
//! white at 0, red for positive and blue for negative entries, with symmetric limits
//! ±max|a_ij| so that equal magnitudes get equal intensities; non-negative matrices
//! (standard errors) use a sequential scale from 0 (white) to the largest entry. A
//! colour bar with readable tick labels ([`tick_label`]) sits to the right of the
//! grid. An undefined entry (NaN) is a grey cell, explained by a note under its panel
//! ([`UNDEFINED_NOTE`]); the scale's limits ignore it. Axis labels are the variable
//! names (`x1 … xp` when none are given), ellipsised (`…`) when too long, turned a
//! quarter when wider than a cell, else 1-based indices, thinned when the cells are
//! too small to hold one label each. A banner (an estimate's verdict) can run across
//! the top of the picture, wrapped to its width.
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
    /// An entry is infinite (NaN is drawn, as undefined).
    #[error("entry ({row}, {col}) is infinite")]
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

/// The sequential colour of `value` on the scale 0 … `limit`: white at 0, linearly to
/// dark blue (8, 48, 107) at `limit`; values beyond the limits get the end colours.
pub fn sequential_color(value: f64, limit: f64) -> RGBColor {
    const DARK: (f64, f64, f64) = (8.0, 48.0, 107.0);
    let t = if limit > 0.0 {
        (value / limit).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let mix = |c: f64| (255.0 + (c - 255.0) * t).round() as u8;
    RGBColor(mix(DARK.0), mix(DARK.1), mix(DARK.2))
}

/// The colour of an undefined (NaN) cell: a neutral grey on either scale.
pub const UNDEFINED_COLOR: RGBColor = RGBColor(190, 190, 190);

/// The note under a panel holding undefined (NaN) cells.
pub const UNDEFINED_NOTE: &str = "grey: undefined, a variance not above the noise";

/// How a panel's values map to colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Signed values: [`diverging_color`] on ±max|a_ij|.
    Diverging,
    /// Non-negative values (standard errors): [`sequential_color`] on 0 … max a_ij.
    Sequential,
}

impl Scale {
    /// The colour of `value` on this scale with limit `limit`; grey for NaN.
    pub fn color(self, value: f64, limit: f64) -> RGBColor {
        match self {
            _ if value.is_nan() => UNDEFINED_COLOR,
            Scale::Diverging => diverging_color(value, limit),
            Scale::Sequential => sequential_color(value, limit),
        }
    }

    /// The colour bar's five tick values, top to bottom, as fractions of the limit.
    fn ticks(self) -> [f64; 5] {
        match self {
            Scale::Diverging => [1.0, 0.5, 0.0, -0.5, -1.0],
            Scale::Sequential => [1.0, 0.75, 0.5, 0.25, 0.0],
        }
    }
}

/// A line of text across the top of a picture, wrapped to its width: an estimate's
/// verdict, in dark red when it is a `warning`.
#[derive(Debug, Clone, Copy)]
pub struct Banner<'a> {
    /// The text (one line; wrapped at spaces when wider than the picture).
    pub text: &'a str,
    /// Whether to draw it as a warning (dark red) rather than plain (black).
    pub warning: bool,
}

/// One matrix of a picture of panels side by side ([`write_heatmaps`]).
#[derive(Debug, Clone, Copy)]
pub struct HeatmapPanel<'a> {
    /// The square matrix.
    pub matrix: &'a DMatrix<f64>,
    /// Its title, above it.
    pub title: &'a str,
    /// Its colour scale.
    pub scale: Scale,
}

/// A colour-bar tick label, readable: 3 significant digits, plain between 10⁻³ and
/// 10⁵ (`1350`, `676`, `0.5`, `0`), a compact exponent otherwise (`1.35e5`, `2e-4`).
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (1e-3..1e5).contains(&a) {
        let e = a.log10().floor() as i32;
        let unit = 10f64.powi(e - 2);
        let rounded = (v / unit).round() * unit;
        trim(format!("{:.*}", (2 - e).max(0) as usize, rounded))
    } else {
        let s = format!("{v:.2e}");
        match s.split_once('e') {
            Some((mantissa, exponent)) => format!("{}e{exponent}", trim(mantissa.to_string())),
            None => s,
        }
    }
}

/// Writes a heatmap of the square matrix `matrix` (p from 2 to a few hundred) on the
/// diverging scale to the PNG file `path`, with `title` above and `names` (one per
/// variable) on both axes. The picture is widened, when text is drawn, to hold the
/// whole title.
pub fn write_heatmap(
    path: &Path,
    matrix: &DMatrix<f64>,
    title: &str,
    names: Option<&[String]>,
) -> Result<Layout, PlotError> {
    let panel = HeatmapPanel {
        matrix,
        title,
        scale: Scale::Diverging,
    };
    let layouts = write_heatmaps(path, &[panel], names, None)?;
    Ok(layouts[0])
}

/// Writes heatmaps of square matrices of one dimension side by side (for example a
/// covariance and its correlation) to the PNG file `path`, each with its title, its
/// scale and its own colour bar, `names` on both axes of each, `banner` across the
/// top; the layouts of the panels, in picture coordinates (`width` and `height`: the
/// whole picture's).
pub fn write_heatmaps(
    path: &Path,
    panels: &[HeatmapPanel<'_>],
    names: Option<&[String]>,
    banner: Option<Banner<'_>>,
) -> Result<Vec<Layout>, PlotError> {
    let Some(first) = panels.first() else {
        return Err(PlotError::Empty);
    };
    let rows = first.matrix.nrows();
    for HeatmapPanel { matrix, .. } in panels {
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
        .map(|panel| {
            let m = panel.matrix;
            let value: Box<dyn Fn(usize, usize) -> f64> = Box::new(move |i, j| m[(i, j)]);
            PanelSpec {
                grid: grid.clone(),
                value,
                title: panel.title,
                scale: panel.scale,
                row_names: names,
                col_names: names,
            }
        })
        .collect();
    draw(path, &panels, banner)
}

/// Writes a vector (for instance the mean) as a one-row heatmap on the same diverging
/// scale to the PNG file `path`, with `names` (one per entry) under the cells and
/// `banner` across the top.
pub fn write_vector(
    path: &Path,
    values: &[f64],
    title: &str,
    names: Option<&[String]>,
    banner: Option<Banner<'_>>,
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
        scale: Scale::Diverging,
        row_names: None,
        col_names: names,
    };
    let layouts = draw(path, &[panel], banner)?;
    Ok(layouts[0])
}

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
    let fail = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    draw_banner(&root, banner, &lines).map_err(|e| fail(&e))?;
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
const BANNER_SIZE: u32 = 14;
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
    /// Whether some cell is undefined (NaN): the note goes under the panel, at
    /// `note_y`.
    undefined: bool,
    note_y: u32,
}

/// `name`, cut to [`MAX_NAME_CHARS`] characters with an ellipsis when longer.
fn ellipsise(name: &str) -> String {
    if name.chars().count() > MAX_NAME_CHARS {
        name.chars().take(MAX_NAME_CHARS - 1).chain(['…']).collect()
    } else {
        name.to_string()
    }
}

/// The names of unnamed variables: `x1 … xn`.
fn default_names(n: usize) -> Vec<String> {
    (1..=n).map(|k| format!("x{k}")).collect()
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
    // NaN is undefined (a grey cell) and outside the scale's limits.
    let (mut limit, mut undefined) = (0.0f64, false);
    for i in 0..rows {
        for j in 0..cols {
            let v = value(i, j);
            if v.is_infinite() {
                return Err(PlotError::NotFinite { row: i, col: j });
            }
            undefined |= v.is_nan();
            if !v.is_nan() {
                limit = limit.max(v.abs());
            }
        }
    }
    let font = ("sans-serif", LABEL_SIZE).into_font();
    let measure_text = |s: &str| -> u32 {
        font.box_size(s)
            .map(|(w, _)| w)
            .unwrap_or(s.chars().count() as u32 * LABEL_SIZE * 3 / 5)
    };
    let shorten = |n: &[String]| -> Vec<String> { n.iter().map(|s| ellipsise(s)).collect() };
    // Unnamed variables are `x1 … xp`, which then also stand for the indices.
    let names: Option<Vec<String>> =
        Some(spec.col_names.map_or_else(|| default_names(cols), shorten));
    let row_names: Option<Vec<String>> =
        Some(spec.row_names.map_or_else(|| default_names(rows), shorten));
    let unnamed = spec.col_names.is_none() && spec.row_names.is_none();
    let index_texts = |n: usize| -> Vec<String> {
        if unnamed {
            default_names(n)
        } else {
            (1..=n).map(|k| k.to_string()).collect()
        }
    };
    let indices = index_texts(cols);
    let row_indices = index_texts(rows);
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
                if unnamed || row_names != names || (col_labels.step == 1 && col_labels.texts == *n)
                {
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
    // An all-zero panel's bar reads one 0, not five.
    let tick_texts: Vec<String> = spec
        .scale
        .ticks()
        .iter()
        .map(|&t| {
            if limit > 0.0 || t == 0.0 {
                tick_label(t * limit)
            } else {
                String::new()
            }
        })
        .collect();
    let note_h = if undefined { LABEL_SIZE + 8 } else { 0 };
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
    let note_width = if text && undefined {
        measure_text(UNDEFINED_NOTE)
    } else {
        0
    };
    let width = (left + grid_w + right)
        .max(left + title_width + 10)
        .max(left + note_width + 10);
    // The note, when there is one, under everything else.
    let note_y = top + grid_h.max(bar_h) + bottom;
    let height = note_y + if text { note_h } else { 0 };
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
        undefined,
        note_y,
    })
}

/// One panel to draw: its cells, their values, its title and the names of its rows
/// and columns.
struct PanelSpec<'a> {
    grid: Grid,
    value: Box<dyn Fn(usize, usize) -> f64 + 'a>,
    title: &'a str,
    scale: Scale,
    row_names: Option<&'a [String]>,
    col_names: Option<&'a [String]>,
}

/// `text` cut at spaces into lines at most `width` pixels wide in `font` (a word
/// wider than that stays whole on its line).
fn wrap(text: &str, width: u32, font: &FontDesc<'_>) -> Vec<String> {
    let fits = |s: &str| font.box_size(s).map_or(true, |(w, _)| w <= width);
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let longer = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if line.is_empty() || fits(&longer) {
            line = longer;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// The banner's lines for a picture `width` pixels wide and the height they take
/// (none without text).
fn banner_lines(banner: Option<Banner<'_>>, width: u32, text: bool) -> (Vec<String>, u32) {
    match banner {
        Some(b) if text => {
            let font = ("sans-serif", BANNER_SIZE).into_font();
            let lines = wrap(b.text, width.saturating_sub(20).max(200), &font);
            let h = 8 + lines.len() as u32 * (BANNER_SIZE + 4);
            (lines, h)
        }
        _ => (Vec::new(), 0),
    }
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
fn draw(
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
    let fail = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    draw_banner(&root, banner, &lines).map_err(|e| fail(&e))?;
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
        let layout = write_vector(&file, &[-3.0, 0.0, 3.0], "mean", Some(&names), None).unwrap();
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
        m[(1, 0)] = f64::INFINITY;
        assert_eq!(
            write_heatmap(&file, &m, "", None).unwrap_err().to_string(),
            "entry (1, 0) is infinite"
        );
        let names = vec!["a".to_string()];
        assert_eq!(
            write_vector(&file, &[1.0, 2.0], "", Some(&names), None)
                .unwrap_err()
                .to_string(),
            "1 names for 2 variables"
        );
        assert!(matches!(
            write_vector(&file, &[], "", None, None),
            Err(PlotError::Empty)
        ));
        assert!(!file.exists());
    }

    #[test]
    fn tick_labels_are_readable_numbers() {
        let cases = [
            (1352.7, "1350"),
            (676.35, "676"),
            (0.0, "0"),
            (-0.0, "0"),
            (0.5, "0.5"),
            (-0.675, "-0.675"),
            (12345.0, "12300"),
            (0.001234, "0.00123"),
            (1.352e5, "1.35e5"),
            (2e-4, "2e-4"),
            (-3.5e-7, "-3.5e-7"),
            (1.0, "1"),
        ];
        for (v, want) in cases {
            assert_eq!(tick_label(v), want, "{v}");
        }
    }

    fn spec<'a>(m: &'a DMatrix<f64>, names: Option<&'a [String]>, scale: Scale) -> PanelSpec<'a> {
        PanelSpec {
            grid: Grid {
                rows: m.nrows(),
                cols: m.ncols(),
                cell_width: 60,
                cell_height: 60,
                row_labels: true,
            },
            value: Box::new(|i, j| m[(i, j)]),
            title: "t",
            scale,
            row_names: names,
            col_names: names,
        }
    }

    #[test]
    fn long_names_are_ellipsised_and_unnamed_variables_are_x1_to_xp() {
        let m = DMatrix::<f64>::identity(2, 2);
        let long = "systolic_blood_pressure_in_the_morning_mmhg".to_string();
        let names = [long.clone(), "weight".to_string()];
        let panel = measure(&spec(&m, Some(&names), Scale::Diverging), false).unwrap();
        let rows = panel.row_labels.unwrap().texts;
        let first = rows[0].strip_suffix('…').expect("an ellipsis");
        assert!(long.starts_with(first), "{rows:?}");
        assert_eq!(rows[0].chars().count(), MAX_NAME_CHARS);
        assert!(rows[1].ends_with("weight"), "{rows:?}");
        let panel = measure(&spec(&m, None, Scale::Diverging), false).unwrap();
        assert_eq!(panel.col_labels.texts, ["x1", "x2"]);
        assert_eq!(panel.row_labels.unwrap().texts, ["x1", "x2"]);
    }

    #[test]
    fn standard_errors_get_a_sequential_scale_from_zero() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("se.png");
        let m = DMatrix::from_row_slice(2, 2, &[0.0, 2.0, 2.0, 1.0]);
        let panel = HeatmapPanel {
            matrix: &m,
            title: "standard errors",
            scale: Scale::Sequential,
        };
        let layout = write_heatmaps(&file, &[panel], None, None).unwrap()[0];
        let img = decode(&file);
        assert!(whiteish(pixel(&img, layout.cell_center(0, 0))));
        let (r, g, b) = pixel(&img, layout.cell_center(0, 1));
        assert_eq!(RGBColor(r, g, b), sequential_color(2.0, 2.0));
        // The colour bar runs from the largest entry (top) to 0 (bottom, white): no
        // half left unused below 0.
        let bar_x = layout.left + 2 * layout.cell_width + 20 + BAR_WIDTH / 2;
        let bar_h = (2 * layout.cell_height).max(120);
        assert!(whiteish(pixel(&img, (bar_x, layout.top + bar_h - 2))));
        let top = pixel(&img, (bar_x, layout.top + 1));
        let near = |a: u8, b: u8| a.abs_diff(b) <= 4;
        assert!(
            near(top.0, r) && near(top.1, g) && near(top.2, b),
            "the bar's top {top:?} is the largest entry's colour {:?}",
            (r, g, b)
        );
        let ticks: Vec<String> = Scale::Sequential
            .ticks()
            .iter()
            .map(|t| tick_label(t * 2.0))
            .collect();
        assert_eq!(ticks, ["2", "1.5", "1", "0.5", "0"]);
    }

    #[test]
    fn undefined_entries_are_grey_and_off_the_scale() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("nan.png");
        let nan = f64::NAN;
        let m = DMatrix::from_row_slice(3, 3, &[1.0, nan, 0.5, nan, 1.0, -0.5, 0.5, -0.5, 1.0]);
        let layout = write_heatmap(&file, &m, "correlation", None).unwrap();
        let img = decode(&file);
        let grey = (UNDEFINED_COLOR.0, UNDEFINED_COLOR.1, UNDEFINED_COLOR.2);
        assert_eq!(pixel(&img, layout.cell_center(0, 1)), grey);
        assert_eq!(pixel(&img, layout.cell_center(1, 0)), grey);
        // The limit is the largest defined entry, 1: the diagonal is full red.
        let (r, g, b) = pixel(&img, layout.cell_center(2, 2));
        assert_eq!(RGBColor(r, g, b), diverging_color(1.0, 1.0));
        let defined = DMatrix::<f64>::identity(3, 3);
        let plain =
            write_heatmap(&dir.path().join("plain.png"), &defined, "correlation", None).unwrap();
        if layout.text {
            // The note's line under the panel.
            assert!(layout.height > plain.height, "{layout:?} vs {plain:?}");
        }
        let all_nan = DMatrix::from_element(2, 2, nan);
        write_heatmap(&dir.path().join("all.png"), &all_nan, "c", None).unwrap();
    }

    #[test]
    fn a_banner_wraps_above_the_panels() {
        let registered = font_available();
        let font = ("sans-serif", BANNER_SIZE).into_font();
        let text = "insufficient: the noise is 37× the signal and no correlation stands out \
                    of it; about 5 400 000 reports (have 2000) would halve it";
        let lines = wrap(text, 300, &font);
        if registered {
            assert!(lines.len() > 1, "{lines:?}");
            for line in &lines {
                assert!(font.box_size(line).unwrap().0 <= 300, "{line}");
            }
        }
        assert_eq!(
            lines.join(" "),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        );
        let dir = tempfile::tempdir().unwrap();
        let m = DMatrix::<f64>::zeros(3, 3);
        let panel = HeatmapPanel {
            matrix: &m,
            title: "covariance",
            scale: Scale::Diverging,
        };
        let banner = Banner {
            text,
            warning: true,
        };
        let plain = write_heatmaps(&dir.path().join("a.png"), &[panel], None, None).unwrap()[0];
        let file = dir.path().join("b.png");
        let with = write_heatmaps(&file, &[panel], None, Some(banner)).unwrap()[0];
        let img = decode(&file);
        assert_eq!((img.0, img.1), (with.width, with.height));
        if with.text {
            assert!(with.top > plain.top, "{with:?} vs {plain:?}");
            assert_eq!(with.height - plain.height, with.top - plain.top);
        }
        assert!(whiteish(pixel(&img, with.cell_center(1, 1))));
    }

    #[test]
    fn the_scree_captions_stay_clear_of_the_loadings() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pca.png");
        let loadings = DMatrix::from_fn(10, 3, |i, j| if i == j { 1.0 } else { 0.0 });
        let bars = [
            ScreeBar {
                ratio: 0.6,
                above_noise_edge: true,
                raw_eigenvalue: Some(1352.0),
            },
            ScreeBar {
                ratio: 0.3,
                above_noise_edge: false,
                raw_eigenvalue: Some(676.0),
            },
            ScreeBar {
                ratio: 0.1,
                above_noise_edge: false,
                raw_eigenvalue: None,
            },
        ];
        let banner = Banner {
            text: "sufficient",
            warning: false,
        };
        let layout =
            write_components(&file, &bars, 700.0, &loadings, "pcs", None, Some(banner)).unwrap();
        let img = decode(&file);
        assert_eq!((img.0, img.1), (layout.width, layout.height));
        assert_eq!((layout.rows, layout.cols), (10, 3));
        assert!(reddish(pixel(&img, layout.cell_center(1, 1))));
        if layout.text {
            let font = ("sans-serif", LABEL_SIZE).into_font();
            let caption = font
                .box_size("explained variance (grey: within the noise)")
                .unwrap()
                .0;
            let loadings_title = ("sans-serif", TITLE_SIZE)
                .into_font()
                .box_size("loadings (10 × 3)")
                .unwrap()
                .0;
            // The loadings' title starts at its grid's left edge, right of the caption.
            assert!(
                layout.left > 20 + caption + PANEL_GAP,
                "{layout:?}, caption {caption}"
            );
            assert!(layout.width >= layout.left + loadings_title, "{layout:?}");
        }
    }

    #[test]
    fn diverging_scale_endpoints() {
        assert_eq!(diverging_color(0.0, 1.0), RGBColor(255, 255, 255));
        assert_eq!(diverging_color(1.0, 1.0), RGBColor(178, 24, 43));
        assert_eq!(diverging_color(-5.0, 1.0), RGBColor(33, 102, 172));
        assert_eq!(diverging_color(0.0, 0.0), RGBColor(255, 255, 255));
    }
}
