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

mod bulk;
mod fit;
mod sure;
#[cfg(test)]
mod tests;

pub use bulk::*;
pub use fit::*;
pub use sure::*;
