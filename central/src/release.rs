//! A central collection's release, from the aggregator's exact sums.
//!
//! The aggregator keeps, per central collection, the exact integer sums of the
//! expanded reports `v(u) = (w·u, triu(u·uᵀ))` (or `triu(u·uᵀ)` alone) in units of
//! `2^−30` (`ldpcov_privacy::collection::CENTRAL_GRID_BITS`). A release adds noise once
//! to those sums. The result has the shape of a local collection's sums with known
//! per-entry noise, so every estimator of `ldpcov-estimate` applies to it as
//! post-processing, at no further privacy cost.
//!
//! # Sensitivities of the joint sums (replace-one, unit-ball units)
//!
//! * ℓ₂: `Δ₀(w) = (2 + w²)/√2` (`ldpcov_privacy::collection::joint_base_sensitivity`,
//!   derived there), `√2` without the mean block (`w = 0`). No rounding term: every
//!   report is on the grid and inside the unit ball exactly (checked in integers
//!   when it arrives), and `w·u_i`, `u_i·u_j` are computed exactly.
//! * ℓ₁: `‖v(u)‖₁ = w‖u‖₁ + (‖u‖₂² + ‖u‖₁²)/2 ≤ w√p + (1 + p)/2` (Cauchy–Schwarz,
//!   `‖u‖₁ ≤ √p`), so `Δ₁ ≤ 2w√p + p + 1` by the triangle inequality (`p + 1` without
//!   the mean block, as in [`laplace_cov`](crate::laplace_cov)).
//!
//! # The weighting of the Gaussian releases
//!
//! A collection's [`central_weighting`](Collection::central_weighting) decides the
//! noise of its off-diagonal sums: `σ²` (the raw triangle, collections stored before
//! the field) or exactly `σ²/2` (`svec`, new collections), the mean and diagonal sums
//! keeping `σ²`. The ℓ₂ derivation above already bounds `‖triu(A)‖ ≤ ‖A‖_F`, which is
//! `‖svec(A)‖`: the svec release is ρ-zCDP at the same σ (the `gaussian` module's
//! docs; docs/PRIVACY.md §6b). The Laplace releases are not weighted: their ℓ₁
//! sensitivity is dominated by the off-diagonal terms, and lowering their noise only
//! raises it.

use crate::gaussian::{NoiseSd, ReleaseNoise, off_diagonal_entries};
use crate::mechanisms::{Mechanism, check_budget, check_sigma, gaussian_sigma};
use crate::{CentralError, CentralStatistics, separate_cov};
use ldpcov_accounting::calibration::pure_dp_rho;
use ldpcov_noise::DiscreteGaussianSampler;
use ldpcov_privacy::Collection;
use ldpcov_privacy::collection::{CENTRAL_GRID_BITS, joint_base_sensitivity};
use ldpcov_privacy::mechanism::OffDiagonalWeighting;
use rand::RngCore;

/// The privacy parameter a release spends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReleaseBudget {
    /// zCDP ρ (GaussCov, SeparateCov).
    Rho(f64),
    /// Pure ε-DP (LaplaceCov), recorded as ρ = ε²/2.
    Epsilon(f64),
    /// The m rows of the compressed release (not DP: spends no ρ).
    CompressedRows(u32),
}

/// Noisy sums as a central collection releases them: the collection's grid units
/// (`2^−30`), the collection's entries.
#[derive(Debug, Clone, PartialEq)]
pub struct NoisySums {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// The released sums: exact sums plus noise (SeparateCov: its released matrix
    /// times n, rounded to the grid).
    pub sums: Vec<i64>,
    /// Reports in the release.
    pub count: u64,
    /// Noise sd of each released mean and diagonal sum entry in grid units
    /// (SeparateCov: of each eigenvalue of the sum).
    pub noise_sd_grid: f64,
    /// Noise sd of each released off-diagonal sum entry in grid units: `σ/√2` for a
    /// Gaussian release in the `svec` weighting, `noise_sd_grid` otherwise.
    pub off_diagonal_noise_sd_grid: f64,
    /// The zCDP ρ spent (`ε²/2` for LaplaceCov).
    pub rho: f64,
    /// The clipping radius of the release, unit-ball units (AdaptiveCov's `2^−j`; 1
    /// for the others).
    pub radius: f64,
    /// AdaptiveCov's private trace of the (unclipped) sums, grid units (0 for the
    /// others).
    pub trace: f64,
}

