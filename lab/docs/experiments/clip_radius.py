"""How the clip radius trades clipping bias against noise on real data.

Reads `unordered` runs of the reproduce example (`--json`) made with different
`--data-clip-factor k` (R = sqrt(k*p) on standardized rows) and prints, per data set
and point, the default estimate's mean relative error (spectral / Frobenius) against
the data's correlation matrix at every k, the k with the smallest sum of the two, and
what k = 2 (the issue's experiment and the load generator's `--standardize`) costs
against it. Points are ordered by

    s = sigma * sqrt(p / n)

(sigma: the per-report noise sd on the unit scale, fixed by epsilon, delta and p), a
public number a user knows before collecting: it is sigma_n*sqrt(p)/R^2, the detection
threshold of the released average (sigma_n = R^2*sigma/sqrt(n)) in units of R^2.
The summary groups the points by s.

Run (lab/docs/REPRODUCTION.md section 6, "The clip radius"; add --data-correlation to
score the correlation matrix each estimate returns instead of the covariance):
    for k in 0.5 0.75 1 1.5 2 3 4 6; do
      cargo run --release -p ldpcov-lab --example reproduce -- --threads 2 unordered --reps 4 --json \\
        --models '' --data-clip-factor $k --data breast_cancer=... --data wine=... \\
        --data diabetes=... --data digits=... --data iris=... > /tmp/clip_$k.json
    done
    python3 lab/docs/experiments/clip_radius.py 0.5=/tmp/clip_0.5.json 0.75=/tmp/clip_0.75.json \\
        1=/tmp/clip_1.json 1.5=/tmp/clip_1.5.json 2=/tmp/clip_2.json 3=/tmp/clip_3.json \\
        4=/tmp/clip_4.json 6=/tmp/clip_6.json
"""
import json
import math
import sys


def load(path):
    """The `unordered` point rows of a JSON-lines run."""
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r.get("experiment") == "unordered"]


def main(args):
    if not args:
        sys.exit("usage: clip_radius.py K=RUN.json ...")
    runs = {}
    for arg in args:
        k, _, path = arg.partition("=")
        runs[k] = {(r["model"], r["p"], r["n"], r["epsilon"]): r for r in load(path)}
    ks = sorted(runs, key=float)
    if "2" not in runs:
        sys.exit("a run with k = 2 is needed (the reference)")
    keys = sorted(runs["2"])
    for k in ks:
        if sorted(runs[k]) != keys:
            sys.exit(f"the run for k = {k} has other points than the one for k = 2")
    points = []
    for key in keys:
        model, p, n, eps = key
        errors = []
        for k in ks:
            r = runs[k][key]
            default = next(e for e in r["errors"] if e["rule"] == "default")
            errors.append((default["rel_spectral"], default["rel_frobenius"]))
        r2 = runs["2"][key]
        s = r2["noise_sd"] * math.sqrt(p) / r2["clip_radius"] ** 2
        total = [a + b for a, b in errors]
        best = min(range(len(ks)), key=lambda i: total[i])
        points.append((s, model, p, n, eps, errors, best, total[ks.index("2")] / total[best]))
    points.sort()
    print("| s = σ√(p/n) | data set | p | n | ε | "
          + " | ".join(f"k = {k}" for k in ks) + " | best k | k = 2 ÷ best |")
    print("|---" * (7 + len(ks)) + "|")
    for s, model, p, n, eps, errors, best, cost in points:
        cells = " | ".join(f"{a:.3f} / {b:.3f}" for a, b in errors)
        print(f"| {s:.4f} | {model} | {p} | {n:.0e} | {eps:g} | {cells} | {ks[best]} | {cost:.2f} |")
    print()
    print("Mean over the points of each band of (spectral + Frobenius error at k) ÷ (the same at the point's best k):")
    print()
    print("| band of s | points | " + " | ".join(f"k = {k}" for k in ks) + " |")
    print("|---" * (2 + len(ks)) + "|")
    bands = [(0.0, 0.01), (0.01, 0.03), (0.03, math.inf)]
    for lo, hi in bands:
        band = [pt for pt in points if lo <= pt[0] < hi]
        if not band:
            continue
        means = []
        for i in range(len(ks)):
            ratios = [(pt[5][i][0] + pt[5][i][1]) / (pt[5][pt[6]][0] + pt[5][pt[6]][1]) for pt in band]
            means.append(sum(ratios) / len(ratios))
        label = f"{lo:g} ≤ s < {hi:g}" if hi != math.inf else f"s ≥ {lo:g}"
        print(f"| {label} | {len(band)} | " + " | ".join(f"{m:.2f}" for m in means) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
