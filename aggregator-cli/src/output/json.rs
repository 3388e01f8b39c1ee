//! The JSON form of an estimate: one object with the matrix and its metadata (the
//! verdict, error bars, components, the release's accounting, the precision target's
//! extras). docs/USAGE.md lists its keys.

use std::io::Write;

use ldpcov_privacy::layout::unpack_symmetric;
use ldpcov_proto::v1::{CentralMechanism, Estimate, EstimateTarget, Moments};
use serde::Serialize;

use super::Part;
use super::files::rows_of;
use super::parts::{bad, part_matrix, variable_names};

#[derive(Serialize)]
pub(super) struct JsonEstimate<'a> {
    pub(super) collection_id: &'a str,
    pub(super) dim: u32,
    pub(super) reports: u64,
    pub(super) sigma: f64,
    pub(super) entry_noise_sd: f64,
    pub(super) threshold: f64,
    pub(super) threshold_rule: &'a str,
    pub(super) surviving_entries: u64,
    pub(super) clamped_eigenvalues: u32,
    pub(super) psd_projected: bool,
    pub(super) threshold_kind: &'a str,
    pub(super) target: &'static str,
    pub(super) matrix: Vec<&'a [f64]>,
    /// The correlation of the released covariance (`null` entries: undefined).
    pub(super) correlation: Option<Vec<Vec<f64>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) precision: Option<JsonPrecision<'a>>,
    pub(super) moments: &'static str,
    #[serde(skip_serializing_if = "<[f64]>::is_empty")]
    pub(super) mean: &'a [f64],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) mean_noise_sd: Option<f64>,
    pub(super) variable_names: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) release: Option<JsonRelease>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) shuffle: Option<JsonShuffle>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) shuffle_delivered: Option<JsonDelivered>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) verdict: Option<JsonVerdict<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error_bars: Option<JsonErrorBars<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) principal_components: Option<JsonComponents<'a>>,
}

/// Whether the reports carry enough signal (the estimate's `SignalVerdict`).
#[derive(Serialize)]
pub(super) struct JsonVerdict<'a> {
    /// `sufficient`, `at the edge` or `insufficient`.
    pub(super) state: &'static str,
    pub(super) sufficient: bool,
    /// `null`: no signal measurable.
    pub(super) noise_to_signal: Option<f64>,
    /// The ratio's interval (`high` `null`: unbounded).
    pub(super) noise_to_signal_low: Option<f64>,
    pub(super) noise_to_signal_high: Option<f64>,
    pub(super) off_diagonal_signal_z: f64,
    pub(super) top_eigenvalue_z: f64,
    pub(super) reports_needed: Option<u64>,
    pub(super) reports_needed_low: Option<u64>,
    pub(super) reports_needed_high: Option<u64>,
    pub(super) target_noise_to_signal: f64,
    pub(super) release_is_zero: bool,
    pub(super) summary: &'a str,
}

/// The verdict's state as the JSON and the text name it.
pub(super) fn verdict_state_name(state: ldpcov_proto::v1::VerdictState) -> &'static str {
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
pub(super) struct JsonErrorBars<'a> {
    pub(super) method: &'a str,
    pub(super) raw: Vec<Vec<f64>>,
    pub(super) standard_errors: Vec<Vec<f64>>,
    pub(super) raw_correlation: Vec<Vec<f64>>,
    pub(super) correlation_standard_errors: Vec<Vec<f64>>,
}

/// The principal components, largest first.
#[derive(Serialize)]
pub(super) struct JsonComponents<'a> {
    pub(super) of_correlation: bool,
    pub(super) total_variance: f64,
    pub(super) noise_edge: f64,
    pub(super) components: Vec<JsonComponent<'a>>,
}

#[derive(Serialize)]
pub(super) struct JsonComponent<'a> {
    pub(super) eigenvalue: f64,
    pub(super) explained_variance_ratio: f64,
    /// The raw matrix's eigenvalue of the same rank: what `above_noise_edge` compares
    /// with `noise_edge` (`null` when the estimate carries no raw matrix).
    pub(super) raw_eigenvalue: Option<f64>,
    pub(super) above_noise_edge: bool,
    pub(super) loadings: &'a [f64],
}

/// What a shuffled collection's completed batches delivered: the central guarantee at
/// the fewest valid reports any batch held (docs/PRIVACY.md §9.1).
#[derive(Serialize)]
pub(super) struct JsonDelivered {
    pub(super) batches: u64,
    pub(super) smallest_batch: u64,
    pub(super) central_epsilon: f64,
    pub(super) central_delta: f64,
}

/// A shuffled collection's guarantee (docs/PRIVACY.md §9).
#[derive(Serialize)]
pub(super) struct JsonShuffle {
    pub(super) local_epsilon: f64,
    pub(super) central_epsilon: f64,
    pub(super) central_delta: f64,
    pub(super) min_batch_size: u64,
}

/// A central collection's release and budget.
#[derive(Serialize)]
pub(super) struct JsonRelease {
    pub(super) mechanism: &'static str,
    pub(super) rho: f64,
    pub(super) epsilon: f64,
    pub(super) rho_spent_by_this_call: f64,
    pub(super) rho_budget: f64,
    pub(super) rho_spent: f64,
    pub(super) radius: f64,
    pub(super) trace: f64,
}

#[derive(Serialize)]
pub(super) struct JsonPrecision<'a> {
    pub(super) covariance: Vec<&'a [f64]>,
    pub(super) lambda: f64,
    pub(super) lambda_cross_validated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) graph: Option<Vec<[u32; 2]>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) iterations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) converged: Option<bool>,
}

pub(super) fn target_name(t: EstimateTarget) -> &'static str {
    match t {
        EstimateTarget::Unspecified | EstimateTarget::Covariance => "covariance",
        EstimateTarget::PrecisionRidge => "precision-ridge",
        EstimateTarget::PrecisionGlasso => "precision-glasso",
    }
}

/// Writes `estimate` as one JSON object (pretty, then a newline): the matrix (`full`:
/// the precision matrix for a precision target, else the covariance) and the metadata;
/// `covariance` is the covariance a precision matrix came from.
pub(super) fn write_json(
    estimate: &Estimate,
    raw_eigenvalues: Option<&[f64]>,
    target: EstimateTarget,
    covariance: &[f64],
    full: &[f64],
    is_precision: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let p = estimate.dim as usize;
    let d = ldpcov_privacy::layout::triangle_len(p);
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
                Ok(CentralMechanism::CompressedNotDp) => "compressed (NOT differentially private)",
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
        principal_components: estimate
            .principal_components
            .as_ref()
            .map(|pc| JsonComponents {
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
