//! Streaming a file's records ([`CsvRows`]) and reading its header alone
//! ([`read_csv_header`]).

use std::io::{BufRead, BufReader, Chain, Cursor, Read};
use std::path::Path;

use thiserror::Error;

use crate::dialect::{CsvDialect, UTF8_BOM, clean_cell, is_csv_header};

/// One non-blank record of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvRow {
    /// The line the record starts on (1-based, as an editor shows it; a record with a
    /// quoted line break spans more than one line).
    pub line: usize,
    /// Its cells, trimmed and unquoted.
    pub cells: Vec<String>,
}

/// Why the records of a file could not be read. Every message is one line; the caller
/// names the file.
#[derive(Debug, Error)]
pub enum CsvError {
    /// Reading failed (an I/O error of the source).
    #[error("line {line}: cannot read: {message}")]
    Read {
        /// The line being read (1-based).
        line: usize,
        /// The reason.
        message: String,
    },
    /// A record is not valid UTF-8.
    #[error("line {line}: not valid UTF-8 text")]
    NotUtf8 {
        /// The line the record starts on (1-based).
        line: usize,
    },
}

/// What the csv reader reads: the bytes read ahead to detect the dialect, the rest,
/// and a final line break (so that every record ends with one: see `next`).
type Source<R> = Chain<Chain<Cursor<Vec<u8>>, BufReader<R>>, &'static [u8]>;

/// The non-blank records of a CSV source, read as they are needed (the source is never
/// held whole in memory), in the dialect of its first record.
pub struct CsvRows<R: Read> {
    reader: csv::Reader<Source<R>>,
    dialect: CsvDialect,
    record: csv::ByteRecord,
}

impl<R: Read> CsvRows<R> {
    /// Reads `source` up to the end of its first non-blank record (dropping a leading
    /// UTF-8 byte order mark), detects the dialect on that record, and is ready to
    /// yield the records from the first.
    pub fn new(source: R) -> Result<Self, CsvError> {
        let mut source = BufReader::new(source);
        let (ahead, first_start) = read_first_record(&mut source)?;
        let dialect = CsvDialect::detect(&String::from_utf8_lossy(&ahead[first_start..]));
        Ok(Self::from_parts(Cursor::new(ahead).chain(source), dialect))
    }

    /// The dialect of the records.
    pub fn dialect(&self) -> CsvDialect {
        self.dialect
    }

    fn from_parts(source: Chain<Cursor<Vec<u8>>, BufReader<R>>, dialect: CsvDialect) -> Self {
        // The delimiter is one of `,`, `;`, a tab: ASCII.
        let mut delimiter = [0u8; 4];
        let delimiter = dialect.delimiter.encode_utf8(&mut delimiter).as_bytes()[0];
        let reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            // Ragged rows are the caller's to refuse, with both lines named.
            .flexible(true)
            // `\r\n` ends a line too: the `\r` is trimmed off the last cell.
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(source.chain(&b"\n"[..]));
        CsvRows {
            reader,
            dialect,
            record: csv::ByteRecord::new(),
        }
    }
}

impl<'a> CsvRows<&'a [u8]> {
    /// The records of `bytes` in a known dialect (for [`CsvDialect::split`]).
    pub(crate) fn with_dialect(bytes: &'a [u8], dialect: CsvDialect) -> Self {
        Self::from_parts(
            Cursor::new(Vec::new()).chain(BufReader::new(bytes)),
            dialect,
        )
    }
}

impl<R: Read> Iterator for CsvRows<R> {
    type Item = Result<CsvRow, CsvError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.reader.read_byte_record(&mut self.record) {
                Ok(false) => return None,
                Ok(true) => {}
                Err(e) => {
                    return Some(Err(CsvError::Read {
                        line: self.reader.position().line() as usize,
                        message: e.to_string(),
                    }));
                }
            }
            // The reader counts the line breaks it consumed, the skipped empty lines'
            // too, and has just consumed this record's final one: the record started
            // that many lines back, less those inside its quoted cells.
            let inside = self
                .record
                .as_slice()
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            let line = (self.reader.position().line() as usize)
                .saturating_sub(inside + 1)
                .max(1);
            let cells: Result<Vec<String>, _> = self
                .record
                .iter()
                .map(|c| std::str::from_utf8(c).map(clean_cell))
                .collect();
            let Ok(cells) = cells else {
                return Some(Err(CsvError::NotUtf8 { line }));
            };
            // A line of whitespace only is blank (the csv reader skips empty ones).
            if !(cells.len() == 1 && cells[0].is_empty()) {
                return Some(Ok(CsvRow { line, cells }));
            }
        }
    }
}

/// At most this many bytes are read ahead to find the end of the first record (a
/// stray quote would otherwise make the whole file one record).
const MAX_READ_AHEAD: usize = 1 << 20;

/// The bytes of `source` up to the end of its first non-blank record (blank lines
/// before it included, so that line numbers stay right), without a leading UTF-8 byte
/// order mark, and where that record starts in them. A record goes on past a line
/// break inside double quotes.
fn read_first_record<R: Read>(source: &mut BufReader<R>) -> Result<(Vec<u8>, usize), CsvError> {
    let bom = UTF8_BOM.to_string();
    let mut ahead = Vec::new();
    let mut record_start = None;
    for line in 1.. {
        let start = ahead.len();
        let read = source
            .read_until(b'\n', &mut ahead)
            .map_err(|e| CsvError::Read {
                line,
                message: e.to_string(),
            })?;
        if line == 1 && ahead.starts_with(bom.as_bytes()) {
            ahead.drain(..bom.len());
        }
        if record_start.is_none() && !ahead[start..].iter().all(u8::is_ascii_whitespace) {
            record_start = Some(start);
        }
        // An even number of quotes so far: the line break is outside them.
        let closed = |s: usize| ahead[s..].iter().filter(|&&b| b == b'"').count() % 2 == 0;
        if read == 0 || ahead.len() > MAX_READ_AHEAD || record_start.is_some_and(closed) {
            break;
        }
    }
    let first = record_start.unwrap_or(ahead.len());
    Ok((ahead, first))
}

