//! The refit-free selection the default uses at large p: Stein's unbiased risk
//! estimate (SURE) of every candidate on the full average, from the known noise level
//! alone — no folds, no refits, one eigendecomposition.
//!
//! Candidates: "none", the soft thresholds of the noise form `c·σ_n√(log p)` with
//! every diagonal shrinkage β, and the bulk shrinkage ([`spectral::bulk_shrink`]) at
//! every weight of [`DEFAULT_BULK_ALPHAS`] without the edge soft threshold
//! ([`REFIT_FREE_BULK_TAUS`]; α = 1 is the PSD projection of the raw average, α = 0
//! flat spikes over a flat bulk). Each has an exact SURE under the
//! noise model of [`spectral`] (every packed entry iid `N(0, σ_n²)`, Frobenius weights
//! 1 on the diagonal and 2 off it), so their risks are comparable:
//!
//! * a soft threshold is continuous and piecewise linear in each entry: an off-diagonal
//!   entry y at λ contributes `2·(min(y², λ²) − σ_n² + 2σ_n²·1[|y| > λ])`;
//! * the diagonal shrinkage `d_i ← (1 − β)d_i + β·mean d` is linear with
//!   `∂f_i/∂d_i = 1 − β + β/p`: `Σ_i (f_i − d_i)² − pσ_n² + 2pσ_n²(1 − β + β/p)`;
//! * the bulk shrinkage's SURE is [`spectral::sure_spectral`]'s.
//!
//! Without off-diagonal signal (the cross-validation's two tests on the full average,
//! the top-eigenvalue one at the stricter [`REFIT_FREE_TOP_Z`]) the selection is the one the
//! cross-validation makes then: the bulk shrinkage is not a candidate (with no spike
//! above the noise edge it has nothing to keep but noise directions, which SURE, a
//! Frobenius risk, barely sees), and among the soft thresholds the simplest — the
//! fewest degrees of freedom — whose SURE exceeds the smallest by at most one standard
//! error of the smallest is released ([`simplest_within_one_standard_error`]).
//!
//! Hard thresholds (a jump), the entry-adaptive form (its λ reads the data's sums of
//! squares), the factor model (its diagonal fit is not a spectral function) and the
//! structures have no SURE of this kind and are left to the cross-validation. The
//! soft thresholds' SURE is that of the thresholded matrix before the PSD projection,
//! which can only lower the Frobenius error of a PSD truth (projection onto a convex
//! set containing it), so it is conservative for them.
//!
//! [`spectral`]: crate::spectral
//! [`spectral::bulk_shrink`]: crate::spectral::bulk_shrink
//! [`spectral::sure_spectral`]: crate::spectral::sure_spectral
//! [`DEFAULT_BULK_ALPHAS`]: crate::spectral::DEFAULT_BULK_ALPHAS

use super::settings::CrossValidation;
use super::signal::{diagonal_spread_z, off_diagonal_signal_z, off_diagonal_top_z};
use crate::error::EstimateError;
use crate::full_average::FullAverage;
use crate::spectral::{DEFAULT_BULK_ALPHAS, bulk_shrink_choice};
use crate::threshold::ThresholdKind;
use ldpcov_privacy::layout::triangle_pairs;
use nalgebra::DMatrix;

/// The edge soft thresholds τ the refit-free selection scores: 2 alone, no soft
/// piece. Measured on the `unordered` reproduction with this selection forced at every
/// p (lab/docs/REPRODUCTION.md §6): adding τ ∈ {1, 1.5} (the cross-validation's grid,
/// [`DEFAULT_BULK_TAUS`](crate::spectral::DEFAULT_BULK_TAUS)) took it from 0.740 /
/// 0.648 to 0.753 / 0.656 mean ratio and its worst point from 1.28 to 1.69 in spectral
/// norm, all of it on Wang & Xu's sparse model, where the noise edge is far above the
/// signal and the smallest of 33 SURE values, each with its own noise, keeps pure-noise
/// directions. The cross-validation, which checks the chosen τ on held-out folds,
/// gains from it; the selection by SURE alone does not.
pub(crate) const REFIT_FREE_BULK_TAUS: [f64; 1] = [2.0];

