//! Running the K-fold cross-validation on the fold sums: held-out loss of every
//! candidate, the best of each family, and the one-standard-error rule between them.

use super::{
    Candidate, CrossValidation, SpectralCandidate, candidate_kind, candidate_structure,
    candidate_thresholds, entry_variances, has_sum_squares, shrink_packed_diagonal,
};
use crate::accumulator::Accumulator;
use crate::moments::packed_covariance;
use crate::psd::project_packed;
use crate::spectral::CvFits;
use ldpcov_proto::Collection;
use ldpcov_proto::layout::{triangle_pairs, unpack_symmetric};
use nalgebra::DMatrix;

/// The outcome of a cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct CvOutcome {
    /// The candidate chosen (see [`CrossValidation`] for the rules between and within
    /// the families).
    pub chosen: Candidate,
    /// The diagonal shrinkage weight chosen with it.
    pub diagonal_shrinkage: f64,
    /// Every threshold candidate with its mean held-out loss (data units squared), at
    /// its best diagonal shrinkage.
    pub losses: Vec<(Candidate, f64)>,
    /// Folds used (those with reports on both sides).
    pub folds_used: usize,
    /// The standardised off-diagonal signal energy of the full average
    /// ([`off_diagonal_signal_z`]), which decides whether the within-threshold
    /// one-standard-error rule applies.
    pub off_diagonal_signal_z: f64,
    /// Whether the released threshold was chosen by that rule (the simplest within one
    /// standard error) rather than as the smallest mean.
    pub simplest_within_one_standard_error: bool,
    /// The standardised spread of the full average's diagonal
    /// ([`diagonal_spread_z`]): above the rule's z limit the variances differ, and the
    /// rule does not pool the diagonal more than the best threshold did.
    pub diagonal_spread_z: f64,
}

/// The default of [`CrossValidation::threshold_one_standard_error_max_z`]: above this
/// [`off_diagonal_signal_z`] the data show off-diagonal signal and the
/// within-threshold one-standard-error rule is not applied (the smallest mean wins):
/// a one-sided test at about the 0.1 % level under the null of no off-diagonal
/// signal (docs/ALGORITHMS.md §3 has the reason and the measurement).
pub const OFF_DIAGONAL_SIGNAL_Z: f64 = 3.0;

/// The off-diagonal signal energy of a packed `p × p` average with independent
/// Gaussian entry noise of sd `sigma`, standardised under the null of no
/// off-diagonal signal: with `m = p(p − 1)/2` off-diagonal entries,
/// `z = (Σ_{i<j} y_ij² − m·σ²) / (√(2m)·σ²)`. Under the null `Σ y_ij²/σ²` is `χ²_m`
/// (mean m, variance 2m), so z has mean 0 and sd 1 (close to normal for m ≳ 30);
/// with off-diagonal truth s its mean is `Σ_{i<j} s_ij² / (√(2m)·σ²)`. 0 when there
/// is no off-diagonal entry or no noise to standardise by.
pub fn off_diagonal_signal_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    let m = (p * p.saturating_sub(1) / 2) as f64;
    let var = sigma * sigma;
    if m == 0.0 || var <= 0.0 || !var.is_finite() {
        return 0.0;
    }
    let energy: f64 = triangle_pairs(p)
        .zip(packed)
        .filter(|((i, j), _)| i != j)
        .map(|(_, v)| v * v)
        .sum();
    standardised_chi_square(energy / var, m)
}

/// `(x − k)/√(2k)`: a `χ²_k` draw `x` standardised to mean 0 and sd 1.
fn standardised_chi_square(x: f64, k: f64) -> f64 {
    (x - k) / (2.0 * k).sqrt()
}

