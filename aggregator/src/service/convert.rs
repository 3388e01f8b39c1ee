//! The mapping between the wire and the estimators: a `GetEstimate` request into
//! [`EstimateOptions`] and a [`Target`] ([`options_from_request`], validated with
//! `INVALID_ARGUMENT` on bad values), and an estimator's result into the `Estimate`
//! message ([`estimate_response`]).

use ldpcov_estimate::{
    self as estimate, AdaptiveThreshold, BulkShrinkage, CovarianceEstimate, CrossValidation,
    EstimateOptions, FactorModel, GlassoOptions, LdpNoiseThreshold, PrecisionEstimate,
    PrecisionMethod, RegularisationRule, SpectralShrinkage, ThresholdKind, UniversalThreshold,
    spectral::Shrinker,
};
use ldpcov_privacy::Collection;
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_proto::v1::{
    CentralRelease, CrossValidatedThreshold, Edge, ErrorBars, Estimate, EstimateTarget,
    GetEstimateRequest, PrincipalComponent, PrincipalComponents, SignalVerdict, SpectralLoss,
    ThresholdKind as WireKind, VerdictState, get_estimate_request,
};
use nalgebra::DMatrix;
use tonic::Status;

use super::status::{estimate_status, invalid};

/// What a validated GetEstimate request asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Target {
    /// The covariance estimate.
    Covariance,
    /// A precision matrix by `method`, at λ or (None) at the cross-validated λ.
    Precision(PrecisionMethod, Option<f64>),
}

/// The release fields of a central estimate's response.
pub(super) struct ReleaseInfo {
    /// The release, as asked.
    pub(super) release: CentralRelease,
    /// ρ spent by this call (0 when the ledger answered).
    pub(super) rho_spent_now: f64,
    /// The collection's total ρ spent, this release included.
    pub(super) rho_spent_total: f64,
    /// The release's clipping radius, data units (R, or AdaptiveCov's R·2^−j).
    pub(super) radius: f64,
    /// AdaptiveCov's private trace of the second moment, data units (0 otherwise).
    pub(super) trace: f64,
}

/// What an analyst reads beside the matrix (docs/USAGE.md): the verdict on the signal,
/// and the error bars of the raw matrix and the principal components if asked for.
pub(super) struct Analysis {
    pub(super) error_bars: Option<estimate::ErrorBars>,
    pub(super) verdict: estimate::SignalVerdict,
    pub(super) components: Option<estimate::PrincipalComponents>,
    /// The released matrix's correlation, NaN where undefined
    /// ([`estimate::released_correlation`]).
    pub(super) correlation: DMatrix<f64>,
    /// The variables whose correlations are undefined.
    pub(super) undefined_correlation_variables: Vec<u32>,
}

impl Analysis {
    /// Computes it on a blocking thread's time (two or three eigendecompositions):
    /// `local` says whether the accumulator's squares are the devices' privatised ones
    /// (else: a central release, whose squares are never read and whose noise is
    /// additive), `released` is the released covariance.
    pub(super) fn compute(
        collection: &Collection,
        input: &estimate::EstimationInput,
        acc: &estimate::Accumulator,
        released: &DMatrix<f64>,
        request: &GetEstimateRequest,
    ) -> Result<Self, Status> {
        let local = !collection.is_central();
        let squares = if local {
            estimate::SumsOfSquares::Private
        } else {
            estimate::SumsOfSquares::NotPrivate
        };
        let error_bars = request
            .error_bars
            .then(|| estimate::error_bars(input, acc, squares))
            .transpose()
            .map_err(estimate_status)?;
        let verdict =
            estimate::signal_verdict(input, acc, squares, released).map_err(estimate_status)?;
        let variance_noise_sd = input.diagonal_entry_noise_sd(acc.count);
        let correlation = estimate::released_correlation(released, variance_noise_sd);
        let undefined_correlation_variables = (0..released.nrows())
            .filter(|&i| !estimate::variance_above_noise(released[(i, i)], variance_noise_sd))
            .map(|i| i as u32)
            .collect();
        let components = match request.principal_components {
            0 => None,
            k => Some(
                estimate::principal_components(
                    input,
                    acc,
                    released,
                    k as usize,
                    request.principal_components_of_correlation,
                )
                .map_err(estimate_status)?,
            ),
        };
        Ok(Analysis {
            error_bars,
            verdict,
            components,
            correlation,
            undefined_correlation_variables,
        })
    }
}

