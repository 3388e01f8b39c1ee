//! Running the K-fold cross-validation on the fold sums: held-out loss of every
//! candidate, the best of each family, and the one-standard-error rule between them.

use super::{
    Candidate, CrossValidation, SpectralCandidate, SpectralGuard, candidate_kind,
    candidate_structure, candidate_thresholds, entry_variances, has_sum_squares,
    shrink_packed_diagonal,
};
use crate::accumulator::Accumulator;
use crate::moments::packed_covariance;
use crate::psd::{project_packed, symmetric_eigen};
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
    /// ([`off_diagonal_signal_z`]); with [`off_diagonal_top_z`](Self::off_diagonal_top_z)
    /// it decides whether the data show off-diagonal signal
    /// ([`CrossValidation::shows_off_diagonal_signal`]), on which the
    /// within-threshold one-standard-error rule, the spectral guard and the stacking
    /// depend.
    pub off_diagonal_signal_z: f64,
    /// The full average's largest off-diagonal eigenvalue on the Tracy–Widom scale
    /// ([`off_diagonal_top_z`]): the test for a few strong directions, which the
    /// energy misses at small p.
    pub off_diagonal_top_z: f64,
    /// Whether the data showed off-diagonal signal by either statistic.
    pub off_diagonal_signal: bool,
    /// Whether the released threshold was chosen by that rule (the simplest within one
    /// standard error) rather than as the smallest mean.
    pub simplest_within_one_standard_error: bool,
    /// The standardised spread of the full average's diagonal
    /// ([`diagonal_spread_z`]): above the rule's z limit the variances differ, and the
    /// rule does not pool the diagonal more than the best threshold did.
    pub diagonal_spread_z: f64,
    /// The other family's best, mixed into the release with its stacking weight
    /// ([`CrossValidation::stack_families`]); `None` when the folds gave it weight 0,
    /// the mixture did not earn its place, or the stacking did not apply.
    pub stacked: Option<StackedRelease>,
}

/// A second candidate mixed into the cross-validation's release: the release is
/// `(1 − weight)·chosen + weight·candidate`, a convex combination, so it is PSD when
/// both parts are and its error in any norm is at most the weighted mean of theirs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StackedRelease {
    /// The other family's best candidate.
    pub candidate: Candidate,
    /// Its diagonal shrinkage weight β.
    pub diagonal_shrinkage: f64,
    /// Its weight in the release, in (0, 1].
    pub weight: f64,
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

/// The default of [`CrossValidation::off_diagonal_top_max_z`]: above this
/// [`off_diagonal_top_z`] the data show off-diagonal signal. It is the Tracy–Widom
/// (β = 1) distribution's 99 % quantile, 2.02, rounded; at finite p the statistic's null
/// quantiles are lower (docs/ALGORITHMS.md §3), so the test's level is at most about
/// 1 % at every p.
pub const OFF_DIAGONAL_TOP_Z: f64 = 2.0;