/// The least top-eigenvalue z ([`off_diagonal_top_z`]) at which the refit-free
/// selection sees off-diagonal signal: TW₁'s 99.9 % quantile, 3.27, rounded up — the
/// energy test's level — where the cross-validation uses the 99 % one
/// (`OFF_DIAGONAL_TOP_Z`). A false alarm costs more
/// here: the cross-validation still checks a spectral estimate on held-out folds,
/// while with signal this selection releases SURE's minimum, and on independent
/// variables at p = 300 a top z of 2.9 (a 0.5 % event there) let it release a noise
/// eigenvalue as a spike (relative spectral error 11.8; docs/ALGORITHMS.md §3).
pub(crate) const REFIT_FREE_TOP_Z: f64 = 3.3;

/// The top-eigenvalue limit the refit-free selection applies under `cv`: the CV's
/// limit, raised to at least [`REFIT_FREE_TOP_Z`].
pub(crate) fn refit_free_top_limit(cv: &CrossValidation) -> f64 {
    cv.off_diagonal_top_max_z.max(REFIT_FREE_TOP_Z)
}

/// What the SURE selection chose.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum SureChoice {
    /// A soft threshold at `c·σ_n√(log p)` (c = 0: keep every entry) with diagonal
    /// shrinkage β.
    Soft {
        /// The multiple c.
        c: f64,
        /// The diagonal shrinkage weight β.
        beta: f64,
    },
    /// The bulk shrinkage at weight α and edge threshold τ.
    Bulk {
        /// The weight α.
        alpha: f64,
        /// The edge soft threshold τ.
        tau: f64,
    },
    /// The trivial estimate: the choice above did not beat the zero matrix by one
    /// standard error of the SUREs' difference ([`beats_zero`]), and the scaled
    /// identity at its shrunk level ([`shrunk_level_scale`],
    /// [`SureSelection::level_scale`]) is released instead (the zero matrix when the
    /// level is shrunk to 0).
    Zero,
}

/// A soft threshold candidate of the SURE selection: `λ = c·σ_n√(log p)` off the
/// diagonal and diagonal shrinkage β.
#[derive(Debug, Clone, Copy)]
struct SoftCandidate {
    c: f64,
    lambda: f64,
    beta: f64,
}

impl SoftCandidate {
    /// Its SURE term for one entry of `y`: an off-diagonal `v` (weight 2) contributes
    /// `2·(min(v², λ²) − σ_n² + 2σ_n²·1[|v| > λ])`; a diagonal `d` (the diagonal's
    /// mean `mean`) contributes `(β(mean − d))² − σ_d² + 2σ_d²(1 − β + β/p)`, with
    /// `s2 = (σ_n², σ_d²)` the off-diagonal and the diagonal noise variance (equal for
    /// the raw Gaussian report, `σ_d² = 2σ_n²` for the `svec` and rank-one reports).
    fn term(&self, i: usize, j: usize, v: f64, mean: f64, p: usize, s2: (f64, f64)) -> f64 {
        let (s2, s2_diagonal) = s2;
        if i == j {
            let moved = self.beta * (mean - v);
            let divergence = 1.0 - self.beta + self.beta / p as f64;
            moved * moved - s2_diagonal + 2.0 * s2_diagonal * divergence
        } else {
            let kept = if v.abs() > self.lambda { 2.0 * s2 } else { 0.0 };
            2.0 * ((v * v).min(self.lambda * self.lambda) - s2 + kept)
        }
    }