/// Refuses a request for more principal components than the collection has variables,
/// or for the correlation's components without any.
pub(super) fn check_principal_components(
    req: &GetEstimateRequest,
    dim: usize,
) -> Result<(), Status> {
    if req.principal_components as usize > dim {
        return Err(invalid(format!(
            "principal_components = {} exceeds the collection's dimension {dim}",
            req.principal_components
        )));
    }
    if req.principal_components_of_correlation && req.principal_components == 0 {
        return Err(invalid(
            "principal_components_of_correlation needs principal_components ≥ 1",
        ));
    }
    Ok(())
}

/// Most values a list of a GetEstimate request (a grid of scales, weights, bandwidths,
/// α or τ) may hold.
pub const MAX_ESTIMATE_LIST: usize = 64;

/// Most candidates the grids of one request may combine: (noise + adaptive scales) ×
/// diagonal shrinkage weights for cross-validation, α × τ for bulk shrinkage.
pub const MAX_ESTIMATE_CANDIDATES: usize = 1024;

/// Refuses a request whose lists are longer than [`MAX_ESTIMATE_LIST`] or whose grids
/// combine more than [`MAX_ESTIMATE_CANDIDATES`] candidates, naming the field and the
/// bound, before any work.
fn check_budget(req: &GetEstimateRequest) -> Result<(), Status> {
    use get_estimate_request::Threshold;
    let list = |field: &str, len: usize| {
        if len > MAX_ESTIMATE_LIST {
            Err(invalid(format!(
                "{field} has {len} values; at most {MAX_ESTIMATE_LIST} are allowed"
            )))
        } else {
            Ok(())
        }
    };
    let product = |what: &str, n: usize| {
        if n > MAX_ESTIMATE_CANDIDATES {
            Err(invalid(format!(
                "{what} make {n} candidates; at most {MAX_ESTIMATE_CANDIDATES} are allowed"
            )))
        } else {
            Ok(())
        }
    };
    match &req.threshold {
        Some(Threshold::CrossValidated(c)) => {
            list("cross_validated.noise_scales", c.noise_scales.len())?;
            list("cross_validated.adaptive_scales", c.adaptive_scales.len())?;
            list(
                "cross_validated.diagonal_shrinkage",
                c.diagonal_shrinkage.len(),
            )?;
            list("cross_validated.bandwidths", c.bandwidths.len())?;
            let d = CrossValidation::default();
            let len = |given: usize, default: usize| if given == 0 { default } else { given };
            let scales = len(c.noise_scales.len(), d.noise_scales.len())
                + len(c.adaptive_scales.len(), d.adaptive_scales.len());
            let weights = len(c.diagonal_shrinkage.len(), d.diagonal_shrinkage.len());
            product(
                "cross_validated: (noise_scales + adaptive_scales) × diagonal_shrinkage",
                scales * weights,
            )
        }
        Some(Threshold::BulkShrink(b)) => {
            list("bulk_shrink.alphas", b.alphas.len())?;
            list("bulk_shrink.taus", b.taus.len())?;
            let d = BulkShrinkage::default();
            let len = |given: usize, default: usize| if given == 0 { default } else { given };
            product(
                "bulk_shrink: alphas × taus",
                len(b.alphas.len(), d.alphas.len()) * len(b.taus.len(), d.taus.len()),
            )
        }
        _ => Ok(()),
    }
}

