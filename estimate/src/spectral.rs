//! Spectral estimators that use the known noise level: spike de-biasing, optimal
//! eigenvalue shrinkers, a low-rank plus diagonal (factor) estimate, and Stein's
//! unbiased risk estimate for eigenvalue-shrinkage estimators.
//!
//! # Noise model
//!
//! The released average is `Y = Σ + W` with `W` symmetric and every packed
//! upper-triangle entry (diagonal included) independent `N(0, σ_n²)`, where
//! `σ_n = R²σ/√n` is public (see `EstimationInput::mean_entry_noise_sd`). This differs from
//! the GOE, whose diagonal has variance `2σ_n²`:
//!
//! * the semicircle law, its edge `2σ_n√p` and the spike location below depend only
//!   on the off-diagonal variance, so they are unchanged;
//! * the second-order mean shift of an outlier is exactly `pσ_n²/θ` here: for a unit
//!   spike direction `u`, `E‖Wu‖² = Σ_j Σ_i u_i² Var(W_ji) = pσ_n²`, where the GOE
//!   adds `σ_n²` from its doubled diagonal;
//! * the first-order fluctuation `uᵀWu` has variance
//!   `σ_n²(Σ u_i⁴ + 2Σ_{i<j} u_i²u_j²) = σ_n²(2 − Σ u_i⁴)`, between `σ_n²` and the GOE's
//!   `2σ_n²` (equal to it for a delocalised `u`), so GOE fluctuation bounds are safe;
//! * `E‖W‖_F² = p²σ_n²` (GOE: `p(p+1)σ_n²`), and Stein's identity has heteroscedastic
//!   weights in an orthonormal basis of symmetric matrices (see [`sure_spectral`]).
//!
//! # Spikes (Benaych-Georges & Nadakuditi 2011)
//!
//! For `Σ = ψI + θuuᵀ` and `θ > σ_n√p`, the top eigenvalue of `Y` concentrates at
//! `λ = ψ + θ + pσ_n²/θ` (outside the bulk edge `ψ + 2σ_n√p`), and its eigenvector `û`
//! has `c² = ⟨u, û⟩² → 1 − pσ_n²/θ²`. Below `σ_n√p` the eigenvalue sticks to the edge
//! and `û` carries no information. Inverting `x = θ + a/θ` (`x = λ − ψ`, `a = pσ_n²`)
//! for the larger root gives `θ = (x + √(x² − 4a))/2`.
//!
//! # Shrinkers (Donoho, Gavish & Johnstone 2018, additive case)
//!
//! In the plane of `u` and `û`, the error of `ηûûᵀ` for `θuuᵀ` is a 2×2 matrix with
//! trace `η − θ` and determinant `−ηθs²` (`s² = 1 − c²`):
//!
//! * Frobenius loss `‖ηûûᵀ − θuuᵀ‖_F² = η² − 2ηθc² + θ²` is minimised by `η = θc²`;
//! * operator loss `(|η − θ| + √((η − θ)² + 4ηθs²))/2` decreases for `η < θ` (slope
//!   `(s − 1)/2` at `θ⁻`) and increases for `η > θ`, so it is minimised by `η = θ`:
//!   the de-biased spike itself, with loss `θs`.
//!
//! Users read both norms, and each optimum is poor in the other: `θc²` is up to
//! 15.5 % above the operator optimum (at `c² ≈ 0.67`), `θ` up to 41 % above the
//! Frobenius-norm optimum (as `c → 0`). The default, [`Shrinker::Balanced`], is
//! `η = θ·c^(2 − c²)`: the Frobenius shrinker where the sample direction is nearly
//! noise (`c → 0`, where every `η` near 0 is almost optimal in operator loss too), the
//! geometric mean `θc` of the two optima for a resolved spike (`c → 1`). Over every
//! `c` it stays within 0.8 % of the Frobenius-norm optimum and 11 % of the operator
//! optimum (computed on a grid of `c²` in the tests), and it is 0 at the edge and
//! continuous, so Stein's unbiased risk estimate stays exact for it. (The geometric
//! mean `θc` alone is more even, 3.3 % / 7.6 %, but it rises like the fourth root of
//! the distance past the edge, so at finite `p` a noise eigenvalue just past the edge
//! becomes a large spurious spike.)
//!
//! Distinct spikes have asymptotically orthogonal sample eigenvectors, so each is
//! shrunk on its own. The bulk (eigenvalues inside the edge) carries no recoverable
//! direction and is replaced by its mean `ψ̂` ([`shrink`]) or by a fitted diagonal
//! ([`factor`]).
//!
//! # Structured bulk
//!
//! Real correlation spectra decay gradually instead of sitting on a flat floor, and
//! flattening the bulk to its mean throws that structure away. [`bulk_shrink`] keeps a
//! fraction `α` of each bulk eigenvalue's distance to the mean, soft-thresholds the
//! eigenvalues near the edge at `τσ_n√p` (a signal below the detection threshold still
//! lifts the top sample eigenvalues), and hands over continuously to the balanced
//! shrinker above the edge; [`bulk_shrink_sure`] picks `α` and `τ` by Stein's
//! unbiased risk estimate, exact for this continuous family, from one
//! eigendecomposition.
//!
//! # Rank
//!
//! A spike is detected when `λ − ψ̂ > 2σ_n√p + m·σ_n·p^(−1/6)`: the largest eigenvalue
//! of pure noise fluctuates around the edge on the Tracy–Widom scale
//! `σ_n√p·p^(−2/3)`, and the GOE law (TW₁) bounds it since our diagonal is less
//! noisy. The default `m` is TW₁'s 99.9% quantile, so pure noise yields a spike with
//! probability about 0.1% (a simulation of 2000 pure-noise matrices per
//! `p ∈ {13, 20, 30, 50, 100}` gave at most 0.2%).
//!
//! Everything here is post-processing of the released average: no privacy cost.

use crate::error::EstimateError;
use crate::psd::{from_eigen, symmetric_eigen};
use nalgebra::DMatrix;

/// TW₁'s 99.9% quantile: the default edge margin in Tracy–Widom units.
pub const DEFAULT_EDGE_MARGIN: f64 = 3.27;

/// How many spikes to keep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RankRule {
    /// Every eigenvalue above the bulk edge plus `margin` Tracy–Widom units
    /// (`margin·σ_n·p^(−1/6)`).
    Detect {
        /// The margin in Tracy–Widom units (≥ 0).
        margin: f64,
    },
    /// The top `k` eigenvalues (`k < p`). One at or below the edge gets the critical
    /// value `σ_n√p` as its de-biased spike and overlap 0.
    Fixed(usize),
}

impl Default for RankRule {
    fn default() -> Self {
        RankRule::Detect {
            margin: DEFAULT_EDGE_MARGIN,
        }
    }
}

/// The loss a spike's shrunk eigenvalue is optimal for (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shrinker {
    /// Both norms (the default): `η = θ·c^(2 − c²)`, within 0.8 % of the
    /// Frobenius-norm optimum and 11 % of the operator optimum at every spike strength.
    #[default]
    Balanced,
    /// Frobenius loss: `η = θc²`.
    Frobenius,
    /// Operator (spectral) loss: `η = θ`, the de-biased spike.
    Operator,
}

/// Options of [`shrink`] and [`factor`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpectralOptions {
    /// How the rank is chosen.
    pub rank: RankRule,
    /// Which loss the shrunk eigenvalues are optimal for.
    pub shrinker: Shrinker,
}

/// One kept spike, in data units relative to the bulk level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spike {
    /// The sample eigenvalue minus the bulk level.
    pub excess: f64,
    /// The de-biased spike θ̂.
    pub signal: f64,
    /// The predicted squared overlap `c²` of sample and true eigenvector.
    pub overlap: f64,
    /// The shrunk eigenvalue used in the estimate (above the bulk level).
    pub shrunk: f64,
}

