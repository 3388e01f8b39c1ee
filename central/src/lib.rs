//! `ldpcov-central`: covariance releases for a **trusted aggregator** (the central
//! model of differential privacy), from exact sufficient statistics.
//!
//! In a central collection the aggregator sees each user's clipped vector `u` (on the
//! grid `2^−k`, inside the unit ball exactly) and keeps only the exact integer sum
//! `S = Σ triu(u·uᵀ)` ([`CentralStatistics`]); privacy comes from the noise added once,
//! to `S`, when something is released. At equal (ε, δ) the noise on the average is
//! about √n times smaller than in the local model, where every report carries its own.
//!
//! The mechanisms (Dong, Liang & Yi, "Differentially private covariance
//! revisited"):
//!
//! * [`gauss_cov`] — every entry plus exact discrete Gaussian noise, ρ-zCDP; in the
//!   `svec` weighting ([`OffDiagonalWeighting::Svec`], what new central collections
//!   use) the off-diagonal entries get half the variance at the same ρ;
//! * [`separate_cov`] — noisy eigenvalues (ρ/2) with the eigenvectors of a GaussCov
//!   release (ρ/2), better when the trace is small;
//! * [`laplace_cov`] — the pure ε-DP variant with exact discrete Laplace noise.
//!
//! Each returns a [`CentralRelease`] with the ρ it spent and the sd of its noise, so
//! that post-processing (thresholds, the PSD projection of `ldpcov-estimate`) knows
//! its noise level. Sensitivities are derived in the `mechanisms` module's docs
//! (replace-one neighbours: `√2` in sum units where the papers print `1/n` for the
//! average). No I/O, no gRPC; randomness is passed in.
//!
//! ```
//! use ldpcov_central::{CentralStatistics, CENTRAL_GRID_BITS, OffDiagonalWeighting, gauss_cov};
//! use ldpcov_noise::DiscreteGaussianSampler;
//!
//! let mut stats = CentralStatistics::new(3, CENTRAL_GRID_BITS)?;
//! for i in 0..1000 {
//!     let t = i as f64 / 1000.0;
//!     stats.add_vector(&[0.6 * t, -0.3, 0.5 * (1.0 - t)])?; // clipped, on the grid
//! }
//! // Real noise: ChaCha20 seeded by the operating system.
//! let mut noise = DiscreteGaussianSampler::from_os_rng()?;
//! let release = gauss_cov(&stats, 0.5, OffDiagonalWeighting::Svec, &mut noise)?;
//! assert_eq!(release.rho, 0.5);
//! // Each averaged diagonal entry carries noise of sd 1/(n√ρ), each off-diagonal one
//! // 1/(n√(2ρ)).
//! assert!((release.noise_sd - 1.0 / (1000.0 * 0.5f64.sqrt())).abs() < 1e-12);
//! assert!((release.off_diagonal_noise_sd - 1.0 / 1000.0).abs() < 1e-12);
//! let exact = stats.exact_second_moment().unwrap();
//! assert!((release.matrix[(1, 1)] - exact[(1, 1)]).abs() < 10.0 * release.noise_sd);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod adaptive;
mod error;
mod gaussian;
mod mechanisms;
mod release;
mod statistics;
#[cfg(test)]
mod tests;

pub use error::CentralError;
pub use gaussian::NoiseSd;
pub use ldpcov_privacy::mechanism::OffDiagonalWeighting;
pub use mechanisms::{
    CentralRelease, Mechanism, eigenvalue_l1_sensitivity, eigenvalue_sensitivity, gauss_cov,
    gaussian_sigma, laplace_cov, separate_cov, separate_cov_laplace,
};
pub use release::{
    MAX_COMPRESSED_ROWS, NoisyFolds, NoisySums, ReleaseBudget, collection_l1_sensitivity,
    collection_l2_sensitivity, gauss_cov_folds, gaussian_sums, laplace_sums, release_sums,
};
pub use statistics::{CENTRAL_GRID_BITS, CentralStatistics, to_grid_unit_ball};
