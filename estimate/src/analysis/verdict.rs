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
use nalgebra::DMatrix;

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

/// How many standard deviations wide each side of the signal's interval is: 3, so
/// that runs of one setting contradict each other (one *sufficient*, another
/// *insufficient*) only when one of them misses by 3 sds, about 0.1 % each side.
pub const VERDICT_Z: f64 = 3.0;

/// What the reports allow: see [`signal_verdict`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictState {
    /// The noise is below [`MAX_NOISE_TO_SIGNAL`] times the signal over the whole
    /// interval, or an off-diagonal structure stands out of the noise.
    Sufficient,
    /// The interval of the noise-to-signal ratio holds [`MAX_NOISE_TO_SIGNAL`]: the
    /// reports cannot tell which side of it the data are.
    AtTheEdge,
    /// The noise is above [`MAX_NOISE_TO_SIGNAL`] times the signal over the whole
    /// interval and no structure stands out, or the release is the zero matrix.
    Insufficient,
}

impl VerdictState {
    /// `sufficient`, `at the edge`, `insufficient`.
    pub fn name(self) -> &'static str {
        match self {
            VerdictState::Sufficient => "sufficient",
            VerdictState::AtTheEdge => "at the edge",
            VerdictState::Insufficient => "insufficient",
        }
    }
}

/// Whether an estimate can say more than a trivial one (see [`signal_verdict`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SignalVerdict {
    /// The verdict.
    pub state: VerdictState,
    /// `state == Sufficient`.
    pub sufficient: bool,
    /// `‖noise‖_F / ‖signal‖_F` of the raw average at the signal's point estimate;
    /// `None` when no signal is measurable at all (the point estimate is not positive).
    pub noise_to_signal: Option<f64>,
    /// The ratio at the upper end of the signal's interval (its smallest plausible
    /// value); `None` when no signal is measurable at all.
    pub noise_to_signal_low: Option<f64>,
    /// The ratio at the lower end of the signal's interval (its largest plausible
    /// value); `None` when that end is 0: unbounded.
    pub noise_to_signal_high: Option<f64>,
    /// The off-diagonal energy test's z (the selection's signal test).
    pub off_diagonal_signal_z: f64,
    /// The top off-diagonal eigenvalue's z on the Tracy–Widom scale.
    pub top_eigenvalue_z: f64,
    /// Reports that bring the point ratio to [`TARGET_NOISE_TO_SIGNAL`] (the noise's
    /// Frobenius norm falls as `1/√n`), the reports at hand when it is already there;
    /// `None` with `noise_to_signal`.
    pub reports_needed: Option<u64>,
    /// The same at the ratio's low end: the fewest reports that may do.
    pub reports_needed_low: Option<u64>,
    /// The same at the ratio's high end; `None` when unbounded.
    pub reports_needed_high: Option<u64>,
    /// The released matrix is the zero matrix.
    pub release_is_zero: bool,
    /// One line for people, starting with the state's name.
    pub summary: String,
}

