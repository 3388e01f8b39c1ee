//! Reading a data matrix (one row per observation, one column per variable) from a CSV
//! or `.npy` file, and the moments simulations and the load generator need from it.
//!
//! * CSV: RFC 4180 as spreadsheets and pandas write it, read record by record (a file
//!   is never held whole in memory, only its values): `,`, or `;` or a tab when the
//!   first non-blank record holds no comma outside double quotes; quoted cells may hold
//!   the delimiter, line breaks and doubled quotes (a column named `income, annual`
//!   is written `"income, annual"`); `\n` or `\r\n` line endings; a leading UTF-8
//!   byte order mark dropped; blank lines skipped; cells trimmed. The first non-blank
//!   record is a header when any of its cells is non-empty and not a number; otherwise
//!   it is data and the columns have no names. The dialect is `ldpcov_csv`'s
//!   ([`CsvRows`]), shared with the aggregator CLI's `--names-from`.
//! * NPY: a 2-D array (rows × columns) of `f64`, `f32`, `i64` or `i32` in either byte
//!   order, C or Fortran order. Integers above 2⁵³ in magnitude are rounded to the
//!   nearest `f64`.
//!
//! Every value must be finite. Each bad file gets a one-line [`DataError`] naming the
//! line and column (CSV: 1-based, as an editor shows them) or the row and column index
//! (NPY: 0-based, as numpy indexes).
//!
//! ```
//! use ldpcov_lab::data::DataSet;
//!
//! let data = DataSet::from_csv_str("height,weight\n1.0,2.0\n3.0,6.0\n")?;
//! assert_eq!(data.names.as_deref(), Some(&["height".to_string(), "weight".to_string()][..]));
//! assert_eq!((data.rows, data.cols), (2, 2));
//! assert_eq!(data.row(1), &[3.0, 6.0]);
//! // Population covariance (divides by n): Var(height) = ((1-2)² + (3-2)²) / 2 = 1.
//! let cov = data.covariance();
//! assert_eq!(cov[(0, 0)], 1.0);
//! assert_eq!(cov[(0, 1)], 2.0);
//! assert_eq!(data.correlation()?[(0, 1)], 1.0);
//! # Ok::<(), ldpcov_lab::data::DataError>(())
//! ```

use ldpcov_csv::{CsvError, CsvRows, is_csv_header};
use nalgebra::{DMatrix, DVector};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use thiserror::Error;

/// Why a data file could not be read or a moment could not be formed. Every message is
/// one line.
#[derive(Debug, Error)]
pub enum DataError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {message}")]
    Io {
        /// The file.
        path: String,
        /// The operating system's reason.
        message: String,
    },
    /// The file (or its first non-blank line) holds nothing.
    #[error("empty file: no header and no data rows")]
    Empty,
    /// A header and no data row after it.
    #[error("line {line}: header only, no data rows follow")]
    NoDataRows {
        /// The header's line (1-based).
        line: usize,
    },
    /// A CSV record could not be read or is not valid UTF-8 (the message names the
    /// line).
    #[error(transparent)]
    Csv(#[from] CsvError),
    /// A CSV record has a different number of cells than the first one.
    #[error("line {line}: {found} columns, expected {expected} as on line {first_line}")]
    Ragged {
        /// The offending line (1-based).
        line: usize,
        /// Its number of cells.
        found: usize,
        /// The number of cells of the first row (header or data).
        expected: usize,
        /// The first row's line (1-based).
        first_line: usize,
    },
    /// A CSV data cell is empty or does not parse as a number.
    #[error("line {line}, column {column}: not a number: {cell:?}")]
    NotNumeric {
        /// The line (1-based).
        line: usize,
        /// The column (1-based).
        column: usize,
        /// The cell's text (trimmed, at most 40 characters).
        cell: String,
    },
    /// A CSV data cell is NaN or infinite.
    #[error("line {line}, column {column}: {cell:?} is not a finite number")]
    NotFinite {
        /// The line (1-based).
        line: usize,
        /// The column (1-based).
        column: usize,
        /// The cell's text.
        cell: String,
    },
    /// The `.npy` header or data could not be parsed (bad magic, truncated data, …).
    #[error("npy: {0}")]
    Npy(String),
    /// The `.npy` array is not 2-D.
    #[error("npy: expected a 2-D array (rows × columns), found shape {shape:?}")]
    NpyShape {
        /// The array's shape.
        shape: Vec<u64>,
    },
    /// The `.npy` element type is not one of f64, f32, i64, i32.
    #[error("npy: unsupported dtype {dtype}; expected f64, f32, i64 or i32")]
    NpyDtype {
        /// numpy's description of the dtype.
        dtype: String,
    },
    /// A `.npy` element is NaN or infinite.
    #[error("npy: row index {row}, column index {column}: {value} is not a finite number")]
    NpyNotFinite {
        /// The row index (0-based).
        row: usize,
        /// The column index (0-based).
        column: usize,
        /// The value.
        value: f64,
    },
    /// The data have no column (an `n × 0` array).
    #[error("no columns")]
    NoColumns,
    /// Standardizing or correlating needs every column to vary.
    #[error("column {column} ({name}) is constant: its standard deviation is 0")]
    ConstantColumn {
        /// The column (1-based).
        column: usize,
        /// Its name, or `unnamed`.
        name: String,
    },
}

