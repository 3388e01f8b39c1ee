//! Measuring a picture before it is drawn: the cells' size, the axis labels (names
//! ellipsised, turned a quarter or thinned), the colour bar's ticks, the title and the
//! banner wrapped to the picture's width.

use plotters::prelude::*;

use super::colour::{Scale, UNDEFINED_NOTE, tick_label};
use super::{Banner, Layout, PlotError};

/// The cells' shape.
#[derive(Clone)]
pub(super) struct Grid {
    pub(super) rows: usize,
    pub(super) cols: usize,
    pub(super) cell_width: u32,
    pub(super) cell_height: u32,
    /// Whether rows carry labels (a matrix) or not (a vector).
    pub(super) row_labels: bool,
}

/// Labels of one axis: the text of every `step`-th cell, written across the axis
/// (`vertical`: turned a quarter, for column names wider than their cells).
pub(super) struct AxisLabels {
    pub(super) texts: Vec<String>,
    pub(super) step: usize,
    pub(super) width: u32,
    pub(super) vertical: bool,
}

pub(super) const LABEL_SIZE: u32 = 12;
pub(super) const TITLE_SIZE: u32 = 18;
pub(super) const BANNER_SIZE: u32 = 14;
pub(super) const BAR_WIDTH: u32 = 16;
pub(super) const MAX_NAME_CHARS: usize = 24;
/// Horizontal space between two panels.
pub(super) const PANEL_GAP: u32 = 24;

/// One panel measured: its layout relative to its own top-left corner, its labels,
/// ticks and colour limit.
pub(super) struct Panel {
    pub(super) layout: Layout,
    pub(super) col_labels: AxisLabels,
    pub(super) row_labels: Option<AxisLabels>,
    pub(super) tick_texts: Vec<String>,
    pub(super) limit: f64,
    pub(super) bar_h: u32,
    /// Whether some cell is undefined (NaN): the note goes under the panel, at
    /// `note_y`.
    pub(super) undefined: bool,
    pub(super) note_y: u32,
}

/// `name`, cut to [`MAX_NAME_CHARS`] characters with an ellipsis when longer.
pub(super) fn ellipsise(name: &str) -> String {
    if name.chars().count() > MAX_NAME_CHARS {
        name.chars().take(MAX_NAME_CHARS - 1).chain(['…']).collect()
    } else {
        name.to_string()
    }
}

/// The names of unnamed variables: `x1 … xn`.
pub(super) fn default_names(n: usize) -> Vec<String> {
    (1..=n).map(|k| format!("x{k}")).collect()
}

/// Measures one panel of `grid` with values `value` and `title`.
pub(super) fn measure(spec: &PanelSpec<'_>, text: bool) -> Result<Panel, PlotError> {
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
pub(super) struct PanelSpec<'a> {
    pub(super) grid: Grid,
    pub(super) value: Box<dyn Fn(usize, usize) -> f64 + 'a>,
    pub(super) title: &'a str,
    pub(super) scale: Scale,
    pub(super) row_names: Option<&'a [String]>,
    pub(super) col_names: Option<&'a [String]>,
}

/// `text` cut at spaces into lines at most `width` pixels wide in `font` (a word
/// wider than that stays whole on its line).
pub(super) fn wrap(text: &str, width: u32, font: &FontDesc<'_>) -> Vec<String> {
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
pub(super) fn banner_lines(
    banner: Option<Banner<'_>>,
    width: u32,
    text: bool,
) -> (Vec<String>, u32) {
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
