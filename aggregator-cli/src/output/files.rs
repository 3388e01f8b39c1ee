//! The file formats' bytes: CSV cells and rows (RFC 4180 quoting; an undefined entry
//! is an empty cell) and NPY float64 arrays.

use std::io::Write;

use nalgebra::DMatrix;

/// The entries of `m` row by row (a `DMatrix` is column-major).
pub(super) fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    m.transpose().as_slice().to_vec()
}

/// The rows of `m`, for JSON.
pub(super) fn rows_of(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    m.row_iter().map(|r| r.iter().copied().collect()).collect()
}

/// One CSV number: `{:e}`, or an empty cell for an undefined (NaN) entry.
pub(super) fn cell(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v:e}")
    }
}

/// Writes a header row of `names`, then row-major `values` in rows of `names.len()`
/// numbers, as RFC 4180 CSV (names holding commas or quotes are quoted).
pub(super) fn write_csv(
    names: &[String],
    values: &[f64],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut csv = csv::Writer::from_writer(out);
    csv.write_record(names).map_err(csv_io)?;
    for row in values.chunks(names.len().max(1)) {
        csv.write_record(row.iter().map(|v| cell(*v)))
            .map_err(csv_io)?;
    }
    csv.flush()
}

/// A CSV writer's error as the `io::Error` it wraps, when it is one (so that a closed
/// standard output stays a `BrokenPipe`).
pub(super) fn csv_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io,
        other => std::io::Error::other(format!("{other:?}")),
    }
}

/// Writes row-major `values` as a float64 NPY array of `shape`.
pub(super) fn write_npy(shape: &[u64], values: &[f64], out: &mut dyn Write) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().copied())?;
    writer.finish()
}
