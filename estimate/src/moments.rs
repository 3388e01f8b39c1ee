//! From the averaged report to the matrix every estimator acts on, and the moments
//! released with it.
//!
//! A second-moment collection's report is `triu(uuᵀ)`: its average, times R², is the
//! second moment about the centre and is what the estimators regularise. A
//! mean-and-covariance report is `(w·u, triu(uuᵀ))`; with `a` its average in
//! unit-ball units over `n` reports:
//!
//! * `μ̂ = a[..p]/w` (the mean of `u`), `M̂ = a[p..]` (the second moment of `u`);
//! * `Σ̂ = M̂ − μ̂μ̂ᵀ + τ²I`, `τ² = σ²/(w²n)`: the mean block's noise `ε ~ N(0, τ²I)`
//!   makes `E[μ̂μ̂ᵀ] = ūūᵀ + τ²I`, so without `+τ²I` the diagonal would be biased down
//!   by exactly `τ²`; σ, w and n are public, so the correction is exact
//!   (docs/ALGORITHMS.md, "Mean and covariance").
//!
//! Other mechanisms' averages are first unbiased entry by entry (the mechanism's
//! `Unbiasing`: the √2 of an `svec` report's off-diagonal entries, the rank-one report's
//! κ, c and diagonal offset), and `τ²I` becomes the mechanism's `Cov(μ̂) = a·I + b·M̂`
//! (for the rank-one report `b = (κ − c²)/(c²n)`: its mean block's noise depends on
//! `u`).
//!
//! Units (data units, as every released number): the covariance `R²·Σ̂`, the second
//! moment `R²·M̂` about the collection's centre `c` (about 0 without one), the mean
//! `c + R·μ̂`. Subtracting a public constant changes no covariance, so `Σ̂` needs no
//! centre.
//!
//! Invariants: [`packed_covariance`] is the one place the joint blocks are combined;
//! the cross-validation folds, the precision likelihood's held-out fold and the full
//! estimate all go through it, so each fold's Σ̂ comes from that fold's two blocks and
//! its own `τ²` (at the fold's n).

use crate::error::EstimateError;
use crate::input::EstimationInput;
use ldpcov_privacy::layout::{triangle_index, triangle_pairs};
use nalgebra::DMatrix;

/// The moments of a collection's average, in data units (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct MomentsEstimate {
    /// The mean `c + R·μ̂` (None for a second-moment collection).
    pub mean: Option<Vec<f64>>,
    /// Noise sd of each coordinate of the mean, `R·σ/(w·√n)` (0 without a mean).
    pub mean_noise_sd: f64,
    /// The packed second moment about the centre, `R²·M̂`.
    pub second_moment: Vec<f64>,
    /// The packed matrix the estimators act on: `R²·(M̂ − μ̂μ̂ᵀ + τ²I)` with a mean,
    /// the second moment without.
    pub covariance: Vec<f64>,
}

/// The moments of the average of `n` reports whose per-entry grid-unit sums are `sums`
/// (`input.entries()` of them).
pub(crate) fn moments(
    input: &EstimationInput,
    sums: &[i64],
    n: u64,
) -> Result<MomentsEstimate, EstimateError> {
    check_sums(input, sums)?;
    let r = input.clip_radius();
    let (mean_u, second_u) = unit_blocks(input, sums, n);
    let second_moment: Vec<f64> = second_u.iter().map(|v| v * r * r).collect();
    let covariance = packed_covariance(input, sums, n);
    let mean = mean_u.map(|m| {
        m.iter()
            .enumerate()
            .map(|(i, v)| input.centre().get(i).copied().unwrap_or(0.0) + r * v)
            .collect()
    });
    Ok(MomentsEstimate {
        mean,
        mean_noise_sd: input.mean_noise_sd(n),
        second_moment,
        covariance,
    })
}

/// Refuses sums that are not `input.entries()` long.
pub(crate) fn check_sums(input: &EstimationInput, sums: &[i64]) -> Result<(), EstimateError> {
    if sums.len() != input.entries() {
        return Err(EstimateError::SumLength {
            expected: input.entries(),
            got: sums.len(),
        });
    }
    Ok(())
}

