//! The threshold operators applied to the averaged noisy second moment: hard or soft
//! thresholding with one λ or one per entry ([`apply_threshold`]), the diagonal
//! shrinkage toward the mean variance, the entry-adaptive λ_ij from per-entry
//! variances ([`entry_variances`], Cai & Liu 2011) and the noise-form λ
//! `c·σ_n√(log p)`.
//!
//! Which threshold is applied, and how it is chosen, is the business of the
//! `select` module; these are the operators it chooses among.
//!
//! # Units
//!
//! Accumulators are in grid units of the unit ball; every threshold here is in data
//! units (`× R²/2^k`), like the matrix it is applied to. `σ_n = R²σ/√n` is the noise sd
//! of one averaged entry.

mod adaptive;
mod apply;
mod noise;
#[cfg(test)]
mod tests;

pub use adaptive::entry_variances;
pub(crate) use adaptive::{adaptive_thresholds, entry_variances_of_sums, has_sum_squares};
pub use apply::{ThresholdKind, Thresholds, apply_threshold};
pub(crate) use apply::{shrink_diagonal, shrink_packed_diagonal};
pub(crate) use noise::noise_threshold;
