//! The rules a release is made by: the [`RegularisationRule`] that names a fixed-form
//! threshold (Wang & Xu's universal threshold, the heavy-tailed LDP threshold, Cai &
//! Liu's entry-adaptive threshold), the cross-validation, or a spectral estimator;
//! the parameters of each, and the formulas of the fixed thresholds' λ.
//!
//! `RegularisationRule` rather than a "threshold rule": three of its rules (the
//! spectral estimators) threshold nothing, and the cross-validation may choose a
//! structure or a spectral estimate.

use super::candidates::SpectralCandidate;
use super::settings::CrossValidation;
use crate::input::EstimationInput;
use crate::spectral::Shrinker;
use crate::threshold::noise_threshold;

/// The universal threshold of Wang & Xu, "Differentially Private High Dimensional
/// Sparse Covariance Matrix Estimation" (CISS 2019):
/// `λ = γ·√(log p / n) + c·σ_n·√(log p)`, with `σ_n = R²σ/√n` the noise sd of one
/// averaged entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UniversalThreshold {
    /// γ, the sub-Gaussian constant of the data (0 leaves only the noise term).
    pub gamma: f64,
    /// c, the multiple of the noise level (the paper uses 4).
    pub c: f64,
    /// Threshold the diagonal too, as the paper prints; by default it is exempt.
    pub threshold_diagonal: bool,
}

impl Default for UniversalThreshold {
    fn default() -> Self {
        UniversalThreshold {
            gamma: 0.0,
            c: 4.0,
            threshold_diagonal: false,
        }
    }
}

/// The local-DP threshold of the follow-up to Wang & Xu on sparse covariance
/// estimation under DP and LDP for heavy-tailed data (a bounded `4 + ε` moment; its
/// Algorithm 2), with the missing `1/√n` restored:
/// `λ = ξ·√(log p / n) + 4·(R²σ/√n)·√(log p)`.
///
/// The paper prints `4σ₂√(log p)` (no `1/√n`), which does not shrink with n and would
/// zero every off-diagonal entry at any realistic n; the noise of an averaged entry is
/// `σ₂/√n` (in data units `R²σ/√n`), so that is what the threshold scales.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LdpNoiseThreshold {
    /// ξ, the data term's constant (the paper tunes it by cross-validation).
    pub xi: f64,
    /// Threshold the diagonal too, as the paper prints; by default it is exempt.
    pub threshold_diagonal: bool,
}

/// Entry-adaptive threshold (Cai & Liu 2011): `λ_ij = η·√(θ̂_ij·log p / n)` with
/// `θ̂_ij` the variance of entry ij across reports, in data units
/// `R⁴/2^{2k}·(Σv²/n − (Σv/n)²)`.
///
/// `θ̂_ij` includes the privacy noise variance `R⁴σ²` as well as the data's own
/// variance, so the rule adapts both to the noise level and to entries whose products
/// `x_i x_j` vary more; that is intended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveThreshold {
    /// η (Cai & Liu recommend 2).
    pub eta: f64,
    /// Threshold the diagonal too; by default it is exempt.
    pub threshold_diagonal: bool,
}

impl Default for AdaptiveThreshold {
    fn default() -> Self {
        AdaptiveThreshold {
            eta: 2.0,
            threshold_diagonal: false,
        }
    }
}

/// Spike de-biasing over a flat bulk ([`spectral::shrink`](crate::spectral::shrink)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpectralShrinkage {
    /// The loss the shrunk eigenvalues are optimal for.
    pub shrinker: Shrinker,
    /// A fixed number of spikes (`< p`); `None` detects them above the bulk edge.
    pub rank: Option<usize>,
}

/// Low rank plus diagonal ([`spectral::factor`](crate::spectral::factor), Frobenius
/// shrinker).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FactorModel {
    /// A fixed number of factors (`< p`); `None` detects them above the bulk edge.
    pub rank: Option<usize>,
}

