//! Whether the reports carry enough signal for an estimate to say more than a trivial
//! one, and how many would.

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::full_average::FullAverage;
use crate::input::EstimationInput;
use crate::moments::unit_blocks;
use crate::select::{
    OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z, off_diagonal_signal_z, off_diagonal_top_z,
};
use ldpcov_privacy::layout::{triangle_index, triangle_pairs};

/// The noise-to-signal ratio [`SignalVerdict::reports_needed`] aims at: the raw
/// average's noise half the signal's Frobenius norm.
pub const TARGET_NOISE_TO_SIGNAL: f64 = 0.5;

/// The largest [`SignalVerdict::noise_to_signal`] reported (no signal left after the
/// noise's share: the ratio would be infinite).
const MAX_NOISE_TO_SIGNAL: f64 = 1e9;

/// Whether an estimate can say more than a trivial one (see [`signal_verdict`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalVerdict {
    /// False when the raw average's noise exceeds its signal and no off-diagonal
    /// structure stands out of the noise.
    pub sufficient: bool,
    /// `‖noise‖_F / ‖signal‖_F` of the raw average.
    pub noise_to_signal: f64,
    /// The off-diagonal energy test's z (the selection's signal test).
    pub off_diagonal_signal_z: f64,
    /// The top off-diagonal eigenvalue's z on the Tracy–Widom scale.
    pub top_eigenvalue_z: f64,
    /// Reports that bring `noise_to_signal` to [`TARGET_NOISE_TO_SIGNAL`] (the
    /// noise's Frobenius norm falls as `1/√n`); the reports at hand when it is already
    /// there.
    pub reports_needed: u64,
    /// One line for people.
    pub summary: String,
}

/// The verdict on `acc`'s reports, whose raw average has expected noise Frobenius norm
/// `noise_frobenius` (data units, both triangles: the planner's
/// `ldpcov_privacy::plan::raw_average_error` for a local collection,
/// [`additive_noise_frobenius`] for a central release).
///
/// The signal's Frobenius norm is estimated without bias in its square from the raw
/// average `Y = S + W`: `E‖Y‖²_F = ‖S‖²_F + E‖W‖²_F`. Above a ratio of 1 the raw
/// average is expected to be farther from the truth than the zero matrix; the
/// regularised estimate can still recover a structure that stands out of the noise,
/// which the selection's two off-diagonal signal tests detect (energy z above 3, about
/// 0.1 % under the null; top eigenvalue above 2 on the Tracy–Widom scale, about 1 %).
/// So the verdict is *insufficient* when the ratio is above 1 and neither test sees
/// off-diagonal signal: the release is then little more than a diagonal, and its
/// correlations are not to be read.
pub fn signal_verdict(
    input: &EstimationInput,
    acc: &Accumulator,
    noise_frobenius: f64,
) -> Result<SignalVerdict, EstimateError> {
    let full = FullAverage::new(input, acc)?;
    let p = input.dim();
    let n = acc.count.max(1);
    let energy: f64 = triangle_pairs(p)
        .zip(full.packed())
        .map(|((i, j), v)| if i == j { v * v } else { 2.0 * v * v })
        .sum();
    let noise2 = noise_frobenius * noise_frobenius;
    let signal2 = energy - noise2;
    let noise_to_signal = if signal2 > 0.0 {
        (noise2 / signal2).sqrt().min(MAX_NOISE_TO_SIGNAL)
    } else {
        MAX_NOISE_TO_SIGNAL
    };
    let off_diagonal_signal_z =
        off_diagonal_signal_z(p, full.packed(), full.off_diagonal_test_sd());
    let top_eigenvalue_z = off_diagonal_top_z(p, full.packed(), full.top_test_sd());
    let shows_structure =
        off_diagonal_signal_z > OFF_DIAGONAL_SIGNAL_Z || top_eigenvalue_z > OFF_DIAGONAL_TOP_Z;
    let sufficient = noise_to_signal <= 1.0 || shows_structure;
    let ratio = noise_to_signal / TARGET_NOISE_TO_SIGNAL;
    let reports_needed = if ratio <= 1.0 {
        n
    } else {
        let needed = (n as f64 * ratio * ratio).ceil();
        if needed >= u64::MAX as f64 {
            u64::MAX
        } else {
            needed as u64
        }
    };
    let summary = if sufficient {
        format!(
            "sufficient: noise/signal {noise_to_signal:.2}, off-diagonal signal z {off_diagonal_signal_z:.1}, top eigenvalue z {top_eigenvalue_z:.1}"
        )
    } else {
        format!(
            "insufficient: the noise is {noise_to_signal:.3}× the signal and no correlation stands out of it (z {off_diagonal_signal_z:.1}, top {top_eigenvalue_z:.1}); the released matrix is near a diagonal; about {reports_needed} reports (have {n}) bring the noise to {TARGET_NOISE_TO_SIGNAL}× the signal"
        )
    };
    Ok(SignalVerdict {
        sufficient,
        noise_to_signal,
        off_diagonal_signal_z,
        top_eigenvalue_z,
        reports_needed,
        summary,
    })
}

/// The expected Frobenius norm (both triangles) of the noise of the raw average of
/// `n` reports under `input`'s noise model, for noise independent of the signal (a
/// central release; a Gaussian report): `√(p·σ_d² + p(p − 1)·σ_o²)` with the diagonal and
/// off-diagonal entry sds at n. For the rank-one report, whose noise depends on the
/// users' norms, the planner's `ldpcov_privacy::plan::raw_average_error` is the exact
/// form; this is its value at `u = 0`.
pub fn additive_noise_frobenius(input: &EstimationInput, n: u64) -> f64 {
    let p = input.dim() as f64;
    let d = input.diagonal_entry_noise_sd(n);
    let o = input.mean_entry_noise_sd(n);
    (p * d * d + p * (p - 1.0) * o * o).sqrt()
}

/// The users' mean squared norm `E‖u‖²` in unit-ball units estimated from the raw
/// second moment's trace, clamped to `[0, 1]`: what the planner's rank-one noise reads.
pub fn mean_square_norm(input: &EstimationInput, acc: &Accumulator) -> f64 {
    let sums = acc.sums();
    if sums.len() != input.entries() {
        return 1.0;
    }
    let p = input.dim();
    let (_, second) = unit_blocks(input, &sums, acc.count.max(1));
    let trace: f64 = (0..p).map(|i| second[triangle_index(p, i, i)]).sum();
    if trace.is_finite() {
        trace.clamp(0.0, 1.0)
    } else {
        1.0
    }
}
