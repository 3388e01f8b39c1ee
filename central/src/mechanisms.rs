//! The releases: exact integer sums plus exact discrete noise, then post-processing.
//!
//! # Sensitivities (replace-one neighbours, sum units)
//!
//! Neighbouring data sets differ in one user's vector: `u` replaced by `w`, both on
//! the grid and inside the unit ball exactly ([`CentralStatistics::add`]). The sum
//! `S = Σ triu(u·uᵀ)` then changes by `triu(u·uᵀ) − triu(w·wᵀ)`:
//!
//! * **ℓ₂ (Gaussian):** the packed upper triangle counts each off-diagonal entry once,
//!   so its norm is at most the Frobenius norm of the full difference,
//!   `‖uuᵀ − wwᵀ‖_F² = ‖u‖⁴ + ‖w‖⁴ − 2(uᵀw)² ≤ 2`: **Δ₂ = √2**, attained by two
//!   orthogonal unit vectors. The papers print `1/n` for the average (Wang & Xu Alg. 1);
//!   replace-one neighbours need `√2/n`. In grid units: `√2·2^2k`. The same bound holds
//!   in the `svec` norm, `‖svec(uuᵀ − wwᵀ)‖ = ‖uuᵀ − wwᵀ‖_F` exactly, which is what a
//!   release in the `svec` weighting (noise `σ²/2` on the off-diagonal sums, the
//!   `gaussian` module) is charged in: the same ρ, half the off-diagonal variance.
//! * **ℓ₁ (Laplace):** `‖triu(uuᵀ)‖₁ = Σ_i u_i² + Σ_{i<j} |u_i u_j| = (‖u‖₂² + ‖u‖₁²)/2
//!   ≤ (1 + p)/2` (Cauchy–Schwarz: `‖u‖₁² ≤ p‖u‖₂²`), so **Δ₁ = p + 1** (the triangle
//!   inequality on the two terms). In grid units: `(p + 1)·2^2k`.
//! * **Eigenvalues (SeparateCov):** by Hoffman–Wielandt, the sorted eigenvalues of two
//!   symmetric matrices differ in ℓ₂ by at most the Frobenius norm of their difference:
//!   **Δ₂ = √2** as above, plus the eigensolver's floating-point error and the rounding
//!   of the eigenvalues to the grid, both counted (see [`separate_cov`]).
//!
//! # Calibration
//!
//! zCDP throughout (one ledger, as the local side reports ρ): the Gaussian mechanism
//! with ℓ₂ sensitivity Δ and noise σ is `Δ²/(2σ²)`-zCDP, and so is the multivariate
//! discrete Gaussian on integer-valued queries (Canonne, Kamath & Steinke 2020, Thm. 14;
//! their additional term is below `10⁻¹⁰⁰` at the σ used here), so `σ = Δ/√(2ρ)`. A pure
//! ε-DP release (discrete Laplace of scale `t ≥ Δ₁/ε`) is `ε²/2`-zCDP.

use crate::{CentralError, CentralStatistics};
use ldpcov_accounting::calibration::pure_dp_rho;
use ldpcov_noise::{DiscreteGaussianSampler, NoiseSampler};
use ldpcov_privacy::mechanism::OffDiagonalWeighting;
use nalgebra::DMatrix;
use rand::RngCore;

/// Which mechanism produced a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// Dong, Liang & Yi's GaussCov: every entry of the sum plus Gaussian noise.
    GaussCov,
    /// Dong, Liang & Yi's SeparateCov: noisy eigenvalues (ρ/2) with the eigenvectors of a
    /// GaussCov release (ρ/2).
    SeparateCov,
    /// The pure ε-DP variant of GaussCov: discrete Laplace noise.
    LaplaceCov,
    /// Dong, Liang & Yi's AdaptiveCov: private trace, a clipping radius by the sparse vector
    /// technique, GaussCov of the clipped data (`adaptive` module).
    AdaptiveCov,
    /// Zhou, Ligett & Wasserman's compressed release — NOT differentially private (`release` module).
    CompressedNotDp,
    /// GaussCov of every cross-validation fold's sums (`release` module).
    GaussCovFolds,
    /// The pure ε-DP SeparateCov: discrete Laplace eigenvalues (ε/2) with the
    /// eigenvectors of a LaplaceCov release (ε/2).
    SeparateCovLaplace,
    /// The pure ε-DP AdaptiveCov (`adaptive` module).
    AdaptiveCovLaplace,
}

