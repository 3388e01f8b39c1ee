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

use std::io::Write;

use ldpcov_privacy::layout::unpack_symmetric;
use ldpcov_proto::v1::{CentralMechanism, Estimate, EstimateTarget, Moments};
use nalgebra::DMatrix;
use serde::Serialize;

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

#[derive(Serialize)]
struct JsonEstimate<'a> {
    collection_id: &'a str,
    dim: u32,
    reports: u64,
    sigma: f64,
    entry_noise_sd: f64,
    threshold: f64,
    threshold_rule: &'a str,
    surviving_entries: u64,
    clamped_eigenvalues: u32,
    psd_projected: bool,
    threshold_kind: &'a str,
    target: &'static str,
    matrix: Vec<&'a [f64]>,
    /// The correlation of the released covariance (`null` entries: undefined).
    correlation: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    precision: Option<JsonPrecision<'a>>,
    moments: &'static str,
    #[serde(skip_serializing_if = "<[f64]>::is_empty")]
    mean: &'a [f64],
    #[serde(skip_serializing_if = "Option::is_none")]
    mean_noise_sd: Option<f64>,
    variable_names: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    release: Option<JsonRelease>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shuffle: Option<JsonShuffle>,
    #[serde(skip_serializing_if = "Option::is_none")]
    shuffle_delivered: Option<JsonDelivered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    verdict: Option<JsonVerdict<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_bars: Option<JsonErrorBars<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    principal_components: Option<JsonComponents<'a>>,
}

/// Whether the reports carry enough signal (the estimate's `SignalVerdict`).
#[derive(Serialize)]
struct JsonVerdict<'a> {
    /// `sufficient`, `at the edge` or `insufficient`.
    state: &'static str,
    sufficient: bool,
    /// `null`: no signal measurable.
    noise_to_signal: Option<f64>,
    /// The ratio's interval (`high` `null`: unbounded).
    noise_to_signal_low: Option<f64>,
    noise_to_signal_high: Option<f64>,
    off_diagonal_signal_z: f64,
    top_eigenvalue_z: f64,
    reports_needed: Option<u64>,
    reports_needed_low: Option<u64>,
    reports_needed_high: Option<u64>,
    target_noise_to_signal: f64,
    release_is_zero: bool,
    summary: &'a str,
}

/// The verdict's state as the JSON and the text name it.
fn verdict_state_name(state: ldpcov_proto::v1::VerdictState) -> &'static str {
    use ldpcov_proto::v1::VerdictState;
    match state {
        VerdictState::Sufficient => "sufficient",
        VerdictState::AtTheEdge => "at the edge",
        VerdictState::Insufficient => "insufficient",
        VerdictState::Unspecified => "unknown",
    }
}

/// The raw matrix and its standard errors, full `p × p` matrices.
#[derive(Serialize)]
struct JsonErrorBars<'a> {
    method: &'a str,
    raw: Vec<Vec<f64>>,
    standard_errors: Vec<Vec<f64>>,
    raw_correlation: Vec<Vec<f64>>,
    correlation_standard_errors: Vec<Vec<f64>>,
}

/// The principal components, largest first.
#[derive(Serialize)]
struct JsonComponents<'a> {
    of_correlation: bool,
    total_variance: f64,
    noise_edge: f64,
    components: Vec<JsonComponent<'a>>,
}

#[derive(Serialize)]
struct JsonComponent<'a> {
    eigenvalue: f64,
    explained_variance_ratio: f64,
    /// The raw matrix's eigenvalue of the same rank: what `above_noise_edge` compares
    /// with `noise_edge` (`null` when the estimate carries no raw matrix).
    raw_eigenvalue: Option<f64>,
    above_noise_edge: bool,
    loadings: &'a [f64],
}

/// What a shuffled collection's completed batches delivered: the central guarantee at
/// the fewest valid reports any batch held (docs/PRIVACY.md §9.1).
#[derive(Serialize)]
struct JsonDelivered {
    batches: u64,
    smallest_batch: u64,
    central_epsilon: f64,
    central_delta: f64,
}

/// A shuffled collection's guarantee (docs/PRIVACY.md §9).
#[derive(Serialize)]
struct JsonShuffle {
    local_epsilon: f64,
    central_epsilon: f64,
    central_delta: f64,
    min_batch_size: u64,
}

