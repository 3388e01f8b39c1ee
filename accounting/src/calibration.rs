//! Gaussian noise calibration: the analytic Gaussian mechanism (Balle & Wang 2018,
//! Theorem 8), the classic formula, and the zCDP parameter.
//!
//! All functions take the L2 sensitivity `sensitivity` (Δ) in the same units as the
//! returned σ.

use thiserror::Error;

/// Why a Gaussian mechanism could not be calibrated. The privacy core maps each
/// variant onto its own spec error with the same meaning.
#[derive(Debug, Clone, Copy, PartialEq, Error)]
pub enum CalibrationError {
    /// ε not a positive finite number.
    #[error("epsilon {0} must be a positive finite number")]
    Epsilon(f64),
    /// δ outside (0, 1).
    #[error("delta {0} must lie strictly between 0 and 1")]
    Delta(f64),
    /// Sensitivity not a positive finite number.
    #[error("sensitivity {0} must be a positive finite number")]
    Sensitivity(f64),
    /// No finite σ meets (ε, δ).
    #[error("epsilon {epsilon} and delta {delta} need more noise than a finite sigma")]
    Uncalibratable {
        /// ε asked for.
        epsilon: f64,
        /// δ asked for.
        delta: f64,
    },
}

/// Standard normal CDF Φ(x), accurate in the tails (via `erfc`).
pub fn std_normal_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// The smallest δ for which the Gaussian mechanism with noise sd `sigma` is
/// (ε, δ)-DP for a query of L2 sensitivity `sensitivity` (Balle & Wang 2018, Thm 8):
/// `Φ(Δ/(2σ) − εσ/Δ) − e^ε·Φ(−Δ/(2σ) − εσ/Δ)`.
pub fn gaussian_delta(sensitivity: f64, epsilon: f64, sigma: f64) -> f64 {
    let a = sensitivity / (2.0 * sigma);
    let b = epsilon * sigma / sensitivity;
    // max(0, ·): rounding can push the difference a hair below zero far in the tail.
    (std_normal_cdf(a - b) - epsilon.exp() * std_normal_cdf(-a - b)).max(0.0)
}

fn check_privacy(sensitivity: f64, epsilon: f64, delta: f64) -> Result<(), CalibrationError> {
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(CalibrationError::Epsilon(epsilon));
    }
    if !(delta > 0.0 && delta < 1.0) {
        return Err(CalibrationError::Delta(delta));
    }
    if !(sensitivity.is_finite() && sensitivity > 0.0) {
        return Err(CalibrationError::Sensitivity(sensitivity));
    }
    Ok(())
}

