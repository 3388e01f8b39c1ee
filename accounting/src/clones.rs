//! The clone reduction both shuffle amplification bounds sum: a pair `(P_c, Q_c)` on
//! `{0, …, c + 1}` mixed over the clone count `C ~ Bin(n − 1, p)`,
//!
//! ```text
//! A ~ Bin(C, 1/2),   α = e^ε0 / (1 + e^ε0),
//! P_c = A + 1 with probability α, A otherwise;   Q_c = P_c mirrored (k ↦ c + 1 − k),
//! δ(ε) = Σ_c Pr[C = c] · Σ_k max(0, P_c(k) − e^ε·Q_c(k)),
//! ```
//!
//! where the bounds differ only in the clone probability `p`: `e^−ε0` for FMT21
//! ([`crate::amplification`]), `2/(e^ε0 + 1)` for the variation-ratio bound
//! ([`crate::variation_ratio`]). How the sum is taken, and why it is an upper bound, is
//! in the variation-ratio module's docs.

use crate::binomial::{
    NEGLIGIBLE_ERROR, PMF_RELATIVE_ERROR, REANCHOR_RELATIVE, binomial_pmf, binomial_tail_bound,
    half_binomial_pmf, half_binomial_upper_tail,
};

/// The largest batch size computed as such: a larger `n` is computed as this one, which
/// is conservative (δ(ε) does not increase with `n`) and keeps the cost (∝ √n) bounded.
pub const MAX_BATCH_SIZE: u64 = 1_000_000_000;

/// Local ε0 above which no amplification is claimed ([`fmt21_delta`](crate::amplification::fmt21_delta) returns the
/// trivial bound): `e^−ε0` is then below 10⁻⁴³, so a batch of at most
/// [`MAX_BATCH_SIZE`] reports holds a clone with probability below 10⁻³⁴.
pub const MAX_AMPLIFIED_LOCAL_EPSILON: f64 = 100.0;

/// Probability mass of the clone count left out of [`fmt21_delta`](crate::amplification::fmt21_delta)'s window on each
/// side (bounded and added to δ).
pub(crate) const NEGLECTED_MASS: f64 = 1e-30;

/// [`fmt21_epsilon`](crate::amplification::fmt21_epsilon) leaves out this fraction of the target δ instead (at least
/// [`NEGLECTED_MASS`]): a narrower window, and a δ larger by at most 2·10⁻⁹ of the
/// target, which moves ε by far less than [`EPSILON_TOLERANCE`](crate::amplification::EPSILON_TOLERANCE).
pub(crate) const NEGLECTED_FRACTION_OF_TARGET: f64 = 1e-9;

/// Above the window's mean, the walk stops once a clone count's divergence is below
/// this fraction of the δ summed so far (the rest is bounded and added).
pub(crate) const UPPER_STOP_RELATIVE: f64 = 1e-12;

/// Why an amplification bound could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AmplificationError {
    /// ε0 not a positive finite number.
    #[error("local epsilon {0} must be a positive finite number")]
    LocalEpsilon(f64),
    /// Fewer than two reports in a batch: nothing to hide among.
    #[error("batch size {0} must be at least 2 (a shuffled batch of one report hides nothing)")]
    BatchSize(u64),
    /// δ outside (0, 1).
    #[error("delta {0} must lie strictly between 0 and 1")]
    Delta(f64),
    /// A target central ε that is not a positive finite number.
    #[error("central epsilon {0} must be a positive finite number")]
    CentralEpsilon(f64),
}

/// δ(ε) for `0 ≤ eps < eps0 ≤ MAX_AMPLIFIED_LOCAL_EPSILON` with the law of `C` given:
/// the estimate plus its error bound, capped at 1.
pub(crate) fn delta_with_law(eps0: f64, eps: f64, law: &mut CloneLaw) -> f64 {
    let (estimate, error_bound) = ClonePair::new(eps0, eps).delta(law);
    (estimate + error_bound).min(1.0)
}

