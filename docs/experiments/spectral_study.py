"""Selection study for the spectral estimators of `aggregator/src/spectral.rs`.

Simulates the released average Y = M + W, W symmetric with every packed entry
(diagonal included) iid N(0, sigma_n^2), sigma_n = R^2 sigma / sqrt(n), R = sqrt(2p),
sigma from the analytic Gaussian mechanism (Delta = sqrt(2), delta = 1e-6), and
compares estimators and selection rules in relative spectral and Frobenius error.
Users' sampling error (O(1/sqrt(n))) is negligible next to sigma_n and is not
simulated; for the synthetic models M = Sigma (clipping at R = sqrt(2p) is rare and
ignored), for the real data M is the mean of the clipped x x^T of the standardized
rows and the target is the correlation matrix (so the clipping bias counts).

Run: python3 docs/experiments/spectral_study.py  (about a minute; writes
docs/experiments/spectral_study_results.json)
"""
import json
import math
import sys

import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_breast_cancer, load_wine

DELTA = 1e-6
MARGIN = 3.27  # TW1 99.9% quantile, as DEFAULT_EDGE_MARGIN in spectral.rs
FOLDS = 5
REPS = 4


def analytic_sigma(eps, delta=DELTA, sens=math.sqrt(2.0)):
    """Balle & Wang 2018: smallest sigma with delta(sigma) <= delta (bisection)."""
    def d(s):
        a, b = sens / (2 * s), eps * s / sens
        return norm.cdf(a - b) - math.exp(eps) * norm.cdf(-a - b)
    lo, hi = 1e-3, 1e3
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if d(mid) <= delta else (mid, hi)
    return hi


def noise(p, s, rng):
    a = np.triu(rng.standard_normal((p, p)) * s)
    return a + np.triu(a, 1).T


# ---------------------------------------------------------------- estimators
def eigh(y):
    return np.linalg.eigh(y)  # ascending


def from_eig(u, v):
    m = (u * v) @ u.T
    return 0.5 * (m + m.T)


def debias(x, p, s):
    a = p * s * s
    if x <= 2 * s * math.sqrt(p):
        return math.sqrt(a), 0.0
    t = 0.5 * (x + math.sqrt(x * x - 4 * a))
    return t, 1 - a / (t * t)


def shrunk(x, p, s, kind):
    t, c2 = debias(x, p, s)
    return t * c2 if kind == "F" else t


def dshrunk(x, p, s, kind):
    a = p * s * s
    t, c2 = debias(x, p, s)
    if c2 <= 0:
        return 0.0
    return (t * t + a) / (t * t - a) if kind == "F" else t * t / (t * t - a)