/// A central collection's release and budget.
#[derive(Serialize)]
struct JsonRelease {
    mechanism: &'static str,
    rho: f64,
    epsilon: f64,
    rho_spent_by_this_call: f64,
    rho_budget: f64,
    rho_spent: f64,
    radius: f64,
    trace: f64,
}

#[derive(Serialize)]
struct JsonPrecision<'a> {
    covariance: Vec<&'a [f64]>,
    lambda: f64,
    lambda_cross_validated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    graph: Option<Vec<[u32; 2]>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iterations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    converged: Option<bool>,
}

fn target_name(t: EstimateTarget) -> &'static str {
    match t {
        EstimateTarget::Unspecified | EstimateTarget::Covariance => "covariance",
        EstimateTarget::PrecisionRidge => "precision-ridge",
        EstimateTarget::PrecisionGlasso => "precision-glasso",
    }
}

fn bad(msg: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
}

/// The full symmetric matrices of an estimate, checked against its dimension.
struct Unpacked {
    target: EstimateTarget,
    /// The covariance, row-major `p × p`.
    covariance: Vec<f64>,
    /// The precision matrix Θ, row-major, for a precision target.
    precision: Option<Vec<f64>>,
}

/// Unpacks `estimate`'s matrices; an error when an entry count does not match the
/// dimension or the target is unknown.
fn unpack(estimate: &Estimate) -> std::io::Result<Unpacked> {
    let p = estimate.dim as usize;
    let d = ldpcov_privacy::layout::triangle_len(p);
    if estimate.upper_triangle.len() != d {
        return Err(bad(format!(
            "estimate carries {} entries, dimension {p} needs {d}",
            estimate.upper_triangle.len(),
        )));
    }
    let target = EstimateTarget::try_from(estimate.target)
        .map_err(|_| bad(format!("unknown estimate target {}", estimate.target)))?;
    let is_precision = matches!(
        target,
        EstimateTarget::PrecisionRidge | EstimateTarget::PrecisionGlasso
    );
    if is_precision && estimate.precision_upper_triangle.len() != d {
        return Err(bad(format!(
            "precision estimate carries {} entries, dimension {p} needs {d}",
            estimate.precision_upper_triangle.len(),
        )));
    }
    Ok(Unpacked {
        target,
        covariance: unpack_symmetric(p, &estimate.upper_triangle),
        precision: is_precision.then(|| unpack_symmetric(p, &estimate.precision_upper_triangle)),
    })
}

/// The `p × p` matrix of `estimate` that a picture of `what` shows. The one place
/// that chooses it: a new kind of picture is a new [`Part`] variant here.
pub fn part_matrix(estimate: &Estimate, what: Part) -> std::io::Result<DMatrix<f64>> {
    let p = estimate.dim as usize;
    let unpacked = unpack(estimate)?;
    let d = p * (p + 1) / 2;
    let packed_field = |packed: &[f64], name: &str| -> std::io::Result<Vec<f64>> {
        if packed.is_empty() {
            return Err(bad(format!(
                "the estimate carries no {name}: only mean-and-covariance collections release it"
            )));
        }
        if packed.len() != d {
            return Err(bad(format!(
                "{name} carries {} entries, dimension {p} needs {d}",
                packed.len()
            )));
        }
        Ok(unpack_symmetric(p, packed))
    };
    let values = match what {
        Part::Covariance => unpacked.covariance,
        Part::Precision => unpacked.precision.ok_or_else(|| {
            bad("the estimate carries no precision matrix (its target is the covariance)".into())
        })?,
        // Released with every estimate (of the released matrix).
        Part::Correlation => packed_field(&estimate.correlation, "correlation matrix")?,
        Part::SecondMoment => packed_field(&estimate.second_moment, "second moment")?,
        Part::Raw | Part::StandardErrors => {
            let bars = estimate.error_bars.as_ref().ok_or_else(|| {
                bad("the estimate carries no error bars: ask for them (--error-bars)".into())
            })?;
            if what == Part::Raw {
                packed_field(&bars.raw_upper_triangle, "raw matrix")?
            } else {
                packed_field(&bars.standard_errors, "standard errors")?
            }
        }
        Part::Mean => return Err(bad("the mean is a vector: see `mean_vector`".into())),
        Part::Components => {
            return Err(bad(
                "the components are K × p loadings: see `component_loadings`".into(),
            ));
        }
    };
    Ok(DMatrix::from_row_slice(p, p, &values))
}

