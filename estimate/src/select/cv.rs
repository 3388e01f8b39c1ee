//! Running the K-fold cross-validation on the fold sums: held-out loss of every
//! candidate, the best of each family, the one-standard-error rules within and
//! between them, and the stacking of the families.

use super::candidates::{Candidate, SpectralCandidate};
use super::folds::{
    Fold, FoldInput, scored_fold_estimate, spectral_fits, weighted_squared_distance,
};
use super::guard::{GuardFold, GuardScores};
use super::settings::{CrossValidation, SPECTRAL_GUARD_TRIES, SpectralGuard};
use super::signal::{
    ZERO_LEVEL_Z, diagonal_level_z, diagonal_spread_z, off_diagonal_signal_z, off_diagonal_top_z,
};
use super::stacking::{StackedRelease, stacking_weight_on_folds};
use super::standard_error::{earns_its_place, within_one_standard_error};
use crate::full_average::FullAverage;
use crate::moments::packed_covariance;
use crate::packed::packed_to_matrix;
use crate::threshold::has_sum_squares;
use ldpcov_privacy::layout::triangle_pairs;
use nalgebra::DMatrix;

/// The outcome of a cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CvOutcome {
    /// The candidate chosen (see [`CrossValidation`] for the rules between and within
    /// the families).
    pub(crate) chosen: Candidate,
    /// The diagonal shrinkage weight chosen with it.
    pub(crate) diagonal_shrinkage: f64,
    /// Every threshold candidate with its mean held-out loss (data units squared), at
    /// its best diagonal shrinkage.
    pub(crate) losses: Vec<(Candidate, f64)>,
    /// Folds used (those with reports on both sides).
    pub(crate) folds_used: usize,
    /// The standardised off-diagonal signal energy of the full average
    /// ([`off_diagonal_signal_z`]); with [`off_diagonal_top_z`](Self::off_diagonal_top_z)
    /// it decides whether the data show off-diagonal signal
    /// ([`CrossValidation::shows_off_diagonal_signal`]), on which the
    /// within-threshold one-standard-error rule, the spectral guard and the stacking
    /// depend.
    pub(crate) off_diagonal_signal_z: f64,
    /// The full average's largest off-diagonal eigenvalue on the Tracy–Widom scale
    /// ([`off_diagonal_top_z`]): the test for a few strong directions, which the
    /// energy misses at small p.
    pub(crate) off_diagonal_top_z: f64,
    /// Whether the data showed off-diagonal signal by either statistic.
    pub(crate) off_diagonal_signal: bool,
    /// Whether the released threshold was chosen by that rule (the simplest within one
    /// standard error) rather than as the smallest mean.
    pub(crate) simplest_within_one_standard_error: bool,
    /// The standardised spread of the full average's diagonal
    /// ([`diagonal_spread_z`]): above the rule's z limit the variances differ, and the
    /// rule does not pool the diagonal more than the best threshold did.
    pub(crate) diagonal_spread_z: f64,
    /// The other family's best, mixed into the release with its stacking weight
    /// ([`CrossValidation::stack_families`]); `None` when the folds gave it weight 0,
    /// the mixture did not earn its place, or the stacking did not apply.
    pub(crate) stacked: Option<StackedRelease>,
    /// The releases the spectral-norm guard refused before the one released
    /// ([`CrossValidation::spectral_norm_guard`]), in the order tried.
    pub(crate) spectral_guard_refused: Vec<String>,
}