/// The law of the clone count `C ~ Bin(n − 1, p)` over the window of clone counts that
/// is summed, with its probabilities computed on first use and kept: they do not depend
/// on ε, so a bisection on ε computes them once.
pub(crate) struct CloneLaw {
    /// Trials of `C ~ Bin(trials, p)`: `n − 1`.
    trials: u64,
    /// The clone probability `p` and `q = 1 − p` (each bound passes both, computed
    /// without cancellation).
    p: f64,
    q: f64,
    /// The mean of `C`.
    mean: f64,
    /// The window `[lo, hi]`: the mass of `C` outside it is at most the neglected mass on
    /// each side (bounded by [`CloneLaw::tail_bound`]).
    lo: u64,
    hi: u64,
    /// `Pr[C = lo + i]` for the `i` computed so far.
    weights: Vec<f64>,
}

impl CloneLaw {
    /// The law for `n` reports (`n ≥ 1`) with clone probability `p` (`q = 1 − p`),
    /// leaving out at most `neglected_mass` on each side of the window.
    pub(crate) fn new(p: f64, q: f64, n: u64, neglected_mass: f64) -> Self {
        let trials = n - 1;
        let mean = trials as f64 * p;
        let mut law = CloneLaw {
            trials,
            p,
            q,
            mean,
            lo: 0,
            hi: trials,
            weights: Vec::new(),
        };
        let sd = (mean * q).sqrt();
        let step = (sd.ceil() as u64).max(1);
        // The window: from ±6 sd, widened until the mass outside it is negligible.
        let mut lo = (mean - 6.0 * sd).floor().max(0.0) as u64;
        while lo > 0 && law.tail_bound(lo - 1) > neglected_mass {
            lo = lo.saturating_sub(step);
        }
        let mut hi = ((mean + 6.0 * sd).ceil() as u64).min(trials);
        while hi < trials && law.tail_bound(hi + 1) > neglected_mass {
            hi = (hi + step).min(trials);
        }
        law.lo = lo;
        law.hi = hi;
        law
    }

    /// `Pr[C = c]` for `c` in the window, computed once (the walk visits the window from
    /// its low end upwards, so the cache grows one entry at a time).
    fn weight(&mut self, c: u64) -> f64 {
        let i = (c - self.lo) as usize;
        if let Some(&w) = self.weights.get(i) {
            return w;
        }
        let w = binomial_pmf(c, self.trials, self.p, self.q);
        if i == self.weights.len() {
            self.weights.push(w);
        }
        w
    }

    /// Chernoff bound on `Pr[C ≤ k]` (`k` below the mean) or `Pr[C ≥ k]` (above it):
    /// `exp(−(n−1)·KL(k/(n−1) ‖ p))`.
    fn tail_bound(&self, k: u64) -> f64 {
        binomial_tail_bound(k, self.trials, self.p, self.q)
    }
}

/// The pair `(P_c, Q_c)` at one ε: what one evaluation of δ(ε) needs besides the law of
/// `C`.
pub(crate) struct ClonePair {
    /// `θ`: `P_c(k)/Q_c(k) > e^ε` iff `k > θ(c + 1)`.
    theta: f64,
    /// `δ_c = a1·Pr[A ≥ m − 1] − a2·Pr[A ≥ m] = a1·Pr[A = m − 1] − e1·Pr[A ≥ m]`, with
    /// `a1 = (e^ε0 − e^ε)/(1 + e^ε0)`, `a2 = (e^{ε0+ε} − 1)/(1 + e^ε0)` and
    /// `e1 = a2 − a1 = e^ε − 1`; `a1` is also `δ_0`, the largest divergence.
    a1: f64,
    e1: f64,
}

impl ClonePair {
    /// Requires `0 ≤ eps < eps0 ≤ MAX_AMPLIFIED_LOCAL_EPSILON`.
    pub(crate) fn new(eps0: f64, eps: f64) -> Self {
        // Written with e^−ε0 only, so that nothing overflows and nothing cancels at small
        // ε0: 1 + e^−ε0 = 1/α', 1 − e^−ε0 = −expm1(−ε0), e^ε − e^−ε0 = expm1(ε) −
        // expm1(−ε0) (a sum of two non-negative numbers), 1 − e^{ε−ε0} = −expm1(ε − ε0).
        let one_plus = 1.0 + (-eps0).exp();
        let one_minus = -(-eps0).exp_m1();
        let e_minus_p = eps.exp_m1() - (-eps0).exp_m1();
        ClonePair {
            theta: e_minus_p / (one_minus * (1.0 + eps.exp())),
            a1: -(eps - eps0).exp_m1() / one_plus,
            e1: eps.exp_m1(),
        }
    }