/// Translates and validates a GetEstimate request (INVALID_ARGUMENT on bad values,
/// lists beyond [`MAX_ESTIMATE_LIST`] included).
pub(crate) fn options_from_request(
    req: &GetEstimateRequest,
) -> Result<(EstimateOptions, Target), Status> {
    check_budget(req)?;
    let kind = match WireKind::try_from(req.threshold_kind) {
        Ok(WireKind::Unspecified) => None,
        Ok(WireKind::Hard) => Some(ThresholdKind::Hard),
        Ok(WireKind::Soft) => Some(ThresholdKind::Soft),
        Err(_) => {
            return Err(invalid(format!(
                "unknown threshold_kind {}",
                req.threshold_kind
            )));
        }
    };
    let cv = |c: &CrossValidatedThreshold| {
        let d = CrossValidation::default();
        let or_default = |given: &[f64], default: &[f64]| {
            if given.is_empty() {
                default.to_vec()
            } else {
                given.to_vec()
            }
        };
        RegularisationRule::CrossValidated(CrossValidation {
            noise_scales: or_default(&c.noise_scales, &d.noise_scales),
            adaptive_scales: or_default(&c.adaptive_scales, &d.adaptive_scales),
            diagonal_shrinkage: or_default(&c.diagonal_shrinkage, &d.diagonal_shrinkage),
            kinds: kind.map(|k| vec![k]).unwrap_or(d.kinds),
            threshold_diagonal: c.threshold_diagonal,
            banding: !c.unordered_variables,
            toeplitz: !c.unordered_variables,
            spectral: !c.no_spectral,
            threshold_one_standard_error: !c.smallest_mean_threshold,
            stack_families: !c.no_stacking,
            trivial_candidates: !c.no_trivial_estimates,
            bandwidths: c.bandwidths.iter().map(|&b| b as usize).collect(),
            ..d
        })
    };
    use get_estimate_request::Threshold;
    let rule = match &req.threshold {
        None => cv(&CrossValidatedThreshold::default()),
        Some(Threshold::None(_)) => RegularisationRule::None,
        Some(Threshold::Universal(u)) => RegularisationRule::Universal(UniversalThreshold {
            gamma: u.gamma,
            c: if u.c == 0.0 { 4.0 } else { u.c },
            threshold_diagonal: u.threshold_diagonal,
        }),
        Some(Threshold::LdpNoise(s)) => RegularisationRule::LdpNoise(LdpNoiseThreshold {
            xi: s.xi,
            threshold_diagonal: s.threshold_diagonal,
        }),
        Some(Threshold::Adaptive(a)) => RegularisationRule::Adaptive(AdaptiveThreshold {
            eta: if a.eta == 0.0 { 2.0 } else { a.eta },
            threshold_diagonal: a.threshold_diagonal,
        }),
        Some(Threshold::CrossValidated(c)) => cv(c),
        Some(Threshold::Spectral(s)) => RegularisationRule::Spectral(SpectralShrinkage {
            shrinker: match SpectralLoss::try_from(s.loss) {
                Ok(SpectralLoss::Unspecified | SpectralLoss::Balanced) => Shrinker::Balanced,
                Ok(SpectralLoss::Frobenius) => Shrinker::Frobenius,
                Ok(SpectralLoss::Operator) => Shrinker::Operator,
                Err(_) => return Err(invalid(format!("unknown spectral loss {}", s.loss))),
            },
            rank: s.rank.map(|k| k as usize),
        }),
        Some(Threshold::Factor(f)) => RegularisationRule::Factor(FactorModel {
            rank: f.rank.map(|k| k as usize),
        }),
        Some(Threshold::BulkShrink(b)) => {
            let default = BulkShrinkage::default();
            let or_default = |given: &[f64], default: Vec<f64>| {
                if given.is_empty() {
                    default
                } else {
                    given.to_vec()
                }
            };
            RegularisationRule::BulkShrink(BulkShrinkage {
                alphas: or_default(&b.alphas, default.alphas),
                taus: or_default(&b.taus, default.taus),
            })
        }
    };
    let options = EstimateOptions {
        rule,
        kind: kind.unwrap_or_default(),
        skip_psd_projection: req.skip_psd_projection,
        psd_floor: req.psd_floor,
    };
    estimate::validate_options(&options).map_err(estimate_status)?;
    let params = req.precision.unwrap_or_default();
    let lambda = params.lambda;
    let target = match EstimateTarget::try_from(req.target) {
        Ok(EstimateTarget::Unspecified | EstimateTarget::Covariance) => Target::Covariance,
        Ok(EstimateTarget::PrecisionRidge) => {
            if let Some(l) = lambda
                && !(l > 0.0 && l <= estimate::MAX_LAMBDA)
            {
                return Err(invalid(format!(
                    "ridge lambda = {} must be a number in (0, 1e200]",
                    ldpcov_privacy::limits::ShortNumber(l)
                )));
            }
            Target::Precision(PrecisionMethod::Ridge, lambda)
        }
        Ok(EstimateTarget::PrecisionGlasso) => {
            let d = GlassoOptions::default();
            let opts = GlassoOptions {
                rho: if params.rho == 0.0 { d.rho } else { params.rho },
                max_iterations: if params.max_iterations == 0 {
                    d.max_iterations
                } else {
                    params.max_iterations
                },
                penalize_diagonal: params.penalize_diagonal,
                ..d
            };
            estimate::validate_glasso(lambda.unwrap_or(0.0), &opts).map_err(estimate_status)?;
            Target::Precision(PrecisionMethod::Glasso(opts), lambda)
        }
        Err(_) => return Err(invalid(format!("unknown target {}", req.target))),
    };
    if req.skip_psd_projection && target != Target::Covariance {
        return Err(invalid(
            "skip_psd_projection is only for the covariance target (precision estimators need the projected estimate)",
        ));
    }
    Ok((options, target))
}

