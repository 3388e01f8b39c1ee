//! The CSV dialect of ldpcov's data files, in one small crate with no other ldpcov
//! dependency: the lab's data reader (`ldpcov_lab::data`, data files as simulated
//! users) parses whole files with it, and `ldpcov-aggregator estimate --names-from
//! FILE` reads only the header line with [`read_csv_header`], so that a heatmap's axis
//! names are exactly the column names the data reader sees.
//!
//! ```
//! use ldpcov_csv::{CsvDialect, is_csv_header};
//!
//! let dialect = CsvDialect::detect("height;weight;\"age\"");
//! assert_eq!(dialect.delimiter, ';');
//! let cells = dialect.split("height; weight;\"age\"");
//! assert_eq!(cells, ["height", "weight", "age"]);
//! assert!(is_csv_header(&cells));
//! assert!(!is_csv_header(&dialect.split("1.5;2;3")));
//! ```

mod dialect;

pub use dialect::{CsvDialect, CsvHeaderError, is_csv_header, read_csv_header};
