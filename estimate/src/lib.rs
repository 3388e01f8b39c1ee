//! The ldpcov estimators: from the exact integer sums of perturbed reports to a
//! released covariance (or precision) matrix. Pure functions of the accumulators: no
//! I/O, no gRPC, no storage; everything here is post-processing of the privatised
//! reports and costs no privacy.
//!
//! * [`Accumulator`] — the exact per-fold i64 sums and u128 sums of squares the
//!   estimators read ([`FOLDS`] cross-validation folds).
//! * [`EstimationInput`] — what the estimators know besides the sums: dimension,
//!   report layout, units, minimum reports and the [`NoiseModel`]; built from a local
//!   collection or from a central release.
//! * [`estimate`] — the covariance pipeline: [`average`] (for a mean-and-covariance
//!   collection the de-biased covariance `Σ̂ = M̂ − μ̂μ̂ᵀ + τ²I`, released with its
//!   [`MomentsEstimate`]), a [`RegularisationRule`] resolved on it, then the projection
//!   onto `{A ⪰ floor·I}`; what to do is an [`EstimateOptions`], the result a
//!   [`CovarianceEstimate`]; [`correlation`] of a released matrix.
//! * Selection (module `select`): the rules — none, Wang & Xu's
//!   [`UniversalThreshold`], the heavy-tailed [`LdpNoiseThreshold`] (with `1/√n`
//!   restored), Cai & Liu's [`AdaptiveThreshold`], the spectral estimators
//!   ([`SpectralShrinkage`], [`FactorModel`], [`BulkShrinkage`]) — and K-fold
//!   [`CrossValidation`] (the default) with its refit-free SURE selection at large p,
//!   its signal tests and the stacking of its families.
//! * Operators: thresholds ([`apply_threshold`], [`ThresholdKind::Hard`] or
//!   [`ThresholdKind::Soft`], [`entry_variances`] for the adaptive λ), banding and
//!   Toeplitz averaging, [`spectral`] (estimators built on the known noise level
//!   σ_n: spike de-biasing above the noise edge, low rank plus diagonal, bulk
//!   shrinkage with its α chosen by SURE; a module of its own, its function names —
//!   `shrink`, `factor` — need the `spectral::` prefix to read well), the PSD
//!   projection ([`project_psd`]; the only place the eigensolver runs,
//!   [`symmetric_eigen`]).
//! * Precision matrices ([`estimate_precision`]): ridge (ROPE) and the graphical lasso
//!   ([`PrecisionMethod`]), λ by held-out likelihood ([`cross_validate_lambda`]).
//! * [`packed_to_matrix`] / [`matrix_to_packed`] — the packed upper triangle of
//!   reports and releases to and from a symmetric matrix.
//! * [`synthetic_rows`] — synthetic rows drawn from a released estimate.
//!
//! Every error is an [`EstimateError`].
//!
//! # Example
//!
//! ```
//! use ldpcov_estimate::{
//!     Accumulator, EstimateOptions, EstimationInput, RegularisationRule, estimate,
//! };
//! use ldpcov_privacy::Collection;
//! use ldpcov_proto::v1::CollectionSpec;
//!
//! let c = Collection::from_spec(&CollectionSpec {
//!     collection_id: "doc".into(), dim: 2, epsilon: 1.0, delta: 1e-6,
//!     clip_radius: 1.0, min_reports: 1, encoding: 0, ..Default::default()
//! })?;
//! // Two grid-unit reports whose average is [[0.5, 0.25], [0.25, 0.5]].
//! let g = c.grid_scale() as i32;
//! let input = EstimationInput::from_collection(&c);
//! let mut acc = Accumulator::new(input.entries(), 2);
//! acc.add(0, &[g, g / 2, 0]);
//! acc.add(1, &[0, 0, g]);
//! let opts = EstimateOptions { rule: RegularisationRule::None, ..Default::default() };
//! let est = estimate(&input, &acc, &opts)?;
//! assert_eq!(est.matrix[(0, 1)], 0.25);
//! assert_eq!(est.clamped_eigenvalues, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod accumulator;
mod analysis;
mod error;
mod estimate;
mod full_average;
mod input;
mod moments;
mod packed;
mod precision;
mod psd;
mod select;
pub mod spectral;
mod structure;
mod synthetic;
mod threshold;

pub use accumulator::{Accumulator, FOLDS};
pub use analysis::{
    ErrorBars, MAX_NOISE_TO_SIGNAL, PrincipalComponent, PrincipalComponents, SignalVerdict,
    StandardErrorMethod, SumsOfSquares, TARGET_NOISE_TO_SIGNAL, VERDICT_Z, VerdictState,
    additive_noise_frobenius, error_bars, principal_components, signal_verdict,
};
pub use error::EstimateError;
pub use estimate::{
    CovarianceEstimate, EstimateOptions, MAX_PSD_FLOOR, average, estimate, validate_options,
};
pub use input::{EstimationInput, NoiseModel, Unbiasing};
pub use moments::{
    CORRELATION_VARIANCE_Z, MomentsEstimate, correlation, released_correlation,
    variance_above_noise,
};
pub use packed::{matrix_to_packed, packed_to_matrix};
pub use precision::{
    GlassoOptions, GlassoResult, LambdaCv, MAX_GLASSO_RHO, MAX_LAMBDA, PrecisionEstimate,
    PrecisionMethod, check_lambda, cross_validate_lambda, estimate_precision, lambda_grid,
    precision, validate_glasso,
};
pub use psd::{project_psd, symmetric_eigen};
pub use select::{
    AdaptiveThreshold, BulkShrinkage, CrossValidation, FactorModel, LdpNoiseThreshold,
    RegularisationRule, SpectralGuard, SpectralShrinkage, UniversalThreshold, log_grid,
};
pub use synthetic::synthetic_rows;
pub use threshold::{ThresholdKind, Thresholds, apply_threshold, entry_variances};
