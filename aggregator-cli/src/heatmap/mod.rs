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
//! let layout = ldpcov_aggregator_cli::write_heatmap(
//!     Path::new("cov.png"), &m, "covariance", Some(&names))?;
//! assert_eq!(layout.rows, 2);
//! # Ok::<(), ldpcov_aggregator_cli::PlotError>(())
//! ```

mod colour;
mod components;
mod draw;
mod font;
mod layout;

use nalgebra::DMatrix;
use std::path::Path;
use thiserror::Error;

pub use colour::{
    Scale, UNDEFINED_COLOR, UNDEFINED_NOTE, diverging_color, sequential_color, tick_label,
};
pub use components::{ScreeBar, write_components};
use draw::draw;
pub use font::{FONT_ENV, font_available};
use layout::{Grid, PanelSpec};

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

#[cfg(test)]
mod tests;
