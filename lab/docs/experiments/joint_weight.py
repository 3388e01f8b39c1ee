"""Choice of the public weight w of the joint report (w*u, triu(u u^T)).

For each (p, ||mu||, n) computes the Frobenius mean squared error of the de-biased
covariance Sigma_hat = M_hat - mu_hat mu_hat^T + tau^2 I caused by the privacy noise
(closed form of joint_mean_covariance.md) on a grid of w, its minimiser, and the loss of
the public rules w = (2/p)^(1/4) and w = 1/2; then checks the closed form (and the
de-biasing) by Monte Carlo: the noise sums are drawn directly (the sum of n independent
N(0, sigma^2) draws is N(0, n sigma^2)), so each trial costs O(p^2) whatever n.
sigma is the analytic Gaussian mechanism's (Balle & Wang 2018) at eps = 1, delta = 1e-6.
Run: python3 lab/docs/experiments/joint_weight.py   (numpy, scipy)
"""
import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

EPS, DELTA = 1.0, 1e-6


def analytic_sigma(sens, eps, delta):
    def gap(s):
        a, b = sens / (2 * s), eps * s / sens
        return norm.cdf(a - b) - np.exp(eps) * norm.cdf(-a - b) - delta

    return brentq(gap, 1e-6 * sens, 1e3 * sens, xtol=1e-14)


def sens(w):
    w2 = w * w
    return np.sqrt(2 + 2 * w2 + w2 * w2 / 2) if w2 <= 2 else 2 * w


def mse(w, p, m, n, c):
    """E||Sigma_hat - S||_F^2 from the noise, S the sample covariance of the u_i."""
    s2 = (c * sens(w)) ** 2 / n  # variance of one entry of M_hat
    t2 = s2 / (w * w)  # variance of one entry of mu_hat
    return s2 * p * p + 2 * m * m * (p + 1) * t2 + (p * p + p) * t2 * t2


def monte_carlo(w, p, m, n, c, trials, rng, debias=True):
    sigma = c * sens(w)
    mu = rng.normal(size=p)
    mu *= m / np.linalg.norm(mu)
    iu = np.triu_indices(p)
    errs, diag_bias = [], []
    for _ in range(trials):
        packed = rng.normal(scale=sigma * np.sqrt(n), size=len(iu[0])) / n
        e_m = np.zeros((p, p))
        e_m[iu] = packed
        e_m = e_m + np.triu(e_m, 1).T
        eps = rng.normal(scale=sigma * np.sqrt(n), size=p) / (n * w)
        mu_hat = mu + eps
        # Sigma_hat - S = E_M - (mu_hat mu_hat^T - mu mu^T) + tau^2 I
        err = e_m - (np.outer(mu_hat, mu_hat) - np.outer(mu, mu))
        if debias:
            err += (sigma / w) ** 2 / n * np.eye(p)
        errs.append((err**2).sum())
        diag_bias.append(np.trace(err) / p)
    se_bias = np.std(diag_bias) / np.sqrt(trials)
    return np.mean(errs), np.std(errs) / np.sqrt(trials), (np.mean(diag_bias), se_bias)


def main():
    c = analytic_sigma(1.0, EPS, DELTA)
    print(f"analytic Gaussian sigma per unit sensitivity at eps={EPS}, delta={DELTA}: {c:.4f}")
    ws = np.linspace(0.05, 2.5, 2451)
    print("\nclosed form: optimal w and the loss of the public rules (ratio of MSE to the optimum)")
    print(f"{'p':>3} {'|mu|':>5} {'n':>8} {'w*':>6} {'(2/p)^.25':>9} {'loss':>6} {'w=.5 loss':>9} {'w=1 loss':>8}")
    for p in (10, 20, 50):
        for m in (0.0, 0.5, 0.9):
            for n in (10_000, 100_000, 1_000_000):
                vals = np.array([mse(w, p, m, n, c) for w in ws])
                k = int(np.argmin(vals))
                rule = (2 / p) ** 0.25
                print(
                    f"{p:>3} {m:>5.1f} {n:>8} {ws[k]:>6.3f} {rule:>9.3f}"
                    f" {mse(rule, p, m, n, c) / vals[k]:>6.3f}"
                    f" {mse(0.5, p, m, n, c) / vals[k]:>9.3f}"
                    f" {mse(1.0, p, m, n, c) / vals[k]:>8.3f}"
                )
    print("\nsmaller epsilon (c grows, acts like a smaller n): p = 20, n = 10^4")
    for eps in (0.5, 0.25):
        ce = analytic_sigma(1.0, eps, DELTA)
        for m in (0.0, 0.9):
            vals = np.array([mse(w, 20, m, 10_000, ce) for w in ws])
            k = int(np.argmin(vals))
            print(
                f"eps={eps} |mu|={m}: w* = {ws[k]:.3f}, loss of w=.5 {mse(0.5, 20, m, 10_000, ce) / vals[k]:.3f}"
            )
    print("\nMonte Carlo check of the closed form (n = 10^4, 4000 trials; +- is one standard error)")
    rng = np.random.default_rng(20261123)
    for p, m, w in [(10, 0.9, 0.3), (10, 0.9, 0.67), (20, 0.5, 0.56), (50, 0.0, 0.45), (50, 0.9, 1.2)]:
        n = 10_000
        mc, se, bias = monte_carlo(w, p, m, n, c, 4000, rng)
        _, _, raw_bias = monte_carlo(w, p, m, n, c, 4000, rng, debias=False)
        tau2 = (c * sens(w) / w) ** 2 / n
        print(
            f"p={p:>2} |mu|={m} w={w}: MC {mc:.5f} +- {se:.5f}, closed form {mse(w, p, m, n, c):.5f};"
            f" mean diagonal error {bias[0]:+.1e} +- {bias[1]:.1e} de-biased,"
            f" {raw_bias[0]:+.2e} raw (-tau^2 = {-tau2:.2e})"
        )


if __name__ == "__main__":
    main()
