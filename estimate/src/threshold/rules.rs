//! The fixed-form rules (seed 000's universal threshold, seed 001's LDP threshold,
//! Cai & Liu's entry-adaptive threshold), the [`ThresholdRule`] that names one of them
//! or the cross-validation, and the formulas of their λ.

use super::CrossValidation;
use crate::spectral::Shrinker;
use ldpcov_proto::Collection;

/// Seed 000's universal threshold `λ = γ·√(log p / n) + c·σ_n·√(log p)`, with
/// `σ_n = R²σ/√n` the noise sd of one averaged entry.
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

/// Seed 001's LDP threshold with the missing `1/√n` restored:
/// `λ = ξ·√(log p / n) + 4·(R²σ/√n)·√(log p)`.
///
/// The paper prints `4σ₂√(log p)` (no `1/√n`), which does not shrink with n and would
/// zero every off-diagonal entry at any realistic n; the noise of an averaged entry is
/// `σ₂/√n` (in data units `R²σ/√n`), so that is what the threshold scales.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Seed001Threshold {
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

/// Which entries of the average are kept, and how the threshold is chosen; or, for the
/// spectral rules, which spectral estimator replaces the threshold.
#[derive(Debug, Clone, PartialEq)]
pub enum ThresholdRule {
    /// Keep every entry.
    None,
    /// Seed 000's universal threshold.
    Universal(UniversalThreshold),
    /// Seed 001's LDP threshold (with the `1/√n` erratum fixed).
    Seed001(Seed001Threshold),
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
/// where any fixed rule is right for one and wrong for the other (seed 000's c = 4
/// zeroes true entries whenever `4σ_n√(log p)` exceeds them).
impl Default for ThresholdRule {
    fn default() -> Self {
        ThresholdRule::CrossValidated(CrossValidation::default())
    }
}

impl ThresholdRule {
    /// A short name for logs and the estimate message.
    pub fn name(&self) -> String {
        let diag = |t: bool| if t { "thresholded" } else { "exempt" };
        match self {
            ThresholdRule::None => "none".to_string(),
            ThresholdRule::Universal(u) => format!(
                "universal(gamma={}, c={}, diagonal={})",
                u.gamma,
                u.c,
                diag(u.threshold_diagonal)
            ),
            ThresholdRule::Seed001(s) => format!(
                "seed001(xi={}, diagonal={})",
                s.xi,
                diag(s.threshold_diagonal)
            ),
            ThresholdRule::Adaptive(a) => {
                format!(
                    "adaptive(eta={}, diagonal={})",
                    a.eta,
                    diag(a.threshold_diagonal)
                )
            }
            ThresholdRule::CrossValidated(cv) => {
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
            ThresholdRule::Spectral(s) => format!(
                "spectral(loss={}, rank={})",
                match s.shrinker {
                    Shrinker::Balanced => "balanced",
                    Shrinker::Frobenius => "frobenius",
                    Shrinker::Operator => "operator",
                },
                rank_name(s.rank)
            ),
            ThresholdRule::Factor(f) => format!("factor(rank={})", rank_name(f.rank)),
            ThresholdRule::BulkShrink(b) => {
                format!("bulk-shrink(alphas={:?}, taus={:?})", b.alphas, b.taus)
            }
        }
    }

    /// Whether the rule thresholds the diagonal.
    pub fn threshold_diagonal(&self) -> bool {
        match self {
            ThresholdRule::None => false,
            ThresholdRule::Universal(u) => u.threshold_diagonal,
            ThresholdRule::Seed001(s) => s.threshold_diagonal,
            ThresholdRule::Adaptive(a) => a.threshold_diagonal,
            ThresholdRule::CrossValidated(cv) => cv.threshold_diagonal,
            ThresholdRule::Spectral(_)
            | ThresholdRule::Factor(_)
            | ThresholdRule::BulkShrink(_) => false,
        }
    }

    /// Every numeric parameter with its name, for validation.
    pub fn parameters(&self) -> Vec<(&'static str, f64)> {
        match self {
            ThresholdRule::None => vec![],
            ThresholdRule::Universal(u) => vec![("gamma", u.gamma), ("c", u.c)],
            ThresholdRule::Seed001(s) => vec![("xi", s.xi)],
            ThresholdRule::Adaptive(a) => vec![("eta", a.eta)],
            ThresholdRule::CrossValidated(cv) => cv
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
            ThresholdRule::Spectral(_) | ThresholdRule::Factor(_) => vec![],
            // α ∈ [0, 1], τ ∈ [0, 2]: one above its bound is reported negated so the
            // check refuses it.
            ThresholdRule::BulkShrink(b) => b
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
            ThresholdRule::Spectral(_) | ThresholdRule::Factor(_) | ThresholdRule::BulkShrink(_)
        )
    }
}

fn rank_name(rank: Option<usize>) -> String {
    rank.map_or_else(|| "detected".to_string(), |k| k.to_string())
}

/// `c·σ_n·√(log p)` for `σ_n` the averaged-entry noise sd at n reports (data units).
pub fn noise_threshold(collection: &Collection, n: u64, c: f64) -> f64 {
    c * collection.mean_entry_noise_sd(n.max(1)) * (collection.dim() as f64).ln().sqrt()
}

/// Seed 000's universal threshold `γ√(log p/n) + c·σ_n√(log p)` at n reports.
pub fn universal_threshold(
    rule: &UniversalThreshold,
    p: usize,
    n: u64,
    entry_noise_sd: f64,
) -> f64 {
    let log_p = (p as f64).ln();
    rule.gamma * (log_p / n.max(1) as f64).sqrt() + rule.c * entry_noise_sd * log_p.sqrt()
}

/// Seed 001's LDP threshold `ξ√(log p/n) + 4(R²σ/√n)√(log p)` at n reports.
pub fn seed001_threshold(rule: &Seed001Threshold, collection: &Collection, n: u64) -> f64 {
    let log_p = (collection.dim() as f64).ln();
    rule.xi * (log_p / n.max(1) as f64).sqrt() + noise_threshold(collection, n, 4.0)
}