/// The mean vector of `estimate` (mean-and-covariance collections), for
/// [`write_vector`](crate::write_vector).
pub fn mean_vector(estimate: &Estimate) -> std::io::Result<Vec<f64>> {
    let p = estimate.dim as usize;
    if estimate.mean.is_empty() {
        return Err(bad(
            "the estimate carries no mean: only mean-and-covariance collections release it".into(),
        ));
    }
    if estimate.mean.len() != p {
        return Err(bad(format!(
            "the mean carries {} entries, dimension {p} needs {p}",
            estimate.mean.len()
        )));
    }
    Ok(estimate.mean.clone())
}

/// The principal components of `estimate` as a `K × p` matrix of loadings (one row
/// per component, scikit-learn's `components_`), for CSV, NPY and pictures.
pub fn component_loadings(estimate: &Estimate) -> std::io::Result<DMatrix<f64>> {
    let p = estimate.dim as usize;
    let pcs = estimate.principal_components.as_ref().ok_or_else(|| {
        bad("the estimate carries no principal components: ask for them (--pca K)".into())
    })?;
    let k = pcs.components.len();
    if let Some(c) = pcs.components.iter().find(|c| c.loadings.len() != p) {
        return Err(bad(format!(
            "a component carries {} loadings, dimension {p} needs {p}",
            c.loadings.len()
        )));
    }
    Ok(DMatrix::from_fn(k, p, |c, i| pcs.components[c].loadings[i]))
}

/// The variables' names: the collection's, when it has one per variable, else
/// `x1 … xp` (1-based, the names every output of the CLI and the Python client use).
pub fn variable_names(estimate: &Estimate) -> Vec<String> {
    let p = estimate.dim as usize;
    if estimate.variable_names.len() == p {
        estimate.variable_names.clone()
    } else {
        (1..=p).map(|i| format!("x{i}")).collect()
    }
}

/// The raw matrix's eigenvalues that the principal components' `above_noise_edge`
/// flags test, largest first, one per component, as the server computed them
/// (`PrincipalComponent.raw_eigenvalue`: of the raw matrix, or of its correlation for
/// components of the correlation). `None` when the estimate carries no components.
pub fn raw_eigenvalues(estimate: &Estimate) -> Option<Vec<f64>> {
    let pcs = estimate.principal_components.as_ref()?;
    Some(pcs.components.iter().map(|c| c.raw_eigenvalue).collect())
}

/// The title of a picture of `what` of `estimate`: the matrix, the collection, the
/// number of reports n and the estimator's rule in short ([`short_rule`]; the JSON
/// output has it in full).
pub fn plot_title(estimate: &Estimate, what: Part) -> String {
    format!(
        "{} of {}, n = {}, {}",
        what.name(),
        estimate.collection_id,
        estimate.reports,
        short_rule(&estimate.threshold_rule)
    )
}

