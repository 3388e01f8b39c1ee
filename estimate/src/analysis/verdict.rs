//! Whether the reports carry enough signal for an estimate to say more than a trivial
//! one, and how many would.

use crate::accumulator::Accumulator;
use crate::analysis::SumsOfSquares;
use crate::error::EstimateError;
use crate::full_average::FullAverage;
use crate::input::EstimationInput;
use crate::moments::mean_product_noise_variances;
use crate::select::{
    OFF_DIAGONAL_SIGNAL_Z, OFF_DIAGONAL_TOP_Z, off_diagonal_signal_z, off_diagonal_top_z,
};
use crate::threshold::entry_variances_of_sums;
use ldpcov_privacy::layout::triangle_pairs;

/// The noise-to-signal ratio [`SignalVerdict::reports_needed`] aims at: the raw
/// average's noise half the signal's Frobenius norm.
pub const TARGET_NOISE_TO_SIGNAL: f64 = 0.5;

/// The largest noise-to-signal ratio of the raw average at which the reports are
/// called sufficient without a detected off-diagonal structure.
///
/// Where it sits: on the canonical grid (p = 20, n = 10⁵–10⁶, ε = 0.5–2, Gaussian
/// reports) the raw average's ratio is 0.3–3.8, and the regularised default releases
/// relative errors of 0.3–0.74, below the zero matrix's 1 and a diagonal's 0.71
/// (docs/BENCHMARKS.md); at p = 1 000 with 2·10⁴ users (ratios of 30 and more) the
/// per-variable noise is as large but spread over 50 times more entries, and no
/// release beat the trivial ones. A ratio of 10 lies in the gap, a factor of 3 from
/// either side; the noise falls as `1/√n`, so it is a factor of 10 in users from the
/// worst canonical cell.
pub const MAX_NOISE_TO_SIGNAL: f64 = 10.0;

/// The largest [`SignalVerdict::noise_to_signal`] reported (no signal left after the
/// noise's share: the ratio would be infinite).
const REPORTED_NOISE_TO_SIGNAL_CAP: f64 = 1e9;

/// Whether an estimate can say more than a trivial one (see [`signal_verdict`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalVerdict {
    /// False when the raw average's noise exceeds [`MAX_NOISE_TO_SIGNAL`] times its
    /// signal and no off-diagonal structure stands out of the noise.
    pub sufficient: bool,
    /// `‖noise‖_F / ‖signal‖_F` of the raw average.
    pub noise_to_signal: f64,
    /// The off-diagonal energy test's z (the selection's signal test).
    pub off_diagonal_signal_z: f64,
    /// The top off-diagonal eigenvalue's z on the Tracy–Widom scale.
    pub top_eigenvalue_z: f64,
    /// Reports that bring `noise_to_signal` to [`TARGET_NOISE_TO_SIGNAL`] (the
    /// noise's Frobenius norm falls as `1/√n`); the reports at hand when it is already
    /// there; 0 when no signal is measurable at all (no number can be named).
    pub reports_needed: u64,
    /// One line for people.
    pub summary: String,
}