/// Why a header could not be read. Every message is one line.
#[derive(Debug, Error)]
pub enum CsvHeaderError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's reason (and the line, once reading started).
        message: String,
    },
    /// The file holds only blank lines.
    #[error("{path}: empty file: no header")]
    Empty {
        /// The file.
        path: String,
    },
    /// The first non-blank record is not valid UTF-8.
    #[error("{path}: line {line}: not valid UTF-8 text")]
    NotUtf8 {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
    },
    /// The first non-blank record is numbers: the file has no header.
    #[error("{path}: line {line} is data, not a header: the file has no column names")]
    NoHeader {
        /// The file.
        path: String,
        /// The line (1-based).
        line: usize,
    },
}

/// The column names of the CSV file `path`: its first non-blank record, parsed as
/// [`CsvRows`] parses it (dialect, quotes, byte order mark). Reads only up to that
/// record. Refuses a file without a header.
pub fn read_csv_header(path: &Path) -> Result<Vec<String>, CsvHeaderError> {
    let shown = || path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| CsvHeaderError::Io {
        path: shown(),
        message: e.to_string(),
    })?;
    let first = CsvRows::new(file).and_then(|mut rows| rows.next().transpose());
    match first {
        Ok(Some(row)) if is_csv_header(&row.cells) => Ok(row.cells),
        Ok(Some(row)) => Err(CsvHeaderError::NoHeader {
            path: shown(),
            line: row.line,
        }),
        Ok(None) => Err(CsvHeaderError::Empty { path: shown() }),
        Err(CsvError::NotUtf8 { line }) => Err(CsvHeaderError::NotUtf8 {
            path: shown(),
            line,
        }),
        Err(e @ CsvError::Read { .. }) => Err(CsvHeaderError::Io {
            path: shown(),
            message: e.to_string(),
        }),
    }
}

impl CsvDialect {
    /// The cells of the one record `text` (RFC 4180, see the crate documentation), or
    /// no cell when `text` is blank.
    pub fn split(&self, text: &str) -> Vec<String> {
        CsvRows::with_dialect(text.as_bytes(), *self)
            .next()
            .and_then(Result::ok)
            .map(|row| row.cells)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(bytes: &[u8]) -> Vec<CsvRow> {
        CsvRows::new(bytes)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn row(line: usize, cells: &[&str]) -> CsvRow {
        CsvRow {
            line,
            cells: cells.iter().map(|c| c.to_string()).collect(),
        }
    }

    /// What `pd.DataFrame({"income, annual": [52000.5, 61000.0], "age": [34, 51],
    /// "note": ["a, b", "say \"hi\""]}).to_csv(index=False)` writes: a cell holding
    /// the delimiter or a quote is quoted, a quote doubled; `\n` line endings.
    const PANDAS: &[u8] =
        b"\"income, annual\",age,note\n52000.5,34,\"a, b\"\n61000.0,51,\"say \"\"hi\"\"\"\n";

    #[test]
    fn a_pandas_file_keeps_quoted_delimiters_and_escaped_quotes() {
        let mut reader = CsvRows::new(PANDAS).unwrap();
        assert_eq!(reader.dialect().delimiter, ',');
        let got: Vec<CsvRow> = reader.by_ref().map(Result::unwrap).collect();
        assert_eq!(
            got,
            [
                row(1, &["income, annual", "age", "note"]),
                row(2, &["52000.5", "34", "a, b"]),
                row(3, &["61000.0", "51", "say \"hi\""]),
            ]
        );
    }

    #[test]
    fn a_bom_crlf_blank_lines_and_a_quoted_line_break() {
        let text = b"\xef\xbb\xbf\r\n  \r\nheight;\"weight\r\n(kg)\";\"a;b\"\r\n\r\n1;2;3\r\n \t \r\n4;5;6";
        let mut reader = CsvRows::new(&text[..]).unwrap();
        assert_eq!(reader.dialect().delimiter, ';');
        let got: Vec<CsvRow> = reader.by_ref().map(Result::unwrap).collect();
        assert_eq!(
            got,
            [
                row(3, &["height", "weight\r\n(kg)", "a;b"]),
                row(6, &["1", "2", "3"]),
                row(8, &["4", "5", "6"]),
            ]
        );
        assert_eq!(rows(b"\xef\xbb\xbfa,b\r\n1,2\r\n")[0], row(1, &["a", "b"]));
        assert!(rows(b"").is_empty());
        assert!(rows(b"\xef\xbb\xbf\n \n").is_empty());
        // Spaces before an opening quote, which RFC 4180 reads literally.
        assert_eq!(rows(b"a, \"b c\" ,c\n")[0], row(1, &["a", "b c", "c"]));
    }

    #[test]
    fn invalid_utf8_names_its_line() {
        let mut reader = CsvRows::new(&b"a,b\n1,2\n3,\xff\n"[..]).unwrap();
        let errors: Vec<String> = reader
            .by_ref()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect();
        assert_eq!(errors, ["line 3: not valid UTF-8 text"]);
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
        let p = write("pandas.csv", PANDAS);
        assert_eq!(
            read_csv_header(&p).unwrap(),
            vec!["income, annual", "age", "note"]
        );
        let p = write("bom.csv", b"\xef\xbb\xbfheight,weight\r\n1,2\r\n");
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
