//! Dong, Liang & Yi's AdaptiveCov on a central collection's norm bins.
//!
//! The collection keeps, per dyadic norm bin `l` (`2^−(l+1) < ‖u‖ ≤ 2^−l`, the last
//! bin taking every shorter vector), `S_l = Σ triu(uuᵀ)`, `T_l = Σ round(triu(uuᵀ)/‖u‖²)`
//! and the count `c_l` (`ldpcov_privacy::wire::decode_payload`). Clipping every vector at
//! `τ = 2^−j` leaves the bins `l ≥ j` alone and scales those `l < j` to length τ, so
//! the clipped sum is exactly `Σ_{l≥j} S_l + τ²·Σ_{l<j} T_l` (up to the rounding of T,
//! counted in the sensitivity). The release spends ρ in three parts:
//!
//! 1. **Trace, ρ/8.** `Σ‖u‖²` (the trace of the sums) plus discrete Gaussian noise;
//!    replace-one sensitivity 1 (`|‖u‖² − ‖w‖²| ≤ 1`), i.e. `2^30` grid units. It is
//!    released with the estimate (data units: `R²·trace/n`). The paper also uses it to
//!    choose SeparateCov over GaussCov when SeparateCov's bound is smaller; here the
//!    last step is always GaussCov (not implemented: SeparateCov on clipped sums).
//! 2. **Radius, ρ/8, sparse vector technique.** For `j = 1, 2, …` (τ halving) the
//!    query `q_j = bias_j − noise_j` compares what clipping at `τ_j` removes,
//!    `bias_j = Σ_i (‖u_i‖² − τ_j²)₊ = Σ_{l<j} (tr S_l − τ_j²·c_l)` (an upper bound on
//!    the Frobenius norm of the clipping bias of the sum; sensitivity 1, each user's
//!    term lies in [0, 1)), with the Frobenius norm of the GaussCov noise it would
//!    save, `noise_j = τ_j²·p/√ρ_r` (`σ = 1/√ρ_r` per entry in sum units at
//!    `ρ_r = 3ρ/4`, p² entries in the full matrix; public). `AboveThreshold` (Dwork &
//!    Roth 2014, Alg. 1) with threshold 0, `ε_svt = √(2·ρ/8) = √ρ/2`, discrete Laplace
//!    noise of scale `2Δ/ε_svt` on the threshold and `4Δ/ε_svt` on each query, halts
//!    at the first `j` whose noisy query is above the noisy threshold (the bias starts
//!    to exceed the noise it saves) and clips at `τ_{j−1}`; the smallest radius if none
//!    does. ε_svt-DP, so `ε_svt²/2 = ρ/8`-zCDP.
//! 3. **GaussCov at τ, 3ρ/4.** `V = 2^{2j}·Σ_{l≥j} S_l + Σ_{l<j} T_l` (integers, the
//!    clipped sum in units of `τ²·2^−30`) plus discrete Gaussian noise of sd
//!    `(√2·2^30 + √d)/√(2ρ_r)`: each user's term is `triu(vvᵀ)` with `‖v‖ ≤ τ` scaled
//!    by `2^{30+2j}`, so two of them differ by at most `√2·2^30`, and the rounding of
//!    `T` moves a term by at most `√d/2` (twice: `√d`). Rounded back to the grid
//!    `2^−30` (post-processing), the noise sd there is `that/2^{2j}`: clipping at
//!    `2^−j` divides the noise by `4^j`. In the `svec` weighting (the collection's
//!    [`central_weighting`](ldpcov_privacy::Collection::central_weighting)) the
//!    off-diagonal entries get variance `σ²/2`, and the sensitivity is charged in the
//!    `svec` norm: the exact terms still differ by at most `√2·2^30`
//!    (`‖svec(A)‖ = ‖A‖_F`), and a rounding error of at most ½ per entry has svec norm
//!    at most `√(p/4 + 2(d − p)/4) = p/2` (`2d − p = p²`), so `σ = (√2·2^30 + p)/√(2ρ_r)`.
//!    The query's noise term then uses the Frobenius norm of that release's noise,
//!    `σ·√d` instead of `σ·p` (public, data-independent: no privacy cost).
//!
//! Composition: ρ/8 + ρ/8 + 3ρ/4 = ρ. The pure-DP variant (Dong, Liang & Yi's) splits ε the
//! same way with discrete Laplace noise throughout ([`AdaptiveBudget::Epsilon`]).

