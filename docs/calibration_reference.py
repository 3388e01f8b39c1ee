"""Independent reference values for the analytic Gaussian mechanism (Balle & Wang 2018).

Bisection on delta(sigma) = Phi(D/(2s) - e*s/D) - exp(e)*Phi(-D/(2s) - e*s/D) at 50 digits.
Used by accounting/src/calibration.rs::known_reference_values.  Run: python3 docs/calibration_reference.py
"""
import mpmath as mp

mp.mp.dps = 50


def delta_of(D, e, s):
    a, b = D / (2 * s), e * s / D
    return mp.ncdf(a - b) - mp.e**e * mp.ncdf(-a - b)


def analytic_sigma(D, e, d):
    lo, hi = mp.mpf("1e-6"), mp.mpf(1)
    while delta_of(D, e, hi) > d:
        hi *= 2
    for _ in range(300):
        mid = (lo + hi) / 2
        if delta_of(D, e, mid) > d:
            lo = mid
        else:
            hi = mid
    return hi


for D, e, d in [(1, 1, "1e-5"), (mp.sqrt(2), 1, "1e-6"), (mp.sqrt(2), "0.5", "1e-6"), (1, "0.1", "1e-5")]:
    D, e, d = mp.mpf(D), mp.mpf(e), mp.mpf(d)
    print(f"Δ={mp.nstr(D, 6)} ε={mp.nstr(e, 3)} δ={mp.nstr(d, 3)}: σ={mp.nstr(analytic_sigma(D, e, d), 17)}")