/// The mean of `u` (None without a mean block) and the packed second moment of `u`,
/// unit-ball units, from grid-unit sums of `n` reports (`input.entries()` of them),
/// each average `a` unbiased by the mechanism's [`Unbiasing`](crate::input::Unbiasing):
/// `a/mean_divisor` (`w`, or `c`), `(a − diagonal_offset)/diagonal_divisor` on the
/// diagonal, `a/off_diagonal_divisor` off it (1, √2 for the `svec` Gaussian report, κ for
/// the rank-one report).
pub(crate) fn unit_blocks(
    input: &EstimationInput,
    sums: &[i64],
    n: u64,
) -> (Option<Vec<f64>>, Vec<f64>) {
    let scale = 1.0 / (input.grid_scale() * n.max(1) as f64);
    let unbias = input.unbiasing();
    let (first, second) = sums.split_at(input.mean_entries());
    let second: Vec<f64> = second
        .iter()
        .zip(triangle_pairs(input.dim()))
        .map(|(&s, (i, j))| {
            let a = s as f64 * scale;
            if i == j {
                (a - unbias.diagonal_offset) / unbias.diagonal_divisor
            } else {
                a / unbias.off_diagonal_divisor
            }
        })
        .collect();
    let mean = input.has_mean().then(|| {
        first
            .iter()
            .map(|&s| s as f64 * scale / unbias.mean_divisor)
            .collect()
    });
    (mean, second)
}

/// The packed matrix the estimators act on, data units, from grid-unit sums of `n`
/// reports (`input.entries()` of them; unchecked): `R²·(M̂ − μ̂μ̂ᵀ + Cov(μ̂))` for a
/// collection with a mean block, `Cov(μ̂) = a·I + b·M̂`
/// ([`EstimationInput::mean_block_covariance`]: `τ²I`, `τ² = σ²/(w²n)`, for the Gaussian
/// report); `R²·M̂` otherwise.
pub(crate) fn packed_covariance(input: &EstimationInput, sums: &[i64], n: u64) -> Vec<f64> {
    let r2 = input.clip_radius() * input.clip_radius();
    let (mean, mut m) = unit_blocks(input, sums, n);
    if let Some(mu) = mean {
        let (a, b) = input.mean_block_covariance(n);
        for (v, (i, j)) in m.iter_mut().zip(triangle_pairs(input.dim())) {
            let coupled = b * *v;
            *v -= mu[i] * mu[j];
            *v += coupled;
            if i == j {
                *v += a;
            }
        }
    }
    m.iter_mut().for_each(|v| *v *= r2);
    m
}

/// The noise variance that the plug-in `μ̂μ̂ᵀ` adds to the entries of
/// [`packed_covariance`], data units, averaged over the off-diagonal entries and over
/// the diagonal ones: `(v_off, v_diag)`, `(0, 0)` without a mean block.
///
/// With `μ̂ = μ + e`, `e` centred with per-coordinate variance `τᵢ² = a + b·M̂ᵢᵢ`
/// ([`EstimationInput::mean_block_covariance`]) and independent across coordinates,
/// `μ̂ᵢμ̂ⱼ − μᵢμⱼ = μᵢeⱼ + μⱼeᵢ + eᵢeⱼ` has variance `τⱼ²μᵢ² + τᵢ²μⱼ² + τᵢ²τⱼ²`
/// (i ≠ j) and `μ̂ᵢ² − μᵢ²` about its mean has `4μᵢ²τᵢ² + 2τᵢ⁴` (Gaussian e). `μᵢ²` is
/// estimated by `max(μ̂ᵢ² − τᵢ², 0)`. The signal tests standardise by the second
/// moment's noise plus this: without it, a non-centred collection's `μ̂μ̂ᵀ` noise reads
/// as off-diagonal signal (a z of 5.5 was seen on data with none, p = 100, ε = 1).
pub(crate) fn mean_product_noise_variances(
    input: &EstimationInput,
    sums: &[i64],
    n: u64,
) -> (f64, f64) {
    let (mean, m) = unit_blocks(input, sums, n);
    let Some(mu) = mean else {
        return (0.0, 0.0);
    };
    let p = input.dim();
    let (a, b) = input.mean_block_covariance(n);
    let tau2: Vec<f64> = (0..p)
        .map(|i| (a + b * m[triangle_index(p, i, i)]).max(0.0))
        .collect();
    let mu2: Vec<f64> = mu
        .iter()
        .zip(&tau2)
        .map(|(m, t)| (m * m - t).max(0.0))
        .collect();
    let sum_tau2: f64 = tau2.iter().sum();
    let sum_mu2: f64 = mu2.iter().sum();
    let sum_tau2_mu2: f64 = tau2.iter().zip(&mu2).map(|(t, m)| t * m).sum();
    let sum_tau4: f64 = tau2.iter().map(|t| t * t).sum();
    let r4 = input.clip_radius().powi(4);
    let pairs = (p * p.saturating_sub(1) / 2) as f64;
    // Σ_{i<j} (τⱼ²μᵢ² + τᵢ²μⱼ²) = Σ_{i≠j} τᵢ²μⱼ²; Σ_{i<j} τᵢ²τⱼ² = ((Στ²)² − Στ⁴)/2.
    let off = if pairs > 0.0 {
        ((sum_tau2 * sum_mu2 - sum_tau2_mu2) + (sum_tau2 * sum_tau2 - sum_tau4) / 2.0) / pairs
    } else {
        0.0
    };
    let diagonal = tau2
        .iter()
        .zip(&mu2)
        .map(|(t, m)| 4.0 * m * t + 2.0 * t * t)
        .sum::<f64>()
        / p.max(1) as f64;
    (r4 * off, r4 * diagonal)
}

