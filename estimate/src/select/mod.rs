//! Choosing the release: the [`RegularisationRule`]s (fixed-form thresholds: Wang &
//! Xu's universal rule, the heavy-tailed LDP rule, Cai & Liu's entry-adaptive rule
//! (2011); the spectral estimators; and the K-fold cross-validation of Bickel & Levina
//! (2008), the default), and the machinery that resolves a rule on the full average
//! into what is applied to it.
//!
//! The cross-validation ([`CrossValidation`]) scores the thresholds (hard or soft), a
//! diagonal shrinkage, the spectral estimators and, for collections that declare
//! ordered variables, two structural regularisers, banding and Toeplitz band
//! averaging ([`Structure`](crate::Structure)), on the same held-out folds: it picks
//! whichever predicts held-out users best, a structure or a spectral estimate only
//! when it beats the thresholds by one standard error, and a threshold as the
//! simplest one within one standard error of the best (`estimate --unordered` /
//! `unordered_variables` turns the structures off for one estimate); with
//! off-diagonal signal it stacks the two families. Above
//! `CrossValidation::refit_free_above_dim` the choice is made without refits, by
//! Stein's unbiased risk estimate on the full average.
//!
//! Modules: `rules` (the rules and their parameters), `settings` (the
//! cross-validation's settings), `candidates` (what it chooses among), `folds` (one
//! fold's training and held-out averages), `cv` (the cross-validation itself),
//! `standard_error` (the one-standard-error rules), `stacking`, `signal` (the tests
//! on the full average for off-diagonal signal and differing variances), `sure` (the
//! refit-free selection) and `resolve` (a rule into what is applied). The operators
//! chosen among live in [`threshold`](crate::threshold), [`spectral`](crate::spectral)
//! and [`structure`](crate::structure).
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
//! # Memory
//!
//! Cross-validation works on packed `d = p(p+1)/2` vectors: one training average, one
//! test average and the optional per-entry variances at a time, so beyond the K fold
//! sums it needs O(p²) memory and O(K·#candidates·p²) time.

mod candidates;
mod cv;
mod folds;
mod guard;
mod resolve;
mod rules;
mod settings;
mod signal;
mod stacking;
mod standard_error;
mod sure;
#[cfg(test)]
pub(crate) mod tests;

pub(crate) use resolve::{Resolved, resolve};
pub use rules::{
    AdaptiveThreshold, BulkShrinkage, FactorModel, LdpNoiseThreshold, RegularisationRule,
    SpectralShrinkage, UniversalThreshold,
};
pub use settings::{CrossValidation, SpectralGuard, log_grid};
pub(crate) use signal::{
    OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z, off_diagonal_signal_z, off_diagonal_top_z,
};
