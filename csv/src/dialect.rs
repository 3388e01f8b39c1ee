//! The CSV dialect of ldpcov's data files, in one place: the lab's data reader
//! (`ldpcov_lab::data`) parses whole files with it, and `ldpcov-aggregator estimate
//! --names-from FILE` reads only the header line with [`read_csv_header`], so that a
//! heatmap's axis names are exactly the column names the data reader sees.
//!
//! The dialect: comma-separated; a file whose first non-blank line contains no comma
//! but a `;` or a tab uses that delimiter instead. Cells are trimmed and may be wrapped
//! in double quotes (no escaped quotes or embedded delimiters). Blank lines are
//! skipped. The first non-blank row is a header when any of its cells is non-empty
//! and not a number.

use std::io::BufRead;
use std::path::Path;
use thiserror::Error;

/// How the lines of one file are split into cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvDialect {
    /// `,`, `;` or a tab.
    pub delimiter: char,
}

impl CsvDialect {
    /// The dialect of a file whose first non-blank line is `first_line`: `,` if it holds
    /// one, else `;`, else a tab, else `,` (a single column).
    pub fn detect(first_line: &str) -> Self {
        let delimiter = [',', ';', '\t']
            .into_iter()
            .find(|d| first_line.contains(*d))
            .unwrap_or(',');
        CsvDialect { delimiter }
    }

    /// The cells of `line`: split at the delimiter, trimmed, one pair of surrounding
    /// double quotes removed (and the inside trimmed again).
    pub fn split(&self, line: &str) -> Vec<String> {
        line.split(self.delimiter)
            .map(|c| {
                let c = c.trim();
                let c = c
                    .strip_prefix('"')
                    .and_then(|c| c.strip_suffix('"'))
                    .unwrap_or(c);
                c.trim().to_string()
            })
            .collect()
    }
}

/// Whether the first row's `cells` are a header: some cell is non-empty and not a
/// number.
pub fn is_csv_header(cells: &[String]) -> bool {
    cells
        .iter()
        .any(|c| !c.is_empty() && c.parse::<f64>().is_err())
}

/// Why a header could not be read. Every message is one line.
#[derive(Debug, Error)]
pub enum CsvHeaderError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's reason.
        message: String,
    },
    /// The file holds only blank lines.
    #[error("{path}: empty file: no header")]
    Empty {
        /// The file.
        path: String,
    },
    /// The first non-blank line is not valid UTF-8.
    #[error("{path}: line {line}: not valid UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
    },
    /// The first non-blank line is numbers: the file has no header.
    #[error("{path}: line {line} is data, not a header: the file has no column names")]
    NoHeader {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
    },
}

/// The column names of the CSV file `path`: its first non-blank line, split in the
/// file's dialect. Reads only up to that line. Refuses a file without a header.
pub fn read_csv_header(path: &Path) -> Result<Vec<String>, CsvHeaderError> {
    let shown = || path.display().to_string();
    let io = |e: std::io::Error| CsvHeaderError::Io {
        path: shown(),
        message: e.to_string(),
    };
    let mut reader = std::io::BufReader::new(std::fs::File::open(path).map_err(io)?);
    let mut bytes = Vec::new();
    for line in 1.. {
        bytes.clear();
        if reader.read_until(b'\n', &mut bytes).map_err(io)? == 0 {
            return Err(CsvHeaderError::Empty { path: shown() });
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| CsvHeaderError::NotUtf8 {
                path: shown(),
                line,
            })?
            .trim_end_matches(['\n', '\r']);
        if text.trim().is_empty() {
            continue;
        }
        let cells = CsvDialect::detect(text).split(text);
        return if is_csv_header(&cells) {
            Ok(cells)
        } else {
            Err(CsvHeaderError::NoHeader {
                path: shown(),
                line,
            })
        };
    }
    unreachable!("the loop returns at the end of the file")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialect_and_header_detection() {
        assert_eq!(CsvDialect::detect("a;b,c").delimiter, ',');
        assert_eq!(CsvDialect::detect("a;b").delimiter, ';');
        assert_eq!(CsvDialect::detect("a\tb").delimiter, '\t');
        assert_eq!(CsvDialect::detect("a").delimiter, ',');
        let d = CsvDialect::detect("x");
        assert_eq!(d.split(" a , \" b c \" ,"), vec!["a", "b c", ""]);
        assert!(is_csv_header(&d.split("1,height")));
        assert!(!is_csv_header(&d.split("1,,2e3")));
    }

    #[test]
    fn header_of_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let p = write("ok.csv", b"\n  \r\nheight; \"weight\"\r\n1;2\n");
        assert_eq!(read_csv_header(&p).unwrap(), vec!["height", "weight"]);
        let p = write("data.csv", b"\n1,2\n");
        let shown = p.display().to_string();
        assert_eq!(
            read_csv_header(&p).unwrap_err().to_string(),
            format!("{shown}: line 2 is data, not a header: the file has no column names")
        );
        let p = write("empty.csv", b"\n\n");
        assert!(
            read_csv_header(&p)
                .unwrap_err()
                .to_string()
                .ends_with("empty file: no header")
        );
        let p = write("bad.csv", b"a,\xff\n");
        assert!(
            read_csv_header(&p)
                .unwrap_err()
                .to_string()
                .ends_with("line 1: not valid UTF-8 text")
        );
        let missing = dir.path().join("missing.csv");
        assert!(
            read_csv_header(&missing)
                .unwrap_err()
                .to_string()
                .starts_with(&format!("cannot read {}: ", missing.display()))
        );
    }
}