/// Runs the K-fold cross-validation of [`CrossValidation`] on the accumulators.
///
/// Returns `None` when fewer than two folds have reports on both sides (nothing to
/// validate against); the caller then keeps every entry. See [`CrossValidation`] for
/// the loss and the rescaling to the full n.
pub(crate) fn cross_validate(full: &FullAverage<'_>, cv: &CrossValidation) -> Option<CvOutcome> {
    let (input, acc) = (full.input(), full.acc());
    let p = input.dim();
    let with_adaptive = has_sum_squares(acc) && !cv.adaptive_scales.is_empty();
    let variances: &[f64] = if with_adaptive {
        // θ̂ from all reports: it is a per-report variance, the same population
        // quantity whichever fold is held out, and sums of squares are not kept per fold.
        full.variances()
    } else {
        &[]
    };
    let mut candidates = cv.candidates(with_adaptive, p, input.ordered_variables());
    // The zero matrix only where the full average cannot tell the mean variance from
    // zero (`ZERO_LEVEL_Z`): elsewhere the scaled identity beats it, and the folds'
    // coin flips between the two cost more than they save (docs/ALGORITHMS.md §3).
    if diagonal_level_z(p, full.packed(), full.diagonal_test_sd()) > ZERO_LEVEL_Z {
        candidates.retain(|c| *c != Candidate::Zero);
    }
    if candidates.is_empty() {
        return None;
    }
    let total = full.sums();
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
                Candidate::Spectral(_) | Candidate::Zero => &[0.0],
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
        let train = packed_covariance(input, &train_sums, n_train);
        let test = packed_covariance(input, fold_sums, n_k);
        let spectral_fits = if with_spectral {
            spectral_fits(p, &train, input.spectral_noise_sd(n_train))
        } else {
            None
        };
        let spectral_losses = match &spectral_fits {
            Some(fits) => fits.losses(&packed_to_matrix(p, &test)),
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
                input,
                cv,
                variances,
                train: &train,
                n_train,
            };
            let kept = fold.threshold_estimate(candidate, *beta);
            *dof += threshold_dof(p, &kept, *beta);
            let kept = fold.project_as_scored(kept);
            loss.push(weighted_squared_distance(&kept, &test, &weights));
        }
        if cv.stack_families || cv.spectral_norm_guard {
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
        Candidate::Zero => Family::Trivial,
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
    let full_average = full.packed();
    let test_sd = full.off_diagonal_test_sd();
    let signal_z = off_diagonal_signal_z(p, full_average, test_sd);
    let top_z = off_diagonal_top_z(p, full_average, full.top_test_sd());
    let spread_z = diagonal_spread_z(p, full_average, full.diagonal_test_sd());
    let signal = cv.shows_off_diagonal_signal(signal_z, top_z);
    let spectral_guarded = match cv.spectral_guard {
        SpectralGuard::Never => false,
        SpectralGuard::WithoutSignal => !signal,
        SpectralGuard::Always => true,
    };
    // The zero matrix first (when it is a candidate); the best threshold (the
    // diagonal alone and the scaled identity among them) and a structure replace the
    // choice so far only if they earn their place (one standard error of the paired
    // differences), a spectral estimate if its mean loss is lower — or, under the
    // spectral guard (by default: without off-diagonal signal), if it earns its place
    // too; always measured against the family bests. (Against the zero matrix a lower
    // mean alone releases the scaled identity whenever its level m̂ exceeds about
    // 1.5 noise sds τ, the one-standard-error rule about 2.6τ, close to the refit-free
    // rule's (1 + √3)τ: docs/ALGORITHMS.md §3.)
    let mut chosen_index: Option<usize> = None;
    // The families' choice before the spectral one, and the spectral family's best:
    // the two the stacking mixes.
    let mut before_spectral: Option<usize> = None;
    let mut spectral_best: Option<usize> = None;
    for f in [
        Family::Trivial,
        Family::Threshold,
        Family::Structure,
        Family::Spectral,
    ] {
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
                input,
                cv,
                variances,
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
    // The spectral-norm guard: the release (stacked or not), else the next candidates
    // by mean held-out loss, else the projected average or the zero matrix, whichever
    // passes first.
    let mut spectral_guard_refused = Vec::new();
    let (chosen_index, stacked) = if cv.spectral_norm_guard {
        let mean_losses: Vec<f64> = losses.iter().map(|l| mean(l)).collect();
        let release = Release {
            index: chosen_index,
            stacked,
        };
        guarded_release(
            input,
            cv,
            variances,
            &folds,
            &candidates,
            &mean_losses,
            release,
            &mut spectral_guard_refused,
        )
    } else {
        (chosen_index, stacked)
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
        spectral_guard_refused,
    })
}

/// A release: a candidate and what is stacked with it.
#[derive(Clone, Copy)]
struct Release {
    index: usize,
    stacked: Option<StackedRelease>,
}

