//! Running the K-fold cross-validation on the fold sums: held-out loss of every
//! candidate, the best of each family, and the one-standard-error rule between them.

use super::{
    Candidate, CrossValidation, candidate_kind, candidate_structure, candidate_thresholds,
    entry_variances, has_sum_squares, shrink_packed_diagonal,
};
use crate::accumulator::Accumulator;
use crate::moments::packed_covariance;
use crate::psd::project_packed;
use ldpcov_proto::Collection;
use ldpcov_proto::layout::triangle_pairs;

/// The outcome of a cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct CvOutcome {
    /// The candidate with the smallest mean held-out loss.
    pub chosen: Candidate,
    /// The diagonal shrinkage weight chosen with it.
    pub diagonal_shrinkage: f64,
    /// Every threshold candidate with its mean held-out loss (data units squared), at
    /// its best diagonal shrinkage.
    pub losses: Vec<(Candidate, f64)>,
    /// Folds used (those with reports on both sides).
    pub folds_used: usize,
}

/// Runs the K-fold cross-validation of [`CrossValidation`] on the accumulators.
///
/// Returns `None` when fewer than two folds have reports on both sides (nothing to
/// validate against); the caller then keeps every entry. See [`CrossValidation`] for
/// the loss and the rescaling to the full n.
pub fn cross_validate(
    collection: &Collection,
    acc: &Accumulator,
    cv: &CrossValidation,
) -> Option<CvOutcome> {
    let p = collection.dim;
    let with_adaptive = has_sum_squares(acc) && !cv.adaptive_scales.is_empty();
    let variances = if with_adaptive {
        // θ̂ from all reports: it is a per-report variance, the same population
        // quantity whichever fold is held out, and sums of squares are not kept per fold.
        entry_variances(collection, acc)
    } else {
        Vec::new()
    };
    let candidates = cv.candidates(with_adaptive, p);
    if candidates.is_empty() {
        return None;
    }
    let total = acc.sums();
    let weights: Vec<f64> = triangle_pairs(p)
        .map(|(i, j)| if i == j { 1.0 } else { 2.0 })
        .collect();
    let betas: Vec<f64> = if cv.diagonal_shrinkage.is_empty() {
        vec![0.0]
    } else {
        cv.diagonal_shrinkage.clone()
    };
    let candidates: Vec<(Candidate, f64)> = candidates
        .iter()
        .flat_map(|&c| betas.iter().map(move |&b| (c, b)))
        .collect();
    // Per candidate, the loss of every usable fold (for the paired comparison below).
    let mut losses: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    let mut folds_used = 0;
    for (fold_sums, &n_k) in acc.fold_sums.iter().zip(&acc.fold_counts) {
        let n_train = acc.count.saturating_sub(n_k);
        if n_k == 0 || n_train == 0 {
            continue;
        }
        folds_used += 1;
        let train_sums: Vec<i64> = total.iter().zip(fold_sums).map(|(t, f)| t - f).collect();
        // Each side's Σ̂ from its own blocks (the plain average for the second moment).
        let train = packed_covariance(collection, &train_sums, n_train);
        let test = packed_covariance(collection, fold_sums, n_k);
        let project = p <= cv.project_in_loss_max_dim;
        for (loss, (candidate, beta)) in losses.iter_mut().zip(&candidates) {
            let thresholds = candidate_thresholds(candidate, collection, &variances, n_train);
            let kind = candidate_kind(candidate);
            let mut shrunk = train.clone();
            shrink_packed_diagonal(p, &mut shrunk, *beta);
            candidate_structure(candidate).apply_packed(p, &mut shrunk);
            let train = &shrunk;
            let kept: Vec<f64> = triangle_pairs(p)
                .enumerate()
                .map(|(k, (i, j))| {
                    if i != j || cv.threshold_diagonal {
                        kind.apply(train[k], thresholds.at(k))
                    } else {
                        train[k]
                    }
                })
                .collect();
            let kept = if project {
                match project_packed(p, &kept) {
                    Some(v) => v,
                    None => kept,
                }
            } else {
                kept
            };
            loss.push(
                kept.iter()
                    .zip(&test)
                    .zip(&weights)
                    .map(|((a, b), w)| w * (a - b) * (a - b))
                    .sum::<f64>(),
            );
        }
    }
    if folds_used < 2 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    // The best candidate of each family: thresholds (and "none") vs structures.
    let best_of = |structured: bool| {
        candidates
            .iter()
            .zip(&losses)
            .enumerate()
            .filter(|(_, ((c, _), _))| matches!(c, Candidate::Structured(_)) == structured)
            .fold(None::<(usize, f64)>, |best, (i, (_, l))| {
                let l = mean(l);
                match best {
                    Some((_, bl)) if bl <= l => best,
                    _ => Some((i, l)),
                }
            })
    };
    let chosen_index = match (best_of(false), best_of(true)) {
        (Some((u, _)), Some((s, _))) => {
            if structure_earns_its_place(&losses[s], &losses[u]) {
                s
            } else {
                u
            }
        }
        (Some((i, _)), None) | (None, Some((i, _))) => i,
        (None, None) => return None,
    };
    let (chosen, diagonal_shrinkage) = candidates[chosen_index];
    let all: Vec<((Candidate, f64), f64)> = candidates
        .into_iter()
        .zip(losses)
        .map(|(c, l)| (c, mean(&l)))
        .collect();
    // Per threshold candidate: the best loss over the diagonal shrinkages.
    let mut losses: Vec<(Candidate, f64)> = Vec::new();
    for &((c, _), l) in &all {
        match losses.last_mut() {
            Some((lc, ll)) if *lc == c => *ll = ll.min(l),
            _ => losses.push((c, l)),
        }
    }
    Some(CvOutcome {
        chosen,
        diagonal_shrinkage,
        losses,
        folds_used,
    })
}

/// The one-standard-error rule between the families: whether a structure with
/// fold-wise losses `structured` replaces the best threshold with losses `thresholded`
/// (same folds, same order). True only when the mean paired difference plus one
/// standard error of it is below zero. Structures assume an order of the variables
/// that the data may not have, and with many candidates the smallest mean loss alone
/// over-selects them by chance.
pub(crate) fn structure_earns_its_place(structured: &[f64], thresholded: &[f64]) -> bool {
    let diff: Vec<f64> = structured
        .iter()
        .zip(thresholded)
        .map(|(a, b)| a - b)
        .collect();
    let k = diff.len() as f64;
    if diff.len() < 2 {
        return false;
    }
    let mean = diff.iter().sum::<f64>() / k;
    let se = (diff.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0) / k).sqrt();
    mean + se < 0.0
}