/// The largest eigenvalue of the off-diagonal part of a packed `p × p` average with
/// independent Gaussian entry noise of sd `sigma`, on the Tracy–Widom scale:
/// `t = (λ₁(Y − diag Y) − 2σ√p) / (σ·p^(−1/6))`. Without off-diagonal signal the
/// off-diagonal part is a Wigner matrix with a zero diagonal, whose top eigenvalue sits
/// at the edge `2σ√p` with fluctuations of order `σ·p^(−1/6)` (t tends to the
/// Tracy–Widom law as p grows); the diagonal, signal or noise, does not enter. A
/// low-rank signal `θuuᵀ` with a delocalised u and `θ > σ√p` lifts it to about
/// `θ + pσ²/θ` (`t ≈ p^(2/3)·(θ/σ√p + σ√p/θ − 2)`), so t sees a single strong
/// direction that the off-diagonal energy ([`off_diagonal_signal_z`]), spread over
/// `p(p − 1)/2` entries, misses at small p. 0 for p < 2, no noise to standardise by,
/// or an eigensolver failure.
pub fn off_diagonal_top_z(p: usize, packed: &[f64], sigma: f64) -> f64 {
    if p < 2 || !(sigma > 0.0 && sigma.is_finite()) {
        return 0.0;
    }
    let mut m = full_matrix(p, packed);
    m.fill_diagonal(0.0);
    let Ok((values, _)) = symmetric_eigen(&m) else {
        return 0.0;
    };
    let top = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let pf = p as f64;
    (top - 2.0 * sigma * pf.sqrt()) / (sigma * pf.powf(-1.0 / 6.0))
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
    let p = collection.dim();
    let with_adaptive = has_sum_squares(acc) && !cv.adaptive_scales.is_empty();
    let variances = if with_adaptive {
        // θ̂ from all reports: it is a per-report variance, the same population
        // quantity whichever fold is held out, and sums of squares are not kept per fold.
        entry_variances(collection, acc)
    } else {
        Vec::new()
    };
    let candidates = cv.candidates(with_adaptive, p, collection.ordered_variables());
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
    // What the stacking of the families needs again after the choice (kept only when
    // it may run).
    let mut folds: Vec<Fold> = Vec::new();
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
        let spectral_fits = if with_spectral {
            spectral_fits(p, &train, collection.mean_entry_noise_sd(n_train))
        } else {
            None
        };
        let spectral_losses = match &spectral_fits {
            Some(fits) => fits.losses(&full_matrix(p, &test)),
            None => [f64::INFINITY; 3],
        };
        for ((loss, dof), (candidate, beta)) in
            losses.iter_mut().zip(&mut kept_dof).zip(&candidates)
        {
            if let Candidate::Spectral(s) = candidate {
                loss.push(spectral_losses[*s as usize]);
                continue;
            }
            let fold = FoldInput {
                collection,
                cv,
                variances: &variances,
                train: &train,
                n_train,
            };
            let kept = fold.threshold_estimate(candidate, *beta);
            *dof += threshold_dof(p, &kept, *beta);
            let kept = fold.project_as_scored(kept);
            loss.push(weighted_squared_distance(&kept, &test, &weights));
        }
        if cv.stack_families {
            folds.push(Fold {
                train,
                test,
                n_train,
                spectral_fits,
            });
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
    // Whether the full average shows off-diagonal signal: the within-threshold rule,
    // the spectral guard and the stacking depend on it.
    let full_average = packed_covariance(collection, &total, acc.count);
    let full_sd = collection.mean_entry_noise_sd(acc.count);
    let signal_z = off_diagonal_signal_z(p, &full_average, full_sd);
    let top_z = off_diagonal_top_z(p, &full_average, full_sd);
    let spread_z = diagonal_spread_z(p, &full_average, full_sd);
    let signal = cv.shows_off_diagonal_signal(signal_z, top_z);
    let spectral_guarded = match cv.spectral_guard {
        SpectralGuard::Never => false,
        SpectralGuard::WithoutSignal => !signal,
        SpectralGuard::Always => true,
    };
    // Thresholds first; a structure replaces the choice so far only if it earns its
    // place (one standard error of the paired differences), a spectral estimate if its
    // mean loss is lower — or, under the spectral guard (by default: without
    // off-diagonal signal), if it earns its place too; always measured against the
    // family bests.
    let mut chosen_index: Option<usize> = None;
    // The families' choice before the spectral one, and the spectral family's best:
    // the two the stacking mixes.
    let mut before_spectral: Option<usize> = None;
    let mut spectral_best: Option<usize> = None;
    for f in [Family::Threshold, Family::Structure, Family::Spectral] {
        let Some(mut i) = best_of(f) else { continue };
        if f == Family::Spectral {
            if cv.spectral_prefer_bulk_shrink {
                i = prefer_bulk_shrink(&candidates, &losses, i);
            }
            before_spectral = chosen_index;
            spectral_best = Some(i);
        }
        chosen_index = match chosen_index {
            None => Some(i),
            Some(current) => {
                let replaces = match f {
                    Family::Spectral if !spectral_guarded => {
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
    let simplify = cv.threshold_one_standard_error
        && !signal
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
    // With off-diagonal signal, mix in the other family's best at the weight the
    // folds choose (the two families are the spectral one and the rest).
    let stacked = if cv.stack_families && signal {
        let other = if Some(chosen_index) == spectral_best {
            before_spectral
        } else {
            spectral_best
        };
        other.and_then(|other| {
            let weight = stacking_weight_on_folds(
                collection,
                cv,
                &variances,
                &folds,
                &weights,
                candidates[chosen_index],
                candidates[other],
            )?;
            (weight > 0.0).then_some(StackedRelease {
                candidate: candidates[other].0,
                diagonal_shrinkage: candidates[other].1,
                weight,
            })
        })
    } else {
        None
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
        off_diagonal_signal_z: signal_z,
        off_diagonal_top_z: top_z,
        off_diagonal_signal: signal,
        simplest_within_one_standard_error: simplify,
        diagonal_spread_z: spread_z,
        stacked,
    })
}

/// One usable fold, kept for the stacking weight after the choice: the training and
/// held-out averages (packed) and the spectral candidates fitted to the training one.
struct Fold {
    train: Vec<f64>,
    test: Vec<f64>,
    n_train: u64,
    spectral_fits: Option<CvFits>,
}

/// What a threshold candidate's estimate on one training average depends on.
struct FoldInput<'a> {
    collection: &'a Collection,
    cv: &'a CrossValidation,
    variances: &'a [f64],
    train: &'a [f64],
    n_train: u64,
}

impl FoldInput<'_> {
    /// A threshold (or structure) candidate with diagonal shrinkage `beta` on the
    /// training average, packed, before any PSD projection: what the rule would apply
    /// to the full average, at the training size's thresholds.
    fn threshold_estimate(&self, candidate: &Candidate, beta: f64) -> Vec<f64> {
        let p = self.collection.dim();
        let thresholds =
            candidate_thresholds(candidate, self.collection, self.variances, self.n_train);
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
    fn project_as_scored(&self, kept: Vec<f64>) -> Vec<f64> {
        let p = self.collection.dim();
        if p > self.cv.project_in_loss_max_dim {
            return kept;
        }
        project_packed(p, &kept).unwrap_or(kept)
    }
}

/// The weighted squared distance of two packed matrices (`weights` 1 on the diagonal,
/// 2 off it: the squared Frobenius distance of the full matrices).
fn weighted_squared_distance(a: &[f64], b: &[f64], weights: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .zip(weights)
        .map(|((a, b), w)| w * (a - b) * (a - b))
        .sum()
}

/// A candidate's estimate on one fold's training average, packed, as the loss scored
/// it (`None` if the spectral fit failed on that fold).
fn scored_fold_estimate(
    collection: &Collection,
    cv: &CrossValidation,
    variances: &[f64],
    fold: &Fold,
    (candidate, beta): (Candidate, f64),
) -> Option<Vec<f64>> {
    let p = collection.dim();
    if let Candidate::Spectral(s) = candidate {
        let m = fold.spectral_fits.as_ref()?.estimate(s as usize);
        return Some(triangle_pairs(p).map(|(i, j)| m[(i, j)]).collect());
    }
    let input = FoldInput {
        collection,
        cv,
        variances,
        train: &fold.train,
        n_train: fold.n_train,
    };
    Some(input.project_as_scored(input.threshold_estimate(&candidate, beta)))
}

/// The stacking weight of `other` against `chosen` on the kept folds
/// ([`weight_from_terms`]), or 0 unless the mixture earns its place
/// ([`stacking_earns_its_place`]); `None` when a spectral fit failed on one of them.
fn stacking_weight_on_folds(
    collection: &Collection,
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
            let c = scored_fold_estimate(collection, cv, variances, fold, chosen)?;
            let o = scored_fold_estimate(collection, cv, variances, fold, other)?;
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

/// The full symmetric matrix of a packed upper triangle.
fn full_matrix(p: usize, packed: &[f64]) -> DMatrix<f64> {
    DMatrix::from_row_slice(p, p, &unpack_symmetric(p, packed))
}

/// The spectral candidates fitted to packed `train` (noise sd `sigma_n`): one
/// eigendecomposition. `None` when the eigensolver fails (the candidates then get an
/// infinite loss and cannot be chosen).
fn spectral_fits(p: usize, train: &[f64], sigma_n: f64) -> Option<CvFits> {
    CvFits::new(&full_matrix(p, train), sigma_n).ok()
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