/// A spectral estimate and what it was built from.
#[derive(Debug, Clone, PartialEq)]
pub struct SpectralEstimate {
    /// The estimate (symmetric, PSD by construction).
    pub matrix: DMatrix<f64>,
    /// The number of spikes kept.
    pub rank: usize,
    /// The bulk level ψ̂: the mean of the eigenvalues not kept as spikes, clamped at 0.
    pub bulk_level: f64,
    /// The kept spikes, largest first.
    pub spikes: Vec<Spike>,
}

/// The upper edge of the noise spectrum above the bulk level: `2σ_n√p`.
pub fn bulk_edge(p: usize, sigma_n: f64) -> f64 {
    2.0 * sigma_n * (p as f64).sqrt()
}

/// The margin above the edge: `margin·σ_n·p^(−1/6)` (Tracy–Widom scale
/// `σ_n√p·p^(−2/3)`).
pub fn edge_margin(p: usize, sigma_n: f64, margin: f64) -> f64 {
    margin * sigma_n * (p as f64).powf(-1.0 / 6.0)
}

/// Inverts the spike location: for an eigenvalue `excess` above the bulk level,
/// returns `(θ, c²)` with `θ + pσ_n²/θ = excess` (larger root) and
/// `c² = 1 − pσ_n²/θ²`. At or below the edge `2σ_n√p` returns the critical
/// `(σ_n√p, 0)`.
pub fn debias(excess: f64, p: usize, sigma_n: f64) -> (f64, f64) {
    let a = p as f64 * sigma_n * sigma_n;
    let disc = excess * excess - 4.0 * a;
    if excess <= bulk_edge(p, sigma_n) || disc <= 0.0 {
        return (a.sqrt(), 0.0);
    }
    let theta = 0.5 * (excess + disc.sqrt());
    (theta, 1.0 - a / (theta * theta))
}

/// The shrunk eigenvalue (above the bulk level) for an eigenvalue `excess` above it:
/// `θ·c^(2 − c²)` (balanced), `θc² = θ − pσ_n²/θ` (Frobenius) or `θ` (operator)
/// beyond the edge; 0 (balanced, Frobenius) or the critical `σ_n√p` (operator) at or
/// below it.
pub fn shrunk_eigenvalue(excess: f64, p: usize, sigma_n: f64, shrinker: Shrinker) -> f64 {
    let (theta, c2) = debias(excess, p, sigma_n);
    match shrinker {
        Shrinker::Balanced => theta * c2.powf(1.0 - 0.5 * c2),
        Shrinker::Frobenius => theta * c2,
        Shrinker::Operator => theta,
    }
}

/// The derivative of [`shrunk_eigenvalue`] in `excess` beyond the edge (0 inside).
/// From `dθ/dx = θ²/(θ² − a) = 1/c²` (`a = pσ_n²`): `(θ² + a)/(θ² − a)` for
/// Frobenius, `θ²/(θ² − a)` for operator, and for balanced, with `u = c²`,
/// `s² = 1 − u` and `θ·du/dθ = 2s²`,
/// `u^(−u/2)·(1 + s²((2 − u)/u − ln u))`. The Frobenius and balanced derivatives
/// diverge like `(x − 2σ_n√p)^(−1/2)` at the edge, an integrable singularity.
pub fn shrunk_eigenvalue_derivative(
    excess: f64,
    p: usize,
    sigma_n: f64,
    shrinker: Shrinker,
) -> f64 {
    let a = p as f64 * sigma_n * sigma_n;
    let (theta, c2) = debias(excess, p, sigma_n);
    if c2 <= 0.0 {
        return 0.0;
    }
    let t2 = theta * theta;
    match shrinker {
        Shrinker::Balanced => {
            let s2 = 1.0 - c2;
            c2.powf(-0.5 * c2) * (1.0 + s2 * ((2.0 - c2) / c2 - c2.ln()))
        }
        Shrinker::Frobenius => (t2 + a) / (t2 - a),
        Shrinker::Operator => t2 / (t2 - a),
    }
}

fn check_input(y: &DMatrix<f64>, sigma_n: f64, rank: &RankRule) -> Result<(), EstimateError> {
    if y.nrows() != y.ncols() || y.nrows() == 0 {
        return Err(EstimateError::Parameter {
            name: "rows",
            value: y.nrows() as f64,
            requirement: "equal to the columns and > 0",
        });
    }
    if !(sigma_n.is_finite() && sigma_n > 0.0) {
        return Err(EstimateError::Parameter {
            name: "sigma_n",
            value: sigma_n,
            requirement: "a finite number > 0",
        });
    }
    match *rank {
        RankRule::Detect { margin } if !(margin.is_finite() && margin >= 0.0) => {
            Err(EstimateError::Parameter {
                name: "margin",
                value: margin,
                requirement: "a finite number ≥ 0",
            })
        }
        RankRule::Fixed(k) if k >= y.nrows() => Err(EstimateError::Parameter {
            name: "rank",
            value: k as f64,
            requirement: "below the dimension",
        }),
        _ => Ok(()),
    }
}

/// Mean of the lowest `p − r` of the ascending `values`.
fn bulk_mean(values: &[f64], r: usize) -> f64 {
    let bulk = &values[..values.len() - r];
    bulk.iter().sum::<f64>() / bulk.len() as f64
}

/// Chooses the rank and the (unclamped) bulk level from ascending eigenvalues.
/// Detection starts from the median (robust to spikes) and alternates "count the
/// eigenvalues above level + edge + margin" and "level = mean of the rest" until the
/// count is stable.
fn rank_and_level(values: &[f64], p: usize, sigma_n: f64, rule: &RankRule) -> (usize, f64) {
    match *rule {
        RankRule::Fixed(k) => (k, bulk_mean(values, k)),
        RankRule::Detect { margin } => {
            let cut = bulk_edge(p, sigma_n) + edge_margin(p, sigma_n, margin);
            let mut level = values[p / 2];
            let mut rank = usize::MAX;
            for _ in 0..16 {
                let r = values
                    .iter()
                    .filter(|&&l| l - level > cut)
                    .count()
                    .min(p - 1);
                level = bulk_mean(values, r);
                if r == rank {
                    break;
                }
                rank = r;
            }
            (rank, level)
        }
    }
}

/// The common part of [`shrink`] and [`factor`]: eigendecomposition, rank, bulk
/// level, shrunk spikes.
struct Fit {
    values: Vec<f64>,
    vectors: faer::Mat<f64>,
    rank: usize,
    level: f64,
    spikes: Vec<Spike>,
}

fn fit(y: &DMatrix<f64>, sigma_n: f64, options: &SpectralOptions) -> Result<Fit, EstimateError> {
    check_input(y, sigma_n, &options.rank)?;
    let (values, vectors) = symmetric_eigen(y)?;
    Ok(fit_eigen(values, vectors, sigma_n, options))
}