impl Mechanism {
    /// Its name in requests and outputs.
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::GaussCov => "gauss_cov",
            Mechanism::SeparateCov => "separate_cov",
            Mechanism::LaplaceCov => "laplace_cov",
            Mechanism::AdaptiveCov => "adaptive_cov",
            Mechanism::CompressedNotDp => "compressed_not_dp",
            Mechanism::GaussCovFolds => "gauss_cov_folds",
            Mechanism::SeparateCovLaplace => "separate_cov_laplace",
            Mechanism::AdaptiveCovLaplace => "adaptive_cov_laplace",
        }
    }
}

/// One private release of the second moment `E[u·uᵀ]` (unit-ball units: multiply by
/// R² for data units).
#[derive(Debug, Clone, PartialEq)]
pub struct CentralRelease {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// The released (noisy, symmetric, not projected) second moment.
    pub matrix: DMatrix<f64>,
    /// The standard deviation of the noise on each released coordinate of the average:
    /// each entry for GaussCov (each diagonal entry in the `svec` weighting) and
    /// LaplaceCov, each eigenvalue for SeparateCov.
    pub noise_sd: f64,
    /// The standard deviation of the noise on each off-diagonal entry of the average:
    /// `noise_sd/√2` for GaussCov in the `svec` weighting, `noise_sd` otherwise.
    pub off_diagonal_noise_sd: f64,
    /// The zCDP ρ this release spent.
    pub rho: f64,
    /// Users in the release (public under replace-one neighbours).
    pub count: u64,
}

fn check_release(stats: &CentralStatistics) -> Result<f64, CentralError> {
    if stats.count() == 0 {
        return Err(CentralError::Empty);
    }
    Ok(stats.count() as f64)
}

pub(crate) fn check_budget(what: &str, value: f64) -> Result<(), CentralError> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(CentralError::Parameter(format!(
            "{what} = {value} must be a finite number > 0"
        )))
    }
}

/// The noise σ, in grid units of the sum, of a ρ-zCDP Gaussian release with ℓ₂
/// sensitivity `delta` (grid units): `Δ/√(2ρ)`.
pub fn gaussian_sigma(delta: f64, rho: f64) -> f64 {
    delta / (2.0 * rho).sqrt()
}

/// The exact sampler draws σ up to `2^50` grid units: a smaller ρ is refused.
pub(crate) fn check_sigma(sigma: f64) -> Result<f64, CentralError> {
    if sigma.is_finite() && (1.0..=2f64.powi(50)).contains(&sigma) {
        Ok(sigma)
    } else {
        Err(CentralError::Parameter(format!(
            "the noise sd would be {sigma:e} grid units, outside [1, 2^50]: rho is too small"
        )))
    }
}

/// GaussCov (Dong, Liang & Yi): `S + Z` with `Z` independent `N_Z(0, σ²)` on each packed entry,
/// `σ = Δ₂/√(2ρ) = 2^2k/√ρ` (Δ₂ = `√2·2^2k`, module docs), divided by n: the noise sd
/// of each averaged entry is `1/(n√ρ)`. In the `svec` weighting the off-diagonal
/// entries get `N_Z(0, σ²/2)` instead (sd `1/(n√(2ρ))`) at the same ρ. Spends exactly
/// `rho`.
pub fn gauss_cov(
    stats: &CentralStatistics,
    rho: f64,
    weighting: OffDiagonalWeighting,
    noise: &mut DiscreteGaussianSampler,
) -> Result<CentralRelease, CentralError> {
    let n = check_release(stats)?;
    let unit = stats.unit() as f64;
    let (noisy, sd) = crate::gaussian_sums(
        stats.sums(),
        stats.dim(),
        0,
        std::f64::consts::SQRT_2 * unit,
        rho,
        weighting,
        noise,
    )?;
    let noisy: Vec<f64> = noisy.into_iter().map(|v| v as f64).collect();
    let sd = sd.scaled(unit * n);
    Ok(CentralRelease {
        mechanism: Mechanism::GaussCov,
        matrix: stats.unpack(&noisy, n),
        noise_sd: sd.diagonal,
        off_diagonal_noise_sd: sd.off_diagonal,
        rho,
        count: stats.count(),
    })
}

