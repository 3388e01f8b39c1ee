"""Numerical check of the l2 sensitivity of the joint report v(u) = (w*u, triu(u u^T)).

Maximises ||v(u) - v(u')||_2 over the unit ball (u, u' in R^p, ||u||, ||u'|| <= 1) by
L-BFGS-B from many random starts (the ball constraint is a radial map u = z / max(1, |z|)),
and compares with the closed form of joint_mean_covariance.md.
Run: python3 lab/docs/experiments/joint_sensitivity.py   (numpy, scipy)
"""
import numpy as np
from scipy.optimize import minimize


def packed_triu(u):
    i, j = np.triu_indices(len(u))
    return np.outer(u, u)[i, j]


def v(u, w):
    return np.concatenate([w * u, packed_triu(u)])


def ball(z):
    return z / max(1.0, np.linalg.norm(z))


def neg_dist2(x, p, w):
    u, up = ball(x[:p]), ball(x[p:])
    d = v(u, w) - v(up, w)
    return -d @ d


def closed_form(w):
    """Delta(w)^2 from the note: 2 + 2 w^2 + w^4 / 2 for w^2 <= 2, else 4 w^2."""
    w2 = w * w
    return 2 + 2 * w2 + w2 * w2 / 2 if w2 <= 2 else 4 * w2


def attaining_pair(w, p):
    """The pair of the note that attains closed_form(w): unit vectors in the plane of
    e1, e2 with u = (a, -b), u' = (-b, a) and u.u' = -2ab = max(-w^2/2, -1)."""
    c = max(-w * w / 2, -1.0)
    # a^2 + b^2 = 1, 2ab = -c: a = cos(t), b = sin(t) with sin(2t) = -c.
    t = np.arcsin(-c) / 2
    u, up = np.zeros(p), np.zeros(p)
    u[:2] = (np.cos(t), -np.sin(t))
    up[:2] = (-np.sin(t), np.cos(t))
    return u, up


def main():
    rng = np.random.default_rng(20261123)
    print(f"{'p':>3} {'w':>5} {'numeric D^2':>12} {'closed D^2':>11} {'2+2w^2':>7} {'4w^2':>6}")
    worst = 0.0
    for p in (2, 3, 5, 8):
        for w in (0.0, 0.1, 0.3, 0.5, 0.7, 1.0, 1.1, 1.2, 1.5, 2.0):
            best = 0.0
            for _ in range(200):
                x0 = rng.normal(size=2 * p) * rng.uniform(0.2, 1.5)
                res = minimize(neg_dist2, x0, args=(p, w), method="L-BFGS-B")
                best = max(best, -res.fun)
            cf = closed_form(w)
            u, up = attaining_pair(w, p)
            d = v(u, w) - v(up, w)
            assert abs(d @ d - cf) < 1e-12, (p, w, d @ d, cf)
            worst = max(worst, (best - cf) / cf)
            print(f"{p:>3} {w:>5.2f} {best:>12.6f} {cf:>11.6f} {2 + 2 * w * w:>7.3f} {4 * w * w:>6.3f}")
    print(f"largest relative excess of the numeric optimum over the closed form: {worst:.2e}")
    print("the attaining pair reaches the closed form exactly for every (p, w) above")


if __name__ == "__main__":
    main()
