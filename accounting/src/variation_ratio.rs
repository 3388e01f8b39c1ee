//! Amplification by shuffling: the central (ε, δ) of a shuffled batch of pure ε0-LDP
//! reports, by the *variation-ratio* bound of Wang et al., "Privacy Amplification via
//! Shuffling: Unified, Simplified, and Tightened" (PVLDB 17(8), 2024; arXiv:2304.05007),
//! instantiated for a generic ε0-LDP randomizer.
//!
//! **The reduction.** A local randomizer has *variation-ratio parameters* `(p, β, q)`
//! when, for the two values `x⁰, x¹` of the user in which two neighbouring data sets
//! differ, the likelihood ratio of their outputs is at most `p` and their total
//! variation at most `β`, and every user's output density is at least `1/q` times that of
//! either (the paper's (p, β)-variation and q-ratio properties). Its Theorem 4.7
//! (variation-ratio reduction) bounds any divergence with the data-processing inequality
//! between the two shuffled batches by the divergence between two distributions of a pair
//! of counts:
//!
//! ```text
//! α = β/(p − 1),   r = α·p/q,
//! C ~ Bin(n − 1, 2r)   (the clones: other users whose report looks like the differing one's),
//! A ~ Bin(C, 1/2),   Δ1 ~ Bernoulli(p·α),   Δ2 = 0 if Δ1 = 1, else Bernoulli(α/(1 − p·α)),
//! P = (A + Δ1, C − A + Δ2),   Q = (A + Δ2, C − A + Δ1),
//! ```
//!
//! and its Theorem 4.8 writes `D_{e^ε}(P ‖ Q)` as an expectation over `C` of binomial
//! tail probabilities (Theorem 4.1 states the two together; theorem numbers as in the
//! published version and the full version in the authors' repository,
//! `wangsw/PrivacyAmplification`). For a generic ε0-LDP randomizer
//! the parameters are `p = q = e^ε0`, `β = (e^ε0 − 1)/(e^ε0 + 1)` (the paper's Table 2,
//! "general mechanisms"): then `α = 1/(e^ε0 + 1)`, `p·α + α = 1` so `Δ2 = 1 − Δ1`, and the
//! clone probability is `2r = 2/(e^ε0 + 1)`. The pair's sum is `C + 1`, so `C` is
//! recoverable from the output and the divergence is the mixture of the divergences:
//!
//! ```text
//! C ~ Bin(n − 1, 2/(e^ε0 + 1)),   A ~ Bin(C, 1/2),   α' = e^ε0/(1 + e^ε0),
//! P_c = A + 1 with probability α', A otherwise;   Q_c = A with probability α', A + 1 otherwise,
//! δ(ε) = Σ_c Pr[C = c] · D_{e^ε}(P_c ‖ Q_c),   D_{e^ε}(P ‖ Q) = Σ_k max(0, P(k) − e^ε·Q(k)),
//! ```
//!
//! and the shuffled output is (ε, δ(ε))-DP for every ε ≥ 0 (`Q_c` is `P_c` mirrored,
//! `k ↦ c + 1 − k`, so the divergence is symmetric and `max(D(P‖Q), D(Q‖P))` is either).
//! This is the pair of Feldman, McMillan & Talwar's "Hiding among the clones" (FOCS 2021)
//! with a larger clone probability: `2/(e^ε0 + 1) ≥ e^−ε0`, and the divergence does not
//! increase with `c` (`A` at `c + 1` is `A` at `c` plus an independent coin, a
//! post-processing), so this δ(ε) is never above that bound's at the same `(ε0, n, ε)`.
//! δ(ε) = 0 for ε ≥ ε0, and ε for a target δ is the smallest ε with δ(ε) ≤ δ
//! ([`variation_ratio_epsilon`]).
//!
//! **The computation.** `P_c(k)/Q_c(k) = (e^ε0·k + c + 1 − k)/(k + e^ε0·(c + 1 − k))`
//! increases with `k`, so `D_{e^ε}(P_c ‖ Q_c) = a1·Pr[A ≥ m − 1] − a2·Pr[A ≥ m]`, summed
//! as `a1·Pr[A = m − 1] − (e^ε − 1)·Pr[A ≥ m]`, with `a1 = (e^ε0 − e^ε)/(1 + e^ε0)`,
//! `a2 = (e^{ε0+ε} − 1)/(1 + e^ε0)` and `m` the first `k`
//! above `θ(c + 1)`, `θ = (e^{ε0+ε} − 1)/((e^ε0 − 1)(1 + e^ε))` (the paper's `low_{c+1}`;
//! its third term, weighted by `1 − α − p·α`, is zero here). Walking `c` upwards, `m`
//! grows by 0 or 1 and the tail of `Bin(c, ½)` follows by an exact identity
//! (`Pr[Bin(c+1, ½) ≥ m] = Pr[Bin(c, ½) ≥ m] + ½·Pr[Bin(c, ½) = m − 1]`), so each `c`
//! costs O(1) binomial probabilities, computed by Loader's saddle-point form (accurate to
//! a few ulps for any `n`). Only the `c` whose probability mass matters are summed, and
//! nothing is dropped without being paid for: the mass of `C` left out below the window
//! (bounded by the Chernoff bound, at most 10⁻³⁰) is added to δ at the largest
//! divergence, `a1` (that of `c = 0`); above the window each left-out `c` is added at the
//! divergence of the last one summed (the divergence decreases in `c`); a binomial tail
//! cut short adds its rest bounded by a geometric series. A bound on the floating-point
//! error (tracked along the recurrence, which is re-summed directly when that bound
//! grows) is added too. So the result is an upper bound on δ(ε) (tested against the
//! divergence of the theorem's pair summed by definition: the sum agrees to 10⁻⁹, the
//! added error bound is at most 10⁻⁸ of δ).
//!
//! **The cost** is proportional to the window, up to ±12 standard deviations of `C`,
//! `√((n − 1)·p·(1 − p))` with `p = 2/(e^ε0 + 1)`: at most about `12√n` clone counts
//! (ε0 = ln 3), far fewer at large ε0. [`variation_ratio_epsilon`] bisects with 26 evaluations of
//! δ(ε), and computes the probabilities of `C` (which do not depend on ε) once for all of
//! them. Measured (release build, 2 shared cores): at most 40 ms at n = 10⁶ and 0.3 s at
//! n = 10⁸ (ε0 between 0.5 and 2; about 10 ms for ε0 ≥ 8 at n = 10⁸). Batches above 10⁹
//! are computed as 10⁹ (conservative), which bounds the cost (0.9 s at most).
//!
//! δ is resolved down to about 10⁻³⁰ (the left-out mass added); below that the value is
//! that bound, not δ, so a target δ under 10⁻²⁵ gets a conservative ε.
//!
//! ```
//! use ldpcov_accounting::variation_ratio::{variation_ratio_delta, variation_ratio_epsilon};
//!
//! // One million users reporting at ε0 = 8 through a shuffler: central ε = 0.38112 at
//! // δ = 10⁻⁸ (an independent 50-digit evaluation agrees; the paper's and its reference
//! // code's "upper" 0.383 is the same bound taken at 0.9·δ; "Hiding among the clones"
//! // gives 0.557).
//! let eps = variation_ratio_epsilon(8.0, 1_000_000, 1e-8)?;
//! assert!(eps > 0.380 && eps < 0.383);
//! // The returned ε is never optimistic: its δ is within the target.
//! assert!(variation_ratio_delta(8.0, 1_000_000, eps) <= 1e-8);
//! // Shuffling never hurts: a batch too small to amplify keeps the local ε0.
//! assert_eq!(variation_ratio_epsilon(8.0, 1_000, 1e-8)?, 8.0);
//! # Ok::<(), ldpcov_accounting::amplification::AmplificationError>(())
//! ```