/// The verdict on `acc`'s reports and on `released`, the matrix they released.
///
/// **The noise.** The raw average `Y = S + W` has error `W` (noise and sampling) whose
/// expected squared Frobenius norm `N²` is known: for a local collection
/// ([`SumsOfSquares::Private`]) the sum over entries (both triangles) of each entry's
/// measured variance across reports over n ([`entry_variances`](crate::entry_variances)),
/// plus for a mean-and-covariance collection the plug-in `μ̂μ̂ᵀ`'s noise; for a central
/// release the exact additive noise of the release ([`additive_noise_frobenius`]). The
/// measured variances carry a relative error of about `√(2/(n·d))` over `d` entries
/// (10⁻³ at n = 10⁵, d = 210): the noise is known, it is the signal that is uncertain.
///
/// **The signal, with its uncertainty.** Two estimates of `‖S‖²_F` bound it: the
/// unbiased `‖Y‖²_F − N²`, whose sd is `√(Σ w²(2v² + 4 s²v))` over entries (weight w
/// 1 on the diagonal, 2 off it; v the entry's noise variance; s² its signal, plugged
/// in as `max(y² − v, 0)`), and the trace: `S` is positive semi-definite (a second
/// moment or a covariance), so `tr(S)²/p ≤ ‖S‖²_F ≤ tr(S)²`, with `tr(Y)`'s sd
/// `√(Σ v_ii)` only `√p` times one entry's; and every user's clipped vector has norm
/// at most the clip radius R, so `tr(S) ≤ R²`. The interval of `‖S‖²_F` is the
/// intersection of `‖Y‖²_F − N² ± z·sd`, `[(tr − z·sd_tr)₊²/p, (tr + z·sd_tr)²]` and
/// `[0, R⁴]`, `z` = [`VERDICT_Z`]; the point estimate is `max(‖Y‖²_F − N², tr₊²/p)`.
/// The ratio's interval is `N` over the square roots of its ends. Where the noise
/// dominates, the first two are wide (the energy's sd is about `N²·√(2/d)` over `d`
/// entries) and the radius decides the low end: `N/R²`.
///
/// **The verdict.** *Sufficient* when the whole interval of the ratio is at most
/// [`MAX_NOISE_TO_SIGNAL`], or when the selection's two off-diagonal signal tests see
/// structure (energy z above 3, about 0.1 % under the null; top eigenvalue above 2 on
/// the Tracy–Widom scale, about 1 %); *insufficient* when the whole interval is above
/// it and neither test sees structure, or whatever the ratio when `released` is the
/// zero matrix (a release that says nothing is never sufficient); *at the edge*
/// otherwise. Runs of one setting then agree unless its interval holds the limit,
/// where they say so. The summary also says when the reports are sufficient for the
/// variances but show no correlation. `reports_needed*` follow the planner's law: the
/// noise's Frobenius norm falls as `1/√n`.
pub fn signal_verdict(
    input: &EstimationInput,
    acc: &Accumulator,
    squares: SumsOfSquares,
    released: &DMatrix<f64>,
) -> Result<SignalVerdict, EstimateError> {
    let full = FullAverage::new(input, acc)?;
    let p = input.dim();
    let n = acc.count.max(1);
    let packed = full.packed();
    let energy: f64 = triangle_pairs(p)
        .zip(packed)
        .map(|((i, j), v)| if i == j { v * v } else { 2.0 * v * v })
        .sum();
    // Each entry's weight (both triangles: 2 off the diagonal) and error variance.
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
    // The unbiased estimate of ‖S‖² and its sd (see the docs).
    let excess = energy - noise2;
    let excess_sd = variances
        .iter()
        .zip(packed)
        .map(|((w, v), y)| {
            let s2 = (y * y - v).max(0.0);
            w * w * (2.0 * v * v + 4.0 * s2 * v)
        })
        .sum::<f64>()
        .sqrt();
    // The trace and its sd.
    let diagonal_entries = || triangle_pairs(p).zip(variances.iter()).zip(packed);
    let trace: f64 = diagonal_entries()
        .filter(|(((i, j), _), _)| i == j)
        .map(|(_, y)| *y)
        .sum();
    let trace_sd = (diagonal_entries()
        .filter(|(((i, j), _), _)| i == j)
        .map(|((_, (_, v)), _)| *v)
        .sum::<f64>()
        + pf * diagonal)
        .sqrt();
    let z = VERDICT_Z;
    let signal_low = (excess - z * excess_sd)
        .max((trace - z * trace_sd).max(0.0).powi(2) / pf.max(1.0))
        .max(0.0);
    // Every user's clipped norm is at most R, so tr(S) ≤ R² and ‖S‖²_F ≤ R⁴: a bound
    // no noise can loosen.
    let r2 = input.clip_radius() * input.clip_radius();
    let signal_high = (excess + z * excess_sd)
        .min((trace + z * trace_sd).max(0.0).powi(2))
        .min(r2 * r2)
        .max(signal_low);
    let signal_point = excess.max(trace.max(0.0).powi(2) / pf.max(1.0));
    let ratio = |signal2: f64| (signal2 > 0.0).then(|| (noise2 / signal2).sqrt());
    let noise_to_signal = ratio(signal_point);
    let noise_to_signal_low = ratio(signal_high);
    let noise_to_signal_high = ratio(signal_low);

    let off_diagonal_signal_z = off_diagonal_signal_z(p, packed, full.off_diagonal_test_sd());
    let top_eigenvalue_z = off_diagonal_top_z(p, packed, full.top_test_sd());
    let shows_structure =
        off_diagonal_signal_z > OFF_DIAGONAL_SIGNAL_Z || top_eigenvalue_z > OFF_DIAGONAL_TOP_Z;
    let release_is_zero = released.iter().all(|v| *v == 0.0);
    let state = if release_is_zero {
        VerdictState::Insufficient
    } else if shows_structure || noise_to_signal_high.is_some_and(|r| r <= MAX_NOISE_TO_SIGNAL) {
        VerdictState::Sufficient
    } else if noise_to_signal_low.is_none_or(|r| r > MAX_NOISE_TO_SIGNAL) {
        VerdictState::Insufficient
    } else {
        VerdictState::AtTheEdge
    };
    let needed = |r: f64| -> u64 {
        let ratio = r / TARGET_NOISE_TO_SIGNAL;
        if ratio <= 1.0 {
            return n;
        }
        let needed = (nf * ratio * ratio).ceil();
        if needed >= u64::MAX as f64 {
            u64::MAX
        } else {
            needed as u64
        }
    };
    let reports_needed = noise_to_signal.map(needed);
    let reports_needed_low = noise_to_signal_low.map(needed);
    let reports_needed_high = noise_to_signal_high.map(needed);
    let tests = format!("z {off_diagonal_signal_z:.1}, top {top_eigenvalue_z:.1}");
    let interval = match (noise_to_signal_low, noise_to_signal_high) {
        (Some(lo), Some(hi)) => format!("noise/signal {} to {}", short(lo), short(hi)),
        (Some(lo), None) => format!("noise/signal at least {}", short(lo)),
        _ => "no signal measurable".to_string(),
    };
    let to_target = match (reports_needed_low, reports_needed_high) {
        (Some(lo), Some(hi)) if lo == hi => format!("about {lo} reports (have {n})"),
        (Some(lo), Some(hi)) => format!("{lo} to {hi} reports (have {n})"),
        (Some(lo), None) => format!("at least {lo} reports (have {n})"),
        _ => format!("an unknown number of reports (have {n})"),
    };
    let target = format!("bring the noise to {TARGET_NOISE_TO_SIGNAL}× the signal");
    let summary = match state {
        VerdictState::Insufficient if release_is_zero => format!(
            "insufficient: the release is the zero matrix: nothing stood out of the noise ({interval}; {tests}); {to_target} {target}"
        ),
        VerdictState::Sufficient if shows_structure => {
            format!("sufficient: correlations stand out of the noise ({tests}); {interval}")
        }
        VerdictState::Sufficient => format!(
            "sufficient for the variances: {interval}, but no correlation stands out of the noise ({tests}): read the off-diagonal entries as near 0; {to_target} {target}"
        ),
        VerdictState::AtTheEdge => format!(
            "at the edge: {interval}, either side of {MAX_NOISE_TO_SIGNAL} (the reports cannot tell), and no correlation stands out ({tests}): read the release as uncertain; {to_target} {target}"
        ),
        VerdictState::Insufficient => format!(
            "insufficient: {interval}, above {MAX_NOISE_TO_SIGNAL}, and no correlation stands out of it ({tests}); the released matrix is near a trivial one; {to_target} {target}"
        ),
    };
    Ok(SignalVerdict {
        state,
        sufficient: state == VerdictState::Sufficient,
        noise_to_signal,
        noise_to_signal_low,
        noise_to_signal_high,
        off_diagonal_signal_z,
        top_eigenvalue_z,
        reports_needed,
        reports_needed_low,
        reports_needed_high,
        release_is_zero,
        summary,
    })
}

