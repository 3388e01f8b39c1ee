//! The threshold of the noise form, `c·σ_n·√(log p)`: a multiple of the noise sd of
//! one averaged entry, the common term of the fixed rules and the cross-validation's
//! noise candidates.

use crate::input::EstimationInput;

/// `c·σ_n·√(log p)` for `σ_n` the averaged-entry noise sd at n reports (data units).
pub(crate) fn noise_threshold(input: &EstimationInput, n: u64, c: f64) -> f64 {
    c * input.mean_entry_noise_sd(n.max(1)) * (input.dim() as f64).ln().sqrt()
}
