//! Tests of the exact discrete Gaussian: the arithmetic building blocks, the table,
//! the reference algorithms and the samplers' distributions. This file holds the
//! statistical helpers they share.

mod arithmetic;
mod distribution;
mod rank_one;
mod reference;
mod sigma2;
mod table;

use super::NoiseSampler;
use super::bigint::{ExpAffine, exp_neg_bounds, lazy_bernoulli, pow2, shr_ceil};
use super::fixed_point::{exp_neg_q63, mul_u128_u64, shr192_small};
use super::sampler::{ALIAS_BITS, build_alias};
use super::{DiscreteGaussian, DiscreteGaussianSampler, RandomBits, Sigma2, cks20};
use ldpcov_accounting::calibration::std_normal_cdf;
use num_bigint::BigUint;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha12Rng;

// --- Statistical helpers -------------------------------------------------------
//
// Significance. Every statistical check below fails with probability at most about
// 10⁻⁶ under the null hypothesis (the sampler is exact), with fixed seeds, so a
// failure means a bug, not bad luck:
// * z-tests (binomial proportions, means, variances) accept |z| < 5: two-sided
//   P(|N(0,1)| ≥ 5) = 5.7·10⁻⁷ (normal approximation, every count here is ≫ 100);
// * chi-square tests accept below the Wilson–Hilferty quantile
//   df·(1 − 2/(9df) + z·√(2/(9df)))³ with z = 4.9 (upper tail 4.8·10⁻⁷); the
//   approximation's error in the far tail is a few percent of the quantile for
//   df ≥ 3, which z = 4.9 instead of 4.75 (α = 10⁻⁶) absorbs. Cells are merged until
//   every expected count is at least 20.

const Z: f64 = 5.0;

fn chi2_critical(df: usize) -> f64 {
    let df = df as f64;
    let z = 4.9;
    let a = 2.0 / (9.0 * df);
    df * (1.0 - a + z * a.sqrt()).powi(3)
}

/// Chi-square statistic of `observed` against probabilities `probs` (summing to 1),
/// merging adjacent cells until each expects ≥ 20; returns (statistic, df).
fn chi2(observed: &[u64], probs: &[f64]) -> (f64, usize) {
    let n: u64 = observed.iter().sum();
    let n = n as f64;
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut o, mut e) = (0.0, 0.0);
    for (&obs, &p) in observed.iter().zip(probs) {
        o += obs as f64;
        e += p * n;
        if e >= 20.0 {
            cells.push((o, e));
            (o, e) = (0.0, 0.0);
        }
    }
    if let Some(last) = cells.last_mut() {
        last.0 += o;
        last.1 += e;
    }
    let stat = cells.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
    (stat, cells.len() - 1)
}

fn assert_chi2(observed: &[u64], probs: &[f64], what: &str) {
    let (stat, df) = chi2(observed, probs);
    assert!(df >= 1, "{what}: too few cells");
    let crit = chi2_critical(df);
    assert!(stat < crit, "{what}: chi2 {stat:.1} ≥ {crit:.1} (df {df})");
}

/// Exact pmf of N_Z(0, σ²) on [-m, m] (f64; the mass beyond is < 1e-300).
fn dg_pmf(sigma: f64) -> (i64, Vec<f64>) {
    let m = (40.0 * sigma).ceil() as i64 + 5;
    let w: Vec<f64> = (-m..=m)
        .map(|x| (-(x as f64).powi(2) / (2.0 * sigma * sigma)).exp())
        .collect();
    let z: f64 = w.iter().sum();
    (m, w.iter().map(|v| v / z).collect())
}

fn histogram(samples: &[i64], m: i64) -> Vec<u64> {
    let mut h = vec![0u64; (2 * m + 1) as usize];
    for &s in samples {
        assert!(s.abs() <= m, "draw {s} out of the tested range");
        h[(s + m) as usize] += 1;
    }
    h
}

fn draws(dist: &DiscreteGaussian, n: usize, seed: u64) -> Vec<i64> {
    let mut bits = RandomBits::new(ChaCha12Rng::seed_from_u64(seed));
    (0..n).map(|_| dist.sample_bits(&mut bits)).collect()
}

/// Mean 0 and second moment `var` (fourth moment `m4`) within Z standard errors.
fn assert_moments(samples: &[i64], var: f64, m4: f64, what: &str) {
    let n = samples.len() as f64;
    let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / n;
    let m2 = samples.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n;
    let se_mean = (var / n).sqrt();
    let se_m2 = ((m4 - var * var) / n).sqrt();
    assert!(
        mean.abs() < Z * se_mean,
        "{what}: mean {mean} (se {se_mean})"
    );
    assert!(
        (m2 - var).abs() < Z * se_m2,
        "{what}: E x² {m2} vs {var} (se {se_m2})"
    );
}

/// Σ (c(k) − c(−k))² / (c(k) + c(−k)) over k ≥ 1: under symmetry each term is the
/// square of an (approximately) standard normal, so the sum is χ² with as many
/// degrees of freedom as pairs (pairs with fewer than 40 draws are pooled).
fn assert_symmetric(samples: &[i64], what: &str) {
    let max = samples.iter().map(|v| v.abs()).max().unwrap_or(0);
    let (mut pos, mut neg) = (vec![0f64; max as usize + 1], vec![0f64; max as usize + 1]);
    for &s in samples {
        if s > 0 {
            pos[s as usize] += 1.0;
        } else if s < 0 {
            neg[(-s) as usize] += 1.0;
        }
    }
    let (mut stat, mut df, mut p, mut q) = (0.0, 0usize, 0.0, 0.0);
    for k in 1..=max as usize {
        p += pos[k];
        q += neg[k];
        if p + q >= 40.0 {
            stat += (p - q) * (p - q) / (p + q);
            df += 1;
            (p, q) = (0.0, 0.0);
        }
    }
    assert!(df >= 1);
    assert!(
        stat < chi2_critical(df),
        "{what}: symmetry chi2 {stat} (df {df})"
    );
}

/// Bernoulli count `k` of `n` against probability `p`.
fn assert_binomial(k: u64, n: u64, p: f64, what: &str) {
    let (k, n) = (k as f64, n as f64);
    let se = (n * p * (1.0 - p)).sqrt();
    assert!(
        (k - n * p).abs() < Z * se.max(1e-9),
        "{what}: {k} of {n}, expected {}",
        n * p
    );
}
