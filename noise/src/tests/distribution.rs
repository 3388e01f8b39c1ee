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
        if sigma == 0.5 {
            // The sampler's second moment is the discrete one, not σ²: at σ = 0.5 the
            // exact variance is 0.2150…, and 0.25 lies about 53 standard errors away
            // (se = √((m4 − var²)/n) ≈ 6.5·10⁻⁴ at n = 400 000), far beyond Z.
            let n = samples.len() as f64;
            let m2 = samples.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
            let se = ((m4 - var * var) / n).sqrt();
            assert!(
                (m2 - 0.25).abs() > Z * se,
                "σ=0.5: E x² {m2} is σ² = 0.25 within {Z} se ({se})"
            );
        }
    }
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
    // The σ in use follows the argument, as the cached table switches: the first two
    // moments match N_Z(0, σ²) within Z standard errors (relative se of E x² is
    // √(2/n) ≈ 3 % at n = 2000, so Z·se ≈ 16 % rejects σ/4, σ·√2 or the other σ).
    for sigma in [3.0, 1e8, 3.0] {
        let samples: Vec<i64> = (0..2000).map(|_| a.sample_grid(sigma)).collect();
        let (var, m4) = if sigma < 10.0 {
            exact_moments(sigma)
        } else {
            (sigma * sigma, 3.0 * sigma.powi(4))
        };
        assert_moments(&samples, var, m4, &format!("sample_grid({sigma})"));
    }
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

/// The `NoiseSampler` wrapper (σ squared exactly, cached table, bit reservoir) draws
/// the exact pmf at small σ, as the core sampler does: same chi-square bound (see the
/// significance note in `tests/mod.rs`: Wilson–Hilferty quantile at z = 4.9, cells
/// merged to ≥ 20 expected, so a false failure has probability about 10⁻⁶).
#[test]
fn sample_grid_has_the_exact_pmf() {
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(300);
    for sigma in [0.5, 1.0, 3.0, 1.0] {
        let samples: Vec<i64> = (0..200_000).map(|_| noise.sample_grid(sigma)).collect();
        let (m, probs) = dg_pmf(sigma);
        assert_chi2(
            &histogram(&samples, m),
            &probs,
            &format!("sample_grid σ={sigma}"),
        );
    }
}

#[test]
#[should_panic(expected = "must be finite")]
fn noise_sampler_refuses_nan() {
    DiscreteGaussianSampler::from_seed_for_simulation(1).sample_grid(f64::NAN);
}
