#!/usr/bin/env python3
"""Independent reimplementation of the variation-ratio shuffle-amplification bound.

This script is NOT run by CI. It produces the reference values pinned in
`accounting/src/variation_ratio.rs` (the test `independent_implementation_values`),
written separately from the Rust code so that the two can disagree:

* the Rust code specialises the bound to a generic eps0-LDP randomizer first (the
  third share 1 - alpha - p*alpha is zero, so the pair reduces to one count), walks
  the clone count c upwards with an O(1) recurrence on the tails of Bin(c, 1/2)
  (Loader's saddle-point pmf), sums a1*Pr[A = m-1] - (e^eps - 1)*Pr[A >= m] and
  bisects ln(eps);
* this script evaluates the paper's Theorem 4.8 in its general form, from the
  variation-ratio parameters (p, beta, q) of the paper's Table 2, including the
  third share (zero here up to rounding) and its own threshold, with every binomial
  tail taken from scipy's regularised incomplete beta (`scipy.stats.binom.sf`) at
  every clone count, vectorised with numpy, and bisects eps itself on [0, eps0].

The bound (Wang, Peng, Xiao, Hu, Gao, Song, Xu, Yang, Wang, "Privacy Amplification
via Shuffling: Unified, Simplified, and Tightened", PVLDB 17(8), 2024,
arXiv:2304.05007, Theorems 4.7 and 4.8). A local randomizer with variation-ratio
parameters (p, beta, q) has, for the two inputs x0, x1 in which neighbouring data
sets differ, likelihood ratio at most p and total variation at most beta between
their output laws, and every output law at least 1/q times either. With

    alpha = beta / (p - 1),   r = alpha * p / q,   rest = 1 - alpha - p * alpha,

the other n - 1 users are each a clone of x0 with probability r, of x1 with
probability r, and neither otherwise, so their clone counts (a, b) are multinomial;
the differing user adds (1, 0), (0, 1) or (0, 0) with probabilities p*alpha, alpha,
rest under P (alpha, p*alpha, rest under Q). Theorem 4.7: the shuffled outputs
are (eps, delta)-DP whenever the pair of count distributions P(i, j), Q(i, j) is.
Theorem 4.8: P(i, j) / Q(i, j) increases with i at fixed i + j, so with
C = a + b ~ Bin(n - 1, 2r) and A ~ Bin(C, 1/2) (the clones of x0 among them),

    D_{e^eps}(P || Q) = E_C[ p*alpha*v0 + alpha*v1 + rest*v2
                             - e^eps * (alpha*v0 + p*alpha*v1 + rest*v2) ],
    v0 = Pr[A + 1 > low(C + 1)],   v1 = Pr[A > low(C + 1)],   v2 = Pr[A > low(C)],
    low(s) = (alpha*s*(e^eps*p - 1) + (e^eps - 1)*g(s)) / (alpha*(p - 1)*(1 + e^eps)),
    g(s) = rest * (n - s) * r / (1 - 2r),

(low(s) is where P(i, s - i) = e^eps Q(i, s - i); the paper's low_{c+1} and low_c).
D(Q || P) is the same by the symmetry of the two clone probabilities (the paper's
code makes the same remark). For a generic eps0-LDP randomizer, Table 2's
"general mechanisms" row: p = q = e^eps0, beta = (e^eps0 - 1) / (e^eps0 + 1).

How it is computed. The expectation over C is summed on a window of +-10 standard
deviations (plus 40) around its mean; the mass of C outside the window (scipy's
binomial cdf/sf) is added to delta at the largest possible divergence, 1, so the
result stays an upper bound. At each c the divergence is the maximum over the
threshold and its two neighbours of the restricted sum (each is a lower bound on
the divergence and the maximum is attained at the true threshold, so a rounding of
low(c + 1) cannot lose it), clipped at 0; the third share's term, zero here up to
rounding (|rest| ~ 1e-17), is taken at its own threshold low(c) as computed. eps for a target delta is the smallest eps
with delta(eps) <= delta, by bisection on [0, eps0] down to a bracket of relative
width 1e-9 (returned at its upper end; eps0 if no smaller eps qualifies).

Run:  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scipy
      /tmp/venv/bin/python testing/reference/variation_ratio.py
(prints the table pinned in the Rust test, with one line per grid point; takes a
few minutes, most of it at n = 10^8 and small eps0).
"""

import math
import sys

import numpy as np
from scipy import stats

WINDOW_SD = 10.0


def generic_parameters(eps0):
    """Table 2, general mechanisms: (p, beta, q)."""
    e = math.exp(eps0)
    return e, (e - 1.0) / (e + 1.0), e