    /// Its degrees of freedom on `y`: the off-diagonal entries it keeps plus the
    /// diagonal's `p(1 − β) + β` (its divergence, as in the cross-validation's rule).
    fn dof(&self, y: &DMatrix<f64>) -> f64 {
        let p = y.nrows();
        let kept = triangle_pairs(p)
            .filter(|&(i, j)| i != j && y[(i, j)].abs() > self.lambda)
            .count();
        kept as f64 + p as f64 * (1.0 - self.beta) + self.beta
    }
}

/// Calls `f(i, j, v)` for every entry `(i ≤ j)` of the upper triangle of `y`.
fn for_each_entry(y: &DMatrix<f64>, mut f: impl FnMut(usize, usize, f64)) {
    for (i, j) in triangle_pairs(y.nrows()) {
        f(i, j, y[(i, j)]);
    }
}

/// SURE of a soft threshold λ off the diagonal with diagonal shrinkage β on the
/// symmetric `y` (off-diagonal entry noise sd `sigma_n`, diagonal `sigma_diagonal`):
/// the sum of [`SoftCandidate::term`] over the upper triangle.
pub(crate) fn soft_threshold_risk(
    y: &DMatrix<f64>,
    sigma_n: f64,
    sigma_diagonal: f64,
    lambda: f64,
    beta: f64,
) -> f64 {
    let candidate = SoftCandidate {
        c: 0.0,
        lambda,
        beta,
    };
    let (p, s2, mean) = (y.nrows(), sigma_n * sigma_n, y.trace() / y.nrows() as f64);
    let s2_diagonal = sigma_diagonal * sigma_diagonal;
    let mut risk = 0.0;
    for_each_entry(y, |i, j, v| {
        risk += candidate.term(i, j, v, mean, p, (s2, s2_diagonal))
    });
    risk
}

/// Among `candidates` with SUREs `risks`, the simplest (fewest degrees of freedom,
/// then the smaller SURE) whose SURE exceeds the smallest by at most one standard
/// error of the smallest: the sd of the best candidate's SURE, a sum of independent
/// entry terms, estimated by their spread times their number (exact when the entries'
/// truths are equal, as without off-diagonal signal). This is the cross-validation's
/// within-threshold rule with SURE in place of the held-out loss; as there, the
/// standard error of the difference would be too narrow: two thresholds that keep
/// nearly the same entries have nearly equal terms, and among thirty candidates the
/// smallest SURE of pure noise beat the simplest by more than that in 4 of the 24
/// seeds of the unit test `refit_free_selection_without_signal_keeps_no_noise_entry`
/// (a few kept noise entries, cheap in Frobenius norm, dear in spectral norm).
///
/// As in the cross-validation's rule, pooling the diagonal counts as simpler, but not
/// when the variances differ (`max_pooling`: the best's β when the diagonal's spread z
/// is above its limit, else ∞): no candidate pools more than the best.
fn simplest_within_one_standard_error(
    y: &DMatrix<f64>,
    sigma_n: f64,
    sigma_diagonal: f64,
    candidates: &[SoftCandidate],
    risks: &[f64],
    variances_differ: bool,
) -> usize {
    let best = (0..risks.len())
        .min_by(|&a, &b| risks[a].total_cmp(&risks[b]))
        .unwrap_or(0);
    let (p, s2, mean) = (y.nrows(), sigma_n * sigma_n, y.trace() / y.nrows() as f64);
    let s2_diagonal = sigma_diagonal * sigma_diagonal;
    let (mut count, mut sum, mut squares) = (0.0, 0.0, 0.0);
    for_each_entry(y, |i, j, v| {
        let t = candidates[best].term(i, j, v, mean, p, (s2, s2_diagonal));
        count += 1.0;
        sum += t;
        squares += t * t;
    });
    let variance = (squares - sum * sum / count).max(0.0) / (count - 1.0).max(1.0);
    let standard_error = (variance * count).sqrt();
    let max_pooling = if variances_differ {
        candidates[best].beta
    } else {
        f64::INFINITY
    };
    (0..candidates.len())
        .filter(|&k| candidates[k].beta <= max_pooling && risks[k] - risks[best] <= standard_error)
        .map(|k| (k, candidates[k].dof(y)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(risks[a.0].total_cmp(&risks[b.0])))
        .map_or(best, |(k, _)| k)
}

/// What the SURE selection chose and why.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SureSelection {
    /// The choice.
    pub choice: SureChoice,
    /// Its SURE.
    pub risk: f64,
    /// The full average's off-diagonal energy z.
    pub signal_z: f64,
    /// Its top-eigenvalue z, computed only when the energy alone does not show signal
    /// (it costs an eigendecomposition, a third of the selection at large p).
    pub top_z: Option<f64>,
    /// Whether the data showed off-diagonal signal; without it the simplest soft
    /// threshold within one standard error was released.
    pub signal: bool,
    /// The choice the zero matrix replaced ([`beats_zero`]), if it did.
    pub replaced: Option<SureChoice>,
    /// When the release is the scaled identity (the choice pooled the diagonal and kept
    /// no off-diagonal entry, or it did not beat the zero matrix): the factor
    /// `(1 − 2τ²/m̂²)⁺` its level is shrunk by ([`shrunk_level_scale`]).
    pub level_scale: Option<f64>,
}

