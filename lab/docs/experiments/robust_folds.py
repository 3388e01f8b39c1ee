"""Does the median of the K fold means limit what m malicious reports can do?

One summed entry, in unit-ball units: n honest reports s_i + z_i with |s_i| <= 1 and
z_i ~ N(0, sigma^2) (the exact discrete Gaussian has the same variance up to an
exponentially small term), and m malicious reports at the validation bound
b = 1 + 7.53*sigma. Folds are the aggregator's K = 5 cross-validation folds.

Compared, over `TRIALS` draws:
  * the mean of all reports (what the aggregator releases today),
  * the median of the K fold means,
for three attacker strategies: no attack; all m reports in one fold (an attacker who
can choose report ids, since the fold is a public hash of the id); the m reports
spread evenly over the folds.

Usage: python3 lab/docs/experiments/robust_folds.py  (numpy only; a few seconds).
"""
import numpy as np

SIGMA = 5.97          # epsilon = 1, delta = 1e-6, sensitivity sqrt(2)
BOUND = 1 + 7.53 * SIGMA
K = 5
TRIALS = 4000
rng = np.random.default_rng(20261123)


def fold_sums(n_per_fold, m_per_fold):
    """Sum and count per fold: the honest signal is 0.3 per report (any |s| <= 1 does)."""
    honest = 0.3 * n_per_fold + rng.normal(0.0, SIGMA * np.sqrt(n_per_fold))
    return honest + BOUND * m_per_fold, n_per_fold + m_per_fold


def run(n, m, strategy):
    n_per_fold = np.full(K, n // K, dtype=float)
    if strategy == "none":
        m_per_fold = np.zeros(K)
    elif strategy == "one fold":
        m_per_fold = np.array([m] + [0] * (K - 1), dtype=float)
    else:
        m_per_fold = np.full(K, m / K)
    errs_mean, errs_median = [], []
    for _ in range(TRIALS):
        sums, counts = fold_sums(n_per_fold, m_per_fold)
        errs_mean.append(sums.sum() / counts.sum() - 0.3)
        errs_median.append(np.median(sums / counts) - 0.3)
    return np.array(errs_mean), np.array(errs_median)


print(f"sigma = {SIGMA}, bound b = {BOUND:.2f}, K = {K}, {TRIALS} trials per row")
print("| n | m | attacker | mean: bias | mean: rms | median of folds: bias | median of folds: rms |")
print("|---|---|---|---|---|---|---|")
for n in (100_000, 1_000_000):
    for m, strategy in ((0, "none"), (300, "one fold"), (300, "spread")):
        a, b = run(n, m, strategy)
        print(f"| {n:.0e} | {m} | {strategy} | {a.mean():+.4f} | {np.sqrt((a**2).mean()):.4f} "
              f"| {b.mean():+.4f} | {np.sqrt((b**2).mean()):.4f} |")