/// [`fit`] on a decomposition already made (ascending `values`, `vectors` in columns).
fn fit_eigen(
    values: Vec<f64>,
    vectors: faer::Mat<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Fit {
    let p = values.len();
    let (rank, level) = rank_and_level(&values, p, sigma_n, &options.rank);
    let level = level.max(0.0);
    let spikes = values[p - rank..]
        .iter()
        .rev()
        .map(|&l| {
            let excess = l - level;
            let (signal, overlap) = debias(excess, p, sigma_n);
            Spike {
                excess,
                signal,
                overlap,
                shrunk: shrunk_eigenvalue(excess, p, sigma_n, options.shrinker),
            }
        })
        .collect();
    tracing::debug!(p, rank, level, "spectral fit");
    Fit {
        values,
        vectors,
        rank,
        level,
        spikes,
    }
}

impl Fit {
    /// The new eigenvalues in the decomposition's (ascending) order: `base` plus the
    /// shrunk spike on the last `rank`, `base` on the bulk.
    fn new_values(&self, base: f64) -> Vec<f64> {
        let p = self.values.len();
        (0..p)
            .map(|j| {
                if j >= p - self.rank {
                    base + self.spikes[p - 1 - j].shrunk
                } else {
                    base
                }
            })
            .collect()
    }

    /// The diagonal `L_ii` of the low-rank part `L = U·diag(low)·Uᵀ` (only the last
    /// `rank` of `low` are non-zero), in `O(p·rank)`.
    fn low_rank_diagonal(&self, low: &[f64]) -> Vec<f64> {
        let p = self.values.len();
        (0..p)
            .map(|i| {
                (p - self.rank..p)
                    .map(|a| low[a] * self.vectors[(i, a)] * self.vectors[(i, a)])
                    .sum()
            })
            .collect()
    }
}

/// The factor model's fitted diagonal `max(0, Y_ii − L_ii)` from the low-rank part's
/// diagonal `l_diag`.
fn factor_diagonal(y: &DMatrix<f64>, l_diag: &[f64]) -> Vec<f64> {
    l_diag
        .iter()
        .enumerate()
        .map(|(i, l)| (y[(i, i)] - l).max(0.0))
        .collect()
}

/// Shrunk spikes over a flat bulk: `ψ̂I + Σ_k η_k û_kû_kᵀ` with `ψ̂` the mean of the
/// eigenvalues not kept (clamped at 0) and `η_k` the chosen [`Shrinker`]'s value
/// (≥ 0). PSD by construction. Reads the lower triangle of `y`.
pub fn shrink(
    y: &DMatrix<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Result<SpectralEstimate, EstimateError> {
    let fit = fit(y, sigma_n, options)?;
    Ok(SpectralEstimate {
        matrix: from_eigen(&fit.vectors, fit.new_values(fit.level)),
        rank: fit.rank,
        bulk_level: fit.level,
        spikes: fit.spikes,
    })
}

/// Low rank plus diagonal: `L̂ + D̂` with `L̂ = Σ_k η_k û_kû_kᵀ` the shrunk spikes
/// (above the bulk level, which the diagonal absorbs) and
/// `D̂ = diag(max(0, Y_ii − L̂_ii))` fitted to the residual diagonal. PSD by
/// construction (a PSD plus a non-negative diagonal). `bulk_level` reports the level
/// the spikes were measured from.
pub fn factor(
    y: &DMatrix<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Result<SpectralEstimate, EstimateError> {
    let fit = fit(y, sigma_n, options)?;
    let low = fit.new_values(0.0);
    let diagonal = factor_diagonal(y, &fit.low_rank_diagonal(&low));
    let mut matrix = from_eigen(&fit.vectors, low);
    for (i, d) in diagonal.into_iter().enumerate() {
        matrix[(i, i)] += d;
    }
    Ok(SpectralEstimate {
        matrix,
        rank: fit.rank,
        bulk_level: fit.level,
        spikes: fit.spikes,
    })
}

/// Stein's unbiased estimate of the Frobenius risk `E‖f(Y) − Σ‖_F²` of the spectral
/// estimator `f(Y) = U·diag(h(λ))·Uᵀ` (`h` applied to each eigenvalue of `Y`, `dh` its
/// derivative), under this module's noise model.
///
/// Derivation. In packed coordinates `y_k` (iid noise `σ_n²`) the Frobenius norm
/// weighs a diagonal entry 1 and an off-diagonal one 2 (`Σ w_k = p²`), so Stein's
/// identity gives `SURE = ‖f(Y) − Y‖_F² − p²σ_n² + 2σ_n²·Σ_k w_k ∂f_k/∂y_k`. The
/// derivative of a spectral function is `Df[H] = U(Γ ∘ UᵀHU)Uᵀ` with
/// `Γ_ab = (h(λ_a) − h(λ_b))/(λ_a − λ_b)` and `Γ_aa = h'(λ_a)` (Candès, Sing-Long &
/// Trzasko 2013 for singular values; the symmetric analogue). Moving packed entry
/// `(i, j)`, `i < j`, moves `Y` by `E_ij + E_ji`, so
/// `Σ_k w_k ∂f_k/∂y_k = 2·tr(Df) − Σ_i (Df[E_ii])_ii` with
/// `tr(Df) = Σ_a h'(λ_a) + Σ_{a<b} Γ_ab` (trace over symmetric matrices) and
/// `(Df[E_ii])_ii = Σ_ab U_ia²U_ib²Γ_ab`. For `h(λ) = λ` this gives `p²` and
/// `SURE = p²σ_n² = E‖W‖_F²`. (With GOE noise the weights would be uniform and the
/// divergence `2·tr(Df)`.)
///
/// Unbiased when `h` is continuous and piecewise differentiable, e.g. the balanced or
/// Frobenius shrinker over a fixed level (both are 0 at the edge) or `max(λ, 0)`; a
/// jump in `h` (the operator shrinker, a margin) adds a term this omits.
pub fn sure_spectral(
    y: &DMatrix<f64>,
    sigma_n: f64,
    h: impl Fn(f64) -> f64,
    dh: impl Fn(f64) -> f64,
) -> Result<f64, EstimateError> {
    check_input(y, sigma_n, &RankRule::Fixed(0))?;
    let (values, u) = symmetric_eigen(y)?;
    let basis = SureBasis::new(values, &u);
    let hv: Vec<f64> = basis.values.iter().map(|&l| h(l)).collect();
    let dv: Vec<f64> = basis.values.iter().map(|&l| dh(l)).collect();
    Ok(basis.risk(sigma_n, &hv, &dv))
}

/// What [`sure_spectral`] needs from one eigendecomposition, so that many shrinkers
/// can be scored for `O(p²)` each: the eigenvalues and `M = (U∘U)ᵀ(U∘U)`.
struct SureBasis {
    values: Vec<f64>,
    m: DMatrix<f64>,
}

impl SureBasis {
    fn new(values: Vec<f64>, u: &faer::Mat<f64>) -> Self {
        let p = values.len();
        let sq = DMatrix::<f64>::from_fn(p, p, |i, a| u[(i, a)] * u[(i, a)]);
        let m = sq.transpose() * &sq;
        SureBasis { values, m }
    }

    /// SURE for `h` given by its values `hv` and derivatives `dv` at the eigenvalues.
    /// `‖f(Y) − Y‖_F² = Σ_a (h(λ_a) − λ_a)²` (same eigenvectors).
    fn risk(&self, sigma_n: f64, hv: &[f64], dv: &[f64]) -> f64 {
        let values = &self.values;
        let p = values.len();
        // Γ_ab; coincident eigenvalues take the mean derivative (the limit for smooth h).
        let scale = values.iter().fold(1.0f64, |m, l| m.max(l.abs()));
        let gamma = |a: usize, b: usize| -> f64 {
            let gap = values[a] - values[b];
            if a == b {
                dv[a]
            } else if gap.abs() <= 1e-12 * scale {
                0.5 * (dv[a] + dv[b])
            } else {
                (hv[a] - hv[b]) / gap
            }
        };
        let mut trace = 0.0;
        // Σ_i Σ_ab U_ia²U_ib²Γ_ab = Σ_ab M_ab Γ_ab.
        let mut diag_part = 0.0;
        for (a, &da) in dv.iter().enumerate() {
            trace += da;
            diag_part += self.m[(a, a)] * da;
            for b in a + 1..p {
                let g = gamma(a, b);
                trace += g;
                diag_part += 2.0 * self.m[(a, b)] * g;
            }
        }
        let divergence = 2.0 * trace - diag_part;
        let s2 = sigma_n * sigma_n;
        let fit: f64 = hv.iter().zip(values).map(|(h, l)| (h - l).powi(2)).sum();
        fit - (p * p) as f64 * s2 + 2.0 * s2 * divergence
    }
}

/// The eigenvalue map of [`bulk_shrink`] and its derivative at `lambda`: with
/// `x = λ − ψ` (`ψ = level`) and `a = pσ_n²`,
/// `h(λ) = max(0, ψ + max(αx, x − τ√a, η(x)))` for `x > 0`, with `η` the balanced
/// spike shrinker of [`shrunk_eigenvalue`] (read as 0 at and below the edge `2√a`),
/// and `h(λ) = max(0, ψ + αx)` otherwise.
///
/// Above the edge `η(x) = θ·c^(2 − c²)` lies between the Frobenius shrinker
/// `θc² = √(x² − 4a)` (`x = θ + a/θ` gives `x² − 4a = (θ − a/θ)²`) and `θ ≤ x`; it is 0
/// at the edge, rises there like `√(x − 2√a)`, and tends to slope 1. The soft piece
/// `x − τ√a` (slope 1, the eigenvalue soft threshold: the proximal map of the nuclear
/// norm) serves the eigenvalues near the edge, where a signal below the detection
/// threshold `√a` still lifts the top sample eigenvalues; it crosses the line at
/// `x = τ√a/(1 − α)`, and `η` overtakes it for strong spikes (`x − η(x)` falls
/// towards 0 as θ grows). `τ = 2` never beats the spike piece
/// (`x − 2√a ≤ √(x² − 4a) ≤ η(x)` for `x ≥ 2√a`): the map without a soft piece. A
/// maximum of continuous pieces, `h` is continuous and piecewise differentiable:
/// Stein's identity, hence [`sure_spectral`], applies to it (with `ψ` held fixed). `α = 0, τ = 2` flattens the bulk to `ψ` (the shrinker of
/// [`shrink`] without the margin); `α = 1` gives `max(λ, 0)`, the PSD projection.
pub fn bulk_shrunk_eigenvalue(
    lambda: f64,
    level: f64,
    p: usize,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> (f64, f64) {
    let a = p as f64 * sigma_n * sigma_n;
    let x = lambda - level;
    let (mut value, mut slope) = (level + alpha * x, alpha);
    if x > 0.0 {
        let soft = x - tau * a.sqrt();
        if soft > value - level {
            (value, slope) = (level + soft, 1.0);
        }
        let spike = shrunk_eigenvalue(x, p, sigma_n, Shrinker::Balanced);
        if spike > value - level {
            let spike_slope = shrunk_eigenvalue_derivative(x, p, sigma_n, Shrinker::Balanced);
            (value, slope) = (level + spike, spike_slope);
        }
    }
    if value < 0.0 {
        (0.0, 0.0)
    } else {
        (value, slope)
    }
}

/// Checks that `value` of the bulk map's parameter `name` lies in `[0, max]`
/// (`requirement` says so in the error).
fn check_bulk_parameter(
    name: &'static str,
    value: f64,
    max: f64,
    requirement: &'static str,
) -> Result<(), EstimateError> {
    if (0.0..=max).contains(&value) {
        Ok(())
    } else {
        Err(EstimateError::Parameter {
            name,
            value,
            requirement,
        })
    }
}

fn check_alpha(alpha: f64) -> Result<(), EstimateError> {
    check_bulk_parameter("alpha", alpha, 1.0, "in [0, 1]")
}

fn check_tau(tau: f64) -> Result<(), EstimateError> {
    check_bulk_parameter("tau", tau, 2.0, "in [0, 2]")
}

/// Checks a non-empty grid of one parameter of the bulk map.
fn check_grid(
    name: &'static str,
    grid: &[f64],
    check: fn(f64) -> Result<(), EstimateError>,
) -> Result<(), EstimateError> {
    if grid.is_empty() {
        return Err(EstimateError::Parameter {
            name,
            value: 0.0,
            requirement: "non-empty",
        });
    }
    grid.iter().try_for_each(|&v| check(v))
}

/// Spikes over a bulk shrunk toward its mean: `U·diag(h(λ))·Uᵀ` with `h` the map of
/// [`bulk_shrunk_eigenvalue`] at weight `alpha ∈ [0, 1]`, edge soft threshold
/// `tau ∈ [0, 2]` (in units of `σ_n√p`; 2: none) and level `ψ̂` the bulk level of
/// [`shrink`] (default margin). Where the bulk carries structure (a correlation
/// spectrum decaying gradually, not a flat floor) `α > 0` keeps a fraction `α` of it
/// instead of replacing it by its mean. PSD by construction. `rank` and `spikes`
/// report the eigenvalues on the spike branch.
pub fn bulk_shrink(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> Result<SpectralEstimate, EstimateError> {
    check_alpha(alpha)?;
    check_tau(tau)?;
    let (values, vectors, level) = bulk_fit(y, sigma_n)?;
    Ok(bulk_estimate(&values, &vectors, level, sigma_n, alpha, tau))
}

/// The default candidate weights of [`bulk_shrink_sure`]: 0, 0.1, …, 1.
pub const DEFAULT_BULK_ALPHAS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// The default candidate edge soft thresholds of [`bulk_shrink_sure`], in units of
/// `σ_n√p`: 1, 1.5 and 2 (no soft piece). Chosen by measurement on the `unordered`
/// reproduction (lab/docs/REPRODUCTION.md §6): finer or wider grids (0.5 to 2 by 0.25)
/// gained nothing over these three.
pub const DEFAULT_BULK_TAUS: [f64; 3] = [1.0, 1.5, 2.0];

/// The bulk map [`bulk_shrink_sure`] chose and its risk estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkChoice {
    /// The weight α kept of each bulk eigenvalue's distance to the level.
    pub alpha: f64,
    /// The edge soft threshold τ, in units of `σ_n√p` (2: no soft piece).
    pub tau: f64,
    /// SURE of the estimate at (α, τ): an unbiased estimate of its squared Frobenius
    /// error, up to the level's own fluctuation (held fixed).
    pub risk: f64,
}

/// [`bulk_shrink`] with `(alpha, tau)` chosen on the grid `alphas × taus` by the
/// smallest [`sure_spectral`] risk (level held fixed), from one eigendecomposition:
/// each candidate costs `O(p²)` beyond the `O(p³)` decomposition and
/// `M = (U∘U)ᵀ(U∘U)`. Returns the choice and the estimate.
pub fn bulk_shrink_sure(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<(BulkChoice, SpectralEstimate), EstimateError> {
    let (choice, basis, vectors, level) = fit_bulk_choice(y, sigma_n, alphas, taus)?;
    let estimate = bulk_estimate(
        &basis.values,
        &vectors,
        level,
        sigma_n,
        choice.alpha,
        choice.tau,
    );
    Ok((choice, estimate))
}

/// [`bulk_shrink_sure`]'s choice without the estimate (one eigendecomposition, no
/// reconstruction).
pub(crate) fn bulk_shrink_choice(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<BulkChoice, EstimateError> {
    Ok(fit_bulk_choice(y, sigma_n, alphas, taus)?.0)
}

/// The grids checked, then [`bulk_fit`] and the SURE choice on `alphas × taus`, with
/// the basis, eigenvectors and level the estimate is built from.
fn fit_bulk_choice(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<(BulkChoice, SureBasis, faer::Mat<f64>, f64), EstimateError> {
    check_grid("alphas", alphas, check_alpha)?;
    check_grid("taus", taus, check_tau)?;
    let (values, vectors, level) = bulk_fit(y, sigma_n)?;
    let basis = SureBasis::new(values, &vectors);
    let choice = basis.best_bulk(level, sigma_n, alphas, taus);
    Ok((choice, basis, vectors, level))
}

impl SureBasis {
    /// The `(α, τ)` on the grid `alphas × taus` (both non-empty) whose bulk shrinkage
    /// at `level` has the smallest SURE, and that risk; ties go to the earlier τ, then
    /// the earlier α.
    fn best_bulk(&self, level: f64, sigma_n: f64, alphas: &[f64], taus: &[f64]) -> BulkChoice {
        let mut best = BulkChoice {
            alpha: alphas[0],
            tau: taus[0],
            risk: f64::INFINITY,
        };
        for &tau in taus {
            for &alpha in alphas {
                let risk = self.bulk_risk(level, sigma_n, alpha, tau);
                if risk < best.risk {
                    best = BulkChoice { alpha, tau, risk };
                }
            }
        }
        let p = self.values.len();
        tracing::debug!(
            p,
            alpha = best.alpha,
            tau = best.tau,
            risk = best.risk,
            "bulk shrinkage chosen by SURE"
        );
        best
    }

    /// SURE of the bulk shrinkage at weight `alpha`, edge threshold `tau` and bulk
    /// level `level`.
    fn bulk_risk(&self, level: f64, sigma_n: f64, alpha: f64, tau: f64) -> f64 {
        let p = self.values.len();
        let (hv, dv): (Vec<f64>, Vec<f64>) = self
            .values
            .iter()
            .map(|&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau))
            .unzip();
        self.risk(sigma_n, &hv, &dv)
    }
}

/// The three spectral cross-validation candidates — [`shrink`] (Frobenius, detected
/// rank), [`factor`] and [`bulk_shrink_sure`] on [`DEFAULT_BULK_ALPHAS`] ×
/// [`DEFAULT_BULK_TAUS`] — fitted to
/// one training average from a single eigendecomposition, kept in eigen form so that
/// their held-out losses cost `O(p²)` each beyond one product with the test matrix
/// ([`CvFits::losses`]).
///
/// Invariant: each fit is exactly what the named rule returns on the same `y` and
/// `sigma_n` (same rank, level, α and eigenvalue maps), so the cross-validation scores
/// what the chosen rule then computes on the full average.
pub(crate) struct CvFits {
    vectors: faer::Mat<f64>,
    /// New eigenvalues of [`shrink`].
    shrink: Vec<f64>,
    /// New eigenvalues of the low-rank part `L` of [`factor`], `L`'s diagonal and the
    /// fitted diagonal `D`.
    factor_low: Vec<f64>,
    factor_low_diagonal: Vec<f64>,
    factor_diagonal: Vec<f64>,
    /// New eigenvalues of [`bulk_shrink`] at the SURE-chosen α and τ.
    bulk: Vec<f64>,
}

impl CvFits {
    /// Fits the three candidates to the training average `y` (noise sd `sigma_n` at
    /// the training size).
    pub(crate) fn new(y: &DMatrix<f64>, sigma_n: f64) -> Result<Self, EstimateError> {
        let options = SpectralOptions::default();
        check_input(y, sigma_n, &options.rank)?;
        let (values, vectors) = symmetric_eigen(y)?;
        let fit = fit_eigen(values, vectors, sigma_n, &options);
        let shrink = fit.new_values(fit.level);
        let factor_low = fit.new_values(0.0);
        let factor_low_diagonal = fit.low_rank_diagonal(&factor_low);
        let factor_diagonal = factor_diagonal(y, &factor_low_diagonal);
        // `bulk_fit`'s level is `fit`'s (same default rank rule, clamped at 0).
        let p = fit.values.len();
        let basis = SureBasis::new(fit.values, &fit.vectors);
        let BulkChoice { alpha, tau, .. } =
            basis.best_bulk(fit.level, sigma_n, &DEFAULT_BULK_ALPHAS, &DEFAULT_BULK_TAUS);
        let bulk = basis
            .values
            .iter()
            .map(|&l| bulk_shrunk_eigenvalue(l, fit.level, p, sigma_n, alpha, tau).0)
            .collect();
        Ok(CvFits {
            vectors: fit.vectors,
            shrink,
            factor_low,
            factor_low_diagonal,
            factor_diagonal,
            bulk,
        })
    }

    /// The estimate of the candidate at `index` in [`CvFits::losses`]' order (0 the
    /// flat-bulk shrinkage, 1 the factor model, 2 the bulk shrinkage): exactly what
    /// the named rule returns on the training average.
    pub(crate) fn estimate(&self, index: usize) -> DMatrix<f64> {
        match index {
            0 => from_eigen(&self.vectors, self.shrink.iter().copied()),
            1 => {
                let mut m = from_eigen(&self.vectors, self.factor_low.iter().copied());
                for (i, d) in self.factor_diagonal.iter().enumerate() {
                    m[(i, i)] += d;
                }
                m
            }
            _ => from_eigen(&self.vectors, self.bulk.iter().copied()),
        }
    }

    /// Squared Frobenius distances `‖f(Y) − T‖_F²` of the shrink, factor and bulk
    /// estimates to the symmetric test matrix `t`. With `d_a = u_aᵀTu_a`, a spectral
    /// estimate `U·diag(h)·Uᵀ` is at `Σ h_a² − 2Σ h_a d_a + ‖T‖²`; the factor estimate
    /// `L + D` adds `2Σ_i D_i(L_ii − T_ii) + Σ D_i²` to the low-rank part's distance.
    pub(crate) fn losses(&self, t: &DMatrix<f64>) -> [f64; 3] {
        let p = t.nrows();
        let tm = faer::Mat::<f64>::from_fn(p, p, |i, j| t[(i, j)]);
        let tu = &tm * &self.vectors;
        let d: Vec<f64> = (0..p)
            .map(|a| (0..p).map(|i| self.vectors[(i, a)] * tu[(i, a)]).sum())
            .collect();
        let t2 = t.norm_squared();
        let spectral = |h: &[f64]| -> f64 {
            h.iter()
                .zip(&d)
                .map(|(h, d)| h * h - 2.0 * h * d)
                .sum::<f64>()
                + t2
        };
        let mut factor = spectral(&self.factor_low);
        for (i, (&di, &l_ii)) in self
            .factor_diagonal
            .iter()
            .zip(&self.factor_low_diagonal)
            .enumerate()
        {
            factor += 2.0 * di * (l_ii - t[(i, i)]) + di * di;
        }
        [spectral(&self.shrink), factor, spectral(&self.bulk)]
    }
}

/// Eigendecomposition and bulk level (default margin, clamped at 0).
fn bulk_fit(
    y: &DMatrix<f64>,
    sigma_n: f64,
) -> Result<(Vec<f64>, faer::Mat<f64>, f64), EstimateError> {
    let rule = RankRule::default();
    check_input(y, sigma_n, &rule)?;
    let (values, vectors) = symmetric_eigen(y)?;
    let (_, level) = rank_and_level(&values, y.nrows(), sigma_n, &rule);
    Ok((values, vectors, level.max(0.0)))
}

fn bulk_estimate(
    values: &[f64],
    vectors: &faer::Mat<f64>,
    level: f64,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> SpectralEstimate {
    let p = values.len();
    let hv: Vec<f64> = values
        .iter()
        .map(|&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau).0)
        .collect();
    // The spike branch: where the map takes the spike piece, the only one with slope
    // above 1 (the line has α ≤ 1, the soft piece 1); ascending, so the top.
    let spikes: Vec<Spike> = values
        .iter()
        .rev()
        .take_while(|&&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau).1 > 1.0)
        .map(|&l| l - level)
        .map(|excess| {
            let (signal, overlap) = debias(excess, p, sigma_n);
            Spike {
                excess,
                signal,
                overlap,
                shrunk: shrunk_eigenvalue(excess, p, sigma_n, Shrinker::Balanced),
            }
        })
        .collect();
    SpectralEstimate {
        matrix: from_eigen(vectors, hv),
        rank: spikes.len(),
        bulk_level: level,
        spikes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::DVector;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, StandardNormal};

    /// Symmetric noise with every packed entry (diagonal included) iid `N(0, s²)`.
    fn noise(p: usize, s: f64, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
        let mut w = DMatrix::zeros(p, p);
        for i in 0..p {
            for j in i..p {
                let z: f64 = StandardNormal.sample(rng);
                w[(i, j)] = s * z;
                w[(j, i)] = s * z;
            }
        }
        w
    }

    fn unit_vector(p: usize, rng: &mut ChaCha8Rng) -> DVector<f64> {
        let v = DVector::<f64>::from_fn(p, |_, _| StandardNormal.sample(rng));
        let n = v.norm();
        v / n
    }

    fn detect() -> SpectralOptions {
        SpectralOptions::default()
    }

    #[test]
    fn debias_inverts_the_spike_location() {
        // θ + pσ²/θ at p = 16, σ = 0.25 (a = 1, exact in binary): θ = 3 → 3.333…,
        // c² = 1 − 1/9.
        let (theta, c2) = debias(3.0 + 1.0 / 3.0, 16, 0.25);
        assert!((theta - 3.0).abs() < 1e-12, "{theta}");
        assert!((c2 - 8.0 / 9.0).abs() < 1e-12, "{c2}");
        // At the edge 2σ√p = 2: the critical value, no overlap.
        assert_eq!(debias(2.0, 16, 0.25), (1.0, 0.0));
        assert_eq!(shrunk_eigenvalue(1.5, 16, 0.25, Shrinker::Frobenius), 0.0);
        assert_eq!(shrunk_eigenvalue(2.0, 16, 0.25, Shrinker::Balanced), 0.0);
        // The balanced value at θ = 3: θ·c^(2 − c²) with c² = 8/9.
        let balanced = shrunk_eigenvalue(3.0 + 1.0 / 3.0, 16, 0.25, Shrinker::Balanced);
        let want = 3.0 * (8.0_f64 / 9.0).powf(1.0 - 4.0 / 9.0);
        assert!((balanced - want).abs() < 1e-12, "{balanced} vs {want}");
        // Derivative against a central difference, near the edge and far from it.
        for shrinker in [Shrinker::Balanced, Shrinker::Frobenius, Shrinker::Operator] {
            for x in [2.1, 3.0] {
                let h = |x| shrunk_eigenvalue(x, 16, 0.25, shrinker);
                let num = (h(x + 1e-7) - h(x - 1e-7)) / 2e-7;
                let ana = shrunk_eigenvalue_derivative(x, 16, 0.25, shrinker);
                assert!(
                    (num - ana).abs() < 1e-5 * ana,
                    "{shrinker:?} at {x}: {num} vs {ana}"
                );
            }
        }
    }

    #[test]
    fn balanced_shrinker_is_near_both_optima() {
        // In the plane of the true and the sample direction the error of ηûûᵀ for θuuᵀ
        // (θ = 1) has squared Frobenius norm η² − 2ηc² + 1 (optimum 1 − c⁴ at η = c²)
        // and operator norm (|η − 1| + √((η − 1)² + 4ηs²))/2 (optimum s at η = 1), as
        // the module docs derive. On a fine grid of c² the worst ratios to the optima,
        // computed from those closed forms, are 1.0077 (Frobenius norm) and 1.109
        // (operator) for η = c^(2 − c²); the bounds 1.01 / 1.11 hold them, while the
        // Frobenius shrinker exceeds the operator bound (1.155) and the operator
        // shrinker the Frobenius one (→ √2), so the test tells the three apart.
        let worst = |eta: &dyn Fn(f64) -> f64| {
            (1..1000).fold((0.0_f64, 0.0_f64), |(wf, wo), k| {
                let c2 = k as f64 / 1000.0;
                let s2 = 1.0 - c2;
                let e = eta(c2);
                let frobenius = ((e * e - 2.0 * e * c2 + 1.0) / (1.0 - c2 * c2)).sqrt();
                let d = e - 1.0;
                let operator = (d.abs() + (d * d + 4.0 * e * s2).sqrt()) / 2.0 / s2.sqrt();
                (wf.max(frobenius), wo.max(operator))
            })
        };
        // Through `shrunk_eigenvalue`: a spike θ = 1 at p = 16, σ = 0.25 (a = 1) has
        // c² = 1 − 1/θ²; pick θ for each c² and read η back.
        let via = |shrinker: Shrinker| {
            move |c2: f64| {
                let theta = 1.0 / (1.0 - c2).sqrt();
                shrunk_eigenvalue(theta + 1.0 / theta, 16, 0.25, shrinker) / theta
            }
        };
        let (f, o) = worst(&via(Shrinker::Balanced));
        assert!(f < 1.01 && o < 1.11, "balanced: {f} / {o}");
        let (f, o) = worst(&via(Shrinker::Frobenius));
        assert!((f - 1.0).abs() < 1e-9 && o > 1.15, "Frobenius: {f} / {o}");
        let (f, o) = worst(&via(Shrinker::Operator));
        assert!(f > 1.4 && (o - 1.0).abs() < 1e-9, "operator: {f} / {o}");
    }

    #[test]
    fn rank_one_spike_above_threshold_is_debiased() {
        // θ = 3σ√p at p = 60, σ = 1. Detection: the top eigenvalue sits at
        // θ + pσ²/θ, i.e. (t − 1)²/t·σ√p = (4/3)·7.75σ = 10.3σ above the edge
        // (t = θ/σ√p = 3), against a margin of 3.27σ·p^(−1/6) = 1.65σ and a fluctuation
        // sd ≤ √2σ: detected except with probability far below 1e-6. (At θ = 1.5σ√p
        // the excess, 0.17σ√p = 1.29σ, is *below* the margin and the spike is missed
        // about half the time.) Accuracy: the top eigenvalue fluctuates with sd ≤ √2σ·c
        // (GOE outlier variance 2σ²c²; ours is smaller, see the module doc), so
        // θ̂ = θ(λ) with dθ/dλ = 1/c² has sd ≤ √2σ/c = 1.50σ (c² = 8/9); the mean of 10
        // independent replicates has sd ≤ 0.47σ. The finite-p bias is O(σ/√p·…)
        // (1000 replicates in numpy: −0.07σ, sd 1.46σ). Bound 1.5σ: 3.2 sd of the
        // mean above 0, below the pσ²/θ = σ√p/3 = 2.58σ bias of the raw eigenvalue.
        let (p, s) = (60, 1.0);
        let theta = 3.0 * s * (p as f64).sqrt();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let mut sum_err = 0.0;
        for _ in 0..10 {
            let u = unit_vector(p, &mut rng);
            let y = &u * u.transpose() * theta + noise(p, s, &mut rng);
            let est = shrink(&y, s, &detect()).unwrap();
            assert_eq!(est.rank, 1);
            sum_err += est.spikes[0].signal - theta;
        }
        let mean_err = sum_err / 10.0;
        assert!(mean_err.abs() < 1.5 * s, "mean error of θ̂: {mean_err}");
    }

    #[test]
    fn spike_below_threshold_is_not_detected() {
        // θ = 0.7σ√p < σ√p: the top eigenvalue sticks to the edge, and the margin keeps
        // it out except with the pure-noise false-positive rate (≈ 0.1%).
        let (p, s) = (50, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let u = unit_vector(p, &mut rng);
        let y = &u * u.transpose() * (0.7 * s * (p as f64).sqrt()) + noise(p, s, &mut rng);
        let est = shrink(&y, s, &detect()).unwrap();
        assert_eq!(est.rank, 0);
        assert!(est.spikes.is_empty());
    }

    #[test]
    fn pure_noise_gives_rank_zero() {
        // 200 pure-noise matrices at p = 30. With the margin at TW₁'s 99.9% quantile
        // the false-positive rate is ≈ 0.1% (0/2000 in a simulation at p = 30); even
        // at a rate of 0.5%, P(≥ 4 of 200) = 1.9%. Without the margin the largest
        // eigenvalue crosses the edge (measured from the bulk mean, which sits below
        // the centre by the finite-p fluctuations) in 17 of these 200 draws, and a
        // wrong edge constant (σ√p) flags all 200.
        let (p, s) = (30, 0.3);
        let mut rng = ChaCha8Rng::seed_from_u64(13);
        let flagged = (0..200)
            .filter(|_| shrink(&noise(p, s, &mut rng), s, &detect()).unwrap().rank > 0)
            .count();
        assert!(flagged < 4, "{flagged} of 200 pure-noise matrices flagged");
    }

    #[test]
    fn rank_three_plus_diagonal() {
        // Σ = Σ_k θ_k u_ku_kᵀ + D, θ = (3, 4, 5)·σ√p on orthonormal u_k, D_ii in
        // [2, 6]σ. Each spike is far above the edge (≥ 3× the critical value), so all
        // three are detected. Frobenius error of the factor estimate: per spike
        // θ√(c²(1 − c²)) ≈ 0.31·θ̃·σ√p·… ≈ 7.5σ, the diagonal ≈ σ√p ≈ 7.7σ, total ≈
        // 14σ; "no threshold + PSD" keeps ‖W‖_F ≈ pσ = 60σ minus what the PSD
        // projection removes (≤ half). Dropping the diagonal fit costs ‖D‖_F ≈ 33σ.
        // Bound: factor error ≤ 0.5 × (none + PSD).
        let (p, s) = (60, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(14);
        let g = DMatrix::<f64>::from_fn(p, 3, |_, _| StandardNormal.sample(&mut rng));
        let q = g.qr().q();
        let root_p = (p as f64).sqrt();
        let mut sigma = DMatrix::<f64>::zeros(p, p);
        for (k, t) in [3.0, 4.0, 5.0].into_iter().enumerate() {
            let u = q.column(k);
            sigma += u * u.transpose() * (t * s * root_p);
        }
        for i in 0..p {
            sigma[(i, i)] += s * (2.0 + 4.0 * i as f64 / (p - 1) as f64);
        }
        let y = &sigma + noise(p, s, &mut rng);
        let est = factor(&y, s, &detect()).unwrap();
        assert_eq!(est.rank, 3);
        let (psd, _) = crate::psd::project_psd(&y).unwrap();
        let err_factor = (&est.matrix - &sigma).norm();
        let err_none = (&psd - &sigma).norm();
        assert!(
            err_factor <= 0.5 * err_none,
            "factor {err_factor} vs none+PSD {err_none}"
        );
        let min_eig = est.matrix.clone().symmetric_eigen().eigenvalues.min();
        assert!(min_eig >= -1e-9, "factor estimate not PSD: {min_eig}");
        // The fixed rank gives the same three spikes.
        let fixed = SpectralOptions {
            rank: RankRule::Fixed(3),
            ..detect()
        };
        assert_eq!(factor(&y, s, &fixed).unwrap().spikes, est.spikes);
    }

    #[test]
    fn sure_of_identity_is_the_noise_energy() {
        // h(λ) = λ: f(Y) = Y, divergence p², SURE = p²σ² exactly (E‖W‖_F²).
        let mut rng = ChaCha8Rng::seed_from_u64(15);
        let y = noise(8, 1.0, &mut rng);
        let r = sure_spectral(&y, 0.5, |l| l, |_| 1.0).unwrap();
        assert!((r - 64.0 * 0.25).abs() < 1e-9, "{r}");
    }

    #[test]
    fn sure_is_unbiased_by_monte_carlo() {
        // Σ = θuuᵀ (θ = 2σ√p) at p = 20, f = the Frobenius shrinker over level 0 (a
        // continuous h, so Stein's identity holds). Over N = 400 replicates the mean of
        // SURE − loss has expectation 0; bound 4 standard errors (estimated from the
        // replicates), a false alarm rate of 6e-5. This guards the spike part of the
        // divergence; it cannot see the GOE weighting (divergence 2·tr(Df)): with
        // h = 0 on the bulk, Γ is non-zero only in the spike's row and the omitted
        // 2σ²Σ_ab M_abΓ_ab ≈ 2σ²·O(1) is below the standard error. That weighting is
        // caught by the two tests of SURE below and above.
        let (p, s) = (20, 1.0);
        let theta = 2.0 * s * (p as f64).sqrt();
        let mut rng = ChaCha8Rng::seed_from_u64(16);
        let u = unit_vector(p, &mut rng);
        let sigma = &u * u.transpose() * theta;
        let h = |l: f64| shrunk_eigenvalue(l, p, s, Shrinker::Frobenius);
        let dh = |l: f64| shrunk_eigenvalue_derivative(l, p, s, Shrinker::Frobenius);
        assert_sure_unbiased(&sigma, s, h, dh, &mut rng);
    }

    /// `Q·diag(d)·Qᵀ` with `d` evenly spread over `[0, top]` and `Q` random orthogonal.
    fn spread_spectrum(p: usize, top: f64, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
        let g = DMatrix::<f64>::from_fn(p, p, |_, _| StandardNormal.sample(rng));
        let q = g.qr().q();
        let d = DMatrix::<f64>::from_diagonal(&DVector::from_fn(p, |i, _| {
            top * i as f64 / (p - 1) as f64
        }));
        &q * d * q.transpose()
    }

    #[test]
    fn bulk_shrinker_endpoints_and_continuity() {
        // α = 1 is max(λ, 0): exactly the PSD projection.
        let (p, s) = (30, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(17);
        let u = unit_vector(p, &mut rng);
        let y = &u * u.transpose() * (3.0 * s * (p as f64).sqrt()) + noise(p, s, &mut rng);
        let (psd, clamped) = crate::psd::project_psd(&y).unwrap();
        assert!(clamped > 0);
        // Whatever τ: the soft piece and the spike piece never exceed x.
        for tau in [1.0, 2.0] {
            let one = bulk_shrink(&y, s, 1.0, tau).unwrap();
            let gap = (&one.matrix - &psd).amax();
            assert!(
                gap < 1e-9,
                "α = 1, τ = {tau} differs from the PSD projection by {gap}"
            );
        }
        // α = 0: the spike gets ψ̂ + η(x̂) as in `shrink` (same level, same shrinker).
        let zero = bulk_shrink(&y, s, 0.0, 2.0).unwrap();
        let flat = shrink(&y, s, &detect()).unwrap();
        assert_eq!(flat.rank, 1);
        assert_eq!(zero.spikes[0], flat.spikes[0]);
        // Continuity everywhere, for maps with and without a soft piece: on a grid of
        // x across the line, the soft piece and the spike piece, a step of 1e-9 moves
        // h by less than 1e-3. The steepest continuous part is the spike piece's rise
        // at the edge, like the Frobenius root's √(x² − 4a) ≈ 2a^(1/4)·√δ ≈ 1.5e-4 for
        // δ = 1e-9 (a = 30); a jump such as the operator shrinker's √a ≈ 5.5 at the
        // edge fails it.
        let level = 0.7;
        let a = p as f64 * s * s;
        let edge = 2.0 * a.sqrt();
        let h = |x: f64, alpha: f64, tau: f64| {
            bulk_shrunk_eigenvalue(level + x, level, p, s, alpha, tau)
        };
        for (alpha, tau) in [(0.6, 2.0), (0.2, 1.2), (0.0, 1.0), (0.9, 1.5)] {
            for k in 0..4000 {
                let x = -5.0 + 0.01 * k as f64;
                for x in [x, edge] {
                    let (below, above) = (h(x, alpha, tau).0, h(x + 1e-9, alpha, tau).0);
                    assert!(
                        (below - above).abs() < 1e-3,
                        "α = {alpha}, τ = {tau}, x = {x}: {below} vs {above}"
                    );
                }
            }
        }
        // τ = 1.2, α = 0.2: the soft piece takes over from the line at
        // x = τ√a/(1 − α) = 1.5√a (before the edge 2√a, where the spike piece is 0),
        // with slope 1, until the spike piece, rising faster, overtakes it; from there
        // the slope stays above 1 (the spike piece's, which tends to 1 from above).
        let (tau, soft_alpha) = (1.2, 0.2);
        let from = tau * a.sqrt() / (1.0 - soft_alpha);
        assert_eq!(h(from - 0.1, soft_alpha, tau).1, soft_alpha);
        let (value, slope) = h(from + 0.1, soft_alpha, tau);
        assert!((value - (level + from + 0.1 - tau * a.sqrt())).abs() < 1e-12 && slope == 1.0);
        let to = (0..4000)
            .map(|k| from + 0.01 * k as f64)
            .find(|&x| h(x, soft_alpha, tau).1 > 1.0)
            .expect("the spike piece overtakes the soft piece");
        assert!(to > edge, "{to}");
        for k in 0..1000 {
            let x = to + 0.05 * k as f64;
            let (value, slope) = h(x, soft_alpha, tau);
            let spike = shrunk_eigenvalue(x, p, s, Shrinker::Balanced);
            assert!(
                slope > 1.0 && (value - (level + spike)).abs() < 1e-12,
                "x = {x}"
            );
        }
        // τ = 2 is the map without a soft piece: max(αx, η(x)) everywhere, η the
        // balanced shrinker of `shrink` (0 at and below the edge).
        let alpha = 0.6;
        for k in 0..200 {
            let x = -5.0 + 0.1 * k as f64;
            let shrunk = if x > edge {
                (alpha * x).max(shrunk_eigenvalue(x, p, s, Shrinker::Balanced))
            } else {
                alpha * x
            };
            let want = (level + shrunk).max(0.0);
            assert!((h(x, alpha, 2.0).0 - want).abs() < 1e-12, "x = {x}");
        }
        assert!(bulk_shrink(&y, s, 1.5, 2.0).is_err());
        assert!(bulk_shrink(&y, s, 0.5, 2.5).is_err());
        assert!(bulk_shrink(&y, s, 0.5, -0.1).is_err());
        assert!(bulk_shrink_sure(&y, s, &[], &DEFAULT_BULK_TAUS).is_err());
        assert!(bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &[]).is_err());
        assert!(bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &[3.0]).is_err());
    }

    #[test]
    fn sure_of_bulk_shrinker_is_unbiased_by_monte_carlo() {
        // A spread spectrum (no flat bulk) at p = 20, level fixed at 1: h is continuous
        // and piecewise differentiable, so E[SURE] = E[loss] exactly (Stein's
        // identity). Mean of N = 400 differences within 4 standard errors (false alarm
        // 6e-5). Two maps:
        // * α = 0.5, τ = 2 (no soft piece). Dropping the line's slope from h' (dh = 0
        //   below the shrinker) lowers SURE by 2σ²·Σ_a (2 − M_aa)·α ≈ 2σ²·2α·m over the
        //   m eigenvalues on the line (about 10 here): ≈ −20σ², ten standard errors
        //   (measured −20.6 ± 1.8). The GOE weighting (divergence 2·tr(Df)) omits
        //   2σ²Σ_ab M_abΓ_ab ≈ 2σ²·Σ_a h' ≈ +20σ² (measured +29).
        // * α = 0.2, τ = 1: the soft piece (slope 1) serves x ∈ [√a/0.8, 2.5√a] =
        //   [5.6, 11.2] at √a = √20, where the spread spectrum puts several
        //   eigenvalues. Reading its slope as α instead of 1 lowers SURE by about
        //   2σ²·Σ_a (2 − M_aa)(1 − α) over its eigenvalues, ≈ 2·2·0.8 ≈ 3σ² each
        //   (measured with that mistake: −15.7 ± 2.1, caught at 7.6 standard errors).
        let (p, s) = (20, 1.0);
        for (seed, alpha, tau) in [(18, 0.5, 2.0), (21, 0.2, 1.0)] {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let sigma = spread_spectrum(p, 3.0 * s * (p as f64).sqrt(), &mut rng);
            let h = |l: f64| bulk_shrunk_eigenvalue(l, 1.0, p, s, alpha, tau).0;
            let dh = |l: f64| bulk_shrunk_eigenvalue(l, 1.0, p, s, alpha, tau).1;
            assert_sure_unbiased(&sigma, s, h, dh, &mut rng);
        }
    }

    #[test]
    fn sure_keeps_a_structured_bulk() {
        // Σ with eigenvalues evenly spread over [0, 3σ√p] at p = 40, σ = 1: no flat
        // floor. Expected Frobenius losses: α = 0 replaces the spread by its mean, about
        // p·Var(U[0, 19]) ≈ 40·30 = 1200; α = 1 keeps all the noise minus the PSD clamp,
        // below p²σ² = 1600; α = ½ about ¼·1200 + ¼·1600 = 700. So the gain of α = ½
        // is ≈ 500 over α = 0 and ≈ 600 over α = 1, while the SURE differences between
        // weights have sd ≤ 120 (200 replicates of this model in numpy: 57–117), a
        // margin above 4 sd: SURE must pick an interior weight, and its estimate must
        // beat both the flat bulk and the PSD projection on this draw.
        let (p, s) = (40, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(19);
        let sigma = spread_spectrum(p, 3.0 * s * (p as f64).sqrt(), &mut rng);
        let y = &sigma + noise(p, s, &mut rng);
        let alphas = [0.0, 0.25, 0.5, 0.75, 1.0];
        // τ = 2 only: the map these expectations are derived for.
        let (choice, est) = bulk_shrink_sure(&y, s, &alphas, &[2.0]).unwrap();
        let alpha = choice.alpha;
        assert!(alpha > 0.0 && alpha < 1.0, "chosen α = {alpha}");
        let loss = (&est.matrix - &sigma).norm_squared();
        let flat = (&bulk_shrink(&y, s, 0.0, 2.0).unwrap().matrix - &sigma).norm_squared();
        let (psd, _) = crate::psd::project_psd(&y).unwrap();
        let none = (&psd - &sigma).norm_squared();
        assert!(
            loss < flat && loss < none,
            "α = {alpha}: {loss} vs flat {flat}, PSD {none}"
        );
    }

    #[test]
    fn cv_fits_score_exactly_what_the_rules_return() {
        // The eigen-form held-out losses of `CvFits` against the plain
        // ‖f(Y) − T‖_F² of `shrink`, `factor` and `bulk_shrink_sure` on the same Y:
        // equal up to rounding (relative 1e-9), on a two-spike Y with a heterogeneous
        // diagonal (so the factor's diagonal fit and every term of its loss are
        // exercised) and an independent test matrix T.
        let (p, s) = (25, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(20);
        let root_p = (p as f64).sqrt();
        let (u, v) = (unit_vector(p, &mut rng), unit_vector(p, &mut rng));
        let mut sigma =
            &u * u.transpose() * (4.0 * s * root_p) + &v * v.transpose() * (3.0 * s * root_p);
        for i in 0..p {
            sigma[(i, i)] += 2.0 + i as f64 / p as f64;
        }
        let y = &sigma + noise(p, s, &mut rng);
        let t = &sigma + noise(p, 2.0 * s, &mut rng);
        let fits = CvFits::new(&y, s).unwrap();
        let got = fits.losses(&t);
        let want = [
            (&shrink(&y, s, &detect()).unwrap().matrix - &t).norm_squared(),
            (&factor(&y, s, &detect()).unwrap().matrix - &t).norm_squared(),
            (&bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &DEFAULT_BULK_TAUS)
                .unwrap()
                .1
                .matrix
                - &t)
                .norm_squared(),
        ];
        assert!(factor(&y, s, &detect()).unwrap().rank == 2);
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() <= 1e-9 * w, "{got:?} vs {want:?}");
        }
    }

    #[test]
    fn refuses_bad_input() {
        let y = DMatrix::<f64>::identity(3, 3);
        assert!(shrink(&y, 0.0, &detect()).is_err());
        assert!(shrink(&y, f64::NAN, &detect()).is_err());
        let fixed = SpectralOptions {
            rank: RankRule::Fixed(3),
            ..detect()
        };
        assert!(factor(&y, 1.0, &fixed).is_err());
        let neg = SpectralOptions {
            rank: RankRule::Detect { margin: -1.0 },
            ..detect()
        };
        assert!(shrink(&y, 1.0, &neg).is_err());
        assert!(shrink(&DMatrix::zeros(2, 3), 1.0, &detect()).is_err());
    }
    /// Monte Carlo check that SURE is unbiased for the eigenvalue map `h` (derivative
    /// `dh`): over 400 draws of `Y = sigma + W`, the mean of SURE − ‖f(Y) − sigma‖² is
    /// within 4 standard errors of 0 (a false failure has probability ≈ 6e-5).
    fn assert_sure_unbiased(
        sigma: &DMatrix<f64>,
        s: f64,
        h: impl Fn(f64) -> f64 + Copy,
        dh: impl Fn(f64) -> f64 + Copy,
        rng: &mut ChaCha8Rng,
    ) {
        let p = sigma.nrows();
        let n = 400;
        let diffs: Vec<f64> = (0..n)
            .map(|_| {
                let y = sigma + noise(p, s, rng);
                let (values, vectors) = symmetric_eigen(&y).unwrap();
                let f = from_eigen(&vectors, values.iter().map(|&l| h(l)));
                sure_spectral(&y, s, h, dh).unwrap() - (&f - sigma).norm_squared()
            })
            .collect();
        let mean = diffs.iter().sum::<f64>() / n as f64;
        let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let se = (var / n as f64).sqrt();
        assert!(mean.abs() < 4.0 * se, "mean SURE − loss {mean}, se {se}");
    }
}
