//! What an analyst reads beside the released matrix: error bars of the raw average
//! ([`error_bars`]), a verdict on whether the reports carry enough signal
//! ([`signal_verdict`]), and principal components ([`principal_components`]).
//!
//! Like everything in this crate these are functions of the accumulators and of the
//! released matrix, so they cost no privacy (post-processing). One rule is kept by
//! hand: a central collection's accumulators hold the users' *exact* sums and sums of
//! squares, which are not private; for it these functions are given the noisy release
//! (whose accumulator carries no sums of squares) and [`SumsOfSquares::NotPrivate`],
//! and never read a square.

mod components;
mod error_bars;
mod verdict;

pub use components::{PrincipalComponent, PrincipalComponents, principal_components};
pub use error_bars::{ErrorBars, StandardErrorMethod, SumsOfSquares, error_bars};
pub use verdict::{
    MAX_NOISE_TO_SIGNAL, SignalVerdict, TARGET_NOISE_TO_SIGNAL, VERDICT_Z, VerdictState,
    additive_noise_frobenius, signal_verdict,
};