/// Adds exact discrete Gaussian noise to every sum, `σ = Δ₂/√(2ρ)` (grid units): of
/// variance `σ²` on each entry in the raw triangle; in the `svec` weighting `σ²` on the
/// mean and diagonal entries and exactly `σ²/2` on the off-diagonal ones. ρ-zCDP for
/// sums whose replace-one ℓ₂ sensitivity — in the `svec` norm for the `svec`
/// weighting — is `l2_grid` grid units (module docs). `sums` is laid out as `dim`'s
/// release: `mean_entries` mean entries, then the packed triangle. Returns the noisy
/// sums and their noise sds.
pub fn gaussian_sums(
    sums: &[i64],
    dim: usize,
    mean_entries: usize,
    l2_grid: f64,
    rho: f64,
    weighting: OffDiagonalWeighting,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<(Vec<i64>, NoiseSd), CentralError> {
    check_budget("rho", rho)?;
    let expected = mean_entries + ldpcov_privacy::layout::triangle_len(dim);
    if sums.len() != expected {
        return Err(CentralError::Length {
            expected,
            got: sums.len(),
        });
    }
    let sigma = check_sigma(gaussian_sigma(l2_grid, rho))?;
    let noise = ReleaseNoise::new(sigma, weighting)?;
    let noisy = sums
        .iter()
        .zip(off_diagonal_entries(dim, mean_entries))
        .map(|(&s, off)| add_noise(s, noise.draw(off, sampler)))
        .collect::<Result<_, _>>()?;
    Ok((noisy, noise.sd()))
}

/// The weighting of a central collection's Gaussian releases (refuses a local one).
fn weighting_of(collection: &Collection) -> Result<OffDiagonalWeighting, CentralError> {
    collection.central_weighting().ok_or_else(|| {
        CentralError::Parameter(format!(
            "collection {} is not a central collection",
            collection.id()
        ))
    })
}

/// Adds exact discrete Laplace noise of scale `t = ⌈Δ₁/ε⌉` (grid units) to every sum:
/// ε-DP for sums whose replace-one ℓ₁ sensitivity is `l1_grid` grid units. Returns the
/// noisy sums and the noise sd, `√(2e^{−1/t})/(1 − e^{−1/t})`.
pub fn laplace_sums(
    sums: &[i64],
    l1_grid: f64,
    epsilon: f64,
    rng: &mut impl RngCore,
) -> Result<(Vec<i64>, f64), CentralError> {
    check_budget("epsilon", epsilon)?;
    let t = (l1_grid / epsilon).ceil();
    if !(1.0..=2f64.powi(52)).contains(&t) {
        return Err(CentralError::Parameter(format!(
            "epsilon = {epsilon} gives a Laplace scale of {t} grid units, outside [1, 2^52]"
        )));
    }
    let t = t as u64;
    let noisy = sums
        .iter()
        .map(|&s| add_noise(s, ldpcov_noise::cks20::discrete_laplace(rng, t)))
        .collect::<Result<_, _>>()?;
    let q = (-1.0 / t as f64).exp();
    Ok((noisy, (2.0 * q).sqrt() / (1.0 - q)))
}

fn add_noise(sum: i64, noise: i64) -> Result<i64, CentralError> {
    sum.checked_add(noise).ok_or_else(|| {
        CentralError::Parameter("a noisy sum does not fit 64 bits: the noise is too large".into())
    })
}

/// The replace-one ℓ₂ sensitivity of a central collection's sums, grid units:
/// `Δ₀(w)·2^30` (module docs).
pub fn collection_l2_sensitivity(collection: &Collection) -> f64 {
    joint_base_sensitivity(collection.mean_weight()) * collection.grid_scale()
}

/// The replace-one ℓ₁ sensitivity of a central collection's sums, grid units:
/// `(2w√p + p + 1)·2^30` (module docs).
pub fn collection_l1_sensitivity(collection: &Collection) -> f64 {
    let p = collection.dim() as f64;
    (2.0 * collection.mean_weight() * p.sqrt() + p + 1.0) * collection.grid_scale()
}

/// One release of a central collection's exact `sums` over `count` reports.
///
/// * GaussCov: [`gaussian_sums`] at [`collection_l2_sensitivity`] in the collection's
///   [`central_weighting`](Collection::central_weighting), spends ρ.
/// * LaplaceCov: [`laplace_sums`] at [`collection_l1_sensitivity`], spends ε²/2.
/// * SeparateCov ([`separate_cov`], second-moment collections only, its GaussCov
///   directions in the collection's weighting): its matrix, times n, rounded to the
///   grid; spends ρ.
///
/// Refuses a local collection, sums of the wrong length, no reports, a budget of the
/// wrong kind for the mechanism, and ρ or ε out of range; nothing is drawn then.
pub fn release_sums(
    collection: &Collection,
    count: u64,
    sums: &[i64],
    mechanism: Mechanism,
    budget: ReleaseBudget,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisySums, CentralError> {
    let weighting = weighting_of(collection)?;
    if !collection.is_central() || collection.grid_bits() != CENTRAL_GRID_BITS {
        return Err(CentralError::Parameter(format!(
            "collection {} is not a central collection",
            collection.id()
        )));
    }
    if sums.len() != collection.entries() {
        return Err(CentralError::Length {
            expected: collection.entries(),
            got: sums.len(),
        });
    }
    if count == 0 {
        return Err(CentralError::Empty);
    }
    if mechanism == Mechanism::CompressedNotDp {
        let ReleaseBudget::CompressedRows(rows) = budget else {
            return Err(CentralError::Parameter(
                "compressed_not_dp takes a number of rows, not a rho or an epsilon".into(),
            ));
        };
        return compressed_not_dp(collection, count, sums, rows, sampler);
    }
    match (mechanism, budget) {
        (Mechanism::AdaptiveCov, ReleaseBudget::Rho(rho)) => {
            let budget = crate::adaptive::AdaptiveBudget::Rho(rho);
            return crate::adaptive::adaptive_cov(collection, count, sums, budget, sampler);
        }
        (Mechanism::AdaptiveCovLaplace, ReleaseBudget::Epsilon(epsilon)) => {
            let budget = crate::adaptive::AdaptiveBudget::Epsilon(epsilon);
            return crate::adaptive::adaptive_cov(collection, count, sums, budget, sampler);
        }
        _ => {}
    }
    // The other mechanisms release the moments, without the norm bins.
    let sums = &sums[..collection.release_entries()];
    let (sums, sd, rho) = match (mechanism, budget) {
        (Mechanism::GaussCov, ReleaseBudget::Rho(rho)) => {
            let (noisy, sd) = gaussian_sums(
                sums,
                collection.dim(),
                collection.mean_entries(),
                collection_l2_sensitivity(collection),
                rho,
                weighting,
                sampler,
            )?;
            (noisy, sd, rho)
        }
        (Mechanism::LaplaceCov, ReleaseBudget::Epsilon(epsilon)) => {
            let (noisy, sd) = laplace_sums(
                sums,
                collection_l1_sensitivity(collection),
                epsilon,
                sampler.rng_mut(),
            )?;
            (noisy, NoiseSd::uniform(sd), pure_dp_rho(epsilon))
        }
        (Mechanism::SeparateCovLaplace, ReleaseBudget::Epsilon(epsilon)) => {
            let stats = second_moment_statistics(collection, count, sums, "laplace_cov")?;
            let release = crate::separate_cov_laplace(&stats, epsilon, sampler.rng_mut())?;
            let scale = collection.grid_scale() * count as f64;
            let packed = grid_sums(collection, &release.matrix, scale);
            (
                packed,
                NoiseSd::uniform(release.noise_sd * scale),
                release.rho,
            )
        }
        (Mechanism::SeparateCov, ReleaseBudget::Rho(rho)) => {
            let stats = second_moment_statistics(collection, count, sums, "gauss_cov")?;
            let release = separate_cov(&stats, rho, weighting, sampler)?;
            let scale = collection.grid_scale() * count as f64;
            let packed = grid_sums(collection, &release.matrix, scale);
            (packed, NoiseSd::uniform(release.noise_sd * scale), rho)
        }
        (mechanism, budget) => {
            return Err(CentralError::Parameter(format!(
                "{} spends {}, not {budget:?}",
                mechanism.name(),
                if matches!(
                    mechanism,
                    Mechanism::LaplaceCov
                        | Mechanism::SeparateCovLaplace
                        | Mechanism::AdaptiveCovLaplace
                ) {
                    "an epsilon"
                } else {
                    "a rho"
                }
            )));
        }
    };
    Ok(NoisySums {
        mechanism,
        sums,
        count,
        noise_sd_grid: sd.diagonal,
        off_diagonal_noise_sd_grid: sd.off_diagonal,
        rho,
        radius: 1.0,
        trace: 0.0,
    })
}

/// Most rows of a compressed release.
pub const MAX_COMPRESSED_ROWS: u32 = 1_000_000;

/// Zhou, Ligett & Wasserman's compressed release, **not differentially private**: `Y = ΦX` for a
/// secret `Φ` with i.i.d. `N(0, 1/n)` entries. Given the data, the rows of `ΦX` are
/// i.i.d. `N(0, XᵀX/n)` (each is `Σ_i φ_i x_iᵀ`, a Gaussian with covariance
/// `Σ_i x_i x_iᵀ/n`), so they are drawn from the exact second moment of the sums
/// ([`ldpcov_estimate::synthetic_rows`], from the sampler's ChaCha20 stream) and no row
/// of X is needed. The release is the Gram matrix `YᵀY/m`, returned as sums over `n`
/// (`round(n·YᵀY/m)` on the grid); it spends ρ = 0 and its noise is data-dependent
/// (Wishart: `Var = (M_ij² + M_ii·M_jj)/m`), so `noise_sd_grid` is 0. The paper's
/// rejection step (redraw Φ while the compressed Gram strays from a public reference)
/// is not implemented. Only for collections created with `allow_compressed_release`.
fn compressed_not_dp(
    collection: &Collection,
    count: u64,
    sums: &[i64],
    rows: u32,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisySums, CentralError> {
    if !collection.allow_compressed_release() || collection.has_mean() {
        return Err(CentralError::Parameter(
            "the compressed release (not differentially private) needs a central second-moment collection created with allow_compressed_release".into(),
        ));
    }
    if !(1..=MAX_COMPRESSED_ROWS).contains(&rows) {
        return Err(CentralError::Parameter(format!(
            "compressed_rows = {rows} must be between 1 and {MAX_COMPRESSED_ROWS}"
        )));
    }
    let p = collection.dim();
    let unit = collection.grid_scale();
    let n = count as f64;
    let packed: Vec<f64> = sums[..collection.second_moment_entries()]
        .iter()
        .map(|&s| s as f64 / (unit * n))
        .collect();
    let second = nalgebra::DMatrix::from_row_slice(
        p,
        p,
        &ldpcov_privacy::layout::unpack_symmetric(p, &packed),
    );
    let y = ldpcov_estimate::synthetic_rows(&[], &second, rows as usize, sampler.rng_mut())
        .map_err(CentralError::Eigen)?;
    let m = f64::from(rows);
    let gram: Vec<i64> = ldpcov_privacy::layout::triangle_pairs(p)
        .map(|(i, j)| {
            let g = y.iter().map(|r| r[i] * r[j]).sum::<f64>() / m;
            (g * unit * n).round() as i64
        })
        .collect();
    Ok(NoisySums {
        mechanism: Mechanism::CompressedNotDp,
        sums: gram,
        count,
        noise_sd_grid: 0.0,
        off_diagonal_noise_sd_grid: 0.0,
        rho: 0.0,
        radius: 1.0,
        trace: 0.0,
    })
}

/// Per-fold noisy sums released by [`gauss_cov_folds`].
#[derive(Debug, Clone, PartialEq)]
pub struct NoisyFolds {
    /// The noisy sums of each fold (the collection's release entries each).
    pub fold_sums: Vec<Vec<i64>>,
    /// Reports per fold.
    pub fold_counts: Vec<u64>,
    /// Noise sd of each released mean and diagonal fold-sum entry, grid units.
    pub noise_sd_grid: f64,
    /// Noise sd of each released off-diagonal fold-sum entry, grid units (`σ/√2` in
    /// the `svec` weighting).
    pub off_diagonal_noise_sd_grid: f64,
    /// The zCDP ρ spent.
    pub rho: f64,
}

/// GaussCov of every cross-validation fold's sums, each entry with discrete Gaussian
/// noise of sd `σ = Δ₀(w)·2^30/√(2ρ)` ([`collection_l2_sensitivity`]; `σ/√2` on the
/// off-diagonal entries in the `svec` weighting): **ρ-zCDP for all folds together.** A user is in one fold (fixed by the report id, not by the data),
/// so replacing that user's vector moves one fold's sums by at most `Δ₀(w)`; and if
/// the neighbouring user also changes fold, two folds move, by `‖v(u)‖ ≤ √(1 + w²)`
/// and `‖v(w)‖` respectively, together `√2·√(1 + w²) ≤ Δ₀(w)` (`1.58 ≤ 1.59` at
/// `w = 1/2`; `√2` without the mean block). Both bounds hold in the `svec` norm
/// (`‖(w·u, svec(uuᵀ))‖² = w²‖u‖² + ‖u‖⁴`). The total of K fold releases has K times
/// GaussCov's noise variance; in exchange the held-out folds let cross-validation run
/// on private statistics. Norm bins are not released.
pub fn gauss_cov_folds(
    collection: &Collection,
    fold_counts: &[u64],
    fold_sums: &[Vec<i64>],
    rho: f64,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisyFolds, CentralError> {
    let weighting = weighting_of(collection)?;
    if fold_counts.len() != fold_sums.len()
        || fold_sums.iter().any(|f| f.len() != collection.entries())
    {
        return Err(CentralError::Length {
            expected: collection.entries(),
            got: fold_sums.first().map_or(0, Vec::len),
        });
    }
    if fold_counts.iter().sum::<u64>() == 0 {
        return Err(CentralError::Empty);
    }
    let entries = collection.release_entries();
    let l2 = collection_l2_sensitivity(collection);
    let mut noisy = Vec::with_capacity(fold_sums.len());
    let mut sd = NoiseSd::uniform(0.0);
    for fold in fold_sums {
        let (sums, fold_sd) = gaussian_sums(
            &fold[..entries],
            collection.dim(),
            collection.mean_entries(),
            l2,
            rho,
            weighting,
            sampler,
        )?;
        noisy.push(sums);
        sd = fold_sd;
    }
    Ok(NoisyFolds {
        fold_sums: noisy,
        fold_counts: fold_counts.to_vec(),
        noise_sd_grid: sd.diagonal,
        off_diagonal_noise_sd_grid: sd.off_diagonal,
        rho,
    })
}

/// The exact statistics SeparateCov releases from: the second moment's sums of a
/// collection without a mean block (`instead` names the mechanism to use otherwise).
fn second_moment_statistics(
    collection: &Collection,
    count: u64,
    sums: &[i64],
    instead: &str,
) -> Result<CentralStatistics, CentralError> {
    if collection.has_mean() {
        return Err(CentralError::Parameter(format!(
            "separate_cov releases the second moment only: use {instead}, or a collection of moments SECOND_MOMENT"
        )));
    }
    CentralStatistics::from_sums(
        collection.dim(),
        CENTRAL_GRID_BITS / 2,
        count,
        sums.to_vec(),
    )
}

/// A released matrix (data units) back as packed sums on the collection's grid, `scale`
/// being `grid_scale·count`.
fn grid_sums(collection: &Collection, matrix: &nalgebra::DMatrix<f64>, scale: f64) -> Vec<i64> {
    ldpcov_privacy::layout::triangle_pairs(collection.dim())
        .map(|(i, j)| (matrix[(i, j)] * scale).round() as i64)
        .collect()
}
