//! Tests: the Bernoulli and Laplace sub-samplers.

use super::*;

#[test]
fn cks20_bernoulli_exp_matches_exp() {
    let mut rng = ChaCha12Rng::seed_from_u64(20);
    let n = 100_000u64;
    for (num, den) in [
        (0u128, 1u128),
        (1, 3),
        (1, 1),
        (7, 5),
        (3, 1),
        (22, 7),
        (1u128 << 80, 3u128 << 79),
    ] {
        let k = (0..n)
            .filter(|_| cks20::bernoulli_exp_neg(&mut rng, num, den))
            .count();
        let p = (-(num as f64) / den as f64).exp();
        assert_binomial(k as u64, n, p, &format!("exp(-{num}/{den})"));
    }
}

/// The exact lazy Bernoulli on its own: α rational (exact bounds) and α = e^{-γ}
/// (big bounds), from a random first word and from the word right at α's 64-bit
/// prefix, where the outcome depends on the later digits: P(accept | u) is then the
/// fractional part of α·2^64.
#[test]
fn lazy_bernoulli_is_exact() {
    let mut rng = ChaCha12Rng::seed_from_u64(21);
    let n = 30_000u64;
    // α = 1/3.
    let third = |p: u64| {
        let v = pow2(p) / 3u32;
        (v.clone(), v + 1u32)
    };
    let k = (0..n)
        .filter(|_| {
            let first = rng.next_u64();
            lazy_bernoulli(&mut rng, first, third)
        })
        .count();
    assert_binomial(k as u64, n, 1.0 / 3.0, "1/3");
    // u = ⌊2^64/3⌋: P = frac(2^64/3) = 1/3 (2^64 ≡ 1 mod 3).
    let u = (1u128 << 64).div_euclid(3) as u64;
    let k = (0..n)
        .filter(|_| lazy_bernoulli(&mut rng, u, third))
        .count();
    assert_binomial(k as u64, n, 1.0 / 3.0, "1/3 at its prefix");
    // α = e^{-7/5}.
    let (a, b) = (BigUint::from(7u32), BigUint::from(5u32));
    let bounds = |p: u64| exp_neg_bounds(&a, &b, p);
    let k = (0..n)
        .filter(|_| {
            let first = rng.next_u64();
            lazy_bernoulli(&mut rng, first, bounds)
        })
        .count();
    assert_binomial(k as u64, n, (-1.4f64).exp(), "e^-1.4");
    let (lo, _) = exp_neg_bounds(&a, &b, 64 + 64);
    let prefix = u64::try_from(&(&lo >> 64u32)).unwrap();
    let frac = u64::try_from(&(&lo & BigUint::from(u64::MAX))).unwrap() as f64 / 2f64.powi(64);
    let k = (0..n)
        .filter(|_| lazy_bernoulli(&mut rng, prefix, bounds))
        .count();
    assert_binomial(k as u64, n, frac, "e^-1.4 at its prefix");
    assert!(lazy_bernoulli(&mut rng, prefix - 1, bounds));
    assert!(!lazy_bernoulli(&mut rng, prefix + 1, bounds));
}

#[test]
fn cks20_discrete_laplace_has_the_laplace_pmf() {
    let mut rng = ChaCha12Rng::seed_from_u64(22);
    for t in [1u64, 4] {
        let n = 100_000;
        let m = 40 * t as i64;
        let samples: Vec<i64> = (0..n)
            .map(|_| cks20::discrete_laplace(&mut rng, t))
            .collect();
        let w: Vec<f64> = (-m..=m)
            .map(|x| (-(x.abs() as f64) / t as f64).exp())
            .collect();
        let z: f64 = w.iter().sum();
        let probs: Vec<f64> = w.iter().map(|v| v / z).collect();
        assert_chi2(&histogram(&samples, m), &probs, &format!("Lap_Z({t})"));
        assert_symmetric(&samples, &format!("Lap_Z({t})"));
    }
}

#[test]
fn cks20_discrete_gaussian_has_the_exact_pmf() {
    let mut rng = ChaCha12Rng::seed_from_u64(23);
    for (num, den) in [(1u128, 4u128), (9, 1)] {
        let s2 = Sigma2::from_ratio(num, den).unwrap();
        let sigma = (num as f64 / den as f64).sqrt();
        let samples: Vec<i64> = (0..60_000)
            .map(|_| cks20::discrete_gaussian(&mut rng, &s2))
            .collect();
        let (m, probs) = dg_pmf(sigma);
        assert_chi2(&histogram(&samples, m), &probs, &format!("CKS20 σ={sigma}"));
    }
}