/// The verdict on `acc`'s reports.
///
/// The raw average `Y = S + W` has error `W` (noise and sampling) whose expected
/// squared Frobenius norm `N²` is measured, not modelled, where it may be: for a local
/// collection ([`SumsOfSquares::Private`]) it is the sum over entries (both
/// triangles) of each entry's variance across reports over n
/// ([`entry_variances`](crate::entry_variances)), plus for a mean-and-covariance
/// collection the plug-in `μ̂μ̂ᵀ`'s noise; for a central release the exact additive
/// noise of the release ([`additive_noise_frobenius`]). A model would not do: where the
/// noise is 20 times the signal, a 1 % error in the noise's sd moves the signal's
/// estimate by 8 times its size, and the planner's closed forms are exact to 1–3 %.
/// The measured variances carry a relative error of about `√(2/(n·d))` over `d`
/// entries instead. The signal's squared Frobenius norm is estimated by `‖Y‖²_F − N²`,
/// unbiased, where that stands out of the noise energy's own χ² fluctuation (more than
/// 3 of its sd, about `N²·√(2/d)`: below that the difference is noise, and a signal
/// whose ratio to the noise is below about `(d/2)^(−1/4)` (1/3.2 at p = 20) cannot
/// show); else by `tr(Y)²/p`, the Cauchy–Schwarz lower bound `‖S‖²_F ≥ tr(S)²/p`
/// (equal for a scaled identity), one pooled number whose noise is only `√p` times an
/// entry's, so that it still sees the variances' common scale.
///
/// Above a ratio of 1 the raw average is expected to be farther from the truth than
/// the zero matrix; the regularised estimate can still recover a structure that stands
/// out of the noise, which the selection's two off-diagonal signal tests detect (energy
/// z above 3, about 0.1 % under the null; top eigenvalue above 2 on the Tracy–Widom
/// scale, about 1 %). The verdict is *insufficient* when the ratio is above
/// [`MAX_NOISE_TO_SIGNAL`] and neither test sees off-diagonal signal: no release then
/// beats the trivial ones. The summary also says when the reports are sufficient for
/// the variances but show no correlation. `reports_needed` follows the planner's law:
/// the noise's Frobenius norm falls as `1/√n`.
pub fn signal_verdict(
    input: &EstimationInput,
    acc: &Accumulator,
    squares: SumsOfSquares,
) -> Result<SignalVerdict, EstimateError> {
    let full = FullAverage::new(input, acc)?;
    let p = input.dim();
    let n = acc.count.max(1);
    let energy: f64 = triangle_pairs(p)
        .zip(full.packed())
        .map(|((i, j), v)| if i == j { v * v } else { 2.0 * v * v })
        .sum();
    // Each entry's error variance, both triangles weighted (2 off the diagonal): their
    // sum is N², and the noise energy's sd under Gaussian noise is
    // √(Σ w²·2·v²) (w the weight, v the variance).
    let nf = n as f64;
    let variances: Vec<(f64, f64)> = match squares {
        SumsOfSquares::Private => entry_variances_of_sums(input, acc, full.sums())
            .iter()
            .zip(triangle_pairs(p))
            .map(|(v, (i, j))| (if i == j { 1.0 } else { 2.0 }, v / nf))
            .collect(),
        SumsOfSquares::NotPrivate => {
            let (d, o) = (
                input.diagonal_entry_noise_sd(n),
                input.mean_entry_noise_sd(n),
            );
            triangle_pairs(p)
                .map(|(i, j)| if i == j { (1.0, d * d) } else { (2.0, o * o) })
                .collect()
        }
    };
    let (off, diagonal) = match squares {
        SumsOfSquares::Private => mean_product_noise_variances(input, full.sums(), n),
        SumsOfSquares::NotPrivate => (0.0, 0.0),
    };
    let pf = p as f64;
    let noise2 =
        variances.iter().map(|(w, v)| w * v).sum::<f64>() + pf * (pf - 1.0) * off + pf * diagonal;
    let energy_sd = variances
        .iter()
        .map(|(w, v)| 2.0 * (w * v).powi(2))
        .sum::<f64>()
        .sqrt();
    // The unbiased estimate of ‖S‖² where it stands out of the noise energy's
    // fluctuation (3 sd), else the Cauchy–Schwarz bound tr(S)²/p: see the docs.
    let trace: f64 = (0..p)
        .map(|i| full.packed()[ldpcov_privacy::layout::triangle_index(p, i, i)])
        .sum();
    let excess = energy - noise2;
    let pooled = trace.max(0.0).powi(2) / pf.max(1.0);
    let signal2 = if excess > 3.0 * energy_sd {
        excess.max(pooled)
    } else {
        pooled
    };
    let noise_to_signal = if signal2 > 0.0 {
        (noise2 / signal2).sqrt().min(REPORTED_NOISE_TO_SIGNAL_CAP)
    } else {
        REPORTED_NOISE_TO_SIGNAL_CAP
    };
    let off_diagonal_signal_z =
        off_diagonal_signal_z(p, full.packed(), full.off_diagonal_test_sd());
    let top_eigenvalue_z = off_diagonal_top_z(p, full.packed(), full.top_test_sd());
    let shows_structure =
        off_diagonal_signal_z > OFF_DIAGONAL_SIGNAL_Z || top_eigenvalue_z > OFF_DIAGONAL_TOP_Z;
    let sufficient = noise_to_signal <= MAX_NOISE_TO_SIGNAL || shows_structure;
    let ratio = noise_to_signal / TARGET_NOISE_TO_SIGNAL;
    let reports_needed = if signal2 <= 0.0 {
        // No signal measurable at all: no number of reports can be named.
        0
    } else if ratio <= 1.0 {
        n
    } else {
        let needed = (n as f64 * ratio * ratio).ceil();
        if needed >= u64::MAX as f64 {
            u64::MAX
        } else {
            needed as u64
        }
    };
    let summary = if shows_structure {
        format!(
            "sufficient: noise/signal {noise_to_signal:.2}; correlations stand out of the noise (z {off_diagonal_signal_z:.1}, top {top_eigenvalue_z:.1})"
        )
    } else if sufficient {
        format!(
            "sufficient for the variances: noise/signal {noise_to_signal:.2}, but no correlation stands out of the noise (z {off_diagonal_signal_z:.1}, top {top_eigenvalue_z:.1}): read the off-diagonal entries as near 0; about {reports_needed} reports (have {n}) bring the noise to {TARGET_NOISE_TO_SIGNAL}× the signal"
        )
    } else if signal2 <= 0.0 {
        format!(
            "insufficient: no signal stands out of the noise at all (z {off_diagonal_signal_z:.1}, top {top_eigenvalue_z:.1}, variances' trace ≤ 0); the released matrix is not to be read"
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
