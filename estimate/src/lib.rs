//! The ldpcov estimators: from the exact integer sums of perturbed reports to a
//! released covariance (or precision) matrix. Pure functions of the accumulators: no
//! I/O, no gRPC, no storage; everything here is post-processing of the privatised
//! reports and costs no privacy.
//!
//! * [`Accumulator`] — the exact per-fold i64 sums and u128 sums of squares the
//!   estimators read ([`FOLDS`] cross-validation folds).
//! * [`moments()`] — the mean, the second moment and the de-biased covariance
//!   `Σ̂ = M̂ − μ̂μ̂ᵀ + τ²I` of a mean-and-covariance collection's average (the matrix
//!   the estimators act on), and [`correlation`] of a released matrix.
//! * [`estimate`] — the covariance pipeline: [`average`], diagonal shrinkage, a
//!   [`Structure`] (banding / Toeplitz averaging), a threshold, then
//!   [`project_psd_floor`]; what to do is an [`EstimateOptions`], the result a
//!   [`CovarianceEstimate`].
//! * Threshold rules ([`ThresholdRule`]): none, seed 000's [`UniversalThreshold`],
//!   seed 001's [`Seed001Threshold`] (with `1/√n` restored), Cai & Liu's
//!   [`AdaptiveThreshold`], and K-fold [`CrossValidation`] (the default), each
//!   [`ThresholdKind::Hard`] or [`ThresholdKind::Soft`].
//! * [`project_psd`] / [`project_psd_floor`] — the projection onto the PSD cone (or
//!   `{A ⪰ floor·I}`), the only place the eigensolver runs ([`symmetric_eigen`]).
//! * Precision matrices ([`estimate_precision`]): ridge ([`ridge_precision`]) and the
//!   graphical lasso ([`glasso`]), λ by held-out likelihood
//!   ([`cross_validate_lambda`]).
//! * [`spectral`] — estimators built on the known noise level σ_n: spike de-biasing
//!   above the noise edge with balanced/Frobenius/operator shrinkers, low rank plus
//!   diagonal, bulk shrinkage with its α chosen by SURE. A module of its own (its
//!   function names — `shrink`, `factor` — need the `spectral::` prefix to read well).
//!
//! Every error is an [`EstimateError`].
//!
//! # Example
//!
//! ```
//! use ldpcov_estimate::{Accumulator, EstimateOptions, ThresholdRule, estimate};
//! use ldpcov_proto::{v1::CollectionSpec, Collection};
//!
//! let c = Collection::from_spec(&CollectionSpec {
//!     collection_id: "doc".into(), dim: 2, epsilon: 1.0, delta: 1e-6,
//!     clip_radius: 1.0, min_reports: 1, encoding: 0, ..Default::default()
//! })?;
//! // Two grid-unit reports whose average is [[0.5, 0.25], [0.25, 0.5]].
//! let g = c.grid_scale() as i32;
//! let mut acc = Accumulator::new(c.entries(), 2);
//! acc.add(0, &[g, g / 2, 0]);
//! acc.add(1, &[0, 0, g]);
//! let opts = EstimateOptions { rule: ThresholdRule::None, ..Default::default() };
//! let est = estimate(&c, &acc, &opts)?;
//! assert_eq!(est.matrix[(0, 1)], 0.25);
//! assert_eq!(est.clamped_eigenvalues, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod accumulator;
mod error;
mod estimate;
mod moments;
mod precision;
mod psd;
pub mod spectral;
mod structure;
mod synthetic;
mod threshold;

pub use accumulator::{Accumulator, FOLDS};
pub use error::EstimateError;
pub use estimate::{CovarianceEstimate, EstimateOptions, average, estimate, validate_options};
pub use moments::{MomentsEstimate, correlation, mean_noise_sd, moments, packed_correlation};
pub use precision::{
    GlassoOptions, GlassoResult, LambdaCv, PrecisionEstimate, PrecisionMethod,
    cross_validate_lambda, estimate_precision, glasso, lambda_grid, neg_log_likelihood, precision,
    ridge_precision, validate_glasso,
};
pub use psd::{project_psd, project_psd_floor, symmetric_eigen};
pub use structure::{Structure, bandwidth_grid};
pub use synthetic::synthetic_rows;
pub use threshold::{
    AdaptiveThreshold, BulkShrinkage, Candidate, CrossValidation, CvOutcome, FactorModel,
    OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z, Seed001Threshold, SpectralCandidate, SpectralGuard,
    SpectralShrinkage, StackedRelease, ThresholdKind, ThresholdRule, Thresholds,
    UniversalThreshold, apply_threshold, cross_validate, diagonal_spread_z, entry_variances,
    log_grid, noise_threshold, off_diagonal_signal_z, off_diagonal_top_z, seed001_threshold,
    universal_threshold,
};