/// A rule's name without its parameters, for titles: `cv(diagonal=exempt, …): noise(c=2,
/// hard) β=1` becomes `cv: noise`; at most 32 characters.
pub fn short_rule(rule: &str) -> String {
    let head = |s: &str| -> String {
        s.split(['(', ';', ',', ' '])
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    };
    let short = match rule.find("): ") {
        Some(at) => format!("{}: {}", head(rule), head(&rule[at + 3..])),
        None => head(rule),
    };
    if short.chars().count() > 32 {
        short.chars().take(31).collect::<String>() + "…"
    } else {
        short
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
    let d = ldpcov_privacy::layout::triangle_len(p);
    match format {
        Format::Json => {
            let glasso = target == EstimateTarget::PrecisionGlasso;
            let doc = JsonEstimate {
                collection_id: &estimate.collection_id,
                dim: estimate.dim,
                reports: estimate.reports,
                sigma: estimate.sigma,
                entry_noise_sd: estimate.entry_noise_sd,
                threshold: estimate.threshold,
                threshold_rule: &estimate.threshold_rule,
                surviving_entries: estimate.surviving_entries,
                clamped_eigenvalues: estimate.clamped_eigenvalues,
                psd_projected: estimate.psd_projected,
                threshold_kind: &estimate.threshold_kind,
                target: target_name(target),
                matrix: full.chunks(p.max(1)).collect(),
                correlation: (!estimate.correlation.is_empty())
                    .then(|| part_matrix(estimate, Part::Correlation).map(|m| rows_of(&m)))
                    .transpose()?,
                moments: match Moments::try_from(estimate.moments) {
                    Ok(Moments::MeanAndCovariance) => "mean-and-covariance",
                    _ => "second-moment",
                },
                mean: &estimate.mean,
                mean_noise_sd: (!estimate.mean.is_empty()).then_some(estimate.mean_noise_sd),
                variable_names: variable_names(estimate),
                release: estimate.release.as_ref().map(|r| JsonRelease {
                    mechanism: match CentralMechanism::try_from(r.mechanism) {
                        Ok(CentralMechanism::GaussCov) => "gauss-cov",
                        Ok(CentralMechanism::GaussCovFolds) => "gauss-cov-folds",
                        Ok(CentralMechanism::SeparateCov) => "separate-cov",
                        Ok(CentralMechanism::LaplaceCov) => "laplace-cov",
                        Ok(CentralMechanism::AdaptiveCov) => "adaptive-cov",
                        Ok(CentralMechanism::SeparateCovLaplace) => "separate-cov-laplace",
                        Ok(CentralMechanism::AdaptiveCovLaplace) => "adaptive-cov-laplace",
                        Ok(CentralMechanism::CompressedNotDp) => {
                            "compressed (NOT differentially private)"
                        }
                        _ => "unknown",
                    },
                    rho: r.rho,
                    epsilon: r.epsilon,
                    rho_spent_by_this_call: estimate.release_rho_spent,
                    rho_budget: estimate.rho_budget,
                    rho_spent: estimate.rho_spent,
                    radius: estimate.release_radius,
                    trace: estimate.release_trace,
                }),
                shuffle: estimate.shuffle.as_ref().map(|s| JsonShuffle {
                    local_epsilon: s.local_epsilon,
                    central_epsilon: s.central_epsilon,
                    central_delta: s.central_delta,
                    min_batch_size: s.min_batch_size,
                }),
                shuffle_delivered: estimate.shuffle_delivered.as_ref().map(|d| JsonDelivered {
                    batches: d.batches,
                    smallest_batch: d.smallest_batch,
                    central_epsilon: d.central_epsilon,
                    central_delta: d.central_delta,
                }),
                verdict: estimate.verdict.as_ref().map(|v| JsonVerdict {
                    state: verdict_state_name(v.state()),
                    sufficient: v.sufficient,
                    noise_to_signal: v.noise_to_signal,
                    noise_to_signal_low: v.noise_to_signal_low,
                    noise_to_signal_high: v.noise_to_signal_high,
                    off_diagonal_signal_z: v.off_diagonal_signal_z,
                    top_eigenvalue_z: v.top_eigenvalue_z,
                    reports_needed: v.reports_needed,
                    reports_needed_low: v.reports_needed_low,
                    reports_needed_high: v.reports_needed_high,
                    target_noise_to_signal: v.target_noise_to_signal,
                    release_is_zero: v.release_is_zero,
                    summary: &v.summary,
                }),
                error_bars: match &estimate.error_bars {
                    None => None,
                    Some(b) => {
                        let full = |packed: &[f64], name: &str| -> std::io::Result<Vec<Vec<f64>>> {
                            if packed.len() != d {
                                return Err(bad(format!(
                                    "{name} carries {} entries, dimension {p} needs {d}",
                                    packed.len()
                                )));
                            }
                            Ok(unpack_symmetric(p, packed)
                                .chunks(p.max(1))
                                .map(<[f64]>::to_vec)
                                .collect())
                        };
                        Some(JsonErrorBars {
                            method: &b.method,
                            raw: full(&b.raw_upper_triangle, "raw matrix")?,
                            standard_errors: full(&b.standard_errors, "standard errors")?,
                            raw_correlation: full(&b.raw_correlation, "raw correlation")?,
                            correlation_standard_errors: full(
                                &b.correlation_standard_errors,
                                "correlation standard errors",
                            )?,
                        })
                    }
                },
                principal_components: estimate.principal_components.as_ref().map(|pc| {
                    JsonComponents {
                        of_correlation: pc.of_correlation,
                        total_variance: pc.total_variance,
                        noise_edge: pc.noise_edge,
                        components: pc
                            .components
                            .iter()
                            .enumerate()
                            .map(|(k, c)| JsonComponent {
                                eigenvalue: c.eigenvalue,
                                explained_variance_ratio: c.explained_variance_ratio,
                                raw_eigenvalue: raw_eigenvalues.and_then(|r| r.get(k).copied()),
                                above_noise_edge: c.above_noise_edge,
                                loadings: &c.loadings,
                            })
                            .collect(),
                    }
                }),
                precision: is_precision.then(|| JsonPrecision {
                    covariance: covariance.chunks(p.max(1)).collect(),
                    lambda: estimate.precision_lambda,
                    lambda_cross_validated: estimate.precision_lambda_cross_validated,
                    graph: glasso.then(|| estimate.graph.iter().map(|e| [e.i, e.j]).collect()),
                    iterations: glasso.then_some(estimate.precision_iterations),
                    converged: glasso.then_some(estimate.precision_converged),
                }),
            };
            serde_json::to_writer_pretty(&mut *out, &doc)?;
            writeln!(out)
        }
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

/// The entries of `m` row by row (a `DMatrix` is column-major).
fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    m.transpose().as_slice().to_vec()
}

/// The rows of `m`, for JSON.
fn rows_of(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    m.row_iter().map(|r| r.iter().copied().collect()).collect()
}

/// One CSV number: `{:e}`, or an empty cell for an undefined (NaN) entry.
fn cell(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else {
        format!("{v:e}")
    }
}

/// Writes a header row of `names`, then row-major `values` in rows of `names.len()`
/// numbers, as RFC 4180 CSV (names holding commas or quotes are quoted).
fn write_csv(names: &[String], values: &[f64], out: &mut dyn Write) -> std::io::Result<()> {
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
fn csv_io(e: csv::Error) -> std::io::Error {
    match e.into_kind() {
        csv::ErrorKind::Io(io) => io,
        other => std::io::Error::other(format!("{other:?}")),
    }
}

/// Writes row-major `values` as a float64 NPY array of `shape`.
fn write_npy(shape: &[u64], values: &[f64], out: &mut dyn Write) -> std::io::Result<()> {
    use npyz::WriterBuilder;
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().copied())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimate() -> Estimate {
        Estimate {
            collection_id: "c".into(),
            dim: 2,
            upper_triangle: vec![1.0, 0.5, 2.0],
            reports: 10,
            ..Default::default()
        }
    }

    #[test]
    fn csv_is_the_full_symmetric_matrix() {
        let mut out = Vec::new();
        write_estimate(&estimate(), None, Format::Csv, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "x1,x2\n1e0,5e-1\n5e-1,2e0\n"
        );
    }

    #[test]
    fn json_has_matrix_and_metadata() {
        let mut out = Vec::new();
        write_estimate(&estimate(), None, Format::Json, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["reports"], 10);
        assert_eq!(v["matrix"][1][0], 0.5);
    }

    #[test]
    fn npy_header_and_data() {
        let mut out = Vec::new();
        write_estimate(&estimate(), None, Format::Npy, &mut out).unwrap();
        assert_eq!(&out[..6], b"\x93NUMPY");
        let header = String::from_utf8_lossy(&out[10..out.len() - 32]);
        assert!(
            header.contains("'<f8'") && header.contains("'shape': (2, 2"),
            "{header}"
        );
        let data: Vec<f64> = out[out.len() - 32..]
            .chunks(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(data, vec![1.0, 0.5, 0.5, 2.0]);
    }

    #[test]
    fn precision_target_writes_theta_and_the_graph() {
        let mut e = estimate();
        e.target = EstimateTarget::PrecisionGlasso as i32;
        e.precision_upper_triangle = vec![2.0, -0.5, 1.0];
        e.precision_lambda = 0.1;
        e.graph = vec![ldpcov_proto::v1::Edge { i: 0, j: 1 }];
        let mut csv = Vec::new();
        write_estimate(&e, None, Format::Csv, &mut csv).unwrap();
        assert_eq!(
            String::from_utf8(csv).unwrap(),
            "x1,x2\n2e0,-5e-1\n-5e-1,1e0\n"
        );
        let mut json = Vec::new();
        write_estimate(&e, None, Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["target"], "precision-glasso");
        assert_eq!(v["matrix"][0][1], -0.5);
        assert_eq!(v["precision"]["covariance"][0][1], 0.5);
        assert_eq!(v["precision"]["graph"][0][1], 1);
        // Missing Θ for a precision target is an error, not a silent covariance.
        e.precision_upper_triangle.clear();
        assert!(write_estimate(&e, None, Format::Npy, &mut Vec::new()).is_err());
    }

    #[test]
    fn the_plotted_matrix_is_the_released_one() {
        let e = estimate();
        assert_eq!(Part::released(&e), Part::Covariance);
        let m = part_matrix(&e, Part::Covariance).unwrap();
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[1.0, 0.5, 0.5, 2.0]));
        assert!(part_matrix(&e, Part::Precision).is_err());
        let mut e = estimate();
        e.target = EstimateTarget::PrecisionRidge as i32;
        e.precision_upper_triangle = vec![2.0, -0.5, 1.0];
        assert_eq!(Part::released(&e), Part::Precision);
        let m = part_matrix(&e, Part::released(&e)).unwrap();
        assert_eq!(m[(1, 0)], -0.5);
        assert!(write_estimate(&e, None, Format::Png, &mut Vec::new()).is_err());
    }

    /// A 3-variable estimate carrying every part: names (one with a comma, one with a
    /// quote), the correlation with an undefined entry (NaN), error bars, components
    /// (the second one's raw eigenvalue below the noise edge), a verdict.
    fn full_estimate() -> Estimate {
        use ldpcov_proto::v1::{ErrorBars, PrincipalComponent, PrincipalComponents, SignalVerdict};
        let nan = f64::NAN;
        Estimate {
            collection_id: "c".into(),
            dim: 3,
            upper_triangle: vec![4.0, 1.0, 0.0, 1.0, 0.0, 1e-9],
            correlation: vec![1.0, 0.5, nan, 1.0, nan, 1.0],
            reports: 10,
            variable_names: vec!["height, cm".into(), "say \"hi\"".into(), "z".into()],
            mean: vec![0.0, 1.0, 2.0],
            moments: Moments::MeanAndCovariance as i32,
            verdict: Some(SignalVerdict {
                sufficient: false,
                summary: "insufficient: the noise is 37× the signal".into(),
                ..Default::default()
            }),
            error_bars: Some(ErrorBars {
                raw_upper_triangle: vec![5.0, 0.0, 0.0, 1.0, 0.0, 0.5],
                standard_errors: vec![0.1, 0.2, 0.3, 0.1, 0.2, 0.1],
                raw_correlation: vec![1.0, 0.0, nan, 1.0, nan, 1.0],
                correlation_standard_errors: vec![0.0, 0.1, nan, 0.0, nan, 0.0],
                ..Default::default()
            }),
            principal_components: Some(PrincipalComponents {
                noise_edge: 2.0,
                total_variance: 5.0,
                components: vec![
                    PrincipalComponent {
                        eigenvalue: 4.3,
                        explained_variance_ratio: 0.86,
                        loadings: vec![0.96, 0.29, 0.0],
                        above_noise_edge: true,
                        raw_eigenvalue: 5.0,
                    },
                    PrincipalComponent {
                        eigenvalue: 0.7,
                        explained_variance_ratio: 0.14,
                        loadings: vec![-0.29, 0.96, 0.0],
                        above_noise_edge: false,
                        raw_eigenvalue: 1.0,
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn every_csv_has_a_header_of_quoted_names() {
        let e = full_estimate();
        let header = "\"height, cm\",\"say \"\"hi\"\"\",z\n";
        let mut out = Vec::new();
        write_estimate(&e, None, Format::Csv, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(header), "{text}");
        assert_eq!(text.lines().count(), 4, "{text}");
        for part in [
            Part::Correlation,
            Part::StandardErrors,
            Part::Raw,
            Part::Mean,
        ] {
            let mut out = Vec::new();
            write_part(&e, None, part, Format::Csv, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            assert!(text.starts_with(header), "{part:?}: {text}");
        }
        let mut out = Vec::new();
        write_part(&e, None, Part::Components, Format::Csv, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(
                "component,eigenvalue,explained_variance_ratio,raw_eigenvalue,\
                 above_noise_edge,\"height, cm\",\"say \"\"hi\"\"\",z\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn unnamed_variables_are_x1_to_xp_everywhere() {
        let mut e = full_estimate();
        e.variable_names.clear();
        assert_eq!(variable_names(&e), ["x1", "x2", "x3"]);
        let mut json = Vec::new();
        write_estimate(&e, None, Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["variable_names"], serde_json::json!(["x1", "x2", "x3"]));
        let mut csv = Vec::new();
        write_part(&e, None, Part::Mean, Format::Csv, &mut csv).unwrap();
        assert_eq!(String::from_utf8(csv).unwrap(), "x1,x2,x3\n0e0,1e0,2e0\n");
    }

    #[test]
    fn undefined_correlations_are_null_in_json_and_empty_in_csv() {
        let e = full_estimate();
        let mut json = Vec::new();
        write_estimate(&e, None, Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["correlation"][0], serde_json::json!([1.0, 0.5, null]));
        assert_eq!(v["correlation"][2][1], serde_json::Value::Null);
        let bars = &v["error_bars"];
        assert_eq!(bars["raw_correlation"][0][2], serde_json::Value::Null);
        assert_eq!(
            bars["correlation_standard_errors"][2][0],
            serde_json::Value::Null
        );
        let mut csv = Vec::new();
        write_part(&e, None, Part::Correlation, Format::Csv, &mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        let rows: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(rows, ["1e0,5e-1,", "5e-1,1e0,", ",,1e0"], "{text}");
    }

    #[test]
    fn the_noise_edge_flag_shows_the_raw_eigenvalue_it_tests() {
        let e = full_estimate();
        // The server's raw eigenvalues 5 and 1, the edge 2.
        let raw = raw_eigenvalues(&e).unwrap();
        assert_eq!(raw.len(), 2);
        assert!(
            (raw[0] - 5.0).abs() < 1e-12 && (raw[1] - 1.0).abs() < 1e-12,
            "{raw:?}"
        );
        let mut json = Vec::new();
        write_estimate(&e, Some(&raw), Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let pcs = &v["principal_components"]["components"];
        assert_eq!(pcs[0]["above_noise_edge"], true);
        assert!((pcs[0]["raw_eigenvalue"].as_f64().unwrap() - 5.0).abs() < 1e-12);
        assert_eq!(pcs[1]["above_noise_edge"], false);
        assert!((pcs[1]["raw_eigenvalue"].as_f64().unwrap() - 1.0).abs() < 1e-12);
        let mut csv = Vec::new();
        write_part(&e, Some(&raw), Part::Components, Format::Csv, &mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        let second: Vec<&str> = text.lines().nth(2).unwrap().split(',').collect();
        assert_eq!(
            &second[..5],
            ["PC2", "7e-1", "1.4e-1", "1e0", "false"],
            "{text}"
        );
        // Without components there is nothing to show.
        let mut e = e;
        e.principal_components = None;
        assert!(raw_eigenvalues(&e).is_none());
    }

    /// The JSON's keys are exactly the ones docs/USAGE.md lists (between its
    /// `json-keys` markers), for an estimate carrying every optional part.
    #[test]
    fn json_keys_are_the_documented_ones() {
        let usage = include_str!("../../docs/USAGE.md");
        let (_, rest) = usage.split_once("<!-- json-keys -->").unwrap();
        let (table, _) = rest.split_once("<!-- /json-keys -->").unwrap();
        let mut documented: Vec<&str> = table
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split_once('`').map(|(key, _)| key))
            .collect();
        documented.sort_unstable();
        let mut e = full_estimate();
        e.target = EstimateTarget::PrecisionGlasso as i32;
        e.precision_upper_triangle = vec![1.0; 6];
        e.release = Some(Default::default());
        e.shuffle = Some(Default::default());
        e.shuffle_delivered = Some(Default::default());
        let mut json = Vec::new();
        write_estimate(&e, None, Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, documented);
    }

    #[test]
    fn inconsistent_estimate_is_an_error() {
        let mut e = estimate();
        e.upper_triangle.pop();
        assert!(write_estimate(&e, None, Format::Csv, &mut Vec::new()).is_err());
    }
}