class VariationRatio:
    """The bound for parameters (p, beta, q) and n users; the law of C is kept."""

    def __init__(self, p, beta, q, n):
        self.p, self.n = p, n
        self.alpha = beta / (p - 1.0)
        self.r = self.alpha * p / q
        self.rest = 1.0 - self.alpha - p * self.alpha
        trials = n - 1
        clone = 2.0 * self.r
        mean = trials * clone
        sd = math.sqrt(trials * clone * (1.0 - clone))
        lo = max(0, int(math.floor(mean - WINDOW_SD * sd)))
        hi = min(trials, int(math.ceil(mean + WINDOW_SD * sd)) + 40)
        self.c = np.arange(lo, hi + 1, dtype=np.int64)
        self.weights = stats.binom.pmf(self.c, trials, clone)
        outside = 0.0
        if lo > 0:
            outside += float(stats.binom.cdf(lo - 1, trials, clone))
        if hi < trials:
            outside += float(stats.binom.sf(hi, trials, clone))
        self.outside = outside

    def low(self, s, eps):
        """Where P(i, s - i) = e^eps Q(i, s - i), for output sums s (array)."""
        a, p, ee = self.alpha, self.p, math.exp(eps)
        g = self.rest * (self.n - s) * self.r / (1.0 - 2.0 * self.r)
        return (a * s * (ee * p - 1.0) + (ee - 1.0) * g) / (a * (p - 1.0) * (1.0 + ee))

    def divergence_given_c(self, eps):
        c = self.c
        a, p, rest, ee = self.alpha, self.p, self.rest, math.exp(eps)
        m01 = np.floor(self.low(c + 1, eps)).astype(np.int64) + 1  # first i > low(c+1)
        m2 = np.floor(self.low(c, eps)).astype(np.int64) + 1  # first i > low(c)
        # Pr[A >= m + k] for k = -2..1, A ~ Bin(c, 1/2) (Pr[A >= j] = sf(j - 1)).
        tails = {k: stats.binom.sf(m01 + k - 1, c, 0.5) for k in (-2, -1, 0, 1)}
        # The third share (zero for a generic randomizer, up to rounding) at its own
        # threshold: Pr[A >= m2].
        share = rest * stats.binom.sf(m2 - 1, c, 0.5) * (1.0 - ee)
        best = np.zeros(len(c))
        for shift in (-1, 0, 1):
            v0 = tails[shift - 1]  # Pr[A + 1 >= m]
            v1 = tails[shift]  # Pr[A >= m]
            p_mass = p * a * v0 + a * v1
            q_mass = a * v0 + p * a * v1
            best = np.maximum(best, p_mass - ee * q_mass + share)
        return best

    def delta(self, eps):
        if eps >= math.log(self.p):
            return 0.0
        inside = float(np.sum(self.weights * self.divergence_given_c(eps)))
        return inside + self.outside

    def epsilon(self, target, eps_max):
        if self.delta(0.0) <= target:
            return 0.0
        lo, hi = 0.0, eps_max
        while hi - lo > 1e-9 * hi:
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if self.delta(mid) <= target:
                hi = mid
            else:
                lo = mid
        return hi


def variation_ratio_delta(eps0, n, eps):
    return VariationRatio(*generic_parameters(eps0), n).delta(eps)


def variation_ratio_epsilon(eps0, n, delta):
    return VariationRatio(*generic_parameters(eps0), n).epsilon(delta, eps0)


EPS0S = (1.0, 2.0, 4.0, 6.0, 8.0, 9.37, 10.0, 12.0, 14.0, 16.0)
NS = (10**3, 10**5, 10**6, 10**7, 10**8)


def grid_rows(point):
    """The table's rows at one (eps0, n): the law of C is computed once."""
    eps0, n = point
    bound = VariationRatio(*generic_parameters(eps0), n)
    rows = []
    for delta in (1e-6, 1e-8, 1.0 / (10 * n)):
        eps = bound.epsilon(delta, eps0)
        rows.append(f"({eps0}, {n}, {delta!r}, {eps:.10e}),")
    return rows


def main():
    from multiprocessing import Pool

    print("# eps0, n, delta, eps (smallest eps with delta(eps) <= delta, to 1e-9 relative)")
    points = [(eps0, n) for eps0 in EPS0S for n in NS]
    with Pool() as pool:
        for rows in pool.imap(grid_rows, points):
            print("\n".join(rows))
            sys.stdout.flush()
    print("# the paper's points (delta = 1e-8): 0.383 and 0.449")
    for eps0, n in ((8.0, 10**6), (6.0, 10**5)):
        print(f"({eps0}, {n}, 1e-8, {variation_ratio_epsilon(eps0, n, 1e-8):.10e}),")


if __name__ == "__main__":
    main()
