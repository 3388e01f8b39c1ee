//! The straightforward algorithms of Canonne, Kamath & Steinke (2020), on big integers:
//! the reference that [`DiscreteGaussian`](super::DiscreteGaussian) is benchmarked and tested against.
//!
//! Exact and simple, but slow (microseconds per draw at large σ): every Bernoulli trial
//! draws a uniform big integer below a big denominator.

use super::Sigma2;
use num_bigint::{BigInt, BigUint};
use rand::RngCore;

/// A uniform integer in `[0, bound)`, `bound ≥ 1`, by rejection on `bits(bound)`
/// random bits (fewer than 2 rounds on average).
pub(crate) fn random_below<R: RngCore + ?Sized>(rng: &mut R, bound: &BigUint) -> BigUint {
    let bits = bound.bits();
    assert!(bits > 0, "empty range");
    if bits <= 64 {
        let bound = u64::try_from(bound).expect("64 bits");
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        loop {
            let v = rng.next_u64() & mask;
            if v < bound {
                return BigUint::from(v);
            }
        }
    }
    let words = bits.div_ceil(32) as usize;
    let top_bits = bits - 32 * (words as u64 - 1);
    loop {
        let mut digits: Vec<u32> = (0..words).map(|_| rng.next_u32()).collect();
        if top_bits < 32 {
            digits[words - 1] &= (1u32 << top_bits) - 1;
        }
        let v = BigUint::new(digits);
        if &v < bound {
            return v;
        }
    }
}

/// Bernoulli(num/den), `num ≤ den`.
fn bernoulli_ratio<R: RngCore + ?Sized>(rng: &mut R, num: &BigUint, den: &BigUint) -> bool {
    &random_below(rng, den) < num
}

/// Bernoulli(exp(−γ)) for `γ = num/den ∈ [0, 1]`: CKS20 Algorithm 1, first part.
/// `K ← 1`; while Bernoulli(γ/K), `K ← K + 1`; return `K` odd.
fn bernoulli_exp_neg_unit<R: RngCore + ?Sized>(rng: &mut R, num: &BigUint, den: &BigUint) -> bool {
    let mut k: u64 = 1;
    while bernoulli_ratio(rng, num, &(den * k)) {
        k += 1;
    }
    k % 2 == 1
}

/// Bernoulli(exp(−γ)) for a rational `γ = num/den ≥ 0` (CKS20 Algorithm 1):
/// `⌊γ⌋` trials of Bernoulli(e^{−1}), then one of Bernoulli(exp(−(γ − ⌊γ⌋))).
pub(crate) fn bernoulli_exp_neg_big<R: RngCore + ?Sized>(
    rng: &mut R,
    num: &BigUint,
    den: &BigUint,
) -> bool {
    if num <= den {
        return bernoulli_exp_neg_unit(rng, num, den);
    }
    let one = BigUint::from(1u32);
    let mut j = num / den;
    while j.bits() > 0 {
        if !bernoulli_exp_neg_unit(rng, &one, &one) {
            return false;
        }
        j -= 1u32;
    }
    bernoulli_exp_neg_unit(rng, &(num % den), den)
}

/// Bernoulli(exp(−num/den)) exactly (CKS20 Algorithm 1). `den > 0`.
pub fn bernoulli_exp_neg<R: RngCore + ?Sized>(rng: &mut R, num: u128, den: u128) -> bool {
    assert!(den > 0, "zero denominator");
    bernoulli_exp_neg_big(rng, &BigUint::from(num), &BigUint::from(den))
}

fn discrete_laplace_big<R: RngCore + ?Sized>(rng: &mut R, t: &BigUint) -> BigInt {
    let one = BigUint::from(1u32);
    loop {
        let u = random_below(rng, t);
        if !bernoulli_exp_neg_big(rng, &u, t) {
            continue;
        }
        let mut v = BigUint::ZERO;
        while bernoulli_exp_neg_unit(rng, &one, &one) {
            v += 1u32;
        }
        let x = u + t * v;
        let negative = rng.next_u32() & 1 == 1;
        if negative && x.bits() == 0 {
            continue;
        }
        let x = BigInt::from(x);
        return if negative { -x } else { x };
    }
}

/// The discrete Laplace distribution with scale `t ≥ 1`, `P(x) ∝ exp(−|x|/t)` on Z
/// (CKS20 Algorithm 2 with `s = 1`): `U` uniform in `[0, t)` kept with probability
/// `exp(−U/t)`, `V ~ Geometric(1 − e^{−1})`, `|x| = U + tV`, a sign, and `−0` rejected.
pub fn discrete_laplace<R: RngCore + ?Sized>(rng: &mut R, t: u64) -> i64 {
    assert!(t >= 1, "scale must be at least 1");
    loop {
        if let Ok(x) = i64::try_from(discrete_laplace_big(rng, &BigUint::from(t))) {
            return x;
        }
    }
}

/// The discrete Gaussian `N_Z(0, σ²)` (CKS20 Algorithm 3): with `t = ⌊σ⌋ + 1`,
/// `Y ~ Lap_Z(t)` accepted with probability `exp(−(|Y| − σ²/t)²/(2σ²))`. With
/// σ² = n/d the exponent is the rational `(|Y|·t·d − n)² / (2·n·d·t²)`. Draws beyond
/// the i64 range are rejected.
pub fn discrete_gaussian<R: RngCore + ?Sized>(rng: &mut R, sigma2: &Sigma2) -> i64 {
    let (n, d) = sigma2.big();
    let t = BigUint::from(sigma2.floor_sigma() + 1);
    let n_int = BigInt::from(n.clone());
    let den = BigUint::from(2u32) * &n * &d * &t * &t;
    loop {
        let y = discrete_laplace_big(rng, &t);
        let diff = BigInt::from(y.magnitude() * &t * &d) - &n_int;
        let num = diff.magnitude() * diff.magnitude();
        if bernoulli_exp_neg_big(rng, &num, &den)
            && let Ok(y) = i64::try_from(y)
        {
            return y;
        }
    }
}