/// The `Estimate` message of collection `c`'s estimate: the covariance `result` (with
/// the per-report `sigma` it was computed with), the precision estimate if `target`
/// asked for one, and a central collection's release fields.
pub(super) fn estimate_response(
    c: &Collection,
    target: &Target,
    sigma: f64,
    result: &CovarianceEstimate,
    precision: Option<PrecisionEstimate>,
    release: Option<ReleaseInfo>,
    analysis: Analysis,
) -> Estimate {
    let packed = |m: &DMatrix<f64>| -> Vec<f64> {
        triangle_pairs(c.dim()).map(|(i, j)| m[(i, j)]).collect()
    };
    let wire_target = match target {
        Target::Covariance => EstimateTarget::Covariance,
        Target::Precision(PrecisionMethod::Ridge, _) => EstimateTarget::PrecisionRidge,
        Target::Precision(PrecisionMethod::Glasso(_), _) => EstimateTarget::PrecisionGlasso,
    };
    let mut out = Estimate {
        collection_id: c.id().to_string(),
        dim: c.dim() as u32,
        upper_triangle: packed(&result.matrix),
        reports: result.reports,
        sigma,
        entry_noise_sd: result.entry_noise_sd,
        threshold: result.threshold,
        threshold_rule: result.rule.clone(),
        surviving_entries: result.surviving_entries,
        clamped_eigenvalues: result.clamped_eigenvalues,
        psd_projected: result.psd_projected,
        target: wire_target as i32,
        threshold_kind: result.kind.name().to_string(),
        moments: c.moments() as i32,
        mean: result.moments.mean.clone().unwrap_or_default(),
        mean_noise_sd: result.moments.mean_noise_sd,
        second_moment: if c.has_mean() {
            result.moments.second_moment.clone()
        } else {
            Vec::new()
        },
        variable_names: c.variable_names().to_vec(),
        // The guarantee, not the keys (a parameter answer carries those).
        shuffle: c.params().shuffle,
        ..Default::default()
    };
    let Analysis {
        error_bars,
        verdict,
        components,
        correlation,
        undefined_correlation_variables,
    } = analysis;
    out.correlation = packed(&correlation);
    out.undefined_correlation_variables = undefined_correlation_variables;
    out.error_bars = error_bars.map(|e| ErrorBars {
        raw_upper_triangle: e.raw,
        standard_errors: e.standard_errors,
        raw_correlation: e.raw_correlation,
        correlation_standard_errors: e.correlation_standard_errors,
        method: e.method.name().to_string(),
    });
    out.verdict = Some(SignalVerdict {
        sufficient: verdict.sufficient,
        noise_to_signal: verdict.noise_to_signal,
        off_diagonal_signal_z: verdict.off_diagonal_signal_z,
        top_eigenvalue_z: verdict.top_eigenvalue_z,
        reports_needed: verdict.reports_needed,
        target_noise_to_signal: estimate::TARGET_NOISE_TO_SIGNAL,
        summary: verdict.summary,
        state: match verdict.state {
            estimate::VerdictState::Sufficient => VerdictState::Sufficient,
            estimate::VerdictState::AtTheEdge => VerdictState::AtTheEdge,
            estimate::VerdictState::Insufficient => VerdictState::Insufficient,
        } as i32,
        noise_to_signal_low: verdict.noise_to_signal_low,
        noise_to_signal_high: verdict.noise_to_signal_high,
        reports_needed_low: verdict.reports_needed_low,
        reports_needed_high: verdict.reports_needed_high,
        release_is_zero: verdict.release_is_zero,
    });
    out.principal_components = components.map(|pc| PrincipalComponents {
        of_correlation: pc.of_correlation,
        total_variance: pc.total_variance,
        noise_edge: pc.noise_edge,
        components: pc
            .components
            .into_iter()
            .map(|c| PrincipalComponent {
                eigenvalue: c.eigenvalue,
                explained_variance_ratio: c.explained_variance_ratio,
                loadings: c.loadings,
                above_noise_edge: c.above_noise_edge,
                raw_eigenvalue: c.raw_eigenvalue,
            })
            .collect(),
    });
    if let Some(info) = release {
        out.release = Some(info.release);
        out.release_rho_spent = info.rho_spent_now;
        out.rho_budget = c.rho();
        out.rho_spent = info.rho_spent_total;
        out.release_radius = info.radius;
        out.release_trace = info.trace;
    }
    if let Some(pr) = precision {
        out.precision_upper_triangle = packed(&pr.theta);
        out.precision_lambda = pr.lambda;
        out.precision_lambda_cross_validated = pr.lambda_cross_validated;
        if let Some(g) = pr.glasso {
            out.graph = g
                .edges
                .iter()
                .map(|&(i, j)| Edge {
                    i: i as u32,
                    j: j as u32,
                })
                .collect();
            out.precision_iterations = g.iterations;
            out.precision_converged = g.converged;
        }
    }
    out
}
