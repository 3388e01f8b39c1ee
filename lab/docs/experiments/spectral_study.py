"""Selection study for the spectral estimators of `aggregator/src/spectral.rs`.

Simulates the released average Y = M + W, W symmetric with every packed entry
(diagonal included) iid N(0, sigma_n^2), sigma_n = R^2 sigma / sqrt(n), R = sqrt(2p),
sigma from the analytic Gaussian mechanism (Delta = sqrt(2), delta = 1e-6), and
compares estimators and selection rules in relative spectral and Frobenius error.
Users' sampling error (O(1/sqrt(n))) is negligible next to sigma_n and is not
simulated; for the synthetic models M = Sigma (clipping at R = sqrt(2p) is rare and
ignored), for the real data M is the mean of the clipped x x^T of the standardized
rows and the target is the correlation matrix (so the clipping bias counts).

Run: python3 lab/docs/experiments/spectral_study.py  (about five minutes on one core; writes
lab/docs/experiments/spectral_study_results.json)
"""
import json
import math
import os
import sys

# One BLAS thread: the matrices are small and the machine is shared.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_breast_cancer, load_wine

# Beside this script (lab/docs/experiments/), wherever it is run from.
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spectral_study_results.json")

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


def bulk_shrink(y, s, alpha, eig=None, level=None):
    """Spikes + bulk shrunk toward its mean (spectral.rs `bulk_shrink`):
    h(l) = max(0, psi + max(alpha (l - psi), sqrt((l - psi)^2 - 4 p s^2)_+)) (above psi;
    psi + alpha (l - psi) below it) with the
    Frobenius spike shrinker sqrt(x^2 - 4a) = theta c^2 taking over from the line where
    it is larger. Continuous and piecewise differentiable in l (so SURE holds);
    alpha = 0 is shrink_F without the margin, alpha = 1 is none_psd."""
    p = y.shape[0]
    vals, u = eig if eig is not None else eigh(y)
    if level is None:
        level = max(rank_level(vals, p, s)[1], 0.0)
    a = p * s * s
    x = vals - level
    root = np.sqrt(np.maximum(x * x - 4 * a, 0.0))
    spike = np.where(x > 0, root, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dspike = np.where((x > 0) & (root > 0), x / root, 0.0)
    use = (x > 0) & (spike > alpha * x)
    h = level + np.where(use, spike, alpha * x)
    dh = np.where(use, dspike, alpha)
    dh = np.where(h < 0, 0.0, dh)
    h = np.maximum(h, 0.0)
    return from_eig(u, h), vals, u, h, dh


def threshold(y, lam, kind, beta):
    """The project's CV threshold candidates: hard/soft off the diagonal, then the
    diagonal shrunk toward the mean variance by beta."""
    if kind == "hard":
        t = np.where(np.abs(y) > lam, y, 0.0)
    else:
        t = np.sign(y) * np.maximum(np.abs(y) - lam, 0.0)
    d = np.diag(y)
    np.fill_diagonal(t, (1 - beta) * d + beta * d.mean())
    return t


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
ALPHAS = [round(0.1 * i, 1) for i in range(11)]
C_GRID = [0.25 * 2 ** (i / 2) for i in range(10)]  # CrossValidation::default noise_scales
BETAS = [0.0, 0.5, 1.0]  # CrossValidation::default diagonal_shrinkage
SINGLE = ["none_psd", "univ4", "shrink_F", "shrink_op", "factor_F", "factor_op", "bulk"]
RULES = ["sure", "sure_bulk", "cv_thr", "cv_all", "oracle"]
OLD_SURE = ["none_psd", "shrink_F", "factor_F"]


def spectral_family(y, s, eig=None):
    """name -> (matrix, vals, u, h, dh, diag_fit) for the SURE family."""
    eig = eig if eig is not None else eigh(y)
    level = max(rank_level(eig[0], y.shape[0], s)[1], 0.0)
    out = {"none_psd": none_psd(y, eig) + (False,)}
    out["shrink_F"] = spectral(y, s, "F", False, eig) + (False,)
    out["factor_F"] = spectral(y, s, "F", True, eig) + (True,)
    for a in ALPHAS:
        out[f"bulk{a}"] = bulk_shrink(y, s, a, eig, level) + (False,)
    return out


def sure_pick(y, s, fam, names):
    risks = {k: sure(y, s, *fam[k][1:5], fam[k][0], fam[k][5]) for k in names}
    return min(risks, key=risks.get)


def threshold_cands(y, s):
    lg = math.sqrt(math.log(y.shape[0]))
    out = {"thr_none": y}
    for kind in ("hard", "soft"):
        for c in C_GRID:
            for b in BETAS:
                out[f"thr_{kind}_{c:.3f}_{b}"] = threshold(y, c * s * lg, kind, b)
    return out


def all_cands(y, s):
    """Every candidate of the CV (unprojected for thresholds: the loss uses the
    thresholded matrix; the chosen one is projected on the full data)."""
    fam = spectral_family(y, s)
    out = {k: v[0] for k, v in fam.items()}
    out.update(threshold_cands(y, s))
    return out


def one(target, mean, s, rng):
    p = target.shape[0]
    # Fold sums: K folds of n/K reports each, fold-average noise sd s*sqrt(K).
    folds = [mean + noise(p, s * math.sqrt(FOLDS), rng) for _ in range(FOLDS)]
    y = sum(folds) / FOLDS
    eig = eigh(y)
    fam = spectral_family(y, s, eig)
    mats = {k: v[0] for k, v in fam.items()}
    mats["univ4"] = universal(y, s)
    mats["shrink_op"] = spectral(y, s, "O", False, eig)[0]
    mats["factor_op"] = spectral(y, s, "O", True, eig)[0]
    bulk_names = [f"bulk{a}" for a in ALPHAS]
    pick_bulk = sure_pick(y, s, fam, bulk_names)
    mats["bulk"] = mats[pick_bulk]
    mats["sure"] = mats[sure_pick(y, s, fam, OLD_SURE)]
    pick = sure_pick(y, s, fam, OLD_SURE + bulk_names)
    mats["sure_bulk"] = mats[pick]
    # K-fold CV (the project's scheme): fit on the other folds, score on the held out.
    s_train = s * math.sqrt(FOLDS / (FOLDS - 1))
    cv = {}
    for i in range(FOLDS):
        train = (sum(folds) - folds[i]) / (FOLDS - 1)
        for k, m in all_cands(train, s_train).items():
            cv[k] = cv.get(k, 0.0) + np.sum((m - folds[i]) ** 2)
    thr = {k: v for k, v in cv.items() if k.startswith("thr_")}
    full_thr = threshold_cands(y, s)
    pick_thr = min(thr, key=thr.get)
    mats["cv_thr"] = none_psd(full_thr[pick_thr])[0]
    pick_all = min(cv, key=cv.get)
    mats["cv_all"] = mats[pick_all] if pick_all in mats else none_psd(full_thr[pick_all])[0]
    tn2, tnf = np.linalg.norm(target, 2), np.linalg.norm(target)
    err = {}
    for k, m in mats.items():
        err[k] = (np.abs(np.linalg.eigvalsh(m - target)).max() / tn2, np.linalg.norm(m - target) / tnf)
    pool = [k for k in err if k not in ("sure", "sure_bulk", "bulk", "cv_all")]
    err["oracle"] = tuple(min(err[k][i] for k in pool) for i in (0, 1))
    return err, pick, pick_all


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
    with open(RESULTS, "w") as f:
        json.dump(dict(sigma=sig, points=points), f)
    summarize(points)


def ratio(pt, r, i):
    return pt["err"][r][i] / min(pt["err"]["none_psd"][i], pt["err"]["univ4"][i])


def summarize(points):
    rules = SINGLE + RULES
    print("| rule | norm | max ratio | mean ratio | points ≤ 0.9 | vs oracle (mean) |")
    print("|---|---|---|---|---|---|")
    for r in rules:
        for i, nm in ((0, "spectral"), (1, "Frobenius")):
            ratios = [ratio(pt, r, i) for pt in points]
            orc = [pt["err"][r][i] / pt["err"]["oracle"][i] for pt in points]
            print(f"| {r} | {nm} | {max(ratios):.2f} | {np.mean(ratios):.2f} | "
                  f"{sum(x <= 0.9 for x in ratios)}/{len(ratios)} | {np.mean(orc):.2f} |")
    print()
    cols = ["shrink_F", "bulk", "sure", "sure_bulk", "cv_thr", "cv_all", "oracle"]
    print("| model | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for model in dict.fromkeys(pt["model"] for pt in points):
        pts = [pt for pt in points if pt["model"] == model]
        cells = [f"{np.mean([ratio(pt, r, 0) for pt in pts]):.2f} / "
                 f"{np.mean([ratio(pt, r, 1) for pt in pts]):.2f}" for r in cols]
        print(f"| {model} | " + " | ".join(cells) + " |")
    print()
    for r in ("sure_bulk", "cv_all"):
        print(f"Points where {r} > 0.9 (spectral / Frobenius ratio, detection ratio "
              f"lambda_1(M - I-ish) vs sigma_n sqrt(p)):")
        for pt in points:
            a, b = ratio(pt, r, 0), ratio(pt, r, 1)
            if a > 0.9 or b > 0.9:
                print(f"  {pt['model']} p={pt['p']} n={pt['n']:.0e} eps={pt['eps']}: "
                      f"{a:.2f} / {b:.2f}; vs oracle {pt['err'][r][0] / pt['err']['oracle'][0]:.2f}"
                      f" / {pt['err'][r][1] / pt['err']['oracle'][1]:.2f}")
    from collections import Counter
    print("SURE (sure_bulk) picks:", Counter(k for pt in points for k in pt["sure_picks"]))
    print("CV (cv_all) picks:", Counter(k.rsplit("_", 2)[0] if k.startswith("thr_") else k
                                        for pt in points for k in pt["cv_picks"]))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--summary":
        with open(RESULTS) as f:
            summarize(json.load(f)["points"])
    else:
        main()
