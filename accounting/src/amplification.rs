//! Amplification by shuffling: the central (ε, δ) of a shuffled batch of pure
//! ε0-LDP reports, by the bound of Feldman, McMillan & Talwar, "Hiding Among the
//! Clones: A Simple and Nearly Optimal Analysis of Privacy Amplification by
//! Shuffling" (FOCS 2021, arXiv:2012.12803).
//!
//! **The bound.** Let `n` users each send one report of an ε0-DP local randomizer, and
//! let the aggregator see only the uniformly shuffled multiset of the `n` reports. The
//! paper's Theorem 3.2 reduces the privacy of the shuffled output to that of a pair of
//! distributions on `{0, …, c + 1}` mixed over the number `c` of *clones* (the other
//! users whose report looks like one of the two differing users' reports):
//!
//! ```text
//! C ~ Bin(n − 1, e^−ε0),   A ~ Bin(C, 1/2),   α = e^ε0 / (1 + e^ε0),
//! P_c = A + 1 with probability α, A otherwise;   Q_c = A with probability α, A + 1 otherwise,
//! δ(ε) = Σ_c Pr[C = c] · D_{e^ε}(P_c ‖ Q_c),   D_{e^ε}(P ‖ Q) = Σ_k max(0, P(k) − e^ε·Q(k)),
//! ```
//!
//! and the shuffled output is (ε, δ(ε))-DP for every ε ≥ 0. (`C` is recoverable from
//! `P_c`'s pair `(A + Δ, C − A + 1 − Δ)`, so the hockey-stick divergence of the mixture
//! is the mixture of the divergences; `Q_c` is `P_c` mirrored, `k ↦ c + 1 − k`, so the
//! divergence is symmetric.) This is the bound the authors' numerical method computes
//! with the general clone probability `e^−ε0`; δ(ε) = 0 for ε ≥ ε0, and ε for a target
//! δ is the smallest ε with δ(ε) ≤ δ ([`fmt21_epsilon`]).
//!
//! **The computation.** `P_c(k)/Q_c(k)` increases with `k`, so the divergence is
//! `Pr[P_c ≥ m] − e^ε·Pr[Q_c ≥ m]` for the first `k = m` where the ratio exceeds `e^ε`
//! (`m = ⌊θ(c + 1)⌋ + 1` for a fixed θ ∈ [1/2, 1)), which needs the tail `Pr[A ≥ m]`
//! of `Bin(c, 1/2)`. Walking `c` upwards, `m` grows by 0 or 1 and the tail follows by
//! an exact identity (`Pr[Bin(c+1, ½) ≥ m] = Pr[Bin(c, ½) ≥ m] + ½·Pr[Bin(c, ½) = m − 1]`),
//! so each `c` costs O(1) binomial probabilities, computed by Loader's saddle-point
//! form (accurate to a few ulps for any `n`, where the `ln Γ` difference loses
//! `log10(n)` digits). Only the `c` whose probability mass matters are summed: the mass
//! left out below the window (bounded by the Chernoff bound, at most 10⁻³⁰) is added to
//! δ at the largest divergence any `c` has, and above the window each left-out `c`
//! has at most the divergence of the last one summed (the divergence decreases in `c`:
//! `A` at `c + 1` is `A` at `c` plus an independent coin, a post-processing). So the
//! result is an upper bound on δ(ε); a bound on its floating-point error (tracked along
//! the recurrence, which is re-summed directly when that bound grows) is added too.
//! The cost grows as `√n`: [`fmt21_epsilon`] takes 2–55 ms at n = 10⁶ (the most
//! for ε0 ≤ 1, whose clone counts spread widest) and 20–430 ms at n = 10⁸.
//!
//! δ is resolved down to about 10⁻³⁰ (the left-out mass added); below that the value is
//! that bound, not δ, so a target δ under 10⁻²⁵ gets a conservative ε.
//!
//! [`analytic_epsilon`] is the paper's closed form (Theorem 3.1), looser and valid only
//! for `ε0 ≤ ln(n / (16·ln(2/δ)))`.
//!
//! ```
//! use ldpcov_accounting::amplification::{analytic_epsilon, fmt21_delta, fmt21_epsilon};
//!
//! // One million users reporting at ε0 = 8 through a shuffler: central ε ≈ 0.44 at δ = 10⁻⁶.
//! let eps = fmt21_epsilon(8.0, 1_000_000, 1e-6)?;
//! assert!(eps > 0.44 && eps < 0.45);
//! // The returned ε is never optimistic: its δ is within the target.
//! assert!(fmt21_delta(8.0, 1_000_000, eps) <= 1e-6);
//! // The closed form applies only for ε0 ≤ ln(n / (16·ln(2/δ))) = 8.37 here, and is
//! // looser where it does.
//! assert_eq!(analytic_epsilon(9.0, 1_000_000, 1e-6), None);
//! let closed = analytic_epsilon(8.0, 1_000_000, 1e-6).unwrap();
//! assert!(closed > 1.0 && eps < closed);
//! # Ok::<(), ldpcov_accounting::amplification::AmplificationError>(())
//! ```

