//! The ldpcov command line: the `ldpcov-aggregator` binary (the daemon, `serve`, and
//! the admin commands), and the presentation of what it fetches, as a library:
//!
//! * writing an estimate as JSON, CSV or NPY ([`write_estimate`]) and PNG heatmaps of a
//!   matrix or a vector ([`write_heatmap`], [`write_vector`]; the matrix an estimate's
//!   picture shows: [`part_matrix`]);
//! * the CSV dialect of data files (`ldpcov-csv`, re-exported: [`CsvDialect`],
//!   [`read_csv_header`] for a heatmap's axis names, [`strip_bom`] for names given
//!   on the command line).
//!
//! The binary's subcommands are [`command`] (`command::main` is the binary's `main`).
//! The server itself is the `ldpcov-aggregator` library; this crate only talks to it.
//!
//! ```
//! use ldpcov_aggregator_cli::{CsvDialect, is_csv_header};
//!
//! let dialect = CsvDialect::detect("a;b;c");
//! let cells = dialect.split("height;weight;age");
//! assert!(is_csv_header(&cells));
//! ```

pub mod command;
mod heatmap;
mod output;

pub use heatmap::{
    Banner, FONT_ENV, HeatmapPanel, Layout, PlotError, Scale, ScreeBar, UNDEFINED_COLOR,
    UNDEFINED_NOTE, diverging_color, font_available, sequential_color, tick_label,
    write_components, write_heatmap, write_heatmaps, write_vector,
};
pub use ldpcov_csv::{CsvDialect, CsvHeaderError, is_csv_header, read_csv_header, strip_bom};
pub use output::{
    Format, Part, component_loadings, mean_vector, part_matrix, plot_title, raw_eigenvalues,
    short_rule, variable_names, write_estimate, write_part,
};