    /// The first `k` with `P_c(k) > e^ε·Q_c(k)`, in `[1, c + 1]`.
    fn threshold(&self, c: u64) -> u64 {
        let m = (self.theta * (c + 1) as f64).floor() as u64 + 1;
        m.clamp(1, c + 1)
    }

    /// δ(ε) as `(estimate, bound)`: the sum with each clone count's divergence as computed
    /// (the left-out mass included), and a bound on the floating-point error of that sum,
    /// which [`delta_with_law`] adds.
    pub(crate) fn delta(&self, law: &mut CloneLaw) -> (f64, f64) {
        let n = law.trials;
        if n == 0 {
            return (self.a1, 0.0);
        }
        let (lo, hi, mean) = (law.lo, law.hi, law.mean);
        // Below the window every divergence is at most δ_0 = a1.
        let mut total = if lo > 0 {
            self.a1 * law.tail_bound(lo - 1)
        } else {
            0.0
        };
        let mut sum = 0.0;
        let mut sum_bound = 0.0;
        let mut c = lo;
        let mut m = self.threshold(c);
        // tail = Pr[Bin(c, ½) ≥ m] and err a bound on its absolute error, summed directly
        // here and whenever the recurrence's error grows past 10⁻⁹ of the tail.
        let (mut tail, mut err) = half_binomial_upper_tail(m, c);
        // pmf_m1 = Pr[Bin(c, ½) = m − 1].
        let mut pmf_m1 = half_binomial_pmf(m - 1, c);
        loop {
            // δ_c = a1·Pr[A = m − 1] − e1·Pr[A ≥ m], plus a bound on its error (the
            // tail's, the pmf's and this line's rounding), so that it stays an upper bound
            // where the two terms nearly cancel. (This form, rather than
            // a1·Pr[A ≥ m − 1] − a2·Pr[A ≥ m], cancels less and weighs the tail's error by
            // e^ε − 1 instead of a1 + a2; at ε = 0 it is the total variation, a1·Pr[A = m − 1].)
            let value = self.a1 * pmf_m1 - self.e1 * tail;
            let bound = self.e1 * err
                + PMF_RELATIVE_ERROR * self.a1 * pmf_m1
                + 4.0 * f64::EPSILON * (self.a1 * pmf_m1 + self.e1 * tail);
            let delta_c = (value + bound).clamp(0.0, 1.0);
            let w = law.weight(c);
            sum += w * value.max(0.0);
            sum_bound += w * (delta_c - value.max(0.0));
            let stop_early = c as f64 > mean && delta_c <= UPPER_STOP_RELATIVE * sum;
            if c == hi || stop_early {
                // Above c every divergence is at most delta_c.
                if c < n {
                    total += delta_c * law.tail_bound(c + 1);
                }
                break;
            }
            // Step to c + 1: Pr[Bin(c+1, ½) ≥ m] = Pr[Bin(c, ½) ≥ m] + ½·Pr[Bin(c, ½) = m − 1].
            tail += 0.5 * pmf_m1;
            err += f64::EPSILON * tail + PMF_RELATIVE_ERROR * 0.5 * pmf_m1;
            c += 1;
            let next = self.threshold(c);
            debug_assert!(next == m || next == m + 1);
            if next > m {
                // Pr[Bin(c, ½) = m] leaves the tail and is the new pmf at m' − 1.
                pmf_m1 = half_binomial_pmf(m, c);
                err += f64::EPSILON * tail + PMF_RELATIVE_ERROR * pmf_m1;
                tail -= pmf_m1;
                m = next;
            } else {
                pmf_m1 = half_binomial_pmf(m - 1, c);
            }
            // The subtraction keeps the absolute error while the tail shrinks; once it is
            // no longer small against the tail, sum the tail afresh (only where the tail
            // falls fast with c, i.e. far out, where the direct sum has few terms), unless
            // even the whole error bound, which is added, is negligible.
            if err > REANCHOR_RELATIVE * tail && self.e1 * err > NEGLIGIBLE_ERROR {
                (tail, err) = half_binomial_upper_tail(m, c);
            }
        }
        (total + sum, sum_bound)
    }
}
