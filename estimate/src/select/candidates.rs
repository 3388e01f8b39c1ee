//! What a cross-validation chooses among: the [`Candidate`]s its settings span, and
//! what each candidate applies (thresholds, kind, structure, or a spectral estimator
//! in place of all three).

use crate::input::EstimationInput;
use crate::structure::Structure;
use crate::threshold::{ThresholdKind, Thresholds, adaptive_thresholds, noise_threshold};

/// One threshold a cross-validation may choose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Candidate {
    /// The zero matrix: a trivial estimate, the one every other choice must beat
    /// ([`CrossValidation::trivial_candidates`](crate::CrossValidation::trivial_candidates)).
    Zero,
    /// The diagonal alone (every off-diagonal entry zeroed: a threshold at infinity),
    /// with the diagonal shrinkage β it is tried with (β = 1: the scaled identity).
    Diagonal,
    /// Keep every entry.
    None,
    /// The noise form `λ = c·σ_n·√(log p)` (the universal threshold with γ = 0, the heavy-tailed LDP threshold with ξ = 0).
    Noise {
        /// c, the multiple of `σ_n·√(log p)`.
        c: f64,
        /// Hard or soft.
        kind: ThresholdKind,
    },
    /// The entry-adaptive form `λ_ij = η·√(θ̂_ij·log p / n)`.
    Adaptive {
        /// η.
        eta: f64,
        /// Hard or soft.
        kind: ThresholdKind,
    },
    /// A structural regulariser instead of a threshold: banding or Toeplitz band
    /// averaging ([`Structure`](crate::Structure)).
    Structured(Structure),
    /// A spectral estimator built on the known noise level instead of a threshold
    /// ([`spectral`](crate::spectral)); no diagonal shrinkage.
    Spectral(SpectralCandidate),
}

/// The spectral estimators a cross-validation may choose: the rules
/// [`RegularisationRule::Spectral`](crate::RegularisationRule::Spectral) (balanced shrinker,
/// detected rank), [`RegularisationRule::Factor`](crate::RegularisationRule::Factor) (detected
/// rank) and [`RegularisationRule::BulkShrink`](crate::RegularisationRule::BulkShrink) (α by
/// SURE on the default grid) with their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpectralCandidate {
    /// Shrunk spikes over a flat bulk ([`spectral::shrink`](crate::spectral::shrink)).
    Shrink,
    /// Shrunk spikes plus a fitted diagonal ([`spectral::factor`](crate::spectral::factor)).
    Factor,
    /// Spikes over a bulk shrunk toward its mean, α chosen by SURE on each training
    /// set ([`spectral::bulk_shrink_sure`](crate::spectral::bulk_shrink_sure)).
    BulkShrink,
}

impl SpectralCandidate {
    /// Every spectral candidate, in the order they are tried.
    pub(crate) const ALL: [SpectralCandidate; 3] = [
        SpectralCandidate::Shrink,
        SpectralCandidate::Factor,
        SpectralCandidate::BulkShrink,
    ];

    /// `spectral`, `factor` or `bulk-shrink`.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            SpectralCandidate::Shrink => "spectral",
            SpectralCandidate::Factor => "factor",
            SpectralCandidate::BulkShrink => "bulk-shrink",
        }
    }
}

impl Candidate {
    /// A short name such as `noise(c=1.41, soft)`.
    pub(crate) fn name(&self) -> String {
        match self {
            Candidate::Zero => "zero".to_string(),
            Candidate::Diagonal => "diagonal".to_string(),
            Candidate::None => "none".to_string(),
            Candidate::Noise { c, kind } => format!("noise(c={c:.3}, {})", kind.name()),
            Candidate::Adaptive { eta, kind } => format!("adaptive(eta={eta:.3}, {})", kind.name()),
            Candidate::Structured(s) => s.name(),
            Candidate::Spectral(s) => s.name().to_string(),
        }
    }
}

/// The thresholds of a cross-validation candidate at n reports (None: zero).
pub(crate) fn candidate_thresholds(
    candidate: &Candidate,
    input: &EstimationInput,
    variances: &[f64],
    n: u64,
) -> Thresholds {
    match candidate {
        Candidate::Zero
        | Candidate::Diagonal
        | Candidate::None
        | Candidate::Structured(_)
        | Candidate::Spectral(_) => Thresholds::Uniform(0.0),
        Candidate::Noise { c, .. } => Thresholds::Uniform(noise_threshold(input, n, *c)),
        Candidate::Adaptive { eta, .. } => adaptive_thresholds(variances, input.dim(), n, *eta),
    }
}

/// The kind a candidate applies (hard for "none", the structures and the spectral
/// estimators, which zero nothing).
pub(crate) fn candidate_kind(candidate: &Candidate) -> ThresholdKind {
    match candidate {
        Candidate::Zero
        | Candidate::Diagonal
        | Candidate::None
        | Candidate::Structured(_)
        | Candidate::Spectral(_) => ThresholdKind::Hard,
        Candidate::Noise { kind, .. } | Candidate::Adaptive { kind, .. } => *kind,
    }
}

/// The structure a candidate applies (unstructured for the thresholds; the diagonal
/// alone is banding at bandwidth 0).
pub(crate) fn candidate_structure(candidate: &Candidate) -> Structure {
    match candidate {
        Candidate::Structured(s) => *s,
        Candidate::Diagonal => Structure::Banded { bandwidth: 0 },
        _ => Structure::Unstructured,
    }
}