/// Spikes over a bulk shrunk toward its mean with weight α and edge soft threshold τ
/// chosen by SURE ([`spectral::bulk_shrink_sure`](crate::spectral::bulk_shrink_sure)).
#[derive(Debug, Clone, PartialEq)]
pub struct BulkShrinkage {
    /// The candidate weights α ∈ [0, 1] (non-empty).
    pub alphas: Vec<f64>,
    /// The candidate edge soft thresholds τ ∈ [0, 2], in units of `σ_n√p` (non-empty;
    /// 2: no soft piece).
    pub taus: Vec<f64>,
}

impl Default for BulkShrinkage {
    fn default() -> Self {
        BulkShrinkage {
            alphas: crate::spectral::DEFAULT_BULK_ALPHAS.to_vec(),
            taus: crate::spectral::DEFAULT_BULK_TAUS.to_vec(),
        }
    }
}

/// How the released matrix is regularised: which entries of the average are kept and
/// how the threshold is chosen; or, for the spectral rules, which spectral estimator
/// replaces the threshold; or the cross-validation that chooses among all of them.
#[derive(Debug, Clone, PartialEq)]
pub enum RegularisationRule {
    /// Keep every entry.
    None,
    /// Wang & Xu's universal threshold.
    Universal(UniversalThreshold),
    /// The heavy-tailed LDP threshold (with the `1/√n` erratum fixed); named
    /// `ldp_noise` in the rule names and on the wire.
    LdpNoise(LdpNoiseThreshold),
    /// Cai & Liu's entry-adaptive threshold.
    Adaptive(AdaptiveThreshold),
    /// Chosen by K-fold cross-validation from the fold sums.
    CrossValidated(CrossValidation),
    /// Spectral spike shrinkage (no threshold).
    Spectral(SpectralShrinkage),
    /// Low rank plus diagonal (no threshold).
    Factor(FactorModel),
    /// Bulk shrinkage with a SURE-chosen weight (no threshold).
    BulkShrink(BulkShrinkage),
}

/// The default is cross-validation with [`CrossValidation::default`]: it falls back to
/// "no threshold" when the data are dense and thresholds hard when they are sparse,
/// where any fixed rule is right for one and wrong for the other (Wang & Xu's c = 4
/// zeroes true entries whenever `4σ_n√(log p)` exceeds them).
impl Default for RegularisationRule {
    fn default() -> Self {
        RegularisationRule::CrossValidated(CrossValidation::default())
    }
}

impl RegularisationRule {
    /// A short name for logs and the estimate message.
    pub fn name(&self) -> String {
        let diag = |t: bool| if t { "thresholded" } else { "exempt" };
        match self {
            RegularisationRule::None => "none".to_string(),
            RegularisationRule::Universal(u) => format!(
                "universal(gamma={}, c={}, diagonal={})",
                u.gamma,
                u.c,
                diag(u.threshold_diagonal)
            ),
            RegularisationRule::LdpNoise(s) => format!(
                "ldp_noise(xi={}, diagonal={})",
                s.xi,
                diag(s.threshold_diagonal)
            ),
            RegularisationRule::Adaptive(a) => {
                format!(
                    "adaptive(eta={}, diagonal={})",
                    a.eta,
                    diag(a.threshold_diagonal)
                )
            }
            RegularisationRule::CrossValidated(cv) => {
                format!(
                    "cv(diagonal={}, threshold={}{})",
                    diag(cv.threshold_diagonal),
                    if cv.threshold_one_standard_error {
                        if cv.threshold_one_standard_error_max_z == f64::INFINITY
                            && cv.off_diagonal_top_max_z == f64::INFINITY
                        {
                            "simplest within 1 SE".to_string()
                        } else {
                            format!(
                                "simplest within 1 SE if z ≤ {} and top z ≤ {}",
                                cv.threshold_one_standard_error_max_z, cv.off_diagonal_top_max_z
                            )
                        }
                    } else {
                        "smallest mean".to_string()
                    },
                    if cv.stack_families {
                        ""
                    } else {
                        ", no stacking"
                    }
                )
            }
            RegularisationRule::Spectral(s) => format!(
                "spectral(loss={}, rank={})",
                match s.shrinker {
                    Shrinker::Balanced => "balanced",
                    Shrinker::Frobenius => "frobenius",
                    Shrinker::Operator => "operator",
                },
                rank_name(s.rank)
            ),
            RegularisationRule::Factor(f) => format!("factor(rank={})", rank_name(f.rank)),
            RegularisationRule::BulkShrink(b) => {
                format!("bulk-shrink(alphas={:?}, taus={:?})", b.alphas, b.taus)
            }
        }
    }

