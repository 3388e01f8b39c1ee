//! The exact discrete Gaussian noise of a release, entry by entry, in either weighting.
//!
//! A Gaussian release adds `N_Z(0, σᵢ²)` to each integer sum `i`, independently. In the
//! raw triangle every `σᵢ²` is `σ²`; in the `svec` weighting ([`OffDiagonalWeighting::Svec`])
//! the mean and diagonal sums get `σ²` and the off-diagonal ones `σ²/2`, which is the
//! same as carrying the off-diagonal sums as `√2·Sᵢⱼ`, adding `σ²` and dividing back
//! by √2 — without leaving the integers.
//!
//! # Privacy (docs/PRIVACY.md §6b)
//!
//! For integer shifts the Rényi divergence of the product of independent discrete
//! Gaussians is the sum of the coordinates' divergences, each at most
//! `α·Δᵢ²/(2σᵢ²)` (Canonne, Kamath & Steinke 2020: one coordinate, integer shift;
//! Theorem 14 for independent coordinates of different scales), so the release is
//! `½·sup Σᵢ Δᵢ²/σᵢ²`-zCDP over neighbouring sums. With `σᵢ² = σ²` off the diagonal
//! that is `‖Δ‖²/(2σ²)`; with `σ²/2` it is `‖svec(Δ)‖²/(2σ²)`, and for the
//! second-moment block `‖svec(A)‖ = ‖A‖_F` — the very bound the triangle's sensitivity
//! was derived from (`‖triu(A)‖ ≤ ‖A‖_F`). Every caller's sensitivity is therefore
//! charged in the svec norm unchanged (or, where a rounding term enters, with that
//! term bounded in the svec norm), and ρ is the same.
//!
//! # Exactness
//!
//! `σ²` is the exact square of the calibrated f64 σ ([`Sigma2::from_sigma`]), and the
//! off-diagonal variance is exactly half of it: an f64 is `m·2^e`, so `σ²/2 = m²·2^{2e−1}`
//! is a rational with a power-of-two denominator, represented without rounding. Neither
//! is ever below what ρ was calibrated for.

use crate::CentralError;
use ldpcov_noise::{DiscreteGaussian, DiscreteGaussianSampler, Sigma2};
use ldpcov_privacy::layout::triangle_pairs;
use ldpcov_privacy::mechanism::OffDiagonalWeighting;

/// The noise sd of a release's sums, grid units: of each mean and diagonal entry, and
/// of each off-diagonal entry (the same in the triangle, `σ/√2` in the `svec`
/// weighting; SeparateCov: both are its eigenvalues' sd).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NoiseSd {
    /// Mean and diagonal entries (SeparateCov: each eigenvalue).
    pub diagonal: f64,
    /// Off-diagonal entries.
    pub off_diagonal: f64,
}

impl NoiseSd {
    /// The same sd on every entry.
    pub fn uniform(sd: f64) -> Self {
        NoiseSd {
            diagonal: sd,
            off_diagonal: sd,
        }
    }

    /// Both sds divided by `by` (sums to averages, or a change of grid).
    pub fn scaled(self, by: f64) -> Self {
        NoiseSd {
            diagonal: self.diagonal / by,
            off_diagonal: self.off_diagonal / by,
        }
    }
}

/// The two exact samplers of a Gaussian release at sd `σ` (grid units): `σ²` for the
/// mean and diagonal sums, `σ²` (triangle) or exactly `σ²/2` (`svec`) for the
/// off-diagonal ones. Built once per release (each table takes about half a
/// millisecond).
#[derive(Clone)]
pub(crate) struct ReleaseNoise {
    diagonal: DiscreteGaussian,
    off_diagonal: Option<DiscreteGaussian>,
    sd: NoiseSd,
}

impl std::fmt::Debug for ReleaseNoise {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseNoise")
            .field("diagonal", self.diagonal.sigma2())
            .field("off_diagonal", self.off_diagonal_sigma2())
            .field("sd", &self.sd)
            .finish()
    }
}

/// `σ²/2` exactly.
fn half(sigma2: &Sigma2) -> Result<Sigma2, CentralError> {
    let (num, den) = (sigma2.numerator(), sigma2.denominator());
    let halved = if num % 2 == 0 {
        Sigma2::from_ratio(num / 2, den)
    } else {
        let den = den.checked_mul(2).ok_or_else(|| {
            CentralError::Parameter(format!("σ² = {num}/{den} cannot be halved exactly"))
        })?;
        Sigma2::from_ratio(num, den)
    };
    halved.map_err(|e| CentralError::Parameter(e.to_string()))
}