pub use crate::clones::{AmplificationError, MAX_AMPLIFIED_LOCAL_EPSILON, MAX_BATCH_SIZE};
use crate::clones::{CloneLaw, NEGLECTED_FRACTION_OF_TARGET, NEGLECTED_MASS, delta_with_law};

/// Width of the final bracket of [`fmt21_epsilon`]'s bisection: the returned ε is at
/// most this much above the smallest ε with δ(ε) ≤ δ (and never below it).
pub const EPSILON_TOLERANCE: f64 = 1e-6;

fn check(eps0: f64, n: u64) -> Result<(), AmplificationError> {
    if !(eps0.is_finite() && eps0 > 0.0) {
        return Err(AmplificationError::LocalEpsilon(eps0));
    }
    if n < 2 {
        return Err(AmplificationError::BatchSize(n));
    }
    Ok(())
}

fn check_delta(delta: f64) -> Result<(), AmplificationError> {
    if !(delta > 0.0 && delta < 1.0) {
        return Err(AmplificationError::Delta(delta));
    }
    Ok(())
}

/// The numerical δ(ε) of `n` shuffled reports of a pure `eps0`-LDP randomizer: the
/// shuffled batch is (ε, δ)-DP against whoever sees only the shuffled batch (see the
/// module docs for the bound and how it is summed). An upper bound on the paper's
/// δ(ε), 0 for `eps ≥ eps0`, non-increasing in `n` and in `eps`.
///
/// `n = 1` is allowed here (no clones: the randomizer's own worst case,
/// `(e^ε0 − e^ε)/(1 + e^ε0)`); `n` above [`MAX_BATCH_SIZE`] is computed as
/// [`MAX_BATCH_SIZE`]. Outside the domain (`eps0` not positive and finite, `n = 0`,
/// `eps` negative or NaN) and for `eps0` above [`MAX_AMPLIFIED_LOCAL_EPSILON`] it returns
/// the trivial bound 1 (for `eps < eps0`).
pub fn fmt21_delta(eps0: f64, n: u64, eps: f64) -> f64 {
    delta_upper_bound(eps0, n, eps, NEGLECTED_MASS)
}

/// [`fmt21_delta`] with `neglected_mass` of the clone count left out on each side.
fn delta_upper_bound(eps0: f64, n: u64, eps: f64, neglected_mass: f64) -> f64 {
    if !(eps0.is_finite() && eps0 > 0.0) || n == 0 || eps.is_nan() || eps < 0.0 {
        return 1.0;
    }
    if eps >= eps0 {
        return 0.0;
    }
    if eps0 > MAX_AMPLIFIED_LOCAL_EPSILON {
        return 1.0;
    }
    delta_with_law(
        eps0,
        eps,
        &mut clone_law(eps0, n.min(MAX_BATCH_SIZE), neglected_mass),
    )
}