    /// Whether the rule thresholds the diagonal.
    pub fn threshold_diagonal(&self) -> bool {
        match self {
            RegularisationRule::None => false,
            RegularisationRule::Universal(u) => u.threshold_diagonal,
            RegularisationRule::LdpNoise(s) => s.threshold_diagonal,
            RegularisationRule::Adaptive(a) => a.threshold_diagonal,
            RegularisationRule::CrossValidated(cv) => cv.threshold_diagonal,
            RegularisationRule::Spectral(_)
            | RegularisationRule::Factor(_)
            | RegularisationRule::BulkShrink(_) => false,
        }
    }

    /// Every numeric parameter with its name, for validation.
    pub fn parameters(&self) -> Vec<(&'static str, f64)> {
        match self {
            RegularisationRule::None => vec![],
            RegularisationRule::Universal(u) => vec![("gamma", u.gamma), ("c", u.c)],
            RegularisationRule::LdpNoise(s) => vec![("xi", s.xi)],
            RegularisationRule::Adaptive(a) => vec![("eta", a.eta)],
            RegularisationRule::CrossValidated(cv) => cv
                .noise_scales
                .iter()
                .map(|&v| ("noise_scales", v))
                .chain(cv.adaptive_scales.iter().map(|&v| ("adaptive_scales", v)))
                .chain(
                    cv.diagonal_shrinkage
                        .iter()
                        .map(|&v| ("diagonal_shrinkage", if v <= 1.0 { v } else { -v })),
                )
                .collect(),
            RegularisationRule::Spectral(_) | RegularisationRule::Factor(_) => vec![],
            // α ∈ [0, 1], τ ∈ [0, 2]: one above its bound is reported negated so the
            // check refuses it.
            RegularisationRule::BulkShrink(b) => b
                .alphas
                .iter()
                .map(|&v| ("alphas", if v <= 1.0 { v } else { -v }))
                .chain(
                    b.taus
                        .iter()
                        .map(|&v| ("taus", if v <= 2.0 { v } else { -v })),
                )
                .collect(),
        }
    }

    /// Whether the rule is a spectral estimator (applied in place of a threshold).
    pub fn is_spectral(&self) -> bool {
        matches!(
            self,
            RegularisationRule::Spectral(_)
                | RegularisationRule::Factor(_)
                | RegularisationRule::BulkShrink(_)
        )
    }
}

/// The named rule a spectral candidate of the cross-validation is (applied to the full
/// average when chosen).
impl From<SpectralCandidate> for RegularisationRule {
    fn from(candidate: SpectralCandidate) -> Self {
        match candidate {
            SpectralCandidate::Shrink => RegularisationRule::Spectral(SpectralShrinkage::default()),
            SpectralCandidate::Factor => RegularisationRule::Factor(FactorModel::default()),
            SpectralCandidate::BulkShrink => {
                RegularisationRule::BulkShrink(BulkShrinkage::default())
            }
        }
    }
}

/// `detected` or the fixed rank.
fn rank_name(rank: Option<usize>) -> String {
    rank.map_or_else(|| "detected".to_string(), |k| k.to_string())
}

/// Wang & Xu's universal threshold `γ√(log p/n) + c·σ_n√(log p)` at n reports.
pub(crate) fn universal_threshold(
    rule: &UniversalThreshold,
    p: usize,
    n: u64,
    entry_noise_sd: f64,
) -> f64 {
    let log_p = (p as f64).ln();
    rule.gamma * (log_p / n.max(1) as f64).sqrt() + rule.c * entry_noise_sd * log_p.sqrt()
}

/// The heavy-tailed LDP threshold `ξ√(log p/n) + 4(R²σ/√n)√(log p)` at n reports.
pub(crate) fn ldp_noise_threshold(
    rule: &LdpNoiseThreshold,
    input: &EstimationInput,
    n: u64,
) -> f64 {
    let log_p = (input.dim() as f64).ln();
    rule.xi * (log_p / n.max(1) as f64).sqrt() + noise_threshold(input, n, 4.0)
}
