//! Stacking the families (Breiman 1996): the convex combination of the
//! cross-validation's choice and the other family's best, at the weight that
//! minimises the summed held-out loss, released only when it earns its place on
//! cross-fitted folds.

use super::candidates::Candidate;
use super::folds::{Fold, scored_fold_estimate};
use super::settings::CrossValidation;
use super::standard_error::earns_its_place;
use crate::input::EstimationInput;

/// A second candidate mixed into the cross-validation's release: the release is
/// `(1 − weight)·chosen + weight·candidate`, a convex combination, so it is PSD when
/// both parts are and its error in any norm is at most the weighted mean of theirs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StackedRelease {
    /// The other family's best candidate.
    pub(crate) candidate: Candidate,
    /// Its diagonal shrinkage weight β.
    pub(crate) diagonal_shrinkage: f64,
    /// Its weight in the release, in (0, 1].
    pub(crate) weight: f64,
}

/// The stacking weight of `other` against `chosen` on the kept folds
/// ([`weight_from_terms`]), or 0 unless the mixture earns its place
/// ([`stacking_earns_its_place`]); `None` when a spectral fit failed on one of them.
pub(crate) fn stacking_weight_on_folds(
    input: &EstimationInput,
    cv: &CrossValidation,
    variances: &[f64],
    folds: &[Fold],
    weights: &[f64],
    chosen: (Candidate, f64),
    other: (Candidate, f64),
) -> Option<f64> {
    let estimates = folds
        .iter()
        .map(|fold| {
            let c = scored_fold_estimate(input, cv, variances, fold, chosen)?;
            let o = scored_fold_estimate(input, cv, variances, fold, other)?;
            Some((c, o, fold.test.as_slice()))
        })
        .collect::<Option<Vec<_>>>()?;
    let terms = stacking_terms(&estimates, weights);
    Some(if stacking_earns_its_place(&terms) {
        weight_from_terms(&terms)
    } else {
        0.0
    })
}

/// Per fold of packed estimates `c_k` (the chosen candidate), `o_k` (the other) and
/// held-out average `t_k`, the two terms of the loss of the mixture at weight w,
/// `L_k(w) = ‖(1 − w)·c_k + w·o_k − t_k‖² = ‖c_k − t_k‖² − 2w·a_k + w²·s_k`:
/// `a_k = ⟨t_k − c_k, o_k − c_k⟩` and `s_k = ‖o_k − c_k‖²` (`weights` make the packed
/// sums Frobenius norms).
pub(crate) fn stacking_terms(
    folds: &[(Vec<f64>, Vec<f64>, &[f64])],
    weights: &[f64],
) -> Vec<(f64, f64)> {
    folds
        .iter()
        .map(|(c, o, t)| {
            let (mut along, mut spread) = (0.0, 0.0);
            for (((c, o), t), w) in c.iter().zip(o).zip(t.iter()).zip(weights) {
                along += w * (t - c) * (o - c);
                spread += w * (o - c) * (o - c);
            }
            (along, spread)
        })
        .collect()
}

/// The stacking weight (Breiman 1996) from the fold terms of [`stacking_terms`]: the
/// minimiser `Σa_k / Σs_k` of the quadratic summed loss `Σ_k L_k(w)`, clamped to
/// [0, 1] (0 when the two estimates agree on every fold).
pub(crate) fn weight_from_terms(terms: &[(f64, f64)]) -> f64 {
    let (along, spread) = summed_terms(terms);
    clamped_weight(along, spread)
}

/// `(Σa_k, Σs_k)`.
fn summed_terms(terms: &[(f64, f64)]) -> (f64, f64) {
    terms
        .iter()
        .fold((0.0, 0.0), |(a, s), (ak, sk)| (a + ak, s + sk))
}

/// `along / spread` clamped to [0, 1]; 0 when `spread` is 0 or either is not finite.
fn clamped_weight(along: f64, spread: f64) -> f64 {
    if spread > 0.0 && along.is_finite() && spread.is_finite() {
        (along / spread).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// Whether the stacked release earns its place against the chosen candidate alone,
/// by the rule between the families ([`earns_its_place`]) on cross-fitted fold
/// losses: fold k is scored at the weight fitted on the other folds, `w₋ₖ`, so that
/// the comparison does not see the weight's own fit to the held-out noise (a weight
/// fitted on all folds always looks at least as good as 0 there). The paired
/// difference on fold k is `L_k(w₋ₖ) − L_k(0) = −2w₋ₖ·a_k + w₋ₖ²·s_k`.
pub(crate) fn stacking_earns_its_place(terms: &[(f64, f64)]) -> bool {
    let (total_along, total_spread) = summed_terms(terms);
    let differences: Vec<f64> = terms
        .iter()
        .map(|&(along, spread)| {
            let w = clamped_weight(total_along - along, total_spread - spread);
            -2.0 * w * along + w * w * spread
        })
        .collect();
    earns_its_place(&differences, &vec![0.0; differences.len()])
}
