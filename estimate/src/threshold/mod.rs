//! Threshold rules for the averaged noisy second moment: fixed-form (seed 000's
//! universal rule, seed 001's LDP rule), entry-adaptive (Cai & Liu 2011) and K-fold
//! cross-validated (Bickel & Levina 2008), each with hard or soft thresholding.
//!
//! The cross-validation (the default rule) also scores a diagonal shrinkage, the
//! spectral estimators ([`SpectralCandidate`]) and, for collections that declare
//! ordered variables, two structural regularisers, banding and Toeplitz band averaging
//! ([`Structure`](crate::Structure)), against the thresholds on the same held-out
//! folds: it picks whichever predicts held-out users best, a structure or a spectral
//! estimate only when it beats the thresholds by one standard error, and a threshold
//! as the simplest one within one standard error of the best
//! (`estimate --unordered` / `unordered_variables` turns the structures off for one
//! estimate). Above `CrossValidation::refit_free_above_dim` the choice is made without
//! refits, by Stein's unbiased risk estimate on the full average (module `sure`).
//!
//! # Why none of this costs privacy
//!
//! Every report is already (ε, δ)-LDP when it leaves the device. Everything here is a
//! function of the aggregator's accumulators (fold sums, sums of squares and counts),
//! which are themselves functions of the privatised reports plus public parameters
//! (p, R, σ, the grid); none of it touches a raw `x`. By the post-processing property
//! of differential privacy, any such function — a threshold chosen from the data, a
//! per-entry variance, a cross-validation loss — is as private as the reports. The
//! fold assignment is by report id (random bytes chosen by the client), so it reveals
//! nothing either. Cross-validation splits users, not entries, and each user's noise is
//! independent, so a held-out fold is a genuine independent test set.
//!
//! # Units
//!
//! Accumulators are in grid units of the unit ball; every threshold here is in data
//! units (`× R²/2^k`), like the matrix it is applied to. `σ_n = R²σ/√n` is the noise sd
//! of one averaged entry.
//!
//! # Memory
//!
//! Cross-validation works on packed `d = p(p+1)/2` vectors: one training average, one
//! test average and the optional per-entry variances at a time, so beyond the K fold
//! sums it needs O(p²) memory and O(K·#candidates·p²) time.

mod adaptive;
mod apply;
mod candidates;
mod cv;
mod rules;
pub(crate) mod select;
mod sure;
#[cfg(test)]
mod tests;

pub use adaptive::entry_variances;
pub(crate) use adaptive::{adaptive_thresholds, has_sum_squares};
pub use apply::{ThresholdKind, Thresholds, apply_threshold};
pub(crate) use apply::{shrink_diagonal, shrink_packed_diagonal};
pub use candidates::{Candidate, CrossValidation, SpectralCandidate, SpectralGuard, log_grid};
pub(crate) use candidates::{candidate_kind, candidate_structure, candidate_thresholds};
pub use cv::{
    CvOutcome, OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z, StackedRelease, cross_validate,
    diagonal_spread_z, off_diagonal_signal_z, off_diagonal_top_z,
};
pub use rules::{
    AdaptiveThreshold, BulkShrinkage, FactorModel, Seed001Threshold, SpectralShrinkage,
    ThresholdRule, UniversalThreshold, noise_threshold, seed001_threshold, universal_threshold,
};
pub(crate) use select::{Resolved, resolve};