/// The ℓ₂ sensitivity, in grid units of `2^−2k`, of the eigenvalues of `S` as
/// [`separate_cov`] computes and rounds them: `√2·2^2k` (Hoffman–Wielandt), plus `√p`
/// for rounding each eigenvalue of both neighbours to the nearest unit (at most ½
/// each), plus the eigensolver's error on both, `2·p·2^−40·‖S‖` with `‖S‖ ≤ n·2^2k` (a
/// backward-stable solver errs by a small multiple of `p·ε_machine·‖S‖`; `2^−40`
/// leaves a margin of `2^12` over `ε_machine = 2^−52`).
pub fn eigenvalue_sensitivity(stats: &CentralStatistics) -> f64 {
    let p = stats.dim() as f64;
    let unit = stats.unit() as f64;
    std::f64::consts::SQRT_2 * unit
        + p.sqrt()
        + 2.0 * p * (stats.count() as f64) * unit * 2f64.powi(-40)
}

/// SeparateCov (Dong, Liang & Yi): half of ρ on the eigenvalues, half on the eigenvectors.
///
/// * Eigenvalues: those of the exact `S` (grid units), rounded to integers, plus
///   `N_Z(0, σ_λ²)` with `σ_λ = Δ_λ/√(2·ρ/2)` ([`eigenvalue_sensitivity`]).
/// * Eigenvectors: those of a [`gauss_cov`] release at ρ/2 in `weighting` (the
///   eigenvalue noise is isotropic: Hoffman–Wielandt bounds the eigenvalues' ℓ₂
///   change, and no weighting of them helps).
/// * Output `P̃·diag(λ̃)·P̃ᵀ/n`, the i-th largest noisy eigenvalue paired with the
///   eigenvector of the i-th largest *signed* eigenvalue of the GaussCov matrix.
///
/// Post-processing of the two releases: spends exactly `rho` (composition).
pub fn separate_cov(
    stats: &CentralStatistics,
    rho: f64,
    weighting: OffDiagonalWeighting,
    noise: &mut DiscreteGaussianSampler,
) -> Result<CentralRelease, CentralError> {
    check_budget("rho", rho)?;
    let n = check_release(stats)?;
    let unit = stats.unit() as f64;
    // Eigenvalues of the exact sum, in grid units.
    let exact = stats.unpack(&stats.sums_f64(), 1.0 / unit);
    let (mut lambda, _) = ldpcov_estimate::symmetric_eigen(&exact).map_err(CentralError::Eigen)?;
    let sigma = check_sigma(gaussian_sigma(eigenvalue_sensitivity(stats), rho / 2.0))?;
    for l in &mut lambda {
        *l = l.round() + noise.sample_grid(sigma) as f64;
    }
    // Eigenvectors of a GaussCov release at ρ/2.
    let directions = gauss_cov(stats, rho / 2.0, weighting, noise)?;
    Ok(CentralRelease {
        mechanism: Mechanism::SeparateCov,
        matrix: pair_eigenvalues(lambda, &directions.matrix, unit * n)?,
        noise_sd: sigma / (unit * n),
        off_diagonal_noise_sd: sigma / (unit * n),
        rho,
        count: stats.count(),
    })
}

/// `P̃·diag(λ̃)·P̃ᵀ/scale`: the i-th largest of the noisy eigenvalues `lambda` with the
/// eigenvector of the i-th largest *signed* eigenvalue of `directions` (SeparateCov's
/// assembly, post-processing of its two releases).
fn pair_eigenvalues(
    mut lambda: Vec<f64>,
    directions: &DMatrix<f64>,
    scale: f64,
) -> Result<DMatrix<f64>, CentralError> {
    lambda.sort_by(|a, b| b.total_cmp(a));
    let (values, vectors) =
        ldpcov_estimate::symmetric_eigen(directions).map_err(CentralError::Eigen)?;
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].total_cmp(&values[a]));
    let p = directions.nrows();
    let mut m = DMatrix::zeros(p, p);
    for (rank, &col) in order.iter().enumerate() {
        let l = lambda[rank] / scale;
        for i in 0..p {
            for j in 0..p {
                m[(i, j)] += l * vectors[(i, col)] * vectors[(j, col)];
            }
        }
    }
    Ok((&m + m.transpose()) * 0.5)
}