/// A data matrix: `rows` observations of `cols` variables, stored row-major.
///
/// Invariants (kept by every constructor of this module): `values.len() == rows * cols`,
/// `rows ≥ 1`, `cols ≥ 1`, every value finite, and `names` (when present) has `cols`
/// entries.
#[derive(Debug, Clone, PartialEq)]
pub struct DataSet {
    /// Column names from a CSV header; `None` for a headerless CSV or an `.npy` file.
    pub names: Option<Vec<String>>,
    /// Number of observations n.
    pub rows: usize,
    /// Number of variables p.
    pub cols: usize,
    /// The values, row-major: entry (i, j) is `values[i * cols + j]`.
    pub values: Vec<f64>,
}

/// The magic bytes that open every `.npy` file.
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// At most this many characters of a bad cell are quoted in an error.
const CELL_QUOTE_CHARS: usize = 40;

impl DataSet {
    /// Reads a file: `.npy` when it starts with numpy's magic bytes, CSV otherwise
    /// (streamed record by record).
    pub fn read(path: &Path) -> Result<Self, DataError> {
        let io = |e: std::io::Error| DataError::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        };
        let mut file = BufReader::new(std::fs::File::open(path).map_err(io)?);
        if file.fill_buf().map_err(io)?.starts_with(NPY_MAGIC) {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map_err(io)?;
            Self::from_npy_bytes(&bytes)
        } else {
            Self::from_csv_reader(file)
        }
    }

    /// Parses CSV bytes (UTF-8; see the module documentation for the dialect).
    pub fn from_csv_bytes(bytes: &[u8]) -> Result<Self, DataError> {
        Self::from_csv_reader(bytes)
    }

    /// Parses CSV text (see the module documentation for the dialect).
    pub fn from_csv_str(text: &str) -> Result<Self, DataError> {
        Self::from_csv_reader(text.as_bytes())
    }

    /// Parses CSV from `source`, record by record (see the module documentation for
    /// the dialect).
    pub fn from_csv_reader<R: Read>(source: R) -> Result<Self, DataError> {
        let mut records = CsvRows::new(source)?;
        let first = records.next().transpose()?.ok_or(DataError::Empty)?;
        let (first_line, first_cells) = (first.line, first.cells);
        let cols = first_cells.len();
        let is_header = is_csv_header(&first_cells);
        let mut values = Vec::new();
        let mut rows = 0;
        let mut push_row = |line: usize, cells: &[String]| -> Result<(), DataError> {
            if cells.len() != cols {
                return Err(DataError::Ragged {
                    line,
                    found: cells.len(),
                    expected: cols,
                    first_line,
                });
            }
            for (j, cell) in cells.iter().enumerate() {
                let column = j + 1;
                let v: f64 = cell.parse().map_err(|_| DataError::NotNumeric {
                    line,
                    column,
                    cell: cell.chars().take(CELL_QUOTE_CHARS).collect(),
                })?;
                if !v.is_finite() {
                    return Err(DataError::NotFinite {
                        line,
                        column,
                        cell: cell.clone(),
                    });
                }
                values.push(v);
            }
            rows += 1;
            Ok(())
        };
        let names = if is_header {
            Some(first_cells)
        } else {
            push_row(first_line, &first_cells)?;
            None
        };
        for record in records {
            let record = record?;
            push_row(record.line, &record.cells)?;
        }
        if rows == 0 {
            return Err(DataError::NoDataRows { line: first_line });
        }
        Ok(Self {
            names,
            rows,
            cols,
            values,
        })
    }

    /// Parses the bytes of an `.npy` file holding a 2-D array.
    pub fn from_npy_bytes(bytes: &[u8]) -> Result<Self, DataError> {
        use npyz::{DType, TypeChar};
        let npy_err = |e: std::io::Error| DataError::Npy(e.to_string());
        let file = npyz::NpyFile::new(bytes).map_err(npy_err)?;
        let shape = file.shape().to_vec();
        let &[rows, cols] = shape.as_slice() else {
            return Err(DataError::NpyShape { shape });
        };
        let too_large = || DataError::Npy(format!("shape {shape:?} is too large"));
        let rows = usize::try_from(rows).map_err(|_| too_large())?;
        let cols = usize::try_from(cols).map_err(|_| too_large())?;
        if cols == 0 {
            return Err(DataError::NoColumns);
        }
        if rows == 0 {
            return Err(DataError::Npy("0 rows: no data".into()));
        }
        let order = file.order();
        let dtype = file.dtype();
        let unsupported = || DataError::NpyDtype {
            dtype: dtype.descr(),
        };
        let stored: Vec<f64> = match &dtype {
            DType::Plain(ts) => match (ts.type_char(), ts.size_field()) {
                (TypeChar::Float, 8) => file.into_vec::<f64>().map_err(npy_err)?,
                (TypeChar::Float, 4) => file
                    .into_vec::<f32>()
                    .map_err(npy_err)?
                    .into_iter()
                    .map(f64::from)
                    .collect(),
                // Exact below 2⁵³ in magnitude, nearest f64 above (documented).
                (TypeChar::Int, 8) => file
                    .into_vec::<i64>()
                    .map_err(npy_err)?
                    .into_iter()
                    .map(|v| v as f64)
                    .collect(),
                (TypeChar::Int, 4) => file
                    .into_vec::<i32>()
                    .map_err(npy_err)?
                    .into_iter()
                    .map(f64::from)
                    .collect(),
                _ => return Err(unsupported()),
            },
            _ => return Err(unsupported()),
        };
        if stored.len() != rows * cols {
            return Err(DataError::Npy(format!(
                "{} values for shape {shape:?}",
                stored.len()
            )));
        }
        let values: Vec<f64> = match order {
            npyz::Order::C => stored,
            // Column-major on disk: entry (i, j) is stored at j·rows + i.
            npyz::Order::Fortran => (0..rows * cols)
                .map(|k| stored[(k % cols) * rows + k / cols])
                .collect(),
        };
        if let Some(k) = values.iter().position(|v| !v.is_finite()) {
            return Err(DataError::NpyNotFinite {
                row: k / cols,
                column: k % cols,
                value: values[k],
            });
        }
        Ok(Self {
            names: None,
            rows,
            cols,
            values,
        })
    }

    /// Observation `i` (a slice of `cols` values). Panics if `i ≥ rows`.
    pub fn row(&self, i: usize) -> &[f64] {
        &self.values[i * self.cols..(i + 1) * self.cols]
    }

    /// The observations in order.
    pub fn iter_rows(&self) -> impl Iterator<Item = &[f64]> {
        self.values.chunks_exact(self.cols)
    }

    /// The name of column `j` (0-based), or `column {j+1}` without a header.
    pub fn column_name(&self, j: usize) -> String {
        match &self.names {
            Some(names) => names[j].clone(),
            None => format!("column {}", j + 1),
        }
    }

    /// The data as an `rows × cols` matrix.
    pub fn matrix(&self) -> DMatrix<f64> {
        DMatrix::from_row_slice(self.rows, self.cols, &self.values)
    }

    /// The column means μ̂_j = (1/n) Σ_i x_ij.
    pub fn mean(&self) -> DVector<f64> {
        let mut sum = DVector::zeros(self.cols);
        for row in self.iter_rows() {
            for (s, v) in sum.iter_mut().zip(row) {
                *s += v;
            }
        }
        sum / self.rows as f64
    }

    /// The population covariance (1/n) Σ_i (x_i − μ̂)(x_i − μ̂)ᵀ — divided by n, not
    /// n − 1, to match what the aggregator estimates (the average of the reports).
    pub fn covariance(&self) -> DMatrix<f64> {
        let mean = self.mean();
        let mut centred = self.matrix();
        for mut row in centred.row_iter_mut() {
            row -= mean.transpose();
        }
        centred.tr_mul(&centred) / self.rows as f64
    }

    /// The correlation matrix: the covariance of [`standardized`](Self::standardized)
    /// (unit diagonal). Refuses a constant column.
    pub fn correlation(&self) -> Result<DMatrix<f64>, DataError> {
        let cov = self.covariance();
        let sd = self.standard_deviations(&cov)?;
        let mut cor = DMatrix::from_fn(self.cols, self.cols, |i, j| cov[(i, j)] / (sd[i] * sd[j]));
        cor.fill_diagonal(1.0);
        Ok(cor)
    }

    /// Each column shifted to mean 0 and scaled to population standard deviation 1
    /// (the same 1/n as [`covariance`](Self::covariance)), so that its covariance is the
    /// correlation matrix. Refuses a constant column.
    pub fn standardized(&self) -> Result<DataSet, DataError> {
        let mean = self.mean();
        let sd = self.standard_deviations(&self.covariance())?;
        let values = self
            .values
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let j = k % self.cols;
                (v - mean[j]) / sd[j]
            })
            .collect();
        Ok(DataSet {
            names: self.names.clone(),
            rows: self.rows,
            cols: self.cols,
            values,
        })
    }

    /// Square roots of `cov`'s diagonal; an error for a column whose values are all
    /// equal (checked on the values, not on a rounded variance).
    fn standard_deviations(&self, cov: &DMatrix<f64>) -> Result<Vec<f64>, DataError> {
        (0..self.cols)
            .map(|j| {
                let first = self.values[j];
                let constant = self.iter_rows().all(|row| row[j] == first);
                if constant || cov[(j, j)] <= 0.0 {
                    Err(DataError::ConstantColumn {
                        column: j + 1,
                        name: self
                            .names
                            .as_ref()
                            .map_or_else(|| "unnamed".into(), |n| n[j].clone()),
                    })
                } else {
                    Ok(cov[(j, j)].sqrt())
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds an `.npy` file by hand (format version 1.0), independently of `npyz`'s
    /// writer: `descr` is numpy's dtype string, `data` the raw element bytes.
    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            { if fortran { "True" } else { "False" } }
        );
        // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = NPY_MAGIC.to_vec();
        out.extend([1, 0]);
        out.extend((header.len() as u16).to_le_bytes());
        out.extend(header.as_bytes());
        out.extend(data);
        out
    }

    fn f64_le(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn err(text: &str) -> String {
        DataSet::from_csv_str(text).unwrap_err().to_string()
    }

    fn npy_err(bytes: &[u8]) -> String {
        DataSet::from_npy_bytes(bytes).unwrap_err().to_string()
    }

    #[test]
    fn csv_with_header_reads_values_exactly() {
        let d = DataSet::from_csv_str("a, \"b c\" ,c\r\n0.1,-2e-3,7\n\n1e300,+5,.25\n").unwrap();
        assert_eq!(
            d.names,
            Some(vec!["a".to_string(), "b c".to_string(), "c".to_string()])
        );
        assert_eq!((d.rows, d.cols), (2, 3));
        assert_eq!(d.values, vec![0.1, -2e-3, 7.0, 1e300, 5.0, 0.25]);
    }

    #[test]
    fn csv_without_header_and_other_delimiters() {
        let d = DataSet::from_csv_str("1,2\n3,4\n").unwrap();
        assert_eq!(d.names, None);
        assert_eq!(d.values, vec![1.0, 2.0, 3.0, 4.0]);
        let semi = DataSet::from_csv_str("x;y\n1.5;2\n").unwrap();
        assert_eq!(semi.names, Some(vec!["x".into(), "y".into()]));
        assert_eq!(semi.values, vec![1.5, 2.0]);
        let tab = DataSet::from_csv_str("1\t2\n3\t4\n").unwrap();
        assert_eq!((tab.rows, tab.cols), (2, 2));
        let single = DataSet::from_csv_str("v\n1\n2\n3\n").unwrap();
        assert_eq!((single.rows, single.cols), (3, 1));
        // A first row with an empty cell but otherwise numeric is data, not a header.
        assert_eq!(err(",2\n3,4\n"), "line 1, column 1: not a number: \"\"");
    }

    #[test]
    fn csv_errors_name_line_and_column() {
        assert_eq!(
            err("a,b\n1,2\n3\n"),
            "line 3: 1 columns, expected 2 as on line 1"
        );
        assert_eq!(
            err("1,2\n3,4,5\n"),
            "line 2: 3 columns, expected 2 as on line 1"
        );
        assert_eq!(
            err("a,b\n1,2\n3,x7\n"),
            "line 3, column 2: not a number: \"x7\""
        );
        assert_eq!(err("1,2\n3,\n"), "line 2, column 2: not a number: \"\"");
        assert_eq!(
            err("a,b\n1,NaN\n"),
            "line 2, column 2: \"NaN\" is not a finite number"
        );
        assert_eq!(
            err("a,b\n-inf,1\n"),
            "line 2, column 1: \"-inf\" is not a finite number"
        );
        assert_eq!(err(""), "empty file: no header and no data rows");
        assert_eq!(err("\n  \n"), "empty file: no header and no data rows");
        assert_eq!(err("\na,b\n"), "line 2: header only, no data rows follow");
        let e = DataSet::from_csv_bytes(b"1,2\n3,\xff\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: not valid UTF-8 text");
        for msg in [err("a,b\n1,2\n3\n"), err("a\n\"\n")] {
            assert!(!msg.contains('\n'), "{msg}");
        }
    }

    /// Writes `bytes` to a fresh file and reads it as the load generator does
    /// (`DataUsers::from_file`, on `DataSet::read`), and its header as `estimate
    /// --names-from` does (`read_csv_header`); checks that both name `names` and that
    /// the rows are `rows`.
    fn read_as_users(file: &str, bytes: &[u8], names: &[&str], rows: &[&[f64]]) {
        let dir = std::env::temp_dir().join(format!("ldpcov-data-{}-{file}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(file);
        std::fs::write(&path, bytes).unwrap();
        let users = crate::data_users::DataUsers::from_file(&path, false).unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        assert_eq!(users.names(), Some(names.as_slice()));
        assert_eq!(users.rows(), rows.len());
        for (i, row) in rows.iter().enumerate() {
            assert_eq!(users.row(i), *row, "row {i}");
        }
        assert_eq!(ldpcov_csv::read_csv_header(&path).unwrap(), names);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_csv_as_pandas_writes_it_names_its_columns() {
        // pd.DataFrame({"income, annual": [52000.5, 61000.0], 'height "cm"': [170, 182],
        // "age": [34, 51]}).to_csv(index=False) on Linux: a name holding the delimiter
        // or a quote is quoted (QUOTE_MINIMAL), a quote doubled; `\n` endings.
        let pandas =
            b"\"income, annual\",\"height \"\"cm\"\"\",age\n52000.5,170,34\n61000.0,182,51\n";
        let names = ["income, annual", "height \"cm\"", "age"];
        read_as_users(
            "pandas.csv",
            pandas,
            &names,
            &[&[52000.5, 170.0, 34.0], &[61000.0, 182.0, 51.0]],
        );
        // quoting=csv.QUOTE_NONNUMERIC: every name quoted, and a value too.
        let all_quoted = b"\"income, annual\",\"height \"\"cm\"\"\",\"age\"\n52000.5,170,\"34\"\n";
        read_as_users("quoted.csv", all_quoted, &names, &[&[52000.5, 170.0, 34.0]]);
    }

    #[test]
    fn a_csv_with_a_bom_and_crlf_names_its_first_column() {
        // df.to_csv(index=False, encoding="utf-8-sig", lineterminator="\r\n"), as
        // Excel-bound exports and pandas on Windows write it.
        let bom_crlf = b"\xef\xbb\xbfincome;age\r\n52000.5;34\r\n\r\n61000;51\r\n";
        read_as_users(
            "bom.csv",
            bom_crlf,
            &["income", "age"],
            &[&[52000.5, 34.0], &[61000.0, 51.0]],
        );
        // Line numbers count the BOM's line and the blank one.
        assert_eq!(
            err("\u{feff}a,b\r\n1,2\r\n\r\n3,x\r\n"),
            "line 4, column 2: not a number: \"x\""
        );
    }

    #[test]
    fn npy_f64_c_and_fortran_order_read_exactly() {
        let c = npy(
            "<f8",
            false,
            "(2, 3)",
            &f64_le(&[0.1, 0.2, 0.3, 1.5, -2.0, 1e-300]),
        );
        let d = DataSet::from_npy_bytes(&c).unwrap();
        assert_eq!((d.rows, d.cols, d.names.clone()), (2, 3, None));
        assert_eq!(d.values, vec![0.1, 0.2, 0.3, 1.5, -2.0, 1e-300]);
        // The same matrix stored column by column.
        let f = npy(
            "<f8",
            true,
            "(2, 3)",
            &f64_le(&[0.1, 1.5, 0.2, -2.0, 0.3, 1e-300]),
        );
        assert_eq!(DataSet::from_npy_bytes(&f).unwrap(), d);
        // Big-endian.
        let be: Vec<u8> = [0.1f64, 0.2].iter().flat_map(|x| x.to_be_bytes()).collect();
        let b = DataSet::from_npy_bytes(&npy(">f8", false, "(1, 2)", &be)).unwrap();
        assert_eq!(b.values, vec![0.1, 0.2]);
    }

    #[test]
    fn npy_f32_i64_i32() {
        let f32s: Vec<u8> = [0.1f32, -3.5]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let d = DataSet::from_npy_bytes(&npy("<f4", false, "(2, 1)", &f32s)).unwrap();
        assert_eq!(d.values, vec![f64::from(0.1f32), -3.5]);
        let i64s: Vec<u8> = [-7i64, 1 << 40]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let d = DataSet::from_npy_bytes(&npy("<i8", false, "(1, 2)", &i64s)).unwrap();
        assert_eq!(d.values, vec![-7.0, (1u64 << 40) as f64]);
        let i32s: Vec<u8> = [1i32, 2, 3, 4]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let d = DataSet::from_npy_bytes(&npy("<i4", true, "(2, 2)", &i32s)).unwrap();
        assert_eq!(d.values, vec![1.0, 3.0, 2.0, 4.0]);
    }

    #[test]
    fn npy_errors() {
        let one_d = npy("<f8", false, "(3,)", &f64_le(&[1.0, 2.0, 3.0]));
        assert_eq!(
            npy_err(&one_d),
            "npy: expected a 2-D array (rows × columns), found shape [3]"
        );
        let three_d = npy("<f8", false, "(1, 1, 2)", &f64_le(&[1.0, 2.0]));
        assert_eq!(
            npy_err(&three_d),
            "npy: expected a 2-D array (rows × columns), found shape [1, 1, 2]"
        );
        let u8s = npy("|u1", false, "(1, 2)", &[1, 2]);
        assert_eq!(
            npy_err(&u8s),
            "npy: unsupported dtype '|u1'; expected f64, f32, i64 or i32"
        );
        let nan = npy("<f8", false, "(2, 2)", &f64_le(&[1.0, 2.0, 3.0, f64::NAN]));
        assert_eq!(
            npy_err(&nan),
            "npy: row index 1, column index 1: NaN is not a finite number"
        );
        let f32s: Vec<u8> = [0.0f32, 0.0, f32::INFINITY, 0.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let inf = npy("<f4", true, "(2, 2)", &f32s);
        // Fortran order: the third stored value is row 0, column 1.
        assert_eq!(
            npy_err(&inf),
            "npy: row index 0, column index 1: inf is not a finite number"
        );
        let truncated = npy("<f8", false, "(2, 2)", &f64_le(&[1.0, 2.0, 3.0]));
        assert!(
            npy_err(&truncated).starts_with("npy: "),
            "{}",
            npy_err(&truncated)
        );
        assert!(npy_err(b"\x93NUMPYgarbage").starts_with("npy: "));
        assert_eq!(
            npy_err(&npy("<f8", false, "(0, 2)", &[])),
            "npy: 0 rows: no data"
        );
        assert_eq!(npy_err(&npy("<f8", false, "(2, 0)", &[])), "no columns");
    }

    #[test]
    fn read_dispatches_on_magic_and_names_a_missing_file() {
        let dir = std::env::temp_dir().join(format!("ldpcov-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let npy_path = dir.join("m.dat");
        std::fs::write(&npy_path, npy("<f8", false, "(1, 2)", &f64_le(&[4.0, 5.0]))).unwrap();
        assert_eq!(DataSet::read(&npy_path).unwrap().values, vec![4.0, 5.0]);
        let csv_path = dir.join("m.csv");
        std::fs::write(&csv_path, "4,5\n").unwrap();
        assert_eq!(DataSet::read(&csv_path).unwrap().values, vec![4.0, 5.0]);
        let missing = dir.join("missing.csv");
        let e = DataSet::read(&missing).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("cannot read {}: ", missing.display())),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn moments_and_standardization() {
        // x = (1, 2, 3, 6), y = 2x + 1, z = (0, 1, 0, 1).
        let d = DataSet::from_csv_str("1,3,0\n2,5,1\n3,7,0\n6,13,1\n").unwrap();
        let mean = d.mean();
        assert_eq!(mean.as_slice(), &[3.0, 7.0, 0.5]);
        let cov = d.covariance();
        // Var(x) = (4 + 1 + 0 + 9) / 4 = 3.5 (population: divided by n = 4).
        assert_eq!(cov[(0, 0)], 3.5);
        assert_eq!(cov[(0, 1)], 7.0);
        assert_eq!(cov[(1, 1)], 14.0);
        // Cov(x, z) = ((−2)(−½) + (−1)(½) + 0 + 3·½) / 4 = 0.5.
        assert_eq!(cov[(0, 2)], 0.5);
        assert_eq!(cov[(2, 2)], 0.25);
        let cor = d.correlation().unwrap();
        assert!((cor[(0, 1)] - 1.0).abs() < 1e-15);
        assert!((cor[(0, 2)] - 0.5 / (3.5f64.sqrt() * 0.5)).abs() < 1e-15);
        let s = d.standardized().unwrap();
        let (m, c) = (s.mean(), s.covariance());
        for j in 0..3 {
            assert!(m[j].abs() < 1e-15, "mean {j} = {}", m[j]);
            for k in 0..3 {
                assert!((c[(j, k)] - cor[(j, k)]).abs() < 1e-14, "({j},{k})");
            }
        }
    }

    #[test]
    fn constant_column_is_refused() {
        let d = DataSet::from_csv_str("a,b\n1,0.1\n2,0.1\n3,0.1\n").unwrap();
        assert_eq!(
            d.standardized().unwrap_err().to_string(),
            "column 2 (b) is constant: its standard deviation is 0"
        );
        assert!(d.correlation().is_err());
        let unnamed = DataSet::from_csv_str("5,1\n5,2\n").unwrap();
        assert_eq!(
            unnamed.standardized().unwrap_err().to_string(),
            "column 1 (unnamed) is constant: its standard deviation is 0"
        );
    }
}
