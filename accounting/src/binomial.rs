//! Binomial probabilities to a few ulps for any `n` (Loader's saddle-point form), and the
//! upper tail of `Bin(c, ½)`: the arithmetic both shuffle amplification bounds sum over.

/// Relative error assumed of one binomial probability from [`binomial_pmf`] (Loader's
/// form is accurate to a few ulps; checked against exact values in the tests).
pub(crate) const PMF_RELATIVE_ERROR: f64 = 1e-14;

/// The recurrence's error bound, relative to the tail, past which the tail is summed
/// afresh.
pub(crate) const REANCHOR_RELATIVE: f64 = 1e-9;

/// An error bound on one clone count's divergence this small is added without
/// re-summing the tail (it is far below [`NEGLECTED_MASS`](crate::amplification)).
pub(crate) const NEGLIGIBLE_ERROR: f64 = 1e-40;

/// `Pr[Bin(c, ½) = k]`.
pub(crate) fn half_binomial_pmf(k: u64, c: u64) -> f64 {
    binomial_pmf(k, c, 0.5, 0.5)
}

/// `Pr[Bin(c, ½) ≥ m]` for `m > c/2` (the terms decrease from `m` on) and a bound on
/// its absolute error: summed until a term is below 10⁻¹⁹ of the sum, the rest bounded
/// by a geometric series (the ratio of successive terms decreases) and added.
pub(crate) fn half_binomial_upper_tail(m: u64, c: u64) -> (f64, f64) {
    if m > c {
        return (0.0, 0.0);
    }
    let mut term = half_binomial_pmf(m, c);
    let mut sum = term;
    let mut k = m;
    let mut ratio = 0.0;
    while k < c {
        ratio = (c - k) as f64 / (k + 1) as f64;
        if term <= 1e-19 * sum {
            break;
        }
        term *= ratio;
        sum += term;
        k += 1;
    }
    let rest = if k < c {
        term * ratio / (1.0 - ratio)
    } else {
        0.0
    };
    let terms = (k - m + 1) as f64;
    // Each term carries the first one's error and 3 roundings per ratio applied; the
    // sum one rounding per term.
    let err = sum * (PMF_RELATIVE_ERROR + 4.0 * f64::EPSILON * terms) + rest;
    (sum + rest, err)
}

/// `Pr[Bin(n, p) = k]` with `q = 1 − p` given separately, by Loader's saddle-point
/// form ("Fast and accurate computation of binomial probabilities", 2000):
/// `exp(−stirlerr terms − bd0(k, np) − bd0(n−k, nq)) / √(2πk(n−k)/n)`, accurate to a few
/// ulps where `ln C(n, k)` from `ln Γ` would lose `log10(n)` digits to cancellation.
pub(crate) fn binomial_pmf(k: u64, n: u64, p: f64, q: f64) -> f64 {
    if k > n {
        return 0.0;
    }
    let nf = n as f64;
    if k == 0 {
        return (nf * (-p).ln_1p()).exp();
    }
    if k == n {
        return (nf * (-q).ln_1p()).exp();
    }
    let x = k as f64;
    let lc = stirlerr(n) - stirlerr(k) - stirlerr(n - k) - bd0(x, nf * p) - bd0(nf - x, nf * q);
    let lf = LN_2PI + x.ln() + (-x / nf).ln_1p();
    (lc - 0.5 * lf).exp()
}

/// ln(2π).
pub(crate) const LN_2PI: f64 = 1.837_877_066_409_345_5;

/// `ln(k!) − ln(√(2πk)·(k/e)^k)`, the error of Stirling's formula (`k ≥ 1`).
pub(crate) fn stirlerr(k: u64) -> f64 {
    let x = k as f64;
    if k <= 15 {
        // Small k: directly (the values are small, nothing cancels much).
        return libm::lgamma(x + 1.0) - (x + 0.5) * x.ln() + x - 0.5 * LN_2PI;
    }
    // The Stirling series 1/(12k) − 1/(360k³) + 1/(1260k⁵) − 1/(1680k⁷) + 1/(1188k⁹);
    // the next term is below 10⁻¹⁶ of the sum at k = 16.
    let r = 1.0 / x;
    let r2 = r * r;
    r * (1.0 / 12.0 - r2 * (1.0 / 360.0 - r2 * (1.0 / 1260.0 - r2 * (1.0 / 1680.0 - r2 / 1188.0))))
}

/// `x·ln(x/m) + m − x`, the deviance term, without cancellation when `x ≈ m`.
pub(crate) fn bd0(x: f64, m: f64) -> f64 {
    if x == 0.0 {
        return m;
    }
    if (x - m).abs() < 0.1 * (x + m) {
        // With v = (x − m)/(x + m): (x − m)·v + Σ_{j≥1} 2x·v^{2j+1}/(2j + 1).
        let v = (x - m) / (x + m);
        let v2 = v * v;
        let mut s = (x - m) * v;
        let mut ej = 2.0 * x * v;
        for j in 1..1000 {
            ej *= v2;
            let next = s + ej / (2 * j + 1) as f64;
            if next == s {
                break;
            }
            s = next;
        }
        return s;
    }
    x * (x / m).ln() + m - x
}

/// Chernoff bound on `Pr[Bin(n, p) ≤ k]` (`k` below the mean `n·p`) or
/// `Pr[Bin(n, p) ≥ k]` (above it): `exp(−n·KL(k/n ‖ p))`, with `q = 1 − p`.
pub(crate) fn binomial_tail_bound(k: u64, trials: u64, p: f64, q: f64) -> f64 {
    let n = trials as f64;
    let x = k as f64;
    (-(bd0(x, n * p) + bd0(n - x, n * q))).exp().min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_pmf_matches_exact_values() {
        // Exact small cases: C(10, 3)/2^10 and C(20, 7)·0.3^7·0.7^13.
        let got = binomial_pmf(3, 10, 0.5, 0.5);
        assert!((got - 120.0 / 1024.0).abs() <= 1e-15, "{got}");
        let want = 77_520.0 * 0.3f64.powi(7) * 0.7f64.powi(13);
        let got = binomial_pmf(7, 20, 0.3, 0.7);
        assert!((got / want - 1.0).abs() <= 1e-13, "{got} vs {want}");
        // The pmf sums to one at a large n (Bin(10⁶, ½), ±40 sd).
        let c = 1_000_000u64;
        let s: f64 = (480_000..=520_000).map(|k| half_binomial_pmf(k, c)).sum();
        assert!((s - 1.0).abs() <= 1e-12, "{s}");
        // Symmetry at n = 10⁸, where ln Γ would have lost 8 digits.
        let n = 100_000_000u64;
        let a = half_binomial_pmf(n / 2 - 3_000, n);
        let b = half_binomial_pmf(n / 2 + 3_000, n);
        assert!((a / b - 1.0).abs() <= 1e-13, "{a} {b}");
    }
}