/// The ℓ₁ sensitivity, in grid units, of the eigenvalues of `S` as
/// [`separate_cov_laplace`] computes and rounds them: `2·2^2k` (Lidskii: the
/// eigenvalue change is at most the nuclear norm of `uuᵀ − wwᵀ`, at most
/// `‖u‖² + ‖w‖² ≤ 2`), plus `p` for the rounding (½ per eigenvalue of each neighbour),
/// plus `√p` times the ℓ₂ eigensolver term of [`eigenvalue_sensitivity`].
pub fn eigenvalue_l1_sensitivity(stats: &CentralStatistics) -> f64 {
    let p = stats.dim() as f64;
    let unit = stats.unit() as f64;
    2.0 * unit + p + p.sqrt() * 2.0 * p * (stats.count() as f64) * unit * 2f64.powi(-40)
}

/// The pure ε-DP SeparateCov (Dong, Liang & Yi's variant): half of ε on the eigenvalues of the
/// exact `S` (rounded) plus discrete Laplace noise of scale
/// `⌈Δ₁_λ/(ε/2)⌉` ([`eigenvalue_l1_sensitivity`]), half on the eigenvectors of a
/// [`laplace_cov`] release at ε/2. ε-DP, recorded as ρ = ε²/2; `noise_sd` is each
/// averaged eigenvalue's.
pub fn separate_cov_laplace(
    stats: &CentralStatistics,
    epsilon: f64,
    rng: &mut impl RngCore,
) -> Result<CentralRelease, CentralError> {
    check_budget("epsilon", epsilon)?;
    let n = check_release(stats)?;
    let unit = stats.unit() as f64;
    let exact = stats.unpack(&stats.sums_f64(), 1.0 / unit);
    let (mut lambda, _) = ldpcov_estimate::symmetric_eigen(&exact).map_err(CentralError::Eigen)?;
    let t = (eigenvalue_l1_sensitivity(stats) / (epsilon / 2.0)).ceil();
    if !(1.0..=2f64.powi(52)).contains(&t) {
        return Err(CentralError::Parameter(format!(
            "epsilon = {epsilon} gives an eigenvalue Laplace scale of {t} grid units, outside [1, 2^52]"
        )));
    }
    for l in &mut lambda {
        *l = l.round() + ldpcov_noise::cks20::discrete_laplace(rng, t as u64) as f64;
    }
    let directions = laplace_cov(stats, epsilon / 2.0, rng)?;
    let q = (-1.0 / t).exp();
    Ok(CentralRelease {
        mechanism: Mechanism::SeparateCovLaplace,
        matrix: pair_eigenvalues(lambda, &directions.matrix, unit * n)?,
        noise_sd: (2.0 * q).sqrt() / (1.0 - q) / (unit * n),
        off_diagonal_noise_sd: (2.0 * q).sqrt() / (1.0 - q) / (unit * n),
        rho: pure_dp_rho(epsilon),
        count: stats.count(),
    })
}

/// The pure ε-DP variant: `S + L` with `L` independent discrete Laplace of scale
/// `t = ⌈Δ₁/ε⌉` grid units (`P(x) ∝ exp(−|x|/t)`, CKS20 Alg. 2, exact), `Δ₁ = (p + 1)·2^2k`
/// (module docs). ε-DP, recorded as ρ = ε²/2. The noise sd of an averaged entry is
/// `√(2e^{−1/t})/(1 − e^{−1/t})/(n·2^2k) ≈ √2·t/(n·2^2k)`.
pub fn laplace_cov(
    stats: &CentralStatistics,
    epsilon: f64,
    rng: &mut impl RngCore,
) -> Result<CentralRelease, CentralError> {
    let n = check_release(stats)?;
    let unit = stats.unit() as f64;
    let delta1 = (stats.dim() as f64 + 1.0) * unit;
    let (noisy, sd) = crate::laplace_sums(stats.sums(), delta1, epsilon, rng)?;
    let noisy: Vec<f64> = noisy.into_iter().map(|v| v as f64).collect();
    Ok(CentralRelease {
        mechanism: Mechanism::LaplaceCov,
        matrix: stats.unpack(&noisy, n),
        noise_sd: sd / (unit * n),
        off_diagonal_noise_sd: sd / (unit * n),
        rho: pure_dp_rho(epsilon),
        count: stats.count(),
    })
}