/// Chooses by SURE among the candidates above, on the full average (with its entry
/// noise sd); `cv` supplies the grids of c and β (only soft thresholds are
/// scored, whatever `cv.kinds` says) and the signal tests' limits.
pub(crate) fn sure_select(
    full: &FullAverage<'_>,
    cv: &CrossValidation,
) -> Result<SureSelection, EstimateError> {
    let selection = choose_by_sure(full, cv)?;
    if !cv.trivial_candidates {
        return Ok(selection);
    }
    let (y, sigma_n, sigma_diagonal) = (
        full.matrix(),
        full.entry_noise_sd(),
        full.diagonal_noise_sd(),
    );
    let p = y.nrows();
    let estimate = match selection.choice {
        SureChoice::Soft { c, beta } => {
            let lambda = c * sigma_n * (p as f64).ln().sqrt();
            let keeps_nothing = triangle_pairs(p).all(|(i, j)| i == j || y[(i, j)].abs() <= lambda);
            if beta == 1.0 && keeps_nothing {
                let level = y.trace() / p as f64;
                let tau2 = sigma_diagonal * sigma_diagonal / p as f64;
                return Ok(SureSelection {
                    level_scale: Some(shrunk_level_scale(level, tau2)),
                    ..selection
                });
            }
            soft_estimate(y, lambda, beta)
        }
        SureChoice::Bulk { alpha, tau } => {
            crate::spectral::bulk_shrink(y, full.spectral_noise_sd(), alpha, tau)?.matrix
        }
        SureChoice::Zero => return Ok(selection),
    };
    let zero = zero_risk(y, sigma_n, sigma_diagonal);
    if beats_zero(&estimate, selection.risk, zero, sigma_n, sigma_diagonal) {
        return Ok(selection);
    }
    // It did not beat the zero matrix: the trivial estimate, the scaled identity at
    // its shrunk level (the zero matrix when the level is shrunk to 0).
    let level = y.trace() / p as f64;
    let scale = shrunk_level_scale(level, sigma_diagonal * sigma_diagonal / p as f64);
    tracing::debug!(choice = ?selection.choice, risk = selection.risk, zero, scale, "refit-free selection: the trivial estimate");
    Ok(SureSelection {
        choice: SureChoice::Zero,
        risk: zero,
        replaced: Some(selection.choice),
        level_scale: Some(scale),
        ..selection
    })
}