/// The spectral-norm guard ([`CrossValidation::spectral_norm_guard`], the `guard`
/// module) on the chosen `release`: the first release that passes among it, the
/// chosen candidate without its stacked part, the other candidates by mean held-out
/// loss (`mean_losses`) up to [`SPECTRAL_GUARD_TRIES`] tries, then "none" (β = 0: the
/// projected average) and the zero matrix, one of which always passes (each passes
/// unless the other beats it). The names of the refused releases go to `refused`.
/// The release is unchanged when the guard cannot run (fewer than two folds kept, an
/// eigensolver failure) or nothing passes.
#[allow(clippy::too_many_arguments)]
fn guarded_release(
    input: &crate::input::EstimationInput,
    cv: &CrossValidation,
    variances: &[f64],
    folds: &[Fold],
    candidates: &[(Candidate, f64)],
    mean_losses: &[f64],
    release: Release,
    refused: &mut Vec<String>,
) -> (usize, Option<StackedRelease>) {
    let unchanged = (release.index, release.stacked);
    let p = input.dim();
    if folds.len() < 2 {
        return unchanged;
    }
    let Some(guard_folds) = folds
        .iter()
        .map(|f| GuardFold::new(p, &f.train, &f.test))
        .collect::<Option<Vec<_>>>()
    else {
        return unchanged;
    };
    let fold_estimates = |(candidate, beta): (Candidate, f64)| -> Option<Vec<DMatrix<f64>>> {
        folds
            .iter()
            .map(|f| {
                scored_fold_estimate(input, cv, variances, f, (candidate, beta))
                    .map(|e| packed_to_matrix(p, &e))
            })
            .collect()
    };
    let mut order: Vec<Release> = Vec::new();
    if release.stacked.is_some() {
        order.push(release);
    }
    order.push(Release {
        stacked: None,
        ..release
    });
    let mut by_loss: Vec<usize> = (0..candidates.len())
        .filter(|&i| i != release.index && mean_losses[i].is_finite())
        .collect();
    by_loss.sort_by(|&a, &b| mean_losses[a].total_cmp(&mean_losses[b]));
    for i in by_loss {
        if order.len() >= SPECTRAL_GUARD_TRIES {
            break;
        }
        order.push(Release {
            index: i,
            stacked: None,
        });
    }
    let references = candidates
        .iter()
        .position(|&(c, b)| c == Candidate::None && b == 0.0)
        .into_iter()
        .chain(candidates.iter().position(|&(c, _)| c == Candidate::Zero));
    for i in references {
        if !order.iter().any(|r| r.index == i && r.stacked.is_none()) {
            order.push(Release {
                index: i,
                stacked: None,
            });
        }
    }
    for r in order {
        let name = release_name(candidates, r);
        let Some(mut estimates) = fold_estimates(candidates[r.index]) else {
            refused.push(name);
            continue;
        };
        if let Some(s) = r.stacked {
            let Some(other) = fold_estimates((s.candidate, s.diagonal_shrinkage)) else {
                refused.push(name);
                continue;
            };
            for (e, o) in estimates.iter_mut().zip(other) {
                *e = &*e * (1.0 - s.weight) + o * s.weight;
            }
        }
        match GuardScores::new(&guard_folds, &estimates) {
            Some(scores) if scores.passes() => {
                tracing::debug!(release = %name, ?refused, "spectral-norm guard");
                return (r.index, r.stacked);
            }
            _ => refused.push(name),
        }
    }
    refused.clear();
    unchanged
}

/// A release's name for the log and the rule: `noise(c=1.000, soft) β=0.5`, with
/// `+ 0.31×other` when stacked.
fn release_name(candidates: &[(Candidate, f64)], r: Release) -> String {
    let (c, b) = candidates[r.index];
    let mut name = format!("{} β={b}", c.name());
    if let Some(s) = r.stacked {
        name.push_str(&format!(" + {:.2}×{}", s.weight, s.candidate.name()));
    }
    name
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
        Candidate::Diagonal => f64::INFINITY,
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
    /// The zero matrix: the first choice, which every other family must earn its place
    /// against.
    Trivial,
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