use crate::clones::{
    AmplificationError, CloneLaw, MAX_AMPLIFIED_LOCAL_EPSILON, MAX_BATCH_SIZE,
    NEGLECTED_FRACTION_OF_TARGET, NEGLECTED_MASS, delta_with_law,
};

/// Relative width of the final bracket of [`variation_ratio_epsilon`]'s bisection: the
/// returned ε is at most `1 + 10⁻⁶` times the smallest ε with δ(ε) ≤ δ (and never below
/// it).
const RELATIVE_TOLERANCE: f64 = 1e-6;

/// [`variation_ratio_epsilon`] bisects `ln ε` on `[ln(ε0·10⁻¹²), ln ε0]`; a smaller answer
/// is returned as `ε0·10⁻¹²` (or 0 when δ(0) is within the target).
const SMALLEST_RELATIVE_EPSILON: f64 = 1e-12;

/// Upper bound on δ(ε) of the shuffled output of n reports of an ε0-LDP randomizer
/// (variation-ratio bound): the shuffled batch of `n` reports of a pure `eps0`-LDP
/// randomizer is (`eps`, δ)-DP for the returned δ, against whoever sees only the shuffled
/// batch (see the module docs for the bound and how it is summed). Every truncation is
/// paid for, so this is an upper bound on the paper's δ(ε); it is 0 for `eps ≥ eps0`, and
/// non-increasing in `n` and in `eps`.
///
/// `n = 1` is allowed here (no clones: the randomizer's own worst case,
/// `(e^ε0 − e^ε)/(1 + e^ε0)`); `n` above 10⁹ is computed as 10⁹ (conservative). Outside
/// the domain (`eps0` not positive and finite, `n = 0`, `eps` negative or NaN) and for
/// `eps0` above 100 it returns the trivial bound 1 (for `eps < eps0`).
pub fn variation_ratio_delta(eps0: f64, n: u64, eps: f64) -> f64 {
    if !(eps0.is_finite() && eps0 > 0.0) || n == 0 || eps.is_nan() || eps < 0.0 {
        return 1.0;
    }
    if eps >= eps0 {
        return 0.0;
    }
    if eps0 > MAX_AMPLIFIED_LOCAL_EPSILON {
        return 1.0;
    }
    let mut law = clone_law(eps0, n.min(MAX_BATCH_SIZE), NEGLECTED_MASS);
    delta_with_law(eps0, eps, &mut law)
}