/// The factor `(1 − 2τ²/m̂²)⁺` by which the refit-free selection shrinks the level
/// `m̂` (the mean diagonal entry, noise variance `τ² = σ_d²/p`) of the scaled identity
/// toward zero: James–Stein's positive-part factor with twice its constant. The
/// level alone is a one-dimensional estimate: released as it is, its error
/// `p(m̂ − s̄)²` is many times the zero matrix's `‖Σ‖_F²` when τ is several times the
/// mean variance s̄ (the side-by-side cells at p = 1 000, n = 2·10⁴: relative Frobenius
/// error 1.67–1.71); the zero matrix, in turn, loses to it in both norms once τ is
/// below s̄. Over τ/s̄ from 0.3 to 3 on Model 1's spectrum (a Monte Carlo of
/// m̂ ~ N(s̄, τ²), docs/ALGORITHMS.md §3) this factor stays within 9 % of the better of
/// the two in Frobenius norm and below the zero matrix in spectral norm, where the
/// plain James–Stein constant (1) costs 16 % at τ = 3s̄ and a pretest against the
/// zero matrix (release m̂ only above (1 + √3)τ) up to 20 % / 27 % at τ = 0.7s̄.
pub(crate) fn shrunk_level_scale(level: f64, tau2: f64) -> f64 {
    if level * level > 2.0 * tau2 {
        1.0 - 2.0 * tau2 / (level * level)
    } else {
        0.0
    }
}

/// The soft threshold λ off the diagonal with diagonal shrinkage β applied to `y`.
fn soft_estimate(y: &DMatrix<f64>, lambda: f64, beta: f64) -> DMatrix<f64> {
    let p = y.nrows();
    let mean = y.trace() / p as f64;
    DMatrix::from_fn(p, p, |i, j| {
        let v = y[(i, j)];
        if i == j {
            (1.0 - beta) * v + beta * mean
        } else {
            v.signum() * (v.abs() - lambda).max(0.0)
        }
    })
}

/// SURE of the zero matrix on `y` (off-diagonal noise sd `sigma_n`, diagonal
/// `sigma_diagonal`): `Σ_i (y_ii² − σ_d²) + 2·Σ_{i<j} (y_ij² − σ_n²)`, the unbiased
/// estimate of `‖Σ‖_F²`.
fn zero_risk(y: &DMatrix<f64>, sigma_n: f64, sigma_diagonal: f64) -> f64 {
    let (s2, s2_diagonal) = (sigma_n * sigma_n, sigma_diagonal * sigma_diagonal);
    let mut risk = 0.0;
    for_each_entry(y, |i, j, v| {
        risk += if i == j {
            v * v - s2_diagonal
        } else {
            2.0 * (v * v - s2)
        }
    });
    risk
}

/// Whether an estimate `f` of SURE `risk` beats the zero matrix (SURE `zero`) by one
/// standard error of the difference. The difference is
/// `SURE(f) − SURE(0) = Σ_e w_e·(f_e² − 2f_e·y_e) + 2·Σ_e σ_e²·∂f_e/∂y_e` over the
/// packed entries (`w_e` 1 on the diagonal, 2 off it); with f held fixed its
/// variance is that of `−2Σ_e w_e·f_e·y_e`, i.e. `4Σ_i σ_d²·f_ii² + 16Σ_{i<j} σ_n²·f_ij²`.
/// For the pooled diagonal `f = m̂·I` (m̂ ~ N(s̄, τ²), τ² = σ_d²/p) this is the delta
/// method's `4p²τ²·m̂²`; at s̄ = 0 it is √2 wider than the exact sd of `p·m̂²`, so the
/// rule leans to the zero matrix when the mean variance is below its own noise: the
/// pooled diagonal is released only for `|m̂| > (1 + √3)·τ`.
fn beats_zero(f: &DMatrix<f64>, risk: f64, zero: f64, sigma_n: f64, sigma_diagonal: f64) -> bool {
    let (s2, s2_diagonal) = (sigma_n * sigma_n, sigma_diagonal * sigma_diagonal);
    let mut variance = 0.0;
    for_each_entry(f, |i, j, v| {
        variance += if i == j {
            4.0 * s2_diagonal * v * v
        } else {
            16.0 * s2 * v * v
        }
    });
    risk + variance.sqrt() < zero
}