/// The correlation matrix `D^(-1/2)·A·D^(-1/2)` of a symmetric matrix `A`, `D` its
/// diagonal.
///
/// A row and column whose diagonal entry is not positive (a variable the released
/// covariance gives no variance, e.g. after the PSD projection clamped it, or a NaN)
/// have no correlation: they are 0, including their diagonal entry, rather than the
/// ±∞/NaN of the formula. Every other diagonal entry is exactly 1, and off-diagonal
/// entries are clamped to [−1, 1] (a PSD matrix satisfies this up to rounding; a
/// matrix released without the projection may not).
pub fn correlation(a: &DMatrix<f64>) -> DMatrix<f64> {
    correlation_with(a, |_, d| d > 0.0, 0.0)
}

/// How many noise sds a variance must stand above zero for the correlations of its
/// variable to be released: 3, a one-sided false alarm of 0.13 % for a variable whose
/// true variance is 0 (the entry's noise being close to normal for the average of
/// many reports).
pub const CORRELATION_VARIANCE_Z: f64 = 3.0;

/// The correlation of a released covariance `a` where it means something: the row and
/// column of a variable whose variance is not above [`CORRELATION_VARIANCE_Z`] times
/// `variance_noise_sd` (the noise sd of a diagonal entry of the raw average the release
/// comes from) are NaN, "undefined", its diagonal entry included; the rest as
/// [`correlation`]. A variance the noise could have made is not a variance to divide
/// by: near zero, the ratio `a_ij/√(a_ii·a_jj)` is a ratio of noise (or of the PSD
/// projection's rounding) and can be anything in [−1, 1].
///
/// ```
/// use ldpcov_estimate::released_correlation;
/// use nalgebra::DMatrix;
/// // Variable 2's variance (0.01) is within 3 noise sds (0.05 each) of zero.
/// let a = DMatrix::from_row_slice(3, 3, &[4.0, 2.0, 0.1, 2.0, 9.0, 0.2, 0.1, 0.2, 0.01]);
/// let r = released_correlation(&a, 0.05);
/// assert!((r[(0, 1)] - 2.0 / 6.0).abs() < 1e-15);
/// assert!(r[(0, 2)].is_nan() && r[(2, 2)].is_nan());
/// ```
pub fn released_correlation(a: &DMatrix<f64>, variance_noise_sd: f64) -> DMatrix<f64> {
    let floor = CORRELATION_VARIANCE_Z * variance_noise_sd.max(0.0);
    correlation_with(a, |_, d| d > floor, f64::NAN)
}

