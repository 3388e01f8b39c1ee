#!/usr/bin/env python3
"""Independent reimplementation of the numerical shuffle-amplification bound.

This script is NOT run by CI. It produces the reference values pinned in
`accounting/src/amplification.rs` (the test `independent_implementation_values`), written
separately from the Rust code so that the two can disagree: the Rust code walks the
clone count c with an O(1) recurrence on binomial tails (Loader's saddle-point pmf),
while this script evaluates every binomial tail with scipy's regularised incomplete
beta (`scipy.stats.binom.sf`), one c at a time, vectorised with numpy.

The bound (Feldman, McMillan, Talwar, "Hiding Among the Clones", FOCS 2021,
arXiv:2012.12803, Theorem 3.2 and its numerical algorithm): shuffling n reports of an
eps0-DP local randomizer is (eps, delta)-DP with

    delta(eps) = sum_c Pr[C = c] * D_{e^eps}(P_c || Q_c),
    C ~ Bin(n - 1, e^-eps0),  A ~ Bin(c, 1/2),  a = e^eps0 / (1 + e^eps0),
    P_c = A + 1 with probability a, A otherwise,
    Q_c = A with probability a, A + 1 otherwise,

D_{e^eps}(P || Q) = sum_k max(0, P(k) - e^eps Q(k)) the hockey-stick divergence
(symmetric here: Q_c is P_c mirrored, k -> c + 1 - k). The c outside a window of
+-14 standard deviations are not summed; their probability mass is added to delta
(each term is at most 1), so the result stays an upper bound. eps for a target delta
is the smallest eps with delta(eps) <= delta, by bisection on [0, eps0] to 1e-9.

Run:  python3 -m venv /tmp/venv && /tmp/venv/bin/pip install numpy scipy
      /tmp/venv/bin/python testing/reference/shuffle_amplification.py
(prints the table pinned in the Rust test; takes about a minute).
"""

import math
import sys

import numpy as np
from scipy import stats


def hockey_stick_given_c(c, eps0, eps):
    """D_{e^eps}(P_c || Q_c) for an array of clone counts c (int64)."""
    a = math.exp(eps0) / (1.0 + math.exp(eps0))
    ee = math.exp(eps)
    # P_c(k) / Q_c(k) = (a k + (1-a)(c+1-k)) / ((1-a) k + a (c+1-k)) increases with
    # k; it exceeds e^eps exactly when k / (c + 1) > theta.
    theta = (a * (1.0 + ee) - 1.0) / ((2.0 * a - 1.0) * (1.0 + ee))
    best = np.zeros(len(c))
    # The optimal set is {k >= m}; try the neighbours of the computed m as well so
    # that a rounding of theta * (c + 1) cannot lose the maximum.
    m0 = np.floor(theta * (c + 1)).astype(np.int64) + 1
    for shift in (-1, 0, 1):
        m = m0 + shift
        # Pr[A >= j] = sf(j - 1).
        s_m1 = stats.binom.sf(m - 2, c, 0.5)  # Pr[A >= m - 1]
        s_m = stats.binom.sf(m - 1, c, 0.5)  # Pr[A >= m]
        p_tail = a * s_m1 + (1.0 - a) * s_m  # Pr[P_c >= m]
        q_tail = (1.0 - a) * s_m1 + a * s_m  # Pr[Q_c >= m]
        best = np.maximum(best, p_tail - ee * q_tail)
    return best


def shuffled_delta(eps0, n, eps, window_sd=14.0):
    if eps >= eps0:
        return 0.0
    p = math.exp(-eps0)
    trials = n - 1
    mean = trials * p
    sd = math.sqrt(trials * p * (1.0 - p))
    lo = max(0, int(math.floor(mean - window_sd * sd)))
    hi = min(trials, int(math.ceil(mean + window_sd * sd)) + 40)
    c = np.arange(lo, hi + 1, dtype=np.int64)
    weights = stats.binom.pmf(c, trials, p)
    inside = float(np.sum(weights * hockey_stick_given_c(c, eps0, eps)))
    outside = 0.0
    if lo > 0:
        outside += float(stats.binom.cdf(lo - 1, trials, p))
    if hi < trials:
        outside += float(stats.binom.sf(hi, trials, p))
    return inside + outside


def shuffled_epsilon(eps0, n, delta, tol=1e-9):
    lo, hi = 0.0, eps0
    if shuffled_delta(eps0, n, 0.0) <= delta:
        return 0.0
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if shuffled_delta(eps0, n, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def main():
    print("# eps0, n, delta, eps (smallest eps with delta(eps) <= delta, to 1e-9)")
    for delta in (1e-6, 1e-8):
        for eps0 in (1.0, 2.0, 4.0, 6.0, 8.0, 10.0):
            for n in (10**3, 10**4, 10**5, 10**6):
                eps = shuffled_epsilon(eps0, n, delta)
                print(f"({eps0:.1f}, {n}, {delta:.0e}, {eps:.9f}),")
                sys.stdout.flush()
    # Points of delta(eps) itself.
    print("# eps0, n, eps, delta(eps)")
    for eps0, n, eps in ((6.0, 10**5, 0.5), (8.0, 10**6, 0.4), (2.0, 10**4, 0.3), (4.0, 10**3, 2.0)):
        print(f"({eps0:.1f}, {n}, {eps}, {shuffled_delta(eps0, n, eps):.12e}),")


if __name__ == "__main__":
    main()