/// Three significant digits, plain between 10⁻² and 10⁵.
fn short(x: f64) -> String {
    if x == 0.0 {
        "0".to_string()
    } else if (1e-2..1e5).contains(&x.abs()) {
        let digits = (2 - x.abs().log10().floor() as i32).clamp(0, 4) as usize;
        format!("{x:.digits$}")
    } else {
        format!("{x:.2e}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::select::tests::{collection, simulate_with_truth};
    use ldpcov_privacy::Collection;

    /// The verdicts of `runs` seeds of one setting: p = 10 variables, x ~ N(0, I),
    /// clip radius 3 (√p: a typical norm, so about half the users are clipped), the
    /// Gaussian report at `epsilon`, `n` users; with the true ratio ‖noise‖_F/‖S_n‖_F,
    /// S_n the users' own clipped second moment and the noise's expected Frobenius
    /// norm from the mechanism's closed form ([`additive_noise_frobenius`]).
    fn runs(epsilon: f64, n: usize, runs: u64) -> (f64, Vec<SignalVerdict>) {
        let c: Collection = collection(10, epsilon, 3.0);
        let input = EstimationInput::from_collection(&c);
        let identity = DMatrix::<f64>::identity(10, 10);
        let mut truth_ratio = 0.0;
        let verdicts = (0..runs)
            .map(|seed| {
                let (acc, truth) = simulate_with_truth(&c, &identity, n, 100 + seed);
                truth_ratio = additive_noise_frobenius(&input, n as u64) / truth.norm();
                // A release that is not the zero matrix (the raw average's diagonal).
                let released = DMatrix::from_diagonal(&truth.diagonal());
                signal_verdict(&input, &acc, SumsOfSquares::Private, &released).unwrap()
            })
            .collect();
        (truth_ratio, verdicts)
    }

    fn states(verdicts: &[SignalVerdict]) -> Vec<VerdictState> {
        verdicts.iter().map(|v| v.state).collect()
    }

    /// Ten runs of a clear setting (the noise about the signal's size) agree, and so do
    /// ten of a hopeless one (the noise 100 times it); ten at the limit (10) say so.
    /// The bounds: the signal's interval is ±3 sds, so a run contradicts the truth's
    /// side with probability about 0.1 %; at the limit the interval (whose relative
    /// width at p = 10, d = 55 entries is about 3·√(2/55)·ratio² ≈ 60 times the signal)
    /// holds 10 by a wide margin.
    #[test]
    fn runs_of_one_setting_agree_and_the_edge_says_so() {
        let (clear, verdicts) = runs(4.0, 20_000, 10);
        assert!(clear < 2.0, "the clear setting's true ratio {clear}");
        assert!(
            verdicts.iter().all(|v| v.state == VerdictState::Sufficient),
            "{clear}: {:?}",
            states(&verdicts)
        );
        for v in &verdicts {
            let (lo, hi) = (
                v.noise_to_signal_low.unwrap(),
                v.noise_to_signal_high.unwrap(),
            );
            assert!(lo <= clear && clear <= hi, "{clear} outside [{lo}, {hi}]");
            assert!(v.summary.starts_with("sufficient"), "{}", v.summary);
        }

        let (edge, verdicts) = runs(1.0, 500, 10);
        assert!(
            (5.0..20.0).contains(&edge),
            "the edge setting's true ratio {edge}"
        );
        assert!(
            verdicts.iter().all(|v| v.state == VerdictState::AtTheEdge),
            "{edge}: {:?}",
            states(&verdicts)
        );
        assert!(
            verdicts[0].summary.starts_with("at the edge"),
            "{}",
            verdicts[0].summary
        );

        let (hopeless, verdicts) = runs(0.1, 200, 10);
        assert!(
            hopeless > 100.0,
            "the hopeless setting's true ratio {hopeless}"
        );
        assert!(
            verdicts
                .iter()
                .all(|v| v.state == VerdictState::Insufficient),
            "{hopeless}: {:?}",
            states(&verdicts)
        );
    }

    /// A release of the zero matrix is never sufficient, however clear the reports.
    #[test]
    fn never_sufficient_for_an_all_zero_release() {
        let c: Collection = collection(10, 4.0, 3.0);
        let input = EstimationInput::from_collection(&c);
        let (acc, truth) = simulate_with_truth(&c, &DMatrix::identity(10, 10), 20_000, 7);
        let clear = signal_verdict(&input, &acc, SumsOfSquares::Private, &truth).unwrap();
        assert_eq!(clear.state, VerdictState::Sufficient, "{}", clear.summary);
        let zero = DMatrix::zeros(10, 10);
        let v = signal_verdict(&input, &acc, SumsOfSquares::Private, &zero).unwrap();
        assert_eq!(v.state, VerdictState::Insufficient);
        assert!(!v.sufficient && v.release_is_zero);
        assert!(
            v.summary
                .starts_with("insufficient: the release is the zero matrix"),
            "{}",
            v.summary
        );
    }
}