def rank_level(vals, p, s, margin=MARGIN):
    cut = 2 * s * math.sqrt(p) + margin * s * p ** (-1 / 6)
    level, rank = vals[p // 2], -1
    for _ in range(16):
        r = min(int(np.sum(vals - level > cut)), p - 1)
        level = vals[: p - r].mean()
        if r == rank:
            break
        rank = r
    return rank, level


def spectral(y, s, kind, diag_fit, eig=None):
    """shrink (diag_fit False) or factor (True), as in spectral.rs. Also returns
    h(lambda) and h'(lambda) on the eigenvalues for SURE (bulk level held fixed)."""
    p = y.shape[0]
    vals, u = eig if eig is not None else eigh(y)
    r, level = rank_level(vals, p, s)
    level = max(level, 0.0)
    base = 0.0 if diag_fit else level
    h = np.full(p, base)
    dh = np.zeros(p)
    for j in range(p - r, p):
        h[j] = base + shrunk(vals[j] - level, p, s, kind)
        dh[j] = dshrunk(vals[j] - level, p, s, kind)
    m = from_eig(u, h)
    if diag_fit:
        d = np.maximum(np.diag(y) - np.diag(m), 0.0)
        m = m + np.diag(d)
    return m, vals, u, h, dh


def none_psd(y, eig=None):
    vals, u = eig if eig is not None else eigh(y)
    return from_eig(u, np.maximum(vals, 0)), vals, u, np.maximum(vals, 0), (vals > 0) * 1.0


def universal(y, s, c=4.0):
    p = y.shape[0]
    lam = c * s * math.sqrt(math.log(p))
    t = np.where(np.abs(y) > lam, y, 0.0)
    np.fill_diagonal(t, np.diag(y))  # diagonal exempt (the project's default)
    return none_psd(t)[0]


# ---------------------------------------------------------------- SURE
def sure(y, s, vals, u, h, dh, m, diag_fit):
    """SURE for Frobenius loss, packed-entry noise (see sure_spectral in spectral.rs).
    For the factor estimate f_ii = max(L_ii, Y_ii): its diagonal derivative is 1 where
    Y_ii > L_ii and (DL[E_ii])_ii otherwise."""
    p = len(vals)
    gap = vals[:, None] - vals[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        g = (h[:, None] - h[None, :]) / gap
    close = np.abs(gap) <= 1e-12 * max(1.0, np.abs(vals).max())
    g[close] = 0.5 * (dh[:, None] + dh[None, :])[close]
    np.fill_diagonal(g, dh)
    tr = dh.sum() + g[np.triu_indices(p, 1)].sum()
    sq = u * u
    q = np.einsum("ia,ib,ab->i", sq, sq, g)  # (Df[E_ii])_ii
    if diag_fit:
        low = from_eig(u, h)
        above = np.diag(y) > np.diag(low)
        div = 2 * tr - 2 * q.sum() + np.where(above, 1.0, q).sum()
    else:
        div = 2 * tr - q.sum()
    return np.sum((m - y) ** 2) - p * p * s * s + 2 * s * s * div


# ---------------------------------------------------------------- models
def to_corr(c):
    d = np.sqrt(np.diag(c))
    return c / np.outer(d, d)


def permute(c, rng):
    idx = rng.permutation(c.shape[0])
    return c[np.ix_(idx, idx)]


def factor_model(p, k, rng):
    b = rng.standard_normal((p, k))
    b /= np.linalg.norm(b, axis=1, keepdims=True)
    b *= np.sqrt(rng.uniform(0.3, 0.8, p))[:, None]
    return b @ b.T + np.diag(1 - np.sum(b * b, 1))


def block_model(p, rng):
    sizes = np.array_split(np.arange(p), 4)
    c = np.zeros((p, p))
    for blk, rho in zip(sizes, (0.7, 0.5, 0.4, 0.3)):
        c[np.ix_(blk, blk)] = rho
    np.fill_diagonal(c, 1.0)
    return permute(c, rng)


def sparse_model(p, rng):
    a = np.triu((rng.uniform(size=(p, p)) < 0.05) * 0.3, 1)
    a = a + a.T
    lmin = np.linalg.eigvalsh(a).min()
    return to_corr(a + (abs(min(lmin, 0)) + 0.05) * np.eye(p))


def model1(p, rng):
    i = np.arange(p)
    return permute(0.6 ** np.abs(i[:, None] - i[None, :]), rng)


def model2(p, rng):
    i = np.arange(p)
    d = np.abs(i[:, None] - i[None, :])
    return permute(np.select([d == 0, d == 1, d == 2], [1.0, 0.6, 0.3], 0.0), rng)


def real(loader):
    x = loader().data
    x = (x - x.mean(0)) / x.std(0)
    p = x.shape[1]
    r = math.sqrt(2 * p)
    nrm = np.linalg.norm(x, axis=1)
    xc = x * np.minimum(1.0, r / nrm)[:, None]
    return np.corrcoef(x.T), xc.T @ xc / x.shape[0]


# ---------------------------------------------------------------- one point
CANDS = ["none_psd", "univ4", "shrink_F", "shrink_op", "factor_F", "factor_op"]
SURE_FAMILY = ["none_psd", "shrink_F", "factor_F"]
CV_FAMILY = ["none_psd", "univ4", "shrink_F", "factor_F"]


def fit_all(y, s):
    eig = eigh(y)
    out = {}
    out["none_psd"] = none_psd(y, eig)
    out["univ4"] = (universal(y, s),)
    for kind in ("F", "op"):
        k = "F" if kind == "F" else "O"
        out[f"shrink_{kind}"] = spectral(y, s, k, False, eig)
        out[f"factor_{kind}"] = spectral(y, s, k, True, eig)
    return out


def one(target, mean, s, rng):
    p = target.shape[0]
    # Fold sums: K folds of n/K reports each, fold-average noise sd s*sqrt(K).
    folds = [mean + noise(p, s * math.sqrt(FOLDS), rng) for _ in range(FOLDS)]
    y = sum(folds) / FOLDS
    fits = fit_all(y, s)
    mats = {k: v[0] for k, v in fits.items()}
    risks = {}
    for k in SURE_FAMILY:
        m, vals, u, h, dh = fits[k]
        risks[k] = sure(y, s, vals, u, h, dh, m, k.startswith("factor"))
    mats["sure"] = mats[min(risks, key=risks.get)]
    # K-fold CV (the project's scheme): fit on the other folds, score on the held out.
    s_train = s * math.sqrt(FOLDS / (FOLDS - 1))
    cv = {k: 0.0 for k in CV_FAMILY}
    for i in range(FOLDS):
        train = (sum(folds) - folds[i]) / (FOLDS - 1)
        ft = fit_all(train, s_train)
        for k in CV_FAMILY:
            cv[k] += np.sum((ft[k][0] - folds[i]) ** 2)
    mats["cv"] = mats[min(cv, key=cv.get)]
    tn2, tnf = np.linalg.norm(target, 2), np.linalg.norm(target)
    err = {}
    for k, m in mats.items():
        err[k] = (np.linalg.norm(m - target, 2) / tn2, np.linalg.norm(m - target) / tnf)
    err["oracle"] = tuple(min(err[k][i] for k in SURE_FAMILY) for i in (0, 1))
    return err, min(risks, key=risks.get), min(cv, key=cv.get)


def main():
    rng = np.random.default_rng(20240601)
    sig = {e: analytic_sigma(e) for e in (0.5, 1.0, 2.0)}
    points = []
    synth = {
        "factor1": lambda p, r: factor_model(p, 1, r),
        "factor3": lambda p, r: factor_model(p, 3, r),
        "factor5": lambda p, r: factor_model(p, 5, r),
        "block": block_model,
        "sparse": sparse_model,
        "toeplitz(M1)": model1,
        "banded(M2)": model2,
    }
    cases = []
    for name, mk in synth.items():
        for p in (20, 50, 100):
            c = mk(p, rng)
            cases.append((name, p, c, c))
    for name, loader in (("breast_cancer", load_breast_cancer), ("wine", load_wine)):
        t, m = real(loader)
        cases.append((name, t.shape[0], t, m))
    for name, p, target, mean in cases:
        for n in (1e5, 1e6, 1e7):
            for eps in (0.5, 1.0, 2.0):
                s = 2 * p * sig[eps] / math.sqrt(n)
                acc, picks_s, picks_c = {}, [], []
                for _ in range(REPS):
                    e, ps, pc = one(target, mean, s, rng)
                    picks_s.append(ps)
                    picks_c.append(pc)
                    for k, v in e.items():
                        acc.setdefault(k, []).append(v)
                row = {k: np.mean(v, axis=0).tolist() for k, v in acc.items()}
                points.append(dict(model=name, p=p, n=n, eps=eps, sigma_n=s,
                                   err=row, sure_picks=picks_s, cv_picks=picks_c))
        print(name, p, file=sys.stderr)
    with open("docs/experiments/spectral_study_results.json", "w") as f:
        json.dump(dict(sigma=sig, points=points), f)
    summarize(points)


def summarize(points):
    rules = CANDS + ["sure", "cv", "oracle"]
    print("| rule | norm | max ratio | mean ratio | points ≤ 0.9 | vs oracle (mean) |")
    print("|---|---|---|---|---|---|")
    for r in rules:
        for i, nm in ((0, "spectral"), (1, "Frobenius")):
            ratios = [pt["err"][r][i] / min(pt["err"]["none_psd"][i], pt["err"]["univ4"][i])
                      for pt in points]
            orc = [pt["err"][r][i] / pt["err"]["oracle"][i] for pt in points]
            print(f"| {r} | {nm} | {max(ratios):.2f} | {np.mean(ratios):.2f} | "
                  f"{sum(x <= 0.9 for x in ratios)}/{len(ratios)} | {np.mean(orc):.2f} |")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        with open("docs/experiments/spectral_study_results.json") as f:
            summarize(json.load(f)["points"])
    else:
        main()