use crate::gaussian::{NoiseSd, ReleaseNoise, off_diagonal_entries};
use crate::mechanisms::{Mechanism, check_budget, check_sigma, gaussian_sigma};
use crate::{CentralError, NoisySums};
use ldpcov_accounting::calibration::pure_dp_rho;
use ldpcov_noise::{DiscreteGaussianSampler, NoiseSampler};
use ldpcov_privacy::Collection;
use ldpcov_privacy::layout::{triangle_len, triangle_pairs};
use ldpcov_privacy::mechanism::OffDiagonalWeighting;

/// Which calibration an AdaptiveCov release uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AdaptiveBudget {
    /// ρ-zCDP: discrete Gaussian trace and release, SVT at `ε_svt = √ρ/2`.
    Rho(f64),
    /// Pure ε-DP (Dong, Liang & Yi's variant): ε/8 on a discrete Laplace trace, ε/8 on the SVT,
    /// 3ε/4 on a discrete Laplace release of the clipped sums (ℓ₁ sensitivity
    /// `(p + 1)·τ²` plus the rounding, `d·2^−30·τ²`). Recorded as ρ = ε²/2.
    Epsilon(f64),
}

/// The radius the sparse vector technique chose, and the release at it.
pub(crate) fn adaptive_cov(
    collection: &Collection,
    count: u64,
    sums: &[i64],
    budget: AdaptiveBudget,
    sampler: &mut DiscreteGaussianSampler,
) -> Result<NoisySums, CentralError> {
    let (mechanism, rho) = match budget {
        AdaptiveBudget::Rho(rho) => {
            check_budget("rho", rho)?;
            (Mechanism::AdaptiveCov, rho)
        }
        AdaptiveBudget::Epsilon(epsilon) => {
            check_budget("epsilon", epsilon)?;
            (Mechanism::AdaptiveCovLaplace, pure_dp_rho(epsilon))
        }
    };
    let bins = collection.norm_bins();
    if bins == 0 || collection.has_mean() {
        return Err(CentralError::Parameter(
            "adaptive_cov needs a central second-moment collection created with norm_bins".into(),
        ));
    }
    let weighting = collection
        .central_weighting()
        .ok_or_else(|| CentralError::Parameter("adaptive_cov needs a central collection".into()))?;
    let p = collection.dim();
    let d = triangle_len(p);
    let unit = collection.grid_scale(); // 2^30
    // The Gaussian release's rounding term and the Frobenius norm of its noise per
    // unit σ, in the collection's weighting (module docs).
    let (rounding_l2, frobenius_per_sigma) = match weighting {
        OffDiagonalWeighting::Raw => ((d as f64).sqrt(), p as f64),
        OffDiagonalWeighting::Svec => (p as f64, (d as f64).sqrt()),
    };
    let diagonal: Vec<usize> = triangle_pairs(p)
        .enumerate()
        .filter(|(_, (i, j))| i == j)
        .map(|(k, _)| k)
        .collect();
    let trace = |block: &[i64]| -> i128 { diagonal.iter().map(|&k| i128::from(block[k])).sum() };
    let laplace_scale = |what: &str, scale: f64| -> Result<u64, CentralError> {
        let t = scale.ceil();
        if (1.0..=2f64.powi(60)).contains(&t) {
            Ok(t as u64)
        } else {
            Err(CentralError::Parameter(format!(
                "the budget gives a {what} noise scale of {t} grid units: out of range"
            )))
        }
    };

    // 1. The trace (ρ/8 or ε/8), sensitivity 2^30 grid units (ℓ₁ = ℓ₂: one number).
    let trace_noise = match budget {
        AdaptiveBudget::Rho(rho) => {
            sampler.sample_grid(check_sigma(gaussian_sigma(unit, rho / 8.0))?)
        }
        AdaptiveBudget::Epsilon(epsilon) => ldpcov_noise::cks20::discrete_laplace(
            sampler.rng_mut(),
            laplace_scale("trace", unit / (epsilon / 8.0))?,
        ),
    };
    let noisy_trace = trace(&sums[..d]) + i128::from(trace_noise);

    // 2. The radius (ρ/8 or ε/8): AboveThreshold with Δ = 2^30 grid units. Each query
    // compares the clipping bias with the Frobenius norm of the release noise saved:
    // σ·p (σ·√d in the svec weighting) for the Gaussian (σ = Δ₂/√(2ρ_r), Δ₂ = √2·τ²),
    // √2·b·p for the Laplace (b = Δ₁/ε_r, Δ₁ = (p + 1)·τ²).
    let (epsilon_svt, noise_per_tau2) = match budget {
        AdaptiveBudget::Rho(rho) => (rho.sqrt() / 2.0, frobenius_per_sigma / (0.75 * rho).sqrt()),
        AdaptiveBudget::Epsilon(epsilon) => (
            epsilon / 8.0,
            std::f64::consts::SQRT_2 * (p as f64 + 1.0) / (0.75 * epsilon) * p as f64,
        ),
    };
    let t_threshold = laplace_scale("sparse-vector", 2.0 * unit / epsilon_svt)?;
    let t_query = laplace_scale("sparse-vector", 4.0 * unit / epsilon_svt)?;
    let threshold = ldpcov_noise::cks20::discrete_laplace(sampler.rng_mut(), t_threshold) as f64;
    let mut chosen = bins - 1;
    for j in 1..bins {
        // Σ_{l<j} (tr S_l − 2^(30−2j)·c_l), grid units, exact.
        let bias: i128 = (0..j)
            .map(|l| {
                let start = d + l * (2 * d + 1);
                let (s, c) = (&sums[start..start + d], sums[start + 2 * d]);
                trace(s) - i128::from(c) * (1i128 << (30 - 2 * j))
            })
            .sum();
        let noise = 4f64.powi(-(j as i32)) * noise_per_tau2 * unit;
        let nu = ldpcov_noise::cks20::discrete_laplace(sampler.rng_mut(), t_query) as f64;
        if bias as f64 - noise + nu >= threshold {
            chosen = j - 1;
            break;
        }
    }

    // 3. The release of the sums clipped at 2^−chosen (3ρ/4 or 3ε/4), in units of
    // 2^−(30+2j): ℓ₂ sensitivity √2·2^30 + √d (+ p in the svec norm), ℓ₁
    // (p + 1)·2^30 + d (module docs).
    let j = chosen;
    let scale = 1i128 << (2 * j);
    let v = clipped_sums(collection, sums, j);
    type Draw = Box<dyn FnMut(bool, &mut DiscreteGaussianSampler) -> i64>;
    let (mut draw, noise_sd): (Draw, NoiseSd) = match budget {
        AdaptiveBudget::Rho(rho) => {
            let l2 = std::f64::consts::SQRT_2 * unit + rounding_l2;
            let noise = ReleaseNoise::new(check_sigma(gaussian_sigma(l2, 0.75 * rho))?, weighting)?;
            let sd = noise.sd();
            (Box::new(move |off, s| noise.draw(off, s)), sd)
        }
        AdaptiveBudget::Epsilon(epsilon) => {
            let l1 = (p as f64 + 1.0) * unit + d as f64;
            let t = laplace_scale("release", l1 / (0.75 * epsilon))?;
            let q = (-1.0 / t as f64).exp();
            (
                Box::new(move |_, s: &mut DiscreteGaussianSampler| {
                    ldpcov_noise::cks20::discrete_laplace(s.rng_mut(), t)
                }),
                NoiseSd::uniform((2.0 * q).sqrt() / (1.0 - q)),
            )
        }
    };
    let released = v
        .into_iter()
        .zip(off_diagonal_entries(p, 0))
        .map(|(x, off)| {
            let noisy = x + i128::from(draw(off, sampler));
            // Back to the grid 2^−30: round(noisy / 4^j), post-processing.
            let rounded = (noisy + noisy.signum() * scale / 2) / scale;
            i64::try_from(rounded)
                .map_err(|_| CentralError::Parameter("a released sum does not fit 64 bits".into()))
        })
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(NoisySums {
        mechanism,
        sums: released,
        count,
        noise_sd_grid: noise_sd.diagonal / scale as f64,
        off_diagonal_noise_sd_grid: noise_sd.off_diagonal / scale as f64,
        rho,
        radius: 0.5f64.powi(j as i32),
        trace: noisy_trace as f64,
    })
}

/// `V = 2^{2j}·Σ_{l≥j} S_l + Σ_{l<j} T_l`: the sum of the vectors clipped at `2^−j`, in
/// units of `2^{−(30+2j)}` (exact but for the rounding of `T`, at most ½ per entry and
/// clipped user). `sums` must be a central collection's, with its norm bins.
pub(crate) fn clipped_sums(collection: &Collection, sums: &[i64], j: usize) -> Vec<i128> {
    let d = triangle_len(collection.dim());
    let scale = 1i128 << (2 * j);
    let mut v: Vec<i128> = vec![0; d];
    for l in 0..collection.norm_bins() {
        let start = d + l * (2 * d + 1);
        let (s, t) = (&sums[start..start + d], &sums[start + d..start + 2 * d]);
        for (k, out) in v.iter_mut().enumerate() {
            *out += if l >= j {
                scale * i128::from(s[k])
            } else {
                i128::from(t[k])
            };
        }
    }
    v
}
