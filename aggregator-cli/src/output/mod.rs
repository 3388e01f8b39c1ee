//! Writing a released [`Estimate`] as JSON (matrix plus metadata), CSV (the matrix
//! under a header of the variables' names) or NPY (the matrix as a `p × p` float64
//! array, loadable with `numpy.load`), and choosing the matrix a PNG heatmap shows
//! ([`part_matrix`]; the picture itself is [`write_heatmap`](crate::write_heatmap)'s).
//!
//! "The matrix" is the requested target: the covariance, or for the precision targets
//! the precision matrix Θ (JSON then also carries the covariance it came from, λ and,
//! for the graphical lasso, the graph's edges). For a mean-and-covariance collection
//! JSON adds the mean and its noise sd. docs/USAGE.md lists the JSON's keys.
//!
//! One vocabulary everywhere: variables are named by the collection's names, else
//! `x1 … xp` ([`variable_names`]); an undefined entry (NaN: a correlation whose
//! variance is not clearly above zero, or its standard error) is `null` in JSON and
//! an empty cell in CSV.

mod files;
mod json;
mod parts;

use std::io::Write;

use files::{cell, csv_io, row_major, write_csv, write_npy};
use json::write_json;
use ldpcov_proto::v1::{Estimate, EstimateTarget};
use parts::{Unpacked, unpack};
pub use parts::{
    component_loadings, mean_vector, part_matrix, plot_title, raw_eigenvalues, short_rule,
    variable_names,
};

/// Output formats of `ldpcov-aggregator estimate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Matrix and metadata as one JSON object.
    Json,
    /// The matrix, one row per line under a header of the variables' names.
    Csv,
    /// The matrix as a NumPy `.npy` float64 array.
    Npy,
    /// A PNG heatmap of the matrix (to a file).
    //
    // Drawn by `write_heatmap` from `part_matrix`, not by `write_estimate` (a plain
    // comment: clap shows doc comments as help).
    Png,
}

/// Which part of an estimate a picture, a CSV or an NPY file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The covariance estimate (present in every estimate).
    Covariance,
    /// The precision matrix Θ (only in an estimate of a precision target).
    Precision,
    /// The correlation matrix of the released matrix (every estimate carries it).
    Correlation,
    /// The second moment M̂ (mean-and-covariance collections).
    SecondMoment,
    /// The mean μ̂, a vector (mean-and-covariance collections).
    Mean,
    /// The raw (unregularised) matrix the rule acted on (estimates asked with error
    /// bars).
    Raw,
    /// The standard errors of the raw matrix's entries (estimates asked with error
    /// bars).
    StandardErrors,
    /// The principal components (estimates asked for them): `K × p` loadings.
    Components,
}

impl Part {
    /// The released matrix of `estimate`: its precision matrix for a precision target,
    /// else its covariance (what CSV, NPY and JSON's `matrix` hold).
    pub fn released(estimate: &Estimate) -> Self {
        match EstimateTarget::try_from(estimate.target) {
            Ok(EstimateTarget::PrecisionRidge | EstimateTarget::PrecisionGlasso) => Part::Precision,
            _ => Part::Covariance,
        }
    }

    /// `covariance` or `precision`.
    pub fn name(self) -> &'static str {
        match self {
            Part::Covariance => "covariance",
            Part::Precision => "precision",
            Part::Correlation => "correlation",
            Part::SecondMoment => "second moment",
            Part::Mean => "mean",
            Part::Raw => "raw matrix",
            Part::StandardErrors => "standard errors",
            Part::Components => "principal components",
        }
    }
}

/// Writes `estimate` to `out` in `format` (JSON, CSV or NPY; [`Format::Png`] is an
/// error here, since a picture is drawn to a file by
/// [`write_heatmap`](crate::write_heatmap)). `raw_eigenvalues` are the principal
/// components' raw eigenvalues ([`raw_eigenvalues`]), shown beside their
/// `above_noise_edge` flags.
pub fn write_estimate(
    estimate: &Estimate,
    raw_eigenvalues: Option<&[f64]>,
    format: Format,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let p = estimate.dim as usize;
    let Unpacked {
        target,
        covariance,
        precision,
    } = unpack(estimate)?;
    let is_precision = precision.is_some();
    let full = precision.unwrap_or_else(|| covariance.clone());
    match format {
        Format::Json => write_json(
            estimate,
            raw_eigenvalues,
            target,
            &covariance,
            &full,
            is_precision,
            out,
        ),
        Format::Csv => write_csv(&variable_names(estimate), &full, out),
        Format::Npy => write_npy(&[p as u64, p as u64], &full, out),
        Format::Png => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a PNG is drawn to a file by write_heatmap, not written to a stream",
        )),
    }
}

/// Writes one part of `estimate` to `out` as CSV or NPY: a `p × p` matrix, the mean
/// (a vector: one line, or a 1-D array), or the principal components (NPY: the
/// `K × p` loadings; CSV: one row per component under a header, `component,
/// eigenvalue, explained_variance_ratio, raw_eigenvalue, above_noise_edge` and one
/// column of loadings per variable). Every CSV starts with a header row of the
/// variables' names ([`variable_names`]); `raw_eigenvalues` as for [`write_estimate`].
pub fn write_part(
    estimate: &Estimate,
    raw_eigenvalues: Option<&[f64]>,
    part: Part,
    format: Format,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    if !matches!(format, Format::Csv | Format::Npy) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a part is written as CSV or NPY (JSON holds every part)",
        ));
    }
    let p = estimate.dim as usize;
    let names = variable_names(estimate);
    match part {
        Part::Mean => {
            let mean = mean_vector(estimate)?;
            match format {
                Format::Npy => write_npy(&[p as u64], &mean, out),
                _ => write_csv(&names, &mean, out),
            }
        }
        Part::Components => {
            let loadings = component_loadings(estimate)?;
            if format == Format::Npy {
                let k = loadings.nrows();
                return write_npy(&[k as u64, p as u64], &row_major(&loadings), out);
            }
            let mut csv = csv::Writer::from_writer(out);
            let columns = [
                "component",
                "eigenvalue",
                "explained_variance_ratio",
                "raw_eigenvalue",
                "above_noise_edge",
            ];
            csv.write_record(columns.into_iter().chain(names.iter().map(String::as_str)))
                .map_err(csv_io)?;
            let pcs = estimate
                .principal_components
                .as_ref()
                .map(|pc| &pc.components);
            for (c, component) in pcs.into_iter().flatten().enumerate() {
                let raw = raw_eigenvalues
                    .and_then(|r| r.get(c))
                    .map_or(String::new(), |v| cell(*v));
                let fields = [
                    format!("PC{}", c + 1),
                    cell(component.eigenvalue),
                    cell(component.explained_variance_ratio),
                    raw,
                    component.above_noise_edge.to_string(),
                ];
                csv.write_record(
                    fields
                        .into_iter()
                        .chain(loadings.row(c).iter().map(|v| cell(*v))),
                )
                .map_err(csv_io)?;
            }
            csv.flush()
        }
        _ => {
            let m = part_matrix(estimate, part)?;
            match format {
                Format::Npy => write_npy(&[p as u64, p as u64], &row_major(&m), out),
                _ => write_csv(&names, &row_major(&m), out),
            }
        }
    }
}

#[cfg(test)]
mod tests;
