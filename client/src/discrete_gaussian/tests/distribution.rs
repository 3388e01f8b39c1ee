//! Tests: the fast sampler's distribution.

use super::*;

fn exact_moments(sigma: f64) -> (f64, f64) {
    let (m, probs) = dg_pmf(sigma);
    let var = (-m..=m)
        .zip(&probs)
        .map(|(x, p)| (x as f64).powi(2) * p)
        .sum();
    let m4 = (-m..=m)
        .zip(&probs)
        .map(|(x, p)| (x as f64).powi(4) * p)
        .sum();
    (var, m4)
}

#[test]
fn small_sigmas_have_the_exact_pmf() {
    for (i, sigma) in [0.5, 1.0, 3.0, 20.0].into_iter().enumerate() {
        let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
        let samples = draws(&dist, 400_000, 100 + i as u64);
        let (m, probs) = dg_pmf(sigma);
        assert_chi2(&histogram(&samples, m), &probs, &format!("σ={sigma}"));
        let (var, m4) = exact_moments(sigma);
        assert_moments(&samples, var, m4, &format!("σ={sigma}"));
        assert_symmetric(&samples, &format!("σ={sigma}"));
    }
    // The exact variance is below σ² at small σ: σ = 0.5 gives 0.2146..., not 0.25.
    let (var, _) = exact_moments(0.5);
    assert!((var - 0.25).abs() > 0.03);
}

/// Layouts that make the tail and the exact (big-integer) cap path common: the body
/// stops at 4 (≈ 1.3σ) for σ = 3, and for σ = 50 at 128 ≈ 2.6σ with bins of width 32
/// whose γ exceeds the fast path's range (so every outer cap goes to big integers).
#[test]
fn tail_and_exact_paths_have_the_exact_pmf() {
    for (num, body, bins, seed) in [(9u128, 1, 4, 30), (2500, 2, 4, 31)] {
        let s2 = Sigma2::from_ratio(num, 1).unwrap();
        let sigma = (num as f64).sqrt();
        let dist = DiscreteGaussian::with_layout(s2, body, bins);
        let samples = draws(&dist, 80_000, seed);
        let (m, probs) = dg_pmf(sigma);
        assert_chi2(
            &histogram(&samples, m),
            &probs,
            &format!("σ={sigma} tail layout"),
        );
        let tail = samples
            .iter()
            .filter(|&&x| x.unsigned_abs() >= dist.x0)
            .count();
        let p_tail: f64 = (-m..=m)
            .zip(&probs)
            .filter(|(x, _)| x.unsigned_abs() >= dist.x0)
            .map(|(_, p)| p)
            .sum();
        assert!(p_tail > 0.005);
        assert_binomial(tail as u64, samples.len() as u64, p_tail, "tail mass");
        let (var, m4) = exact_moments(sigma);
        assert_moments(&samples, var, m4, &format!("σ={sigma} tail layout"));
    }
}

/// Large σ: chi-square over bins of width ⌊σ/4⌋ on [−6σ, 6σ] plus two tails, against
/// the normal CDF with continuity correction: P(a ≤ X < b) = Φ((b−½)/σ) − Φ((a−½)/σ)
/// up to a relative O(1/σ²) (Euler–Maclaurin; the discrete normaliser equals
/// σ√(2π) up to e^{−2π²σ²}), far below the test's resolution (~10⁻³).
#[test]
fn large_sigmas_match_the_normal_cdf() {
    for (i, sigma) in [1e3, 1e6, 1.005e8, 2e9].into_iter().enumerate() {
        let dist = DiscreteGaussian::from_sigma(sigma).unwrap();
        let samples = draws(&dist, 400_000, 200 + i as u64);
        let width = (sigma / 4.0).floor() as i64;
        let edges: Vec<i64> = (-24..=24).map(|k| k * width).collect();
        let mut counts = vec![0u64; edges.len() + 1];
        for &s in &samples {
            counts[edges.partition_point(|&e| e <= s)] += 1;
        }
        let cdf = |e: i64| std_normal_cdf((e as f64 - 0.5) / sigma);
        let mut probs = vec![cdf(edges[0])];
        probs.extend(edges.windows(2).map(|w| cdf(w[1]) - cdf(w[0])));
        probs.push(1.0 - cdf(*edges.last().unwrap()));
        assert_chi2(&counts, &probs, &format!("σ={sigma}"));
        assert_moments(
            &samples,
            sigma * sigma,
            3.0 * sigma.powi(4),
            &format!("σ={sigma}"),
        );
        assert_symmetric_binned(&samples, width, &format!("σ={sigma}"));
    }
}

/// Symmetry for large σ: counts of x ∈ [kw, (k+1)w) against (−(k+1)w, −kw].
fn assert_symmetric_binned(samples: &[i64], width: i64, what: &str) {
    let folded: Vec<i64> = samples
        .iter()
        .map(|&s| s.signum() * ((s.abs() + width - 1) / width))
        .collect();
    assert_symmetric(&folded, what);
}

#[test]
fn noise_sampler_caches_and_is_deterministic() {
    let mut a = DiscreteGaussianSampler::from_seed_for_simulation(5);
    let mut b = DiscreteGaussianSampler::from_seed_for_simulation(5);
    for sigma in [1e6, 1e6, 3.0, 1e6] {
        for _ in 0..50 {
            assert_eq!(a.sample_grid(sigma), b.sample_grid(sigma));
        }
    }
    // The σ in use follows the argument.
    let small: Vec<i64> = (0..2000).map(|_| a.sample_grid(3.0)).collect();
    assert!(small.iter().all(|v| v.abs() < 60));
    let big: Vec<i64> = (0..2000).map(|_| a.sample_grid(1e8)).collect();
    assert!(big.iter().filter(|v| v.abs() > 1_000_000).count() > 1900);
    assert!((0..100).all(|_| a.sample_grid(0.0) == 0));
    assert!(a.uniform_below(10) < 10);
    assert_eq!(format!("{a:?}"), "DiscreteGaussianSampler { .. }");
    let mut os = DiscreteGaussianSampler::from_os_rng().unwrap();
    let draws: Vec<i64> = (0..4).map(|_| os.sample_grid(1e9)).collect();
    assert!(draws.iter().any(|&v| v != draws[0]));
    let dist = DiscreteGaussian::from_sigma(2.0).unwrap();
    assert!(os.sample(&dist).abs() < 100);
    assert!(format!("{dist:?}").starts_with("DiscreteGaussian { sigma2"));
}

#[test]
#[should_panic(expected = "must be finite")]
fn noise_sampler_refuses_nan() {
    DiscreteGaussianSampler::from_seed_for_simulation(1).sample_grid(f64::NAN);
}