/// Smallest ε (to within a relative tolerance of 1e-6, always rounded up, never
/// optimistic) with `variation_ratio_delta(eps0, n, ε) <= delta`; Err on bad input.
///
/// Found by bisection on `ln ε` over `[ln(ε0·10⁻¹²), ln ε0]` down to a bracket whose ends
/// differ by a factor of at most `1 + 10⁻⁶`, and returned at the bracket's upper end (so
/// its δ was computed and checked to be within `delta`). Never above `eps0`: shuffling
/// cannot weaken the local guarantee. An answer below `ε0·10⁻¹²` (δ close to 1) is
/// returned as `ε0·10⁻¹²`, or as 0 when δ(0) is within `delta`. For `eps0` above 100 no
/// amplification is claimed and `eps0` is returned.
///
/// The bisection's points depend on `eps0` only, so the result is exactly monotone in
/// `n` and `delta` (non-increasing). It costs 26 evaluations of δ(ε) (sharing the
/// probabilities of the clone count).
pub fn variation_ratio_epsilon(eps0: f64, n: u64, delta: f64) -> Result<f64, AmplificationError> {
    if !(eps0.is_finite() && eps0 > 0.0) {
        return Err(AmplificationError::LocalEpsilon(eps0));
    }
    if n < 2 {
        return Err(AmplificationError::BatchSize(n));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(AmplificationError::Delta(delta));
    }
    if eps0 > MAX_AMPLIFIED_LOCAL_EPSILON {
        return Ok(eps0);
    }
    // The law of C (and its probabilities, as they are computed) serves every step.
    let neglected = (NEGLECTED_FRACTION_OF_TARGET * delta).max(NEGLECTED_MASS);
    let mut law = clone_law(eps0, n.min(MAX_BATCH_SIZE), neglected);
    let mut delta_at = |eps: f64| {
        if eps >= eps0 {
            0.0
        } else {
            delta_with_law(eps0, eps, &mut law)
        }
    };
    let floor = eps0 * SMALLEST_RELATIVE_EPSILON;
    if delta_at(floor) <= delta {
        return Ok(if delta_at(0.0) <= delta { 0.0 } else { floor });
    }
    // Invariant: δ(e^lo) > delta ≥ δ(hi_eps), hi_eps = e^hi (δ(ε0) = 0).
    let log_tolerance = RELATIVE_TOLERANCE.ln_1p();
    let (mut lo, mut hi, mut hi_eps) = (floor.ln(), eps0.ln(), eps0);
    while hi - lo > log_tolerance {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        let eps = mid.exp();
        if delta_at(eps) <= delta {
            (hi, hi_eps) = (mid, eps);
        } else {
            lo = mid;
        }
    }
    Ok(hi_eps.min(eps0))
}

/// The variation-ratio bound's law of the clone count: `C ~ Bin(n − 1, 2/(e^ε0 + 1))`,
/// with `2/(e^ε0 + 1)` and `1 − 2/(e^ε0 + 1) = tanh(ε0/2)` written with `e^−ε0` only (no
/// overflow, and no cancellation at small ε0).
fn clone_law(eps0: f64, n: u64, neglected_mass: f64) -> CloneLaw {
    let e_minus = (-eps0).exp();
    let one_plus = 1.0 + e_minus;
    CloneLaw::new(
        2.0 * e_minus / one_plus,
        -(-eps0).exp_m1() / one_plus,
        n,
        neglected_mass,
    )
}

#[cfg(test)]
mod tests;