impl ReleaseNoise {
    /// The samplers for the calibrated `sigma` (grid units) in `weighting`.
    pub(crate) fn new(sigma: f64, weighting: OffDiagonalWeighting) -> Result<Self, CentralError> {
        let sigma2 =
            Sigma2::from_sigma(sigma).map_err(|e| CentralError::Parameter(e.to_string()))?;
        let off_diagonal = match weighting {
            OffDiagonalWeighting::Raw => None,
            OffDiagonalWeighting::Svec => Some(DiscreteGaussian::new(half(&sigma2)?)),
        };
        let sd = match weighting {
            OffDiagonalWeighting::Raw => NoiseSd::uniform(sigma),
            OffDiagonalWeighting::Svec => NoiseSd {
                diagonal: sigma,
                off_diagonal: sigma * std::f64::consts::FRAC_1_SQRT_2,
            },
        };
        Ok(ReleaseNoise {
            diagonal: DiscreteGaussian::new(sigma2),
            off_diagonal,
            sd,
        })
    }

    /// The exact variance of the mean and diagonal entries' noise.
    #[cfg(test)]
    pub(crate) fn diagonal_sigma2(&self) -> &Sigma2 {
        self.diagonal.sigma2()
    }

    /// The exact variance of the off-diagonal entries' noise.
    pub(crate) fn off_diagonal_sigma2(&self) -> &Sigma2 {
        self.off_diagonal
            .as_ref()
            .unwrap_or(&self.diagonal)
            .sigma2()
    }

    /// The sds, grid units.
    pub(crate) fn sd(&self) -> NoiseSd {
        self.sd
    }

    /// One draw for an entry, off the diagonal or not.
    pub(crate) fn draw(&self, off_diagonal: bool, sampler: &mut DiscreteGaussianSampler) -> i64 {
        match (&self.off_diagonal, off_diagonal) {
            (Some(dist), true) => sampler.sample(dist),
            _ => sampler.sample(&self.diagonal),
        }
    }
}

/// Whether each entry of sums laid out as a mean block of `mean_entries` followed by the
/// packed triangle of dimension `dim` is an off-diagonal entry.
pub(crate) fn off_diagonal_entries(dim: usize, mean_entries: usize) -> impl Iterator<Item = bool> {
    std::iter::repeat_n(false, mean_entries).chain(triangle_pairs(dim).map(|(i, j)| i != j))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variances handed to the sampler are exactly σ² (the square of the
    /// calibrated f64) and σ²/2, compared as exact rationals: never smaller.
    #[test]
    fn the_variances_are_exactly_sigma2_and_half_of_it() {
        for sigma in [
            1.0,
            1.5,
            std::f64::consts::SQRT_2 * 2f64.powi(30) / (2.0f64 * 0.37).sqrt(),
            3.0e9 + 0.123,
            2f64.powi(50),
            1.0 + f64::EPSILON,
        ] {
            let exact = Sigma2::from_sigma(sigma).unwrap();
            let raw = ReleaseNoise::new(sigma, OffDiagonalWeighting::Raw).unwrap();
            assert_eq!(raw.diagonal_sigma2(), &exact);
            assert_eq!(raw.off_diagonal_sigma2(), &exact);
            assert_eq!(raw.sd(), NoiseSd::uniform(sigma));
            let svec = ReleaseNoise::new(sigma, OffDiagonalWeighting::Svec).unwrap();
            assert_eq!(svec.diagonal_sigma2(), &exact);
            // 2·(a/b) = c/d exactly: 2·a·d = c·b (a, c < 2^128 after reduction; checked
            // in u128 with room: the values are reduced fractions of σ² ≤ 2^100).
            let (a, b) = (
                svec.off_diagonal_sigma2().numerator(),
                svec.off_diagonal_sigma2().denominator(),
            );
            let (c, d) = (exact.numerator(), exact.denominator());
            let lhs = num_mul(2 * a, d);
            let rhs = num_mul(c, b);
            assert_eq!(lhs, rhs, "σ = {sigma}: off-diagonal σ² is not exactly σ²/2");
            assert_eq!(svec.sd().diagonal, sigma);
            let off = svec.sd().off_diagonal;
            assert!((off * off * 2.0 / (sigma * sigma) - 1.0).abs() < 1e-15);
        }
    }

    /// `x·y` as a pair of u128 halves (exact), for comparing products of fractions.
    fn num_mul(x: u128, y: u128) -> (u128, u128) {
        let (xh, xl) = (x >> 64, x & u128::from(u64::MAX));
        let (yh, yl) = (y >> 64, y & u128::from(u64::MAX));
        let ll = xl * yl;
        let lh = xl * yh;
        let hl = xh * yl;
        let hh = xh * yh;
        let mid = (ll >> 64) + (lh & u128::from(u64::MAX)) + (hl & u128::from(u64::MAX));
        let low = (ll & u128::from(u64::MAX)) | (mid << 64);
        let high = hh + (lh >> 64) + (hl >> 64) + (mid >> 64);
        (high, low)
    }

    #[test]
    fn off_diagonal_entries_follow_the_layout() {
        let mask: Vec<bool> = off_diagonal_entries(3, 3).collect();
        assert_eq!(
            mask,
            [false, false, false, false, true, true, false, true, false]
        );
        assert_eq!(off_diagonal_entries(1, 0).collect::<Vec<_>>(), [false]);
    }
}
