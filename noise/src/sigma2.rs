//! σ² as an exact rational, and the error for an invalid σ.

use num_bigint::BigUint;
use thiserror::Error;

/// σ² below `2^MIN_SIGMA2_LOG2` is refused (σ < 1/256).
const MIN_SIGMA2_LOG2: u32 = 16;
/// σ² above `2^MAX_SIGMA2_LOG2` is refused (σ > 2^50).
const MAX_SIGMA2_LOG2: u32 = 100;

/// An invalid σ or σ² for the exact sampler.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid noise scale: {0}")]
pub struct SigmaError(String);

/// σ² as an exact rational `num/den` (reduced), `2^−16 ≤ σ² ≤ 2^100`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sigma2 {
    num: u128,
    den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Sigma2 {
    /// σ² = `num/den` exactly. Fails unless `den > 0` and `2^−16 ≤ num/den ≤ 2^100`.
    pub fn from_ratio(num: u128, den: u128) -> Result<Self, SigmaError> {
        if den == 0 {
            return Err(SigmaError("σ² has a zero denominator".into()));
        }
        if num == 0 {
            return Err(SigmaError("σ² must be positive".into()));
        }
        let g = gcd(num, den);
        let (num, den) = (num / g, den / g);
        // num/den ≥ 2^-16 ⇔ num·2^16 ≥ den; num/den ≤ 2^100 ⇔ num ≤ den·2^100.
        let big_enough = num >= 1 << (128 - MIN_SIGMA2_LOG2) || num << MIN_SIGMA2_LOG2 >= den;
        let small_enough = den >= 1 << (128 - MAX_SIGMA2_LOG2) || num <= den << MAX_SIGMA2_LOG2;
        if !big_enough || !small_enough {
            return Err(SigmaError(format!(
                "σ² = {num}/{den} is outside [2^-{MIN_SIGMA2_LOG2}, 2^{MAX_SIGMA2_LOG2}]"
            )));
        }
        Ok(Sigma2 { num, den })
    }

    /// σ² for the f64 `sigma`, **exactly**: an f64 is `m·2^e` with an integer `m`, so
    /// `σ² = m²·2^{2e}` is a rational with a power-of-two denominator and no rounding is
    /// needed (in particular it is never below the square of `sigma`, so the privacy
    /// guarantee computed for `sigma` is not weakened). Fails unless
    /// `2^−8 ≤ sigma ≤ 2^50`.
    pub fn from_sigma(sigma: f64) -> Result<Self, SigmaError> {
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(SigmaError(format!(
                "σ must be finite and positive, got {sigma}"
            )));
        }
        let bits = sigma.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1 << 52) - 1);
        let (m, e) = if biased == 0 {
            (frac, -1074)
        } else {
            (frac | 1 << 52, biased - 1075)
        };
        // σ = m·2^e exactly, m odd after this.
        let tz = m.trailing_zeros();
        let (m, e) = (m >> tz, e + tz as i32);
        let m2 = u128::from(m) * u128::from(m); // < 2^106
        let out_of_range = || SigmaError(format!("σ = {sigma} is outside [2^-8, 2^50]"));
        if e >= 0 {
            let shift = 2 * e as u32;
            if shift + (128 - m2.leading_zeros()) > 127 {
                return Err(out_of_range());
            }
            Sigma2::from_ratio(m2 << shift, 1).map_err(|_| out_of_range())
        } else {
            let shift = (-2 * e) as u32;
            if shift > 127 {
                return Err(out_of_range());
            }
            Sigma2::from_ratio(m2, 1 << shift).map_err(|_| out_of_range())
        }
    }

    /// Numerator of the reduced fraction.
    pub fn numerator(&self) -> u128 {
        self.num
    }

    /// Denominator of the reduced fraction.
    pub fn denominator(&self) -> u128 {
        self.den
    }

    /// `⌊σ⌋ = ⌊√⌊σ²⌋⌋` (exact integer square root), at most `2^50`.
    pub fn floor_sigma(&self) -> u64 {
        let s = (BigUint::from(self.num / self.den)).sqrt();
        u64::try_from(&s).expect("σ ≤ 2^50")
    }

    pub(super) fn big(&self) -> (BigUint, BigUint) {
        (BigUint::from(self.num), BigUint::from(self.den))
    }
}