/// The selection by SURE alone, before the comparison with the zero matrix.
fn choose_by_sure(
    full: &FullAverage<'_>,
    cv: &CrossValidation,
) -> Result<SureSelection, EstimateError> {
    let (y, packed, sigma_n) = (full.matrix(), full.packed(), full.entry_noise_sd());
    let sigma_diagonal = full.diagonal_noise_sd();
    let p = y.nrows();
    let root_log_p = (p as f64).ln().sqrt();
    let test_sd = full.off_diagonal_test_sd();
    let signal_z = off_diagonal_signal_z(p, packed, test_sd);
    let top_z = (signal_z <= cv.threshold_one_standard_error_max_z)
        .then(|| off_diagonal_top_z(p, packed, full.top_test_sd()));
    let signal = signal_z > cv.threshold_one_standard_error_max_z
        || top_z.is_some_and(|t| t > refit_free_top_limit(cv));
    let betas: &[f64] = if cv.diagonal_shrinkage.is_empty() {
        &[0.0]
    } else {
        &cv.diagonal_shrinkage
    };
    let candidates: Vec<SoftCandidate> = std::iter::once(0.0)
        .filter(|_| cv.include_none)
        .chain(cv.noise_scales.iter().copied())
        .flat_map(|c| {
            betas.iter().map(move |&beta| SoftCandidate {
                c,
                lambda: c * sigma_n * root_log_p,
                beta,
            })
        })
        .collect();
    let risks: Vec<f64> = candidates
        .iter()
        .map(|k| soft_threshold_risk(y, sigma_n, sigma_diagonal, k.lambda, k.beta))
        .collect();
    let selection = |k: usize, risk: f64| SureSelection {
        choice: SureChoice::Soft {
            c: candidates[k].c,
            beta: candidates[k].beta,
        },
        risk,
        signal_z,
        top_z,
        signal,
        replaced: None,
        level_scale: None,
    };
    if !signal && !candidates.is_empty() {
        let variances_differ = diagonal_spread_z(p, packed, full.diagonal_test_sd())
            > cv.threshold_one_standard_error_max_z;
        let k = simplest_within_one_standard_error(
            y,
            sigma_n,
            sigma_diagonal,
            &candidates,
            &risks,
            variances_differ,
        );
        tracing::debug!(p, signal_z, top_z, choice = ?candidates[k], "refit-free selection without signal");
        return Ok(selection(k, risks[k]));
    }
    let mut best = match (0..risks.len()).min_by(|&a, &b| risks[a].total_cmp(&risks[b])) {
        Some(k) => selection(k, risks[k]),
        // No soft threshold to score: the bulk shrinkage below, if any.
        None => SureSelection {
            choice: SureChoice::Soft { c: 0.0, beta: 0.0 },
            risk: f64::INFINITY,
            signal_z,
            top_z,
            signal,
            replaced: None,
            level_scale: None,
        },
    };
    if cv.spectral && p >= 2 {
        let bulk = bulk_shrink_choice(
            y,
            full.spectral_noise_sd(),
            &DEFAULT_BULK_ALPHAS,
            &REFIT_FREE_BULK_TAUS,
        )?;
        if bulk.risk < best.risk {
            best.choice = SureChoice::Bulk {
                alpha: bulk.alpha,
                tau: bulk.tau,
            };
            best.risk = bulk.risk;
        }
    }
    tracing::debug!(p, choice = ?best.choice, risk = best.risk, "refit-free selection by SURE");
    Ok(best)
}

/// The kind the SURE selection applies (soft: the only thresholds it scores).
pub(crate) const SURE_KIND: ThresholdKind = ThresholdKind::Soft;
