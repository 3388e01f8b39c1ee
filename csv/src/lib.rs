//! The CSV dialect of ldpcov's data files, in one small crate with no other ldpcov
//! dependency: the lab's data reader (`ldpcov_lab::data`, data files as simulated
//! users) streams whole files with [`CsvRows`], and `ldpcov-aggregator estimate
//! --names-from FILE` reads only the header with [`read_csv_header`], so that a
//! heatmap's axis names are exactly the column names the data reader sees.
//!
//! The dialect is RFC 4180 as spreadsheets and pandas (`df.to_csv(index=False)`)
//! write it, parsed by the `csv` crate:
//!
//! * **Delimiter**: `,`; a file whose first non-blank record holds no comma outside
//!   double quotes but a `;` or a tab uses that instead ([`CsvDialect::detect`]).
//! * **Quotes**: a cell in double quotes may hold the delimiter, line breaks and
//!   doubled quotes (`"say ""hi"""` is `say "hi"`). Cells are trimmed; spaces before
//!   an opening quote are allowed (`a, "b c"`), but a cell holding the delimiter must
//!   then start with its quote.
//! * **Lines**: `\n` or `\r\n`; a leading UTF-8 byte order mark is dropped; blank
//!   lines (whitespace only) are skipped; every record carries the line it starts on.
//! * **Header**: the first non-blank record is a header when any of its cells is
//!   non-empty and not a number ([`is_csv_header`]).
//!
//! ```
//! use ldpcov_csv::{CsvDialect, CsvRows, is_csv_header};
//!
//! // What pandas writes for a column named `income, annual` (with a UTF-8 BOM, as
//! // `encoding="utf-8-sig"` does, and Windows line endings).
//! let file = b"\xef\xbb\xbf\"income, annual\",age\r\n52000.5,34\r\n\r\n61000,51\r\n";
//! let mut rows = CsvRows::new(&file[..])?;
//! assert_eq!(rows.dialect(), CsvDialect { delimiter: ',' });
//! let header = rows.next().transpose()?.expect("a first record");
//! assert_eq!(header.cells, ["income, annual", "age"]);
//! assert!(is_csv_header(&header.cells));
//! let data: Vec<_> = rows.collect::<Result<_, _>>()?;
//! assert_eq!(data[1].line, 4);
//! assert_eq!(data[1].cells, ["61000", "51"]);
//! assert!(!is_csv_header(&data[0].cells));
//!
//! // One record in a known dialect.
//! let dialect = CsvDialect::detect("height;weight;\"age\"");
//! assert_eq!(dialect.split("height; weight;\"age; years\""), ["height", "weight", "age; years"]);
//! # Ok::<(), ldpcov_csv::CsvError>(())
//! ```

mod dialect;
mod reader;

pub use dialect::{CsvDialect, UTF8_BOM, is_csv_header, strip_bom};
pub use reader::{CsvError, CsvHeaderError, CsvRow, CsvRows, read_csv_header};
