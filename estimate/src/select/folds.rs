//! One fold of the cross-validation: its training and held-out averages, a threshold
//! candidate's estimate on the training one (as the loss scores it), the spectral
//! candidates fitted to it, and the loss.

use super::candidates::{Candidate, candidate_kind, candidate_structure, candidate_thresholds};
use super::settings::CrossValidation;
use crate::input::EstimationInput;
use crate::packed::{matrix_to_packed, packed_to_matrix};
use crate::psd::project_packed;
use crate::spectral::CvFits;
use crate::threshold::shrink_packed_diagonal;
use ldpcov_privacy::layout::triangle_pairs;

/// One usable fold, kept for the stacking weight after the choice: the training and
/// held-out averages (packed) and the spectral candidates fitted to the training one.
pub(crate) struct Fold {
    pub(crate) train: Vec<f64>,
    pub(crate) test: Vec<f64>,
    pub(crate) n_train: u64,
    pub(crate) spectral_fits: Option<CvFits>,
}

/// What a threshold candidate's estimate on one training average depends on.
pub(crate) struct FoldInput<'a> {
    pub(crate) input: &'a EstimationInput,
    pub(crate) cv: &'a CrossValidation,
    pub(crate) variances: &'a [f64],
    pub(crate) train: &'a [f64],
    pub(crate) n_train: u64,
}

impl FoldInput<'_> {
    /// A threshold (or structure) candidate with diagonal shrinkage `beta` on the
    /// training average, packed, before any PSD projection: what the rule would apply
    /// to the full average, at the training size's thresholds.
    pub(crate) fn threshold_estimate(&self, candidate: &Candidate, beta: f64) -> Vec<f64> {
        let p = self.input.dim();
        if *candidate == Candidate::Zero {
            return vec![0.0; self.train.len()];
        }
        let thresholds = candidate_thresholds(candidate, self.input, self.variances, self.n_train);
        let kind = candidate_kind(candidate);
        let mut shrunk = self.train.to_vec();
        shrink_packed_diagonal(p, &mut shrunk, beta);
        candidate_structure(candidate).apply_packed(p, &mut shrunk);
        triangle_pairs(p)
            .enumerate()
            .map(|(k, (i, j))| {
                if i != j || self.cv.threshold_diagonal {
                    kind.apply(shrunk[k], thresholds.at(k))
                } else {
                    shrunk[k]
                }
            })
            .collect()
    }

    /// `kept` projected onto the PSD cone when the loss scores the projection
    /// ([`CrossValidation::project_in_loss_max_dim`]), unchanged otherwise or if the
    /// eigensolver fails.
    pub(crate) fn project_as_scored(&self, kept: Vec<f64>) -> Vec<f64> {
        let p = self.input.dim();
        if p > self.cv.project_in_loss_max_dim {
            return kept;
        }
        project_packed(p, &kept).unwrap_or(kept)
    }
}

/// The weighted squared distance of two packed matrices (`weights` 1 on the diagonal,
/// 2 off it: the squared Frobenius distance of the full matrices).
pub(crate) fn weighted_squared_distance(a: &[f64], b: &[f64], weights: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .zip(weights)
        .map(|((a, b), w)| w * (a - b) * (a - b))
        .sum()
}

/// A candidate's estimate on one fold's training average, packed, as the loss scored
/// it (`None` if the spectral fit failed on that fold).
pub(crate) fn scored_fold_estimate(
    input: &EstimationInput,
    cv: &CrossValidation,
    variances: &[f64],
    fold: &Fold,
    (candidate, beta): (Candidate, f64),
) -> Option<Vec<f64>> {
    if let Candidate::Spectral(s) = candidate {
        let m = fold.spectral_fits.as_ref()?.estimate(s as usize);
        return Some(matrix_to_packed(&m));
    }
    let fold_input = FoldInput {
        input,
        cv,
        variances,
        train: &fold.train,
        n_train: fold.n_train,
    };
    Some(fold_input.project_as_scored(fold_input.threshold_estimate(&candidate, beta)))
}

/// The spectral candidates fitted to packed `train` (noise sd `sigma_n`): one
/// eigendecomposition. `None` when the eigensolver fails (the candidates then get an
/// infinite loss and cannot be chosen).
pub(crate) fn spectral_fits(p: usize, train: &[f64], sigma_n: f64) -> Option<CvFits> {
    CvFits::new(&packed_to_matrix(p, train), sigma_n).ok()
}