/// The analytic Gaussian mechanism: the smallest σ with
/// [`gaussian_delta`]`(Δ, ε, σ) ≤ δ`, found by bisection to full f64 precision.
///
/// Valid for every ε > 0 (unlike [`classic_sigma`]).
pub fn analytic_sigma(sensitivity: f64, epsilon: f64, delta: f64) -> Result<f64, CalibrationError> {
    check_privacy(sensitivity, epsilon, delta)?;
    // gaussian_delta is decreasing in σ; bracket the root.
    let mut hi = sensitivity;
    while gaussian_delta(sensitivity, epsilon, hi) > delta {
        hi *= 2.0;
        if !hi.is_finite() {
            return Err(CalibrationError::Uncalibratable { epsilon, delta });
        }
    }
    let mut lo = hi / 2.0;
    while lo > f64::MIN_POSITIVE && gaussian_delta(sensitivity, epsilon, lo) <= delta {
        lo /= 2.0;
    }
    // Invariant: δ(lo) > δ ≥ δ(hi).
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if gaussian_delta(sensitivity, epsilon, mid) > delta {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

/// The classic Gaussian mechanism σ = Δ·√(2 ln(1.25/δ))/ε (Dwork & Roth, Thm A.1).
///
/// Only a valid guarantee for ε < 1; exposed for comparison, never used to calibrate.
pub fn classic_sigma(sensitivity: f64, epsilon: f64, delta: f64) -> Result<f64, CalibrationError> {
    check_privacy(sensitivity, epsilon, delta)?;
    Ok(sensitivity * (2.0 * (1.25 / delta).ln()).sqrt() / epsilon)
}

/// zCDP parameter of the Gaussian mechanism: ρ = Δ²/(2σ²) (Bun & Steinke 2016).
pub fn zcdp_rho(sensitivity: f64, sigma: f64) -> f64 {
    sensitivity * sensitivity / (2.0 * sigma * sigma)
}

/// The zCDP ρ of a pure ε-DP release: `ρ = ε²/2`.
///
/// Bun & Steinke 2016, Proposition 1.4 (proved as Proposition 3.3): an ε-DP
/// mechanism is (ε²/2)-zCDP. Sketch: for neighbouring inputs the privacy loss
/// `Z = ln(P(y)/P'(y))`, `y` drawn from `P`, lies in `[−ε, ε]` and satisfies
/// `E[e^{−Z}] = 1` (the densities integrate to one); these two facts bound its moment
/// generating function by `E[e^{(α−1)Z}] ≤ e^{α(α−1)ε²/2}` for every α > 1, i.e. the
/// Rényi divergence of order α is at most `α·ε²/2`, which is the definition of
/// ρ-zCDP with ρ = ε²/2. Every pure ε-DP release (LaplaceCov, the adaptive Laplace
/// release, a pure-ε budget) is recorded at this ρ, so that ε- and ρ-releases add up
/// in one zCDP ledger.
pub fn pure_dp_rho(epsilon: f64) -> f64 {
    epsilon * epsilon / 2.0
}

/// The ε at which ρ-zCDP implies (ε, δ)-DP: `ε = ρ + 2√(ρ·ln(1/δ))`
/// (Bun & Steinke 2016, Proposition 1.3).
pub fn zcdp_epsilon(rho: f64, delta: f64) -> f64 {
    rho + 2.0 * (rho * (1.0 / delta).ln()).sqrt()
}

/// The largest ρ whose [`zcdp_epsilon`] at `delta` is at most `epsilon`:
/// `ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))²`.
pub fn zcdp_rho_for_epsilon(epsilon: f64, delta: f64) -> f64 {
    let l = (1.0 / delta).ln();
    let r = (l + epsilon).sqrt() - l.sqrt();
    r * r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_sigma_solves_the_delta_equation() {
        for &(eps, delta) in &[
            (0.1, 1e-5),
            (0.5, 1e-6),
            (1.0, 1e-5),
            (1.0, 1e-9),
            (2.0, 1e-6),
            (8.0, 1e-3),
        ] {
            let s = analytic_sigma(2f64.sqrt(), eps, delta).unwrap();
            let got = gaussian_delta(2f64.sqrt(), eps, s);
            assert!(
                (got - delta).abs() <= 1e-9 * delta,
                "eps {eps} delta {delta}: delta(sigma) = {got}"
            );
            // Minimality: 1e-9 less noise already breaks the guarantee.
            assert!(gaussian_delta(2f64.sqrt(), eps, s * (1.0 - 1e-9)) > delta);
        }
    }

    #[test]
    fn analytic_is_below_classic_for_small_epsilon() {
        for &eps in &[0.05, 0.1, 0.5, 0.9, 0.999] {
            for &delta in &[1e-3, 1e-6, 1e-10] {
                let a = analytic_sigma(1.0, eps, delta).unwrap();
                let c = classic_sigma(1.0, eps, delta).unwrap();
                assert!(
                    a < c,
                    "eps {eps} delta {delta}: analytic {a} >= classic {c}"
                );
            }
        }
    }

    /// Reference values computed independently with mpmath (50 digits) by bisection
    /// on the same equation: `python3 docs/calibration_reference.py`.
    #[test]
    fn known_reference_values() {
        let cases = [
            // (Δ, ε, δ, σ)
            (1.0, 1.0, 1e-5, 3.730_631_634_815_942),
            (2f64.sqrt(), 1.0, 1e-6, 5.974_598_181_957_314),
            (2f64.sqrt(), 0.5, 1e-6, 11.395_193_335_869_45),
            (1.0, 0.1, 1e-5, 30.749_566_131_977_45),
        ];
        for (sens, eps, delta, want) in cases {
            let got = analytic_sigma(sens, eps, delta).unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "Δ {sens} ε {eps} δ {delta}: got {got}, want {want}"
            );
        }
    }

    #[test]
    fn sigma_scales_linearly_with_sensitivity() {
        let a = analytic_sigma(1.0, 1.0, 1e-6).unwrap();
        let b = analytic_sigma(2f64.sqrt(), 1.0, 1e-6).unwrap();
        assert!((b / a - 2f64.sqrt()).abs() < 1e-9);
    }

    #[test]
    fn classic_formula_and_rho() {
        let c = classic_sigma(1.0, 0.5, 1e-5).unwrap();
        assert!((c - (2.0 * (1.25e5f64).ln()).sqrt() / 0.5).abs() < 1e-12);
        assert!((zcdp_rho(2f64.sqrt(), 2.0) - 0.25).abs() < 1e-15);
        // ε = 0.5 pure DP is 0.125-zCDP (exact in binary).
        assert_eq!(pure_dp_rho(0.5), 0.125);
    }

    #[test]
    fn zcdp_conversion_and_its_inverse() {
        // ρ = 0.5, δ = 1e-6: 0.5 + 2√(0.5·13.8155) = 5.7566.
        let eps = zcdp_epsilon(0.5, 1e-6);
        assert!((eps - (0.5 + 2.0 * (0.5f64 * 1e6f64.ln()).sqrt())).abs() < 1e-12);
        for &(e, d) in &[(0.1, 1e-6), (1.0, 1e-9), (10.0, 1e-3)] {
            let rho = zcdp_rho_for_epsilon(e, d);
            assert!(
                (zcdp_epsilon(rho, d) - e).abs() < 1e-12 * e.max(1.0),
                "{e} {d}"
            );
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(analytic_sigma(1.0, 0.0, 1e-5).is_err());
        assert!(analytic_sigma(1.0, f64::NAN, 1e-5).is_err());
        assert!(analytic_sigma(1.0, 1.0, 0.0).is_err());
        assert!(analytic_sigma(1.0, 1.0, 1.0).is_err());
        assert!(analytic_sigma(-1.0, 1.0, 1e-5).is_err());
    }
}