/// The spread of the diagonal of a packed `p × p` average with independent Gaussian
/// entry noise of sd `sigma`, standardised under the null of equal variances: with
/// `ȳ` the mean diagonal entry, `z = (Σ_i (y_ii − ȳ)² − (p − 1)·σ²) / (√(2(p − 1))·σ²)`.
/// Under the null `Σ_i (y_ii − ȳ)²/σ²` is `χ²_{p−1}` (mean p − 1, variance 2(p − 1)),
/// so z has mean 0 and sd 1; with variances `s_ii` its mean grows by
/// `Σ_i (s_ii − s̄)² / (√(2(p − 1))·σ²)`. 0 for p < 2 or no noise to standardise by.
pub fn diagonal_spread_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    let var = sigma * sigma;
    if p < 2 || var <= 0.0 || !var.is_finite() {
        return 0.0;
    }
    let diagonal: Vec<f64> = triangle_pairs(p)
        .zip(packed)
        .filter(|((i, j), _)| i == j)
        .map(|(_, v)| *v)
        .collect();
    let mean = diagonal.iter().sum::<f64>() / p as f64;
    let spread: f64 = diagonal.iter().map(|v| (v - mean) * (v - mean)).sum();
    standardised_chi_square(spread / var, (p - 1) as f64)
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
    let candidates = cv.candidates(with_adaptive, p, collection.ordered_variables);
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
    // Every threshold and structure with every β; the spectral estimators without
    // diagonal shrinkage (they estimate the diagonal themselves).
    let candidates: Vec<(Candidate, f64)> = candidates
        .iter()
        .flat_map(|&c| {
            let betas: &[f64] = match c {
                Candidate::Spectral(_) => &[0.0],
                _ => &betas,
            };
            betas.iter().map(move |&b| (c, b))
        })
        .collect();
    let with_spectral = candidates
        .iter()
        .any(|(c, _)| matches!(c, Candidate::Spectral(_)));
    // Per candidate, the loss of every usable fold (for the paired comparison below),
    // and the degrees of freedom it kept, summed over the folds (the complexity the
    // within-family one-standard-error rule orders the thresholds by).
    let mut losses: Vec<Vec<f64>> = vec![Vec::new(); candidates.len()];
    let mut kept_dof: Vec<f64> = vec![0.0; candidates.len()];
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
        let spectral_losses = if with_spectral {
            spectral_losses(p, &train, &test, collection.mean_entry_noise_sd(n_train))
        } else {
            [f64::INFINITY; 3]
        };
        for ((loss, dof), (candidate, beta)) in
            losses.iter_mut().zip(&mut kept_dof).zip(&candidates)
        {
            if let Candidate::Spectral(s) = candidate {
                loss.push(spectral_losses[*s as usize]);
                continue;
            }
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
            *dof += threshold_dof(p, &kept, *beta);
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
    // The best candidate of each family: thresholds (and "none"), structures, spectral.
    let family = |c: &Candidate| match c {
        Candidate::Structured(_) => Family::Structure,
        Candidate::Spectral(_) => Family::Spectral,
        _ => Family::Threshold,
    };
    // Exact ties (candidates that kept the same entries in every fold) go to the
    // larger threshold ([`threshold_scale`]), otherwise to the earlier candidate.
    let best_of = |f: Family| {
        candidates
            .iter()
            .zip(&losses)
            .enumerate()
            .filter(|(_, ((c, _), _))| family(c) == f)
            .fold(None::<(usize, f64)>, |best, (i, ((c, _), l))| {
                let l = mean(l);
                match best {
                    Some((b, bl))
                        if bl < l
                            || (bl == l
                                && threshold_scale(&candidates[b].0) >= threshold_scale(c)) =>
                    {
                        best
                    }
                    _ => Some((i, l)),
                }
            })
            .map(|(i, _)| i)
    };
    // Thresholds first; a structure, then a spectral estimate, replaces the choice so
    // far only if it earns its place (one standard error of the paired differences),
    // always measured against the family bests.
    let mut chosen_index: Option<usize> = None;
    for f in [Family::Threshold, Family::Structure, Family::Spectral] {
        let Some(mut i) = best_of(f) else { continue };
        if f == Family::Spectral && cv.spectral_prefer_bulk_shrink {
            i = prefer_bulk_shrink(&candidates, &losses, i);
        }
        chosen_index = match chosen_index {
            None => Some(i),
            Some(current) => {
                let replaces = match f {
                    Family::Spectral if !cv.spectral_one_standard_error => {
                        mean(&losses[i]) < mean(&losses[current])
                    }
                    _ => earns_its_place(&losses[i], &losses[current]),
                };
                Some(if replaces { i } else { current })
            }
        };
    }
    let mut chosen_index = chosen_index?;
    // A threshold won and the full average shows no off-diagonal signal: release the
    // simplest threshold within one standard error of the best (the fewest degrees of
    // freedom kept, then the smaller mean loss, then the larger threshold). With
    // signal, the best: the fold losses' spread is mostly the held-out noise energy,
    // common to every candidate, so one standard error of it spans thresholds that
    // drop true entries.
    let full_average = packed_covariance(collection, &total, acc.count);
    let full_sd = collection.mean_entry_noise_sd(acc.count);
    let signal_z = off_diagonal_signal_z(p, &full_average, full_sd);
    let spread_z = diagonal_spread_z(p, &full_average, full_sd);
    let simplify = cv.threshold_one_standard_error
        && signal_z <= cv.threshold_one_standard_error_max_z
        && family(&candidates[chosen_index].0) == Family::Threshold;
    if simplify {
        // Pooling the diagonal counts as simpler (fewer degrees of freedom), but not
        // when the full average shows that the variances differ: then no more pooling
        // than the best threshold's.
        let best = chosen_index;
        let max_pooling = if spread_z > cv.threshold_one_standard_error_max_z {
            candidates[best].1
        } else {
            f64::INFINITY
        };
        chosen_index = (0..candidates.len())
            .filter(|&i| {
                family(&candidates[i].0) == Family::Threshold
                    && candidates[i].1 <= max_pooling
                    && (i == best || within_one_standard_error(&losses[i], &losses[best]))
            })
            .min_by(|&a, &b| {
                kept_dof[a]
                    .total_cmp(&kept_dof[b])
                    .then(mean(&losses[a]).total_cmp(&mean(&losses[b])))
                    .then(
                        threshold_scale(&candidates[b].0)
                            .total_cmp(&threshold_scale(&candidates[a].0)),
                    )
            })
            .unwrap_or(best);
    }
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
        off_diagonal_signal_z: signal_z,
        simplest_within_one_standard_error: simplify,
        diagonal_spread_z: spread_z,
    })
}