/// Whether variable `i` has a variance clearly above the noise (see
/// [`released_correlation`]): its diagonal entry `variance` above
/// [`CORRELATION_VARIANCE_Z`] noise sds.
pub fn variance_above_noise(variance: f64, variance_noise_sd: f64) -> bool {
    variance.is_finite() && variance > CORRELATION_VARIANCE_Z * variance_noise_sd.max(0.0)
}

/// `D^(-1/2)·A·D^(-1/2)` where `defined(i, a_ii)`, `undefined` in the rows and columns
/// of the others (the diagonal included); diagonal 1, off-diagonal clamped to [−1, 1].
fn correlation_with(
    a: &DMatrix<f64>,
    defined: impl Fn(usize, f64) -> bool,
    undefined: f64,
) -> DMatrix<f64> {
    let p = a.nrows();
    let scale: Vec<Option<f64>> = (0..p)
        .map(|i| {
            let d = a[(i, i)];
            (d > 0.0 && d.is_finite() && defined(i, d)).then(|| 1.0 / d.sqrt())
        })
        .collect();
    DMatrix::from_fn(p, p, |i, j| match (scale[i], scale[j]) {
        (Some(_), Some(_)) if i == j => 1.0,
        (Some(si), Some(sj)) => (a[(i, j)] * si * sj).clamp(-1.0, 1.0),
        _ => undefined,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_privacy::Collection;
    use ldpcov_privacy::layout::triangle_index;
    use ldpcov_proto::v1::{CollectionSpec, LocalMechanism, Moments};

    /// A mean-and-covariance collection with the raw-weighted Gaussian report (the
    /// hand-made sums below are its averages as they are).
    fn joint(dim: u32, clip_radius: f64, centre: Vec<f64>) -> Collection {
        Collection::create(&CollectionSpec {
            collection_id: "m".into(),
            dim,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius,
            min_reports: 1,
            centre,
            local_mechanism: LocalMechanism::GaussianTriu as i32,
            ..Default::default()
        })
        .unwrap()
    }

    /// The unbiasing on hand-made sums: an svec report's off-diagonal averages are
    /// divided by √2 and its diagonal kept; a rank-one report's averages become
    /// `(a − (1 + Δ_w²/4))/κ` on the diagonal, `a/κ` off it, `a/c` in the mean block, and
    /// its covariance adds `Cov(μ̂) = (I + (κ − c²)M̂)/(c²n)`.
    #[test]
    fn averages_are_unbiased_by_the_mechanism() {
        let spec = |mechanism: LocalMechanism, moments: Moments, delta: f64| CollectionSpec {
            collection_id: "u".into(),
            dim: 2,
            epsilon: 1.0,
            delta,
            clip_radius: 2.0,
            min_reports: 1,
            moments: moments as i32,
            local_mechanism: mechanism as i32,
            ..Default::default()
        };
        let svec = Collection::create(&spec(LocalMechanism::Gaussian, Moments::SecondMoment, 1e-6))
            .unwrap();
        let g = svec.grid_scale() as i64;
        let m = moments(&(&svec).into(), &[2 * g, g, g / 2], 2).unwrap();
        let r2 = 4.0;
        assert_eq!(m.second_moment[0], r2 * 1.0);
        assert!((m.second_moment[1] - r2 * 0.5 / std::f64::consts::SQRT_2).abs() < 1e-12);
        assert_eq!(m.second_moment[2], r2 * 0.25);

        let rank_one = Collection::create(&spec(
            LocalMechanism::RankOne,
            Moments::MeanAndCovariance,
            0.0,
        ))
        .unwrap();
        let ldpcov_privacy::ReportMechanism::RankOne(report) = rank_one.mechanism() else {
            panic!("rank-one");
        };
        let (kappa, c) = (
            report.params().moments.kappa,
            report.params().moments.mean_scale,
        );
        let offset = 1.0 + 2f64.powi(-22) / 4.0;
        let g = rank_one.grid_scale();
        assert_eq!(g, 2f64.powi(22));
        let n = 4u64;
        // Averages (dyadic, so that the sums are exact): mean block (¼, −⅛), triangle
        // (1.5, 0.1875, 1.125).
        let avg = [0.25, -0.125, 1.5, 0.1875, 1.125];
        let sums: Vec<i64> = avg.iter().map(|a| (a * g * n as f64) as i64).collect();
        let m = moments(&(&rank_one).into(), &sums, n).unwrap();
        let mu = [0.25 / c, -0.125 / c];
        let mhat = [
            (1.5 - offset) / kappa,
            0.1875 / kappa,
            (1.125 - offset) / kappa,
        ];
        let mean = m.mean.clone().unwrap();
        for i in 0..2 {
            assert!((mean[i] - 2.0 * mu[i]).abs() < 1e-9, "{mean:?}");
        }
        for (a, b) in m.second_moment.iter().zip(mhat) {
            assert!((a - r2 * b).abs() < 1e-9, "{a} vs {}", r2 * b);
        }
        let (a, b) = (
            1.0 / (c * c * n as f64),
            (kappa - c * c) / (c * c * n as f64),
        );
        let want = [
            r2 * (mhat[0] - mu[0] * mu[0] + a + b * mhat[0]),
            r2 * (mhat[1] - mu[0] * mu[1] + b * mhat[1]),
            r2 * (mhat[2] - mu[1] * mu[1] + a + b * mhat[2]),
        ];
        for (x, y) in m.covariance.iter().zip(want) {
            assert!((x - y).abs() < 1e-9, "{x} vs {y}");
        }
    }

    /// Exact arithmetic on hand-made sums: two reports at p = 2, R = 2, centre (10, −1).
    #[test]
    fn joint_blocks_give_mean_second_moment_and_debiased_covariance() {
        let c = joint(2, 2.0, vec![10.0, -1.0]);
        assert_eq!(c.moments(), Moments::MeanAndCovariance);
        let g = c.grid_scale() as i64;
        // Grid-unit sums of two reports: the mean block averages to (¼, −⅛), so
        // μ̂ = (½, −¼) after dividing by w = ½; the triangle averages to M̂ = (½, −⅛, ⅛).
        let sums = [g / 2, -g / 4, g, -g / 4, g / 4];
        let m = moments(&(&c).into(), &sums, 2).unwrap();
        let mu = [0.5, -0.25];
        let mhat = [0.5, -0.125, 0.125];
        let tau2 = c.sigma() * c.sigma() / (0.25 * 2.0);
        let mean = m.mean.clone().unwrap();
        assert_eq!(mean, vec![10.0 + 2.0 * mu[0], -1.0 + 2.0 * mu[1]]);
        assert_eq!(
            m.second_moment,
            mhat.iter().map(|v| 4.0 * v).collect::<Vec<_>>()
        );
        let want = [
            4.0 * (mhat[0] - mu[0] * mu[0] + tau2),
            4.0 * (mhat[1] - mu[0] * mu[1]),
            4.0 * (mhat[2] - mu[1] * mu[1] + tau2),
        ];
        for (a, b) in m.covariance.iter().zip(want) {
            assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
        }
        assert!((m.mean_noise_sd - 2.0 * c.sigma() / (0.5 * 2f64.sqrt())).abs() < 1e-12);
        assert!(moments(&(&c).into(), &sums[..4], 2).is_err());
    }

    #[test]
    fn a_second_moment_collection_has_no_mean_and_the_average_is_the_matrix() {
        let mut c = joint(2, 2.0, Vec::new());
        c = Collection::from_spec(&CollectionSpec {
            moments: Moments::SecondMoment as i32,
            ..c.spec()
        })
        .unwrap();
        let g = c.grid_scale() as i64;
        let m = moments(&(&c).into(), &[2 * g, g, g / 2], 2).unwrap();
        assert_eq!(m.mean, None);
        assert_eq!(m.mean_noise_sd, 0.0);
        assert_eq!(m.second_moment, vec![4.0, 2.0, 1.0]);
        assert_eq!(m.covariance, m.second_moment);
    }

    /// The de-biasing is what makes the diagonal unbiased: with zero signal, the
    /// diagonal of Σ̂ averages `τ² − E ε² = 0` over many independent mean-block noise
    /// draws, while `M̂ − μ̂μ̂ᵀ` alone averages `−τ²`. Continuous Gaussian draws of
    /// the summed noise (sd σ_g·√n per sum), 4000 repetitions at p = 3, n = 100:
    /// `ε_i²` has sd `√2·τ²`, so the mean over 4000·3 diagonal entries has sd
    /// `√2·τ²/√12000 = 0.013·τ²`; bound 0.08·τ² (6 sd).
    #[test]
    fn the_tau_squared_term_removes_the_diagonal_bias() {
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let c = joint(3, 1.0, Vec::new());
        let input = EstimationInput::from_collection(&c);
        let n = 100u64;
        let sg = c.sigma_grid() * (n as f64).sqrt();
        let tau2 = c.sigma() * c.sigma() / (0.25 * n as f64);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let mut diag = 0.0;
        let reps = 4000;
        for _ in 0..reps {
            let sums: Vec<i64> = (0..c.entries())
                .map(|_| {
                    (sg * Distribution::<f64>::sample(&StandardNormal, &mut rng)).round() as i64
                })
                .collect();
            let cov = packed_covariance(&input, &sums, n);
            diag += (0..3).map(|i| cov[triangle_index(3, i, i)]).sum::<f64>();
        }
        let mean_diag = diag / (3 * reps) as f64;
        // The second-moment block's own noise (sd σ/√n = w·τ = τ/2 per entry) averages
        // over 12000 entries to sd 0.0046·τ; here τ ≈ 1.34, so that is 0.003·τ².
        assert!(mean_diag.abs() < 0.08 * tau2, "{mean_diag} vs τ² = {tau2}");
    }

    /// The diabetes case: a variance the projection left at 5·10⁻³⁰ beside
    /// covariances of 10⁻¹⁴ gave correlations of 0.6–0.8; released, it has none.
    #[test]
    fn a_variance_within_the_noise_releases_no_correlation() {
        let a = DMatrix::from_row_slice(
            3,
            3,
            &[
                2.3e-3, 1.1e-3, 6.0e-17, //
                1.1e-3, 1.9e-3, 7.0e-17, //
                6.0e-17, 7.0e-17, 5.3e-30,
            ],
        );
        // The formula alone reads a strong correlation into rounding.
        assert!(correlation(&a)[(0, 2)] > 0.5, "{}", correlation(&a));
        let r = released_correlation(&a, 1e-5);
        for k in 0..3 {
            assert!(r[(2, k)].is_nan() && r[(k, 2)].is_nan(), "{r}");
        }
        assert_eq!(r[(0, 0)], 1.0);
        assert!((r[(0, 1)] - 1.1e-3 / (2.3e-3_f64 * 1.9e-3).sqrt()).abs() < 1e-15);
        // Just above and just below 3 noise sds.
        let b = DMatrix::from_row_slice(2, 2, &[1.0, 0.01, 0.01, 0.031]);
        assert_eq!(released_correlation(&b, 0.01)[(1, 1)], 1.0);
        assert!(released_correlation(&b, 0.0104)[(1, 1)].is_nan());
        assert!(variance_above_noise(0.031, 0.01) && !variance_above_noise(0.029, 0.01));
    }

    #[test]
    fn correlation_handles_non_positive_variances() {
        let a = DMatrix::from_row_slice(3, 3, &[4.0, 2.0, 1.0, 2.0, 9.0, 0.0, 1.0, 0.0, 0.0]);
        let r = correlation(&a);
        assert_eq!(r[(0, 0)], 1.0);
        assert_eq!(r[(1, 1)], 1.0);
        assert!((r[(0, 1)] - 2.0 / 6.0).abs() < 1e-15);
        assert_eq!(r[(1, 0)], r[(0, 1)]);
        // Variable 2 has variance 0: its row, column and diagonal are 0.
        for k in 0..3 {
            assert_eq!(r[(2, k)], 0.0);
            assert_eq!(r[(k, 2)], 0.0);
        }
        // A negative variance too; an unprojected matrix's entries are clamped.
        let b = DMatrix::from_row_slice(2, 2, &[1.0, 3.0, 3.0, 1.0]);
        assert_eq!(correlation(&b)[(0, 1)], 1.0);
        let c = DMatrix::from_row_slice(2, 2, &[-1.0, 0.5, 0.5, 1.0]);
        assert_eq!(
            correlation(&c),
            DMatrix::from_row_slice(2, 2, &[0.0, 0.0, 0.0, 1.0])
        );
    }
}