/// The central ε of `n` shuffled reports of a pure `eps0`-LDP randomizer at `delta`:
/// the smallest ε with [`fmt21_delta`]`(eps0, n, ε) ≤ delta`, found by bisection on
/// `[0, eps0]` down to a bracket of [`EPSILON_TOLERANCE`] and returned at the bracket's
/// upper end (so its δ was checked to be within `delta`: never optimistic). Never above
/// `eps0`: shuffling cannot weaken the local guarantee.
///
/// The bisection's points depend on `eps0` only, so the result is exactly monotone in
/// `n` and `delta` (non-increasing).
pub fn fmt21_epsilon(eps0: f64, n: u64, delta: f64) -> Result<f64, AmplificationError> {
    check(eps0, n)?;
    check_delta(delta)?;
    let neglected = (NEGLECTED_FRACTION_OF_TARGET * delta).max(NEGLECTED_MASS);
    let delta_at = |eps: f64| delta_upper_bound(eps0, n, eps, neglected);
    if delta_at(0.0) <= delta {
        return Ok(0.0);
    }
    // Invariant: δ(lo) > delta ≥ δ(hi) (δ(eps0) = 0).
    let (mut lo, mut hi) = (0.0f64, eps0);
    while hi - lo > EPSILON_TOLERANCE {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if delta_at(mid) <= delta {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi.min(eps0))
}

/// The central δ(ε) of `n` shuffled reports of a pure `eps0`-LDP randomizer: the
/// smaller of two valid upper bounds, the variation-ratio bound
/// ([`variation_ratio_delta`](crate::variation_ratio::variation_ratio_delta), the
/// tighter almost everywhere) and FMT21's ([`fmt21_delta`]), kept as a cross-check.
pub fn shuffled_delta(eps0: f64, n: u64, eps: f64) -> f64 {
    crate::variation_ratio::variation_ratio_delta(eps0, n, eps).min(fmt21_delta(eps0, n, eps))
}

/// The central ε of `n` shuffled reports of a pure `eps0`-LDP randomizer at `delta`:
/// the smaller of the variation-ratio bound's
/// ([`variation_ratio_epsilon`](crate::variation_ratio::variation_ratio_epsilon)) and
/// FMT21's ([`fmt21_epsilon`]). Both are upper bounds, each computed never
/// optimistically, so their minimum is one too. Never above `eps0`.
///
/// ```
/// use ldpcov_accounting::amplification::{fmt21_epsilon, shuffled_epsilon};
///
/// // ε0 = 8 in batches of 10⁶ at δ = 10⁻⁸: 0.38112 (Wang et al. print 0.383, the same
/// // bound at 0.9·δ), FMT21 0.557.
/// let eps = shuffled_epsilon(8.0, 1_000_000, 1e-8)?;
/// assert!(eps > 0.380 && eps < 0.383);
/// assert!(eps < fmt21_epsilon(8.0, 1_000_000, 1e-8)?);
/// # Ok::<(), ldpcov_accounting::amplification::AmplificationError>(())
/// ```
pub fn shuffled_epsilon(eps0: f64, n: u64, delta: f64) -> Result<f64, AmplificationError> {
    let fmt21 = fmt21_epsilon(eps0, n, delta)?;
    let variation_ratio = crate::variation_ratio::variation_ratio_epsilon(eps0, n, delta)?;
    Ok(fmt21.min(variation_ratio))
}

/// Resolution of [`local_epsilon_for`]'s bisection on ε0.
pub const LOCAL_EPSILON_TOLERANCE: f64 = 1e-3;

/// The inverse question: the largest ε0 in `[target, max_eps0]` whose shuffled batches
/// of `n` reports are (ε, `delta`)-DP with ε ≤ `target` ([`shuffled_epsilon`]). Bisected
/// to [`LOCAL_EPSILON_TOLERANCE`] and returned at the bracket's lower end, whose
/// central ε was computed and checked: never optimistic. At least `target` itself (a
/// batch is never weaker than one report) unless `max_eps0` is smaller, and then
/// `max_eps0`.
///
/// ```
/// use ldpcov_accounting::amplification::{local_epsilon_for, shuffled_epsilon};
///
/// // A central ε of 1 at δ = 1e-8 from batches of 10⁶: each report may have ε0 ≈ 9.7.
/// let eps0 = local_epsilon_for(1.0, 1_000_000, 1e-8, 20.0)?;
/// assert!(eps0 > 9.5 && eps0 < 9.9);
/// assert!(shuffled_epsilon(eps0, 1_000_000, 1e-8)? <= 1.0);
/// # Ok::<(), ldpcov_accounting::amplification::AmplificationError>(())
/// ```
pub fn local_epsilon_for(
    target: f64,
    n: u64,
    delta: f64,
    max_eps0: f64,
) -> Result<f64, AmplificationError> {
    if !(target.is_finite() && target > 0.0) {
        return Err(AmplificationError::CentralEpsilon(target));
    }
    check(max_eps0, n)?;
    check_delta(delta)?;
    if max_eps0 <= target {
        return Ok(max_eps0);
    }
    if shuffled_epsilon(max_eps0, n, delta)? <= target {
        return Ok(max_eps0);
    }
    // Invariant: central(lo) ≤ target < central(hi); central(target) ≤ target.
    let (mut lo, mut hi) = (target, max_eps0);
    while hi - lo > LOCAL_EPSILON_TOLERANCE {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if shuffled_epsilon(mid, n, delta)? <= target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// The paper's closed-form bound (Feldman, McMillan & Talwar 2021, Theorem 3.1):
/// `ε = ln(1 + (e^ε0 − 1)/(e^ε0 + 1) · (8·√(e^ε0·ln(4/δ)/n) + 8·e^ε0/n))`, or `None`
/// outside its conditions (`ε0 ≤ ln(n / (16·ln(2/δ)))`, and valid arguments: `eps0`
/// positive and finite, `n ≥ 2`, `delta` in (0, 1)). Looser than [`fmt21_epsilon`];
/// exposed for comparison.
pub fn analytic_epsilon(eps0: f64, n: u64, delta: f64) -> Option<f64> {
    check(eps0, n).ok()?;
    check_delta(delta).ok()?;
    let nf = n as f64;
    if eps0 > (nf / (16.0 * (2.0 / delta).ln())).ln() {
        return None;
    }
    let e0 = eps0.exp();
    let x = 8.0 * ((e0 * (4.0 / delta).ln() / nf).sqrt() + e0 / nf);
    Some(((0.5 * eps0).tanh() * x).ln_1p())
}

/// FMT21's law of the clone count: `C ~ Bin(n − 1, e^−ε0)`.
fn clone_law(eps0: f64, n: u64, neglected_mass: f64) -> CloneLaw {
    CloneLaw::new((-eps0).exp(), -(-eps0).exp_m1(), n, neglected_mass)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clones::ClonePair;

    /// The inverse is the bound's own inverse: the ε0 it returns meets the target, and
    /// one tolerance step above it does not (else the bisection stopped early); below
    /// the target or at the cap it returns the obvious ends.
    #[test]
    fn local_epsilon_for_inverts_shuffled_epsilon() {
        for (target, n) in [
            (1.0, 100_000u64),
            (1.0, 1_000_000),
            (0.5, 1_000_000),
            (2.0, 10_000),
        ] {
            let eps0 = local_epsilon_for(target, n, 1e-6, 10.0).unwrap();
            assert!(
                shuffled_epsilon(eps0, n, 1e-6).unwrap() <= target,
                "{target} {n}"
            );
            if eps0 < 10.0 {
                let above = eps0 + 2.0 * LOCAL_EPSILON_TOLERANCE;
                assert!(
                    shuffled_epsilon(above, n, 1e-6).unwrap() > target,
                    "{target} {n}"
                );
            }
            assert!(eps0 >= target);
        }
        // Batches of 10⁸ amplify ε0 = 10 below 1: the cap is returned.
        assert_eq!(
            local_epsilon_for(1.0, 100_000_000, 1e-6, 10.0).unwrap(),
            10.0
        );
        assert_eq!(local_epsilon_for(3.0, 10, 1e-6, 2.0).unwrap(), 2.0);
        assert!(local_epsilon_for(0.0, 10, 1e-6, 2.0).is_err());
        assert!(local_epsilon_for(f64::NAN, 10, 1e-6, 2.0).is_err());
    }

    #[test]
    fn one_report_is_the_local_guarantee() {
        // n = 1: no clones, δ(ε) = (e^ε0 − e^ε)/(1 + e^ε0), randomized response's curve.
        for &(eps0, eps) in &[(1.0f64, 0.0f64), (1.0, 0.5), (4.0, 2.0)] {
            let want = (eps0.exp() - eps.exp()) / (1.0 + eps0.exp());
            let got = fmt21_delta(eps0, 1, eps);
            assert!((got - want).abs() <= 1e-15, "{eps0} {eps}: {got} vs {want}");
        }
        assert_eq!(fmt21_delta(1.0, 5, 1.0), 0.0);
        assert_eq!(fmt21_delta(1.0, 5, 2.0), 0.0);
    }

    /// The table of issue #33 (central ε at δ = 10⁻⁶ as printed there, two decimals),
    /// computed with the authors' numerical method.
    #[test]
    fn issue_table() {
        for &(eps0, n, want) in &[
            (6.0, 100_000, 0.52),
            (6.0, 1_000_000, 0.15),
            (8.0, 100_000, 2.19),
            (8.0, 1_000_000, 0.44),
        ] {
            let got = fmt21_epsilon(eps0, n, 1e-6).unwrap();
            assert!(
                (got - want).abs() <= 0.005,
                "ε0 {eps0} n {n}: {got}, table {want}"
            );
        }
    }

    /// Values of `testing/reference/shuffle_amplification.py`, an independent
    /// implementation (scipy's incomplete-beta binomial tails at every clone count,
    /// bisection to 10⁻⁹). Its ε is within 10⁻⁹ above the smallest ε with δ(ε) ≤ δ;
    /// ours is within [`EPSILON_TOLERANCE`] above it; so ours must lie in
    /// `[py − 10⁻⁹, py + EPSILON_TOLERANCE]` (widened by 10⁻⁹ more for the two
    /// computations' rounding of δ, which moves ε by far less).
    #[test]
    fn independent_implementation_values() {
        for &(eps0, n, delta, py) in REFERENCE {
            let got = fmt21_epsilon(eps0, n, delta).unwrap();
            assert!(
                got >= py - 2e-9 && got <= py + EPSILON_TOLERANCE + 2e-9,
                "ε0 {eps0} n {n} δ {delta}: {got}, reference {py}"
            );
        }
        // δ itself: the reference lies within our estimate ± our error bound (widened
        // by 10⁻¹¹ of δ for the reference's own rounding: scipy's tails to ~10⁻¹⁵,
        // times the cancellation between the two tails), and the bound, added to the
        // estimate to make the result an upper bound, is a small part of it.
        for &(eps0, n, eps, py) in REFERENCE_DELTA {
            let (estimate, bound) =
                ClonePair::new(eps0, eps).delta(&mut clone_law(eps0, n, NEGLECTED_MASS));
            assert!(
                (estimate - py).abs() <= bound + 1e-11 * py,
                "ε0 {eps0} n {n} ε {eps}: δ {estimate} ± {bound}, reference {py}"
            );
            assert!(
                bound >= 0.0 && bound <= 1e-6 * estimate,
                "{bound} {estimate}"
            );
            assert_eq!(fmt21_delta(eps0, n, eps), estimate + bound);
        }
    }

    /// (ε0, n, δ, ε) from `python3 testing/reference/shuffle_amplification.py`.
    const REFERENCE: &[(f64, u64, f64, f64)] = &[
        (1.0, 1_000, 1e-06, 0.182412348),
        (1.0, 10_000, 1e-06, 0.053005317),
        (1.0, 100_000, 1e-06, 0.015282063),
        (1.0, 1_000_000, 1e-06, 0.004334521),
        (2.0, 1_000, 1e-06, 0.545497966),
        (2.0, 10_000, 1e-06, 0.155045243),
        (2.0, 100_000, 1e-06, 0.045025581),
        (2.0, 1_000_000, 1e-06, 0.012958370),
        (4.0, 1_000, 1e-06, 3.989963599),
        (4.0, 10_000, 1e-06, 0.600908764),
        (4.0, 100_000, 1e-06, 0.169769748),
        (4.0, 1_000_000, 1e-06, 0.049307074),
        (6.0, 1_000, 1e-06, 5.999996540),
        (6.0, 10_000, 1e-06, 5.721008140),
        (6.0, 100_000, 1e-06, 0.524180546),
        (6.0, 1_000_000, 1e-06, 0.149290901),
        (8.0, 1_000, 1e-06, 7.999998817),
        (8.0, 10_000, 1e-06, 7.999994648),
        (8.0, 100_000, 1e-06, 2.188565535),
        (8.0, 1_000_000, 1e-06, 0.444468746),
        (10.0, 1_000, 1e-06, 9.999998977),
        (10.0, 10_000, 1e-06, 9.999998746),
        (10.0, 100_000, 1e-06, 9.999990321),
        (10.0, 1_000_000, 1e-06, 1.597060613),
        (1.0, 1_000, 1e-08, 0.230555968),
        (1.0, 10_000, 1e-08, 0.068880424),
        (1.0, 100_000, 1e-08, 0.020593415),
        (1.0, 1_000_000, 1e-08, 0.006125477),
        (2.0, 1_000, 1e-08, 0.683988030),
        (2.0, 10_000, 1e-08, 0.196624000),
        (2.0, 100_000, 1e-08, 0.058762904),
        (2.0, 1_000_000, 1e-08, 0.017558903),
        (4.0, 1_000, 1e-08, 3.999900133),
        (4.0, 10_000, 1e-08, 0.754629243),
        (4.0, 100_000, 1e-08, 0.214928017),
        (4.0, 1_000_000, 1e-08, 0.064196844),
        (6.0, 1_000, 1e-08, 5.999999966),
        (6.0, 10_000, 1e-08, 5.997562493),
        (6.0, 100_000, 1e-08, 0.657007602),
        (6.0, 1_000_000, 1e-08, 0.189465504),
        (8.0, 1_000, 1e-08, 7.999999989),
        (8.0, 10_000, 1e-08, 7.999999947),
        (8.0, 100_000, 1e-08, 7.785785841),
        (8.0, 1_000_000, 1e-08, 0.556639058),
        (10.0, 1_000, 1e-08, 9.999999990),
        (10.0, 10_000, 1e-08, 9.999999988),
        (10.0, 100_000, 1e-08, 9.999999903),
        (10.0, 1_000_000, 1e-08, 2.290240572),
    ];

    /// The same comparison at n = 10⁷ and 10⁸ (the reference's `fmt21_epsilon`
    /// called directly at these points; about 15 s each in Python).
    #[test]
    fn independent_implementation_values_large_n() {
        for &(eps0, n, delta, py) in &[
            (1.0, 10_000_000, 1e-8, 0.001_808_641),
            (4.0, 100_000_000, 1e-6, 0.004_024_110),
            (10.0, 100_000_000, 1e-6, 0.108_453_017),
        ] {
            let got = fmt21_epsilon(eps0, n, delta).unwrap();
            assert!(
                got >= py - 2e-9 && got <= py + EPSILON_TOLERANCE + 2e-9,
                "ε0 {eps0} n {n} δ {delta}: {got}, reference {py}"
            );
        }
    }

    /// (ε0, n, ε, δ(ε)) from the same script.
    const REFERENCE_DELTA: &[(f64, u64, f64, f64)] = &[
        (6.0, 100_000, 0.5, 2.151321709797e-06),
        (8.0, 1_000_000, 0.4, 5.067442885064e-06),
        (2.0, 10_000, 0.3, 2.193988326055e-15),
        (4.0, 1_000, 2.0, 2.283557209033e-04),
    ];

    #[test]
    fn the_returned_epsilon_is_minimal_to_the_tolerance() {
        for &(eps0, n, delta) in &[
            (1.0, 10_000, 1e-6),
            (4.0, 100_000, 1e-8),
            (8.0, 1_000_000, 1e-6),
        ] {
            let eps = fmt21_epsilon(eps0, n, delta).unwrap();
            assert!(fmt21_delta(eps0, n, eps) <= delta);
            assert!(fmt21_delta(eps0, n, eps - EPSILON_TOLERANCE) > delta);
        }
    }

    #[test]
    fn monotone_in_n_and_eps0_and_never_above_eps0() {
        let ns = [2u64, 10, 100, 1_000, 10_000, 100_000, 1_000_000];
        let eps0s = [0.1, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0];
        for &delta in &[1e-6, 1e-9] {
            for &eps0 in &eps0s {
                let mut last = f64::INFINITY;
                for &n in &ns {
                    let eps = fmt21_epsilon(eps0, n, delta).unwrap();
                    assert!(eps <= eps0, "ε0 {eps0} n {n}: {eps}");
                    assert!(
                        eps <= last,
                        "ε0 {eps0} n {n}: {eps} > {last} at fewer users"
                    );
                    last = eps;
                }
            }
            for &n in &ns {
                let mut last = 0.0;
                for &eps0 in &eps0s {
                    let eps = fmt21_epsilon(eps0, n, delta).unwrap();
                    assert!(
                        eps >= last,
                        "n {n} ε0 {eps0}: {eps} < {last} at a smaller ε0"
                    );
                    last = eps;
                }
            }
        }
        // δ(ε) itself, at fixed ε: non-increasing in n, non-decreasing in ε0 and
        // non-increasing in ε. (At points where δ is resolved: the 10⁻³⁰ of left-out
        // clone mass sets a floor below which the values are that bound, not δ.)
        let resolved = |d: f64| assert!(d > 1e-25, "{d} is below the resolved range");
        let mut last = f64::INFINITY;
        for n in [2u64, 3, 50, 999, 1_000, 1_001, 40_000, 100_000] {
            let d = fmt21_delta(3.0, n, 0.1);
            resolved(d);
            assert!(d <= last, "n {n}: {d} > {last}");
            last = d;
        }
        let mut last = 0.0;
        for eps0 in [1.0, 1.5, 2.0, 3.0, 5.0, 9.0] {
            let d = fmt21_delta(eps0, 1_000, 0.2);
            resolved(d);
            assert!(d >= last, "ε0 {eps0}: {d} < {last}");
            last = d;
        }
        let mut last = f64::INFINITY;
        for eps in [0.0, 0.01, 0.1, 0.3, 0.6, 1.0, 1.9, 1.99] {
            let d = fmt21_delta(2.0, 10, eps);
            resolved(d);
            assert!(d <= last, "ε {eps}: {d} > {last}");
            last = d;
        }
        assert_eq!(fmt21_delta(2.0, 10, 2.0), 0.0);
    }

    #[test]
    fn numerical_bound_is_below_the_closed_form_where_that_applies() {
        let mut compared = 0;
        for &delta in &[1e-4, 1e-6, 1e-8] {
            for &n in &[1_000u64, 10_000, 100_000, 1_000_000, 10_000_000] {
                for &eps0 in &[0.05, 0.1, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0] {
                    let Some(closed) = analytic_epsilon(eps0, n, delta) else {
                        continue;
                    };
                    compared += 1;
                    let eps = fmt21_epsilon(eps0, n, delta).unwrap();
                    assert!(
                        eps <= closed,
                        "ε0 {eps0} n {n} δ {delta}: numerical {eps} > closed form {closed}"
                    );
                }
            }
        }
        // The grid reaches the closed form's regime often enough to mean something.
        assert!(compared >= 40, "{compared}");
    }

    #[test]
    fn closed_form_conditions() {
        // ln(10⁶ / (16·ln(2·10⁶))) = 8.368: ε0 = 8.36 applies, 8.37 does not.
        assert!(analytic_epsilon(8.36, 1_000_000, 1e-6).is_some());
        assert_eq!(analytic_epsilon(8.37, 1_000_000, 1e-6), None);
        // Small n: no ε0 qualifies (16·ln(2/δ) = 232 > 200).
        assert_eq!(analytic_epsilon(0.01, 200, 1e-6), None);
        assert_eq!(analytic_epsilon(0.0, 1_000_000, 1e-6), None);
        assert_eq!(analytic_epsilon(1.0, 1, 1e-6), None);
        assert_eq!(analytic_epsilon(1.0, 1_000_000, 1.0), None);
        // The formula at one point: ε0 = 1, n = 10⁶, δ = 10⁻⁶, by hand:
        // tanh(½)·8·(√(e·ln(4·10⁶)/10⁶) + e/10⁶) = 0.4621172·0.0514480 = 0.0237750,
        // ln(1.0237750) = 0.02349677 (Python's math module, double precision).
        let got = analytic_epsilon(1.0, 1_000_000, 1e-6).unwrap();
        assert!((got - 0.023_496_774_905_355_63).abs() < 1e-15, "{got}");
    }

    #[test]
    fn bad_input() {
        use AmplificationError::*;
        assert_eq!(fmt21_epsilon(0.0, 100, 1e-6), Err(LocalEpsilon(0.0)));
        assert_eq!(fmt21_epsilon(-1.0, 100, 1e-6), Err(LocalEpsilon(-1.0)));
        assert!(matches!(
            fmt21_epsilon(f64::NAN, 100, 1e-6),
            Err(LocalEpsilon(_))
        ));
        assert_eq!(
            fmt21_epsilon(f64::INFINITY, 100, 1e-6),
            Err(LocalEpsilon(f64::INFINITY))
        );
        assert_eq!(fmt21_epsilon(1.0, 1, 1e-6), Err(BatchSize(1)));
        assert_eq!(fmt21_epsilon(1.0, 0, 1e-6), Err(BatchSize(0)));
        assert_eq!(fmt21_epsilon(1.0, 100, 0.0), Err(Delta(0.0)));
        assert_eq!(fmt21_epsilon(1.0, 100, 1.0), Err(Delta(1.0)));
        assert!(matches!(fmt21_epsilon(1.0, 100, f64::NAN), Err(Delta(_))));
        assert_eq!(
            BatchSize(1).to_string(),
            "batch size 1 must be at least 2 (a shuffled batch of one report hides nothing)"
        );
        // δ outside its domain is the trivial bound.
        assert_eq!(fmt21_delta(0.0, 100, 0.5), 1.0);
        assert_eq!(fmt21_delta(1.0, 0, 0.5), 1.0);
        assert_eq!(fmt21_delta(1.0, 100, -0.5), 1.0);
        assert_eq!(fmt21_delta(1.0, 100, f64::NAN), 1.0);
        // Past the amplified range: nothing is claimed, ε = ε0.
        assert_eq!(fmt21_delta(150.0, 1_000_000, 10.0), 1.0);
        assert_eq!(fmt21_epsilon(150.0, 1_000_000, 1e-6), Ok(150.0));
    }

    #[test]
    fn large_batches_are_capped_conservatively() {
        let capped = fmt21_delta(2.0, MAX_BATCH_SIZE, 0.005);
        assert_eq!(fmt21_delta(2.0, u64::MAX, 0.005), capped);
        assert!(capped > 0.0 && capped < 1.0);
    }
}