/// The scale of a threshold candidate (c or η; 0 for "none" and the other families),
/// which breaks exact ties of held-out loss towards the larger threshold. Thresholds
/// that keep the same entries in every fold have identical fold losses, so the folds
/// cannot tell them apart; on the full average the smallest of them is the likeliest
/// to keep a pure-noise entry. (At p = 100 and c = 2, given that no training fold
/// kept it, a pure-noise entry survives in about 1.4 % of releases — a Monte Carlo of
/// the five-fold design; 9 % without the condition — and one such entry of 4.3σ_n
/// costs more in spectral norm than the whole signal when the noise edge is far above
/// it; at the grid's largest c = 5.66 none does.)
pub(crate) fn threshold_scale(candidate: &Candidate) -> f64 {
    match *candidate {
        Candidate::Noise { c, .. } => c,
        Candidate::Adaptive { eta, .. } => eta,
        _ => 0.0,
    }
}

/// The spectral family's choice under
/// [`CrossValidation::spectral_prefer_bulk_shrink`]: the bulk shrinkage, unless
/// `best` (the family's smallest mean loss) earns its place against it
/// ([`earns_its_place`]); `best` when the bulk shrinkage is not a candidate. The bulk
/// shrinkage nearly nests the other two (at α = 0, τ = 2 it is the flat-bulk spike
/// shrinkage without the detection margin) and its α and τ are already chosen by an
/// unbiased risk estimate on each training set, so the three differ by a fraction of
/// the held-out noise and a smaller mean alone picks among them by chance.
pub(crate) fn prefer_bulk_shrink(
    candidates: &[(Candidate, f64)],
    losses: &[Vec<f64>],
    best: usize,
) -> usize {
    let bulk = candidates
        .iter()
        .position(|(c, _)| *c == Candidate::Spectral(SpectralCandidate::BulkShrink));
    match bulk {
        Some(b) if b != best && !earns_its_place(&losses[best], &losses[b]) => b,
        _ => best,
    }
}

