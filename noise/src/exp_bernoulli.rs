//! [`BernoulliExpNeg`]: an exact Bernoulli(exp(−x)) trial for an f64 `x ≥ 0`, read as
//! the exact dyadic rational it is (the rank-one mechanism's off-cap acceptance
//! `e^{−ε}`).

use super::cks20::bernoulli_exp_neg_big;
use num_bigint::BigUint;
use rand::RngCore;
use thiserror::Error;

/// An exponent that is not a finite number `≥ 0`.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("the exponent of Bernoulli(exp(-x)) must be finite and non-negative, got {0}")]
pub struct ExponentError(pub f64);

/// Bernoulli(exp(−x)) for the exact value of an f64 `x ≥ 0`.
///
/// An f64 is `M·2^e` with integers `M < 2^53` and `e`, so `x` is the rational
/// `M·2^max(e,0) / 2^max(−e,0)` with no rounding at all; each trial is CKS20's
/// Algorithm 1 on that rational ([`cks20`](crate::cks20): `⌊x⌋` trials of
/// Bernoulli(e^{−1}), then one of the fractional part, each from exact comparisons of
/// uniform integers), so its probability is exactly `exp(−x)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BernoulliExpNeg {
    num: BigUint,
    den: BigUint,
}

impl BernoulliExpNeg {
    /// The trial for the exact value of `x`.
    pub fn new(x: f64) -> Result<Self, ExponentError> {
        if !(x.is_finite() && x >= 0.0) {
            return Err(ExponentError(x));
        }
        let bits = x.to_bits();
        let biased = ((bits >> 52) & 0x7ff) as i64;
        let frac = bits & ((1 << 52) - 1);
        let (mantissa, exp) = if biased == 0 {
            (frac, -1074)
        } else {
            (frac | 1 << 52, biased - 1075)
        };
        let one = BigUint::from(1u32);
        let (num, den) = if exp >= 0 {
            (BigUint::from(mantissa) << exp as u64, one)
        } else {
            (BigUint::from(mantissa), one << (-exp) as u64)
        };
        Ok(BernoulliExpNeg { num, den })
    }

    /// The exponent as the exact fraction `(numerator, denominator)` (not reduced).
    pub fn exponent(&self) -> (&BigUint, &BigUint) {
        (&self.num, &self.den)
    }

    /// One trial: `true` with probability exactly `exp(−x)`.
    pub fn sample<R: RngCore + ?Sized>(&self, rng: &mut R) -> bool {
        bernoulli_exp_neg_big(rng, &self.num, &self.den)
    }
}