/// The candidate families the one-standard-error rule arbitrates between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    Threshold,
    Structure,
    Spectral,
}

/// The spectral candidates' held-out losses (shrink, factor, bulk shrinkage, in
/// [`SpectralCandidate`](super::SpectralCandidate) order) for packed `train` (noise sd
/// `sigma_n`) against packed `test`: one eigendecomposition of the training average.
/// Infinite when the eigensolver fails (the candidates then cannot be chosen).
fn spectral_losses(p: usize, train: &[f64], test: &[f64], sigma_n: f64) -> [f64; 3] {
    let full = |packed: &[f64]| DMatrix::from_row_slice(p, p, &unpack_symmetric(p, packed));
    match CvFits::new(&full(train), sigma_n) {
        Ok(fits) => fits.losses(&full(test)),
        Err(_) => [f64::INFINITY; 3],
    }
}

/// Degrees of freedom of a thresholded packed estimate with diagonal shrinkage β: its
/// non-zero off-diagonal entries plus the diagonal's `p(1 − β) + β` (the trace of the
/// linear map `d ↦ (1 − β)d + β·mean d`, as in the SURE of the `sure` module; for a
/// soft threshold the off-diagonal count is exactly its divergence too).
fn threshold_dof(p: usize, kept: &[f64], beta: f64) -> f64 {
    let off = triangle_pairs(p)
        .zip(kept)
        .filter(|((i, j), v)| i != j && **v != 0.0)
        .count();
    let pf = p as f64;
    off as f64 + pf * (1.0 - beta) + beta
}

/// Whether a candidate with fold-wise losses `candidate` is within one standard error
/// of the best, `best` (same folds): its mean loss exceeds the best's by at most the
/// standard error of the best's mean loss across the folds (sd of its fold losses over
/// √K). This is the within-family one-standard-error rule of Breiman et al. (1984) as
/// `glmnet`'s `lambda.1se` applies it; the paired standard error of [`earns_its_place`]
/// would be too narrow here: two thresholds that differ in a few entries have nearly
/// equal fold-wise losses, so their paired differences vary little across folds that
/// share 3/4 of their training reports, and a chance advantage of the less simple one
/// would look significant.
pub(crate) fn within_one_standard_error(candidate: &[f64], best: &[f64]) -> bool {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let k = best.len() as f64;
    if best.len() < 2 {
        return mean(candidate) <= mean(best);
    }
    let m = mean(best);
    let se = (best.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (k - 1.0) / k).sqrt();
    mean(candidate) - m <= se
}

/// The mean of the paired differences `a − b` and its standard error (infinite with
/// fewer than two pairs).
fn paired_difference(a: &[f64], b: &[f64]) -> (f64, f64) {
    let diff: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    let k = diff.len() as f64;
    let mean = diff.iter().sum::<f64>() / k.max(1.0);
    if diff.len() < 2 {
        return (mean, f64::INFINITY);
    }
    let se = (diff.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0) / k).sqrt();
    (mean, se)
}

/// The one-standard-error rule between the families: whether a candidate with
/// fold-wise losses `challenger` replaces the choice so far with losses `incumbent`
/// (same folds, same order). True only when the mean paired difference plus one
/// standard error of it is below zero. Structures assume an order of the variables
/// that the data may not have, and with many candidates the smallest mean loss alone
/// over-selects them by chance; the same guard keeps a spectral estimate from
/// replacing a threshold that is as good.
pub(crate) fn earns_its_place(challenger: &[f64], incumbent: &[f64]) -> bool {
    let (mean, se) = paired_difference(challenger, incumbent);
    mean + se < 0.0
}
