//! Tests of the central statistics and releases.
//!
//! Statistical checks use fixed seeds and accept within 5 standard errors of the
//! statistic (two-sided normal tail 5.7·10⁻⁷), so a failure means a bug. For a sample
//! variance `s²` of N independent draws with variance σ² and kurtosis κ, the standard
//! error of `s²/σ²` is `√((κ − 1)/N)`: `√(2/N)` for Gaussian noise, `√(5/N)` for
//! Laplace noise.

use super::*;
use ldpcov_noise::DiscreteGaussianSampler;
use nalgebra::DMatrix;
use rand::{Rng, SeedableRng};

const K: u32 = CENTRAL_GRID_BITS;

fn stats_from(rows: &[Vec<f64>]) -> CentralStatistics {
    let mut s = CentralStatistics::new(rows[0].len(), K).unwrap();
    for r in rows {
        s.add_vector(r).unwrap();
    }
    s
}

fn random_rows(n: usize, p: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| (0..p).map(|_| rng.random_range(-0.6..0.6)).collect())
        .collect()
}

/// Mean and variance of `xs`.
fn moments(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var)
}

/// Checks that the sample variance of `xs` is within `tolerance` of `variance`;
/// `what` names them in a failure.
fn assert_variance(xs: &[f64], variance: f64, tolerance: f64, what: &str) {
    let (_, var) = moments(xs);
    assert!((var - variance).abs() < tolerance, "{what} {var}");
}

/// Checks that standardised residuals `xs` have a mean within `mean_bound` of 0 and
/// a sample variance within `tolerance` of `variance` (the bounds each test derives).
fn assert_standardised(xs: &[f64], mean_bound: f64, variance: f64, tolerance: f64, what: &str) {
    let (mean, _) = moments(xs);
    assert!(mean.abs() < mean_bound, "mean {mean}");
    assert_variance(xs, variance, tolerance, what);
}

/// Packed upper-triangle entries of `m`.
fn packed(m: &DMatrix<f64>) -> Vec<f64> {
    ldpcov_estimate::matrix_to_packed(m)
}

/// 2000 users along the axes of p = 4, in ± pairs: a second moment with the
/// well-separated eigenvalues 0.405, 0.09, 0.024, 0.004.
fn separated_spectrum() -> CentralStatistics {
    let mut rows = Vec::new();
    for (axis, (len, count)) in [(0.9, 1000), (0.6, 500), (0.4, 300), (0.2, 200)]
        .into_iter()
        .enumerate()
    {
        for k in 0..count {
            let mut x = vec![0.0; 4];
            x[axis] = if k % 2 == 0 { len } else { -len };
            rows.push(x);
        }
    }
    stats_from(&rows)
}

fn sorted_eigenvalues(m: &DMatrix<f64>) -> Vec<f64> {
    let mut v: Vec<f64> = m.clone().symmetric_eigenvalues().iter().copied().collect();
    v.sort_by(|a, b| b.total_cmp(a));
    v
}

#[test]
fn grid_vectors_are_inside_the_unit_ball_exactly_and_close_to_the_clipped_input() {
    let unit = 1i128 << (2 * K);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let mut cases: Vec<Vec<f64>> = vec![
        vec![1.0, 0.0, 0.0],
        vec![0.5f64.sqrt(), 0.5f64.sqrt()],
        // Every coordinate rounds up: the fix-up must bring the norm back.
        vec![0.5; 4],
        vec![3.0, -4.0],
        vec![0.0; 5],
    ];
    for _ in 0..200 {
        let p = rng.random_range(1..40);
        let scale = rng.random_range(0.1..3.0);
        cases.push(
            (0..p)
                .map(|_| scale * rng.random_range(-1.0..1.0))
                .collect(),
        );
    }
    for x in cases {
        let u = to_grid_unit_ball(&x, K).unwrap();
        let norm2: i128 = u.iter().map(|&v| i128::from(v) * i128::from(v)).sum();
        assert!(norm2 <= unit, "{x:?}: {norm2} > {unit}");
        // Within √p grid steps of the clipped input in every coordinate: rounding moves
        // each by ½, and the fix-up needs fewer than √p/2·… steps, each of one unit.
        let norm = x.iter().map(|v| v * v).sum::<f64>().sqrt().max(1.0);
        let tol = (x.len() as f64).sqrt() + 1.0;
        for (ui, xi) in u.iter().zip(&x) {
            let want = xi / norm * f64::from(1u32 << K);
            assert!((f64::from(*ui) - want).abs() <= tol, "{x:?}");
        }
    }
    assert_eq!(
        to_grid_unit_ball(&[0.1, f64::NAN], K),
        Err(CentralError::NotFinite { index: 1 })
    );
}

#[test]
fn bad_vectors_are_refused_and_change_nothing() {
    let mut s = CentralStatistics::new(2, K).unwrap();
    s.add(&[1 << 14, 1 << 14]).unwrap();
    let before = s.clone();
    let unit = 1i32 << K;
    assert!(matches!(
        s.add(&[unit, 1]),
        Err(CentralError::OutsideUnitBall { .. })
    ));
    assert_eq!(
        s.add(&[1, 2, 3]),
        Err(CentralError::Length {
            expected: 2,
            got: 3
        })
    );
    assert!(s.add(&[i32::MIN, i32::MIN]).is_err());
    assert_eq!(s, before);
    // On the sphere exactly is inside.
    s.add(&[unit, 0]).unwrap();
    assert_eq!(s.count(), 2);
    assert!(CentralStatistics::new(0, K).is_err());
    assert!(CentralStatistics::new(3, K + 1).is_err());
}

#[test]
fn sums_are_exact() {
    let rows = random_rows(300, 5, 2);
    let s = stats_from(&rows);
    let mut want = vec![0i64; 15];
    for r in &rows {
        let u = to_grid_unit_ball(r, K).unwrap();
        let mut k = 0;
        for i in 0..5 {
            for j in i..5 {
                want[k] += i64::from(u[i]) * i64::from(u[j]);
                k += 1;
            }
        }
    }
    assert_eq!(s.sums(), want.as_slice());
    assert_eq!(s.count(), 300);
}

/// GaussCov's noise: `(released − exact)·n·√ρ` is standard normal, entry by entry.
/// 300 releases × 10 entries: the sample variance is within 5·√(2/3000) = 0.13 of 1.
/// The printed sensitivity 1 (variance ½) or a doubled one (variance 2) fail.
#[test]
fn gauss_cov_noise_has_the_calibrated_scale() {
    let s = stats_from(&random_rows(40, 4, 3));
    let exact = packed(&s.exact_second_moment().unwrap());
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(4);
    let (n, rho) = (40.0, 0.7);
    let mut residuals = Vec::new();
    for _ in 0..300 {
        let r = gauss_cov(&s, rho, OffDiagonalWeighting::Raw, &mut noise).unwrap();
        assert_eq!(
            (r.rho, r.count, r.mechanism),
            (rho, 40, Mechanism::GaussCov)
        );
        assert!((r.noise_sd - 1.0 / (n * f64::sqrt(rho))).abs() < 1e-15);
        assert_eq!(r.matrix, r.matrix.transpose());
        for (got, want) in packed(&r.matrix).iter().zip(&exact) {
            residuals.push((got - want) * n * rho.sqrt());
        }
    }
    assert_standardised(&residuals, 5.0 / 3000f64.sqrt(), 1.0, 0.13, "variance");
}

/// GaussCov in the svec weighting: at the same ρ and the same σ the diagonal entries
/// keep variance σ² and the off-diagonal ones get exactly half. 400 releases of p = 4
/// (4 diagonal, 6 off-diagonal entries each): 1600 and 2400 standardised residuals, so
/// the sample variances are within 5·√(2/1600) = 0.18 and 5·√(2/2400)·½ = 0.072 of 1 and
/// ½ (a chi-square with N − 1 degrees of freedom over N − 1 has sd √(2/(N − 1))). The
/// triangle's 1 off the diagonal, or a σ/2 (variance ¼), fail.
#[test]
fn gauss_cov_in_the_svec_weighting_halves_the_off_diagonal_variance_at_the_same_rho() {
    let s = stats_from(&random_rows(40, 4, 3));
    let exact = s.exact_second_moment().unwrap();
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(44);
    let (n, rho) = (40.0, 0.7);
    let (mut diagonal, mut off) = (Vec::new(), Vec::new());
    for _ in 0..400 {
        let r = gauss_cov(&s, rho, OffDiagonalWeighting::Svec, &mut noise).unwrap();
        assert_eq!(r.rho, rho);
        // The same σ as the triangle's, and σ/√2 off the diagonal.
        assert!((r.noise_sd - 1.0 / (n * f64::sqrt(rho))).abs() < 1e-15);
        assert!((r.off_diagonal_noise_sd - 1.0 / (n * f64::sqrt(2.0 * rho))).abs() < 1e-15);
        assert_eq!(r.matrix, r.matrix.transpose());
        for i in 0..4 {
            for j in i..4 {
                let z = (r.matrix[(i, j)] - exact[(i, j)]) * n * rho.sqrt();
                if i == j {
                    diagonal.push(z)
                } else {
                    off.push(z)
                }
            }
        }
    }
    assert_standardised(
        &diagonal,
        5.0 / 1600f64.sqrt(),
        1.0,
        0.18,
        "diagonal variance",
    );
    assert_standardised(
        &off,
        5.0 * (0.5 / 2400f64).sqrt(),
        0.5,
        0.072,
        "off-diagonal variance",
    );
}

/// SeparateCov's eigenvalues: the released matrix has exactly the noisy eigenvalues,
/// so `(λ(released) − λ(exact))·n/σ_λ` is standard normal (plus a rounding of at most
/// ½ grid unit, 10⁻⁹ of σ here). Eigenvalues 0.405, 0.09, 0.024, 0.004 (n = 2000,
/// noise sd ≈ 7·10⁻⁴) never swap. 300 releases × 4: within 5·√(2/1200) = 0.21 of 1.
#[test]
fn separate_cov_eigenvalue_noise_has_the_calibrated_scale() {
    let s = separated_spectrum();
    let exact = sorted_eigenvalues(&s.exact_second_moment().unwrap());
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(5);
    let rho = 2.0;
    let mut residuals = Vec::new();
    for _ in 0..300 {
        let r = separate_cov(&s, rho, OffDiagonalWeighting::Raw, &mut noise).unwrap();
        assert_eq!(r.mechanism, Mechanism::SeparateCov);
        // σ_λ of the average: Δ_λ/√(2·ρ/2)/(n·2^2k), with Δ_λ ≈ √2·2^2k.
        let want_sd = eigenvalue_sensitivity(&s) / rho.sqrt() / (2000.0 * (1u64 << (2 * K)) as f64);
        assert!((r.noise_sd - want_sd).abs() < 1e-15);
        assert!((want_sd * 2000.0 * rho.sqrt() / std::f64::consts::SQRT_2 - 1.0).abs() < 1e-6);
        for (got, want) in sorted_eigenvalues(&r.matrix).iter().zip(&exact) {
            residuals.push((got - want) / r.noise_sd);
        }
    }
    assert_standardised(&residuals, 5.0 / 1200f64.sqrt(), 1.0, 0.21, "variance");
}

/// With almost no noise (a huge ρ) SeparateCov returns the exact matrix: each noisy
/// eigenvalue is paired with the eigenvector of the same rank, for a matrix that is not
/// diagonal and has a negative-free but rotated spectrum.
#[test]
fn separate_cov_pairs_eigenvalues_with_their_eigenvectors() {
    let s = stats_from(&random_rows(500, 5, 6));
    let exact = s.exact_second_moment().unwrap();
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(7);
    let r = separate_cov(&s, 1e18, OffDiagonalWeighting::Svec, &mut noise).unwrap();
    let err = (&r.matrix - &exact).abs().max();
    assert!(err < 1e-6, "max error {err}");
}

/// The Laplace release: `(released − exact)/noise_sd` has variance 1; Laplace noise has
/// kurtosis 6, so 300 × 10 draws put the sample variance within 5·√(5/3000) = 0.2 of 1.
/// An ℓ₁ sensitivity of d = p(p+1)/2 instead of p + 1 (variance ×4) fails.
#[test]
fn laplace_cov_noise_has_the_calibrated_scale() {
    let s = stats_from(&random_rows(30, 4, 8));
    let exact = packed(&s.exact_second_moment().unwrap());
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
    let (n, epsilon) = (30.0, 1.5);
    let unit = (1u64 << (2 * K)) as f64;
    // t = ⌈(p + 1)·2^2k/ε⌉ and the discrete Laplace variance 2q/(1 − q)², q = e^{−1/t}.
    let t = (5.0 * unit / epsilon).ceil();
    let q = (-1.0 / t).exp();
    let want_sd = (2.0 * q).sqrt() / (1.0 - q) / (unit * n);
    let mut residuals = Vec::new();
    for _ in 0..300 {
        let r = laplace_cov(&s, epsilon, &mut rng).unwrap();
        assert_eq!(r.rho, epsilon * epsilon / 2.0);
        assert!((r.noise_sd / want_sd - 1.0).abs() < 1e-12);
        for (got, want) in packed(&r.matrix).iter().zip(&exact) {
            residuals.push((got - want) / want_sd);
        }
    }
    assert_standardised(
        &residuals,
        5.0 * (1.0 / 3000f64).sqrt(),
        1.0,
        0.2,
        "variance",
    );
}

#[test]
fn bad_parameters_are_refused() {
    let s = stats_from(&random_rows(10, 3, 10));
    let mut noise = DiscreteGaussianSampler::from_seed_for_simulation(11);
    for rho in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-20] {
        assert!(matches!(
            gauss_cov(&s, rho, OffDiagonalWeighting::Raw, &mut noise),
            Err(CentralError::Parameter(_))
        ));
        assert!(matches!(
            separate_cov(&s, rho, OffDiagonalWeighting::Raw, &mut noise),
            Err(CentralError::Parameter(_))
        ));
    }
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(12);
    assert!(laplace_cov(&s, 0.0, &mut rng).is_err());
    let empty = CentralStatistics::new(3, K).unwrap();
    assert_eq!(
        gauss_cov(&empty, 1.0, OffDiagonalWeighting::Svec, &mut noise),
        Err(CentralError::Empty)
    );
}

/// A central collection of moments MEAN_AND_COVARIANCE, the way the daemon releases it:
/// the expanded reports' sums get discrete Gaussian noise of sd `Δ₀(w)·2^30/√(2ρ)`
/// with `Δ₀(1/2) = 2.25/√2` (not the second moment's √2). `(noisy − exact)/sd` over
/// 300 releases × 9 entries (p = 3: 3 mean + 6 second-moment entries) has sample
/// variance within 5·√(2/2700) = 0.136 of 1; the second moment's √2 alone (variance
/// 0.79) fails, as does a doubled variance. The wrong budget kind, SeparateCov on a
/// mean-and-covariance collection and a local collection are refused.
#[test]
fn collection_releases_use_the_joint_sensitivity() {
    use ldpcov_proto::v1::{CollectionSpec, Moments, PrivacyModel};
    let collection = ldpcov_privacy::Collection::from_spec(
        &ldpcov_fixtures::spec("c", 3)
            .moments(Moments::MeanAndCovariance)
            .privacy_model(PrivacyModel::Central)
            .build(),
    )
    .unwrap();
    // Exact sums of 50 users, expanded as the wire decoder does.
    let mut sums = vec![0i64; collection.entries()];
    for row in random_rows(50, 3, 13) {
        let u = to_grid_unit_ball(&row, K).unwrap();
        let payload = ldpcov_privacy::wire::encode_raw(&u);
        let entries = ldpcov_privacy::wire::decode_payload(&collection, 4, &payload)
            .unwrap()
            .to_dense();
        for (s, e) in sums.iter_mut().zip(entries) {
            *s += i64::from(e);
        }
    }
    assert_eq!(
        collection.central_weighting(),
        Some(OffDiagonalWeighting::Raw)
    );
    let rho: f64 = 0.3;
    let want_sd = 2.25 / std::f64::consts::SQRT_2 * (1u64 << 30) as f64 / (2.0 * rho).sqrt();
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(14);
    let mut residuals = Vec::new();
    for _ in 0..300 {
        let r = release_sums(
            &collection,
            50,
            &sums,
            Mechanism::GaussCov,
            ReleaseBudget::Rho(rho),
            &mut sampler,
        )
        .unwrap();
        assert_eq!((r.rho, r.count), (rho, 50));
        assert!((r.noise_sd_grid / want_sd - 1.0).abs() < 1e-12);
        assert_eq!(r.off_diagonal_noise_sd_grid, r.noise_sd_grid);
        for (got, want) in r.sums.iter().zip(&sums) {
            residuals.push((got - want) as f64 / want_sd);
        }
    }
    assert_standardised(&residuals, 5.0 / 2700f64.sqrt(), 1.0, 0.136, "variance");

    let release =
        |m, b, s: &mut DiscreteGaussianSampler| release_sums(&collection, 50, &sums, m, b, s);
    assert!(matches!(
        release(
            Mechanism::GaussCov,
            ReleaseBudget::Epsilon(1.0),
            &mut sampler
        ),
        Err(CentralError::Parameter(_))
    ));
    assert!(matches!(
        release(Mechanism::LaplaceCov, ReleaseBudget::Rho(1.0), &mut sampler),
        Err(CentralError::Parameter(_))
    ));
    assert!(matches!(
        release(
            Mechanism::SeparateCov,
            ReleaseBudget::Rho(1.0),
            &mut sampler
        ),
        Err(CentralError::Parameter(_))
    ));
    // ε-DP at Δ₁ = (2w√p + p + 1)·2^30, recorded as ρ = ε²/2.
    let lap = release(
        Mechanism::LaplaceCov,
        ReleaseBudget::Epsilon(0.5),
        &mut sampler,
    )
    .unwrap();
    assert_eq!(lap.rho, 0.125);
    let t = ((3f64.sqrt() + 4.0) * (1u64 << 30) as f64 / 0.5).ceil();
    let q = (-1.0 / t).exp();
    assert!((lap.noise_sd_grid / ((2.0 * q).sqrt() / (1.0 - q)) - 1.0).abs() < 1e-12);
    // The same spec as a local collection.
    let local = ldpcov_privacy::Collection::from_spec(&CollectionSpec {
        privacy_model: PrivacyModel::Local as i32,
        encoding: 0,
        central_weighting: 0,
        ..collection.spec()
    })
    .unwrap();
    assert!(
        release_sums(
            &local,
            50,
            &sums,
            Mechanism::GaussCov,
            ReleaseBudget::Rho(1.0),
            &mut sampler
        )
        .is_err()
    );
}

/// A new central collection (CreateCollection: the svec weighting) of moments
/// MEAN_AND_COVARIANCE: GaussCov at the same ρ and the same `σ = Δ₀(w)·2^30/√(2ρ)` as
/// the stored triangle's, variance σ² on the 3 mean and 3 diagonal entries and σ²/2 on
/// the 3 off-diagonal ones. 400 releases: 2400 and 1200 standardised residuals, sample
/// variances within 5·√(2/2400) = 0.145 of 1 and 5·√(2/1200)·½ = 0.102 of ½. So are
/// the folds' (200 × 5 folds × 3 off-diagonal entries: within 5·√(2/3000)·½ = 0.065
/// of ½), and the Laplace release is not weighted.
#[test]
fn new_central_collections_release_in_the_svec_weighting_at_the_same_rho() {
    use ldpcov_proto::v1::{CentralWeighting, Moments, PrivacyModel};
    let spec = ldpcov_fixtures::spec("c", 3)
        .moments(Moments::MeanAndCovariance)
        .privacy_model(PrivacyModel::Central)
        .build();
    let collection = ldpcov_privacy::Collection::create(&spec).unwrap();
    assert_eq!(
        collection.central_weighting(),
        Some(OffDiagonalWeighting::Svec)
    );
    assert_eq!(
        collection.spec().central_weighting,
        CentralWeighting::Svec as i32
    );
    let stored = ldpcov_privacy::Collection::from_spec(&spec).unwrap();
    let mut sums = vec![0i64; collection.entries()];
    let mut fold_sums = vec![vec![0i64; collection.entries()]; 5];
    for (k, row) in random_rows(50, 3, 13).iter().enumerate() {
        let u = to_grid_unit_ball(row, K).unwrap();
        ldpcov_privacy::wire::add_raw_vector(&collection, &u, &mut sums).unwrap();
        ldpcov_privacy::wire::add_raw_vector(&collection, &u, &mut fold_sums[k % 5]).unwrap();
    }
    let rho: f64 = 0.3;
    let sigma = 2.25 / std::f64::consts::SQRT_2 * (1u64 << 30) as f64 / (2.0 * rho).sqrt();
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(15);
    let off_diagonal: Vec<bool> = [false; 3]
        .into_iter()
        .chain(ldpcov_privacy::layout::triangle_pairs(3).map(|(i, j)| i != j))
        .collect();
    let (mut diagonal, mut off) = (Vec::new(), Vec::new());
    for _ in 0..400 {
        let r = release_sums(
            &collection,
            50,
            &sums,
            Mechanism::GaussCov,
            ReleaseBudget::Rho(rho),
            &mut sampler,
        )
        .unwrap();
        let triangle = release_sums(
            &stored,
            50,
            &sums,
            Mechanism::GaussCov,
            ReleaseBudget::Rho(rho),
            &mut sampler,
        )
        .unwrap();
        // The ρ charged and σ are the triangle's; only the off-diagonal sd halves.
        assert_eq!(
            (r.rho, r.noise_sd_grid),
            (triangle.rho, triangle.noise_sd_grid)
        );
        assert!((r.noise_sd_grid / sigma - 1.0).abs() < 1e-12);
        assert_eq!(
            r.off_diagonal_noise_sd_grid,
            r.noise_sd_grid * std::f64::consts::FRAC_1_SQRT_2
        );
        for ((got, want), &is_off) in r.sums.iter().zip(&sums).zip(&off_diagonal) {
            let z = (got - want) as f64 / sigma;
            if is_off {
                off.push(z)
            } else {
                diagonal.push(z)
            }
        }
    }
    assert_variance(&diagonal, 1.0, 0.145, "diagonal variance");
    assert_variance(&off, 0.5, 0.102, "off-diagonal variance");

    let counts = vec![10u64; 5];
    let mut off = Vec::new();
    for _ in 0..200 {
        let r = gauss_cov_folds(&collection, &counts, &fold_sums, rho, &mut sampler).unwrap();
        assert_eq!(r.rho, rho);
        assert!((r.noise_sd_grid / sigma - 1.0).abs() < 1e-12);
        assert_eq!(
            r.off_diagonal_noise_sd_grid,
            r.noise_sd_grid * std::f64::consts::FRAC_1_SQRT_2
        );
        for (noisy, exact) in r.fold_sums.iter().zip(&fold_sums) {
            for ((a, b), &is_off) in noisy.iter().zip(exact).zip(&off_diagonal) {
                if is_off {
                    off.push((a - b) as f64 / sigma);
                }
            }
        }
    }
    assert_variance(&off, 0.5, 0.065, "fold off-diagonal variance");

    let lap = release_sums(
        &collection,
        50,
        &sums,
        Mechanism::LaplaceCov,
        ReleaseBudget::Epsilon(0.5),
        &mut sampler,
    )
    .unwrap();
    assert_eq!(lap.off_diagonal_noise_sd_grid, lap.noise_sd_grid);
}

/// A central second-moment collection with `bins` norm bins, and the exact sums of
/// `rows` as the wire decoder expands them.
fn binned(rows: &[Vec<f64>], bins: u32) -> (ldpcov_privacy::Collection, Vec<i64>) {
    use ldpcov_proto::v1::{CollectionSpec, Moments, PrivacyModel};
    let collection = ldpcov_privacy::Collection::from_spec(&CollectionSpec {
        collection_id: "a".into(),
        dim: rows[0].len() as u32,
        epsilon: 1.0,
        delta: 1e-6,
        clip_radius: 1.0,
        min_reports: 1,
        moments: Moments::SecondMoment as i32,
        privacy_model: PrivacyModel::Central as i32,
        norm_bins: bins,
        ..Default::default()
    })
    .unwrap();
    let mut sums = vec![0i64; collection.entries()];
    for row in rows {
        let u = to_grid_unit_ball(row, K).unwrap();
        let payload = ldpcov_privacy::wire::encode_raw(&u);
        let entries = ldpcov_privacy::wire::decode_payload(&collection, 4, &payload)
            .unwrap()
            .to_dense();
        for (s, e) in sums.iter_mut().zip(entries) {
            *s += i64::from(e);
        }
    }
    (collection, sums)
}

/// The norm bins give the sum of the vectors clipped at any `2^−j` exactly, up to the
/// rounding of `uuᵀ/‖u‖²` (½ unit of `2^−(30+2j)` per entry and clipped user): checked
/// against clipping each vector directly.
#[test]
fn norm_bins_give_the_clipped_sums() {
    // Norms 0.9, 0.3, 0.05 and 0: bins 0, 1, 4 (of 5; 0.05 ≤ 2^-4) and the last.
    let mut rows = Vec::new();
    for (k, len) in [0.9, 0.3, 0.05, 0.0]
        .into_iter()
        .cycle()
        .take(40)
        .enumerate()
    {
        let a = k as f64 * 0.7;
        rows.push(vec![
            len * a.cos(),
            len * a.sin() * 0.6,
            len * a.sin() * 0.8,
        ]);
    }
    let (collection, sums) = binned(&rows, 5);
    assert_eq!(collection.entries(), 6 + 5 * 13);
    for j in 0..5 {
        let tau = 0.5f64.powi(j as i32);
        let v = crate::adaptive::clipped_sums(&collection, &sums, j);
        let mut exact = [0.0f64; 6];
        let mut clipped_users = 0.0;
        for row in &rows {
            let u = to_grid_unit_ball(row, K).unwrap();
            let u: Vec<f64> = u.iter().map(|&x| f64::from(x) / 32768.0).collect();
            let norm = u.iter().map(|x| x * x).sum::<f64>().sqrt();
            let f = if norm > tau { tau / norm } else { 1.0 };
            clipped_users += f64::from(u8::from(norm > tau));
            let mut k = 0;
            for a in 0..3 {
                for b in a..3 {
                    exact[k] += f * f * u[a] * u[b];
                    k += 1;
                }
            }
        }
        let unit = (1u64 << (30 + 2 * j)) as f64;
        for (got, want) in v.iter().zip(exact) {
            let err = (*got as f64 - want * unit).abs();
            assert!(
                err <= 0.5 * clipped_users + 1e-6 * unit,
                "j = {j}: {got} vs {}",
                want * unit
            );
        }
    }
}

/// AdaptiveCov at ρ = 10⁴ (SVT noise scales 2·2^30/ε and 4·2^30/ε with ε = √ρ/2 = 50:
/// 0.04 and 0.08 of one user's largest contribution) on 1000 vectors of norm 0.1.
/// The query at τ = 1/16 is 1000·(0.01 − 1/256) − 10⁻⁴ ≈ 6.1, about 75 query scales
/// above the threshold, so the release never clips below 1/8 (probability < e^{−70}).
/// At τ ≥ 1/8 the bias is 0 and the queries sit a fraction of a scale below the
/// threshold, so the SVT may stop at any of them; whatever it picks, the noise sd is
/// that radius's (`(√2·2^30 + √d)/√(2·3ρ/4)/4^j`, pinned), the residuals against the
/// exact sums are N(0, sd²) (at most 200 × 6 draws: within 5 standard errors) and the
/// trace is within 6 sd (`2^30/√(ρ/4)`).
#[test]
fn adaptive_cov_releases_at_its_radius_with_the_calibrated_noise() {
    let rows: Vec<Vec<f64>> = (0..1000)
        .map(|k| {
            let a = k as f64 * 0.37;
            vec![0.1 * a.cos(), 0.1 * a.sin(), 0.0]
        })
        .collect();
    let (collection, sums) = binned(&rows, 6);
    let rho: f64 = 1e4;
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(21);
    let d = 6.0f64;
    let mut residuals = Vec::new();
    let mut radii = std::collections::BTreeMap::new();
    for _ in 0..200 {
        let r = release_sums(
            &collection,
            1000,
            &sums,
            Mechanism::AdaptiveCov,
            ReleaseBudget::Rho(rho),
            &mut sampler,
        )
        .unwrap();
        assert_eq!((r.rho, r.sums.len()), (rho, 6));
        let j = (-r.radius.log2()).round() as i32;
        *radii.entry(j).or_insert(0) += 1;
        let want_sd = (std::f64::consts::SQRT_2 * (1u64 << 30) as f64 + d.sqrt())
            / (2.0 * 0.75 * rho).sqrt()
            / 4f64.powi(j);
        assert!((r.noise_sd_grid / want_sd - 1.0).abs() < 1e-12, "j = {j}");
        // Every vector is inside any radius ≥ 1/8: the exact sums are the unclipped ones.
        if j <= 3 {
            for (got, want) in r.sums.iter().zip(&sums[..6]) {
                residuals.push((got - want) as f64 / want_sd);
            }
        }
        // The trace's noise: sd 2^30/√(ρ/4) = 2^30/50 grid units; 6 sd.
        let exact_trace = (sums[0] + sums[3] + sums[5]) as f64;
        assert!((r.trace - exact_trace).abs() < 6.0 * (1u64 << 30) as f64 / 50.0);
    }
    // The radius is never below the data's norm by more than the SVT allows: 1/16
    // clips every vector (bias 6.1 ≫ the noise scale 0.08), so it is never chosen.
    assert!(radii.keys().all(|&j| j <= 3), "{radii:?}");
    let n = residuals.len() as f64;
    assert_standardised(
        &residuals,
        5.0 / n.sqrt(),
        1.0,
        5.0 * (2.0 / n).sqrt(),
        "variance",
    );
    // Without norm bins, or with an epsilon: refused.
    let (plain, plain_sums) = binned(&rows[..10], 0);
    assert!(
        release_sums(
            &plain,
            10,
            &plain_sums,
            Mechanism::AdaptiveCov,
            ReleaseBudget::Rho(1.0),
            &mut sampler
        )
        .is_err()
    );
    assert!(
        release_sums(
            &collection,
            1000,
            &sums,
            Mechanism::AdaptiveCov,
            ReleaseBudget::Epsilon(1.0),
            &mut sampler
        )
        .is_err()
    );
}

/// AdaptiveCov of a new (svec) collection: its Gaussian release is charged
/// `√2·2^30 + p` (the rounding of `T` in the svec norm, `p/2` per neighbour) and adds
/// σ² to the diagonal, σ²/2 to the off-diagonal entries, at the same ρ.
#[test]
fn adaptive_cov_of_a_new_collection_releases_in_the_svec_weighting() {
    let rows: Vec<Vec<f64>> = (0..200)
        .map(|k| {
            let a = k as f64 * 0.37;
            vec![0.1 * a.cos(), 0.1 * a.sin(), 0.0]
        })
        .collect();
    let (stored, sums) = binned(&rows, 6);
    let collection = ldpcov_privacy::Collection::create(&ldpcov_proto::v1::CollectionSpec {
        central_weighting: 0,
        ..stored.spec()
    })
    .unwrap();
    assert_eq!(
        collection.central_weighting(),
        Some(OffDiagonalWeighting::Svec)
    );
    let rho: f64 = 1e4;
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(22);
    for _ in 0..20 {
        let r = release_sums(
            &collection,
            200,
            &sums,
            Mechanism::AdaptiveCov,
            ReleaseBudget::Rho(rho),
            &mut sampler,
        )
        .unwrap();
        assert_eq!(r.rho, rho);
        let j = (-r.radius.log2()).round() as i32;
        let want_sd = (std::f64::consts::SQRT_2 * (1u64 << 30) as f64 + 3.0)
            / (2.0 * 0.75 * rho).sqrt()
            / 4f64.powi(j);
        assert!((r.noise_sd_grid / want_sd - 1.0).abs() < 1e-12, "j = {j}");
        assert!(
            (r.off_diagonal_noise_sd_grid * std::f64::consts::SQRT_2 / want_sd - 1.0).abs() < 1e-12
        );
    }
}

/// The compressed release (Zhou, Ligett & Wasserman, not DP): its Gram matrix `YᵀY/m` is Wishart
/// with mean the exact second moment M and `Var(G_ij) = (M_ij² + M_ii·M_jj)/m`. Over
/// 200 releases of m = 50 rows the mean of `G_ij − M_ij` has sd
/// `√((M_ij² + M_ii·M_jj)/10 000)`; every entry is within 5 of those sd. It spends
/// ρ = 0, and is refused without `allow_compressed_release`, for m = 0 and for a
/// budget of another kind.
#[test]
fn the_compressed_release_is_a_wishart_draw_around_the_second_moment() {
    let rows = random_rows(500, 3, 30);
    let (collection, sums) = binned(&rows, 0);
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(31);
    let release = |c: &ldpcov_privacy::Collection, b, s: &mut DiscreteGaussianSampler| {
        release_sums(c, 500, &sums, Mechanism::CompressedNotDp, b, s)
    };
    assert!(release(&collection, ReleaseBudget::CompressedRows(50), &mut sampler).is_err());
    let collection = ldpcov_privacy::Collection::from_spec(&ldpcov_proto::v1::CollectionSpec {
        allow_compressed_release: true,
        ..collection.spec()
    })
    .unwrap();
    assert!(release(&collection, ReleaseBudget::CompressedRows(0), &mut sampler).is_err());
    assert!(release(&collection, ReleaseBudget::Rho(1.0), &mut sampler).is_err());
    let unit = (1u64 << 30) as f64 * 500.0;
    let m: Vec<f64> = sums.iter().map(|&s| s as f64 / unit).collect();
    let mut mean = [0.0f64; 6];
    for _ in 0..200 {
        let r = release(&collection, ReleaseBudget::CompressedRows(50), &mut sampler).unwrap();
        assert_eq!((r.rho, r.noise_sd_grid, r.sums.len()), (0.0, 0.0, 6));
        for (acc, &g) in mean.iter_mut().zip(&r.sums) {
            *acc += g as f64 / unit / 200.0;
        }
    }
    let diag = |i: usize| m[[0, 3, 5][i]];
    let mut k = 0;
    for i in 0..3 {
        for j in i..3 {
            let sd = ((m[k] * m[k] + diag(i) * diag(j)) / 10_000.0).sqrt();
            assert!(
                (mean[k] - m[k]).abs() < 5.0 * sd,
                "({i}, {j}): {} vs {}",
                mean[k],
                m[k]
            );
            k += 1;
        }
    }
}

/// GaussCov of the folds: each fold's sums get noise of sd `Δ₀·2^30/√(2ρ)` (the same
/// as one GaussCov at ρ, since the folds compose in parallel), so the total carries
/// √K times that. 200 releases × 5 folds × 6 entries of `(noisy − exact)/sd`: sample
/// variance within 5·√(2/6000) = 0.091 of 1 (sensitivity 1 instead of √2 gives 0.5).
#[test]
fn fold_releases_have_gauss_cov_noise_on_every_fold() {
    let rows = random_rows(200, 3, 40);
    let (collection, _) = binned(&rows, 0);
    // Five folds of 40 users each, their exact sums.
    let mut fold_sums = vec![vec![0i64; 6]; 5];
    for (k, row) in rows.iter().enumerate() {
        let u = to_grid_unit_ball(row, K).unwrap();
        ldpcov_privacy::wire::add_raw_vector(&collection, &u, &mut fold_sums[k % 5]).unwrap();
    }
    let counts = vec![40u64; 5];
    let rho: f64 = 0.5;
    let sd = std::f64::consts::SQRT_2 * (1u64 << 30) as f64 / (2.0 * rho).sqrt();
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(41);
    let mut residuals = Vec::new();
    for _ in 0..200 {
        let r = gauss_cov_folds(&collection, &counts, &fold_sums, rho, &mut sampler).unwrap();
        assert!((r.noise_sd_grid / sd - 1.0).abs() < 1e-12);
        assert_eq!((r.rho, r.fold_counts.len()), (rho, 5));
        for (noisy, exact) in r.fold_sums.iter().zip(&fold_sums) {
            for (a, b) in noisy.iter().zip(exact) {
                residuals.push((a - b) as f64 / sd);
            }
        }
    }
    assert_standardised(&residuals, 5.0 / 6000f64.sqrt(), 1.0, 0.091, "variance");
    assert!(gauss_cov_folds(&collection, &[0; 5], &fold_sums, rho, &mut sampler).is_err());
}

/// The pure-DP SeparateCov: eigenvalue noise is discrete Laplace of scale
/// `⌈Δ₁_λ/(ε/2)⌉`, so `(λ(released) − λ(exact))/noise_sd` has variance 1 with
/// kurtosis 6: 300 releases × 4 eigenvalues within 5·√(5/1200) = 0.32 of 1. The same
/// well-separated spectrum as the Gaussian test (no swaps at this noise).
#[test]
fn separate_cov_laplace_eigenvalue_noise_has_the_calibrated_scale() {
    let s = separated_spectrum();
    let exact = sorted_eigenvalues(&s.exact_second_moment().unwrap());
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(50);
    let epsilon = 4.0;
    let unit = (1u64 << (2 * K)) as f64;
    let t = (eigenvalue_l1_sensitivity(&s) / (epsilon / 2.0)).ceil();
    // Δ₁_λ is 2·2^2k plus the rounding and eigensolver terms (tiny here).
    assert!((eigenvalue_l1_sensitivity(&s) / (2.0 * unit) - 1.0).abs() < 1e-6);
    let q = (-1.0 / t).exp();
    let want_sd = (2.0 * q).sqrt() / (1.0 - q) / (unit * 2000.0);
    let mut residuals = Vec::new();
    for _ in 0..300 {
        let r = separate_cov_laplace(&s, epsilon, &mut rng).unwrap();
        assert_eq!((r.mechanism, r.rho), (Mechanism::SeparateCovLaplace, 8.0));
        assert!((r.noise_sd / want_sd - 1.0).abs() < 1e-12);
        for (got, want) in sorted_eigenvalues(&r.matrix).iter().zip(&exact) {
            residuals.push((got - want) / want_sd);
        }
    }
    assert_standardised(
        &residuals,
        5.0 * (2.0 / 1200f64).sqrt(),
        1.0,
        0.32,
        "variance",
    );
}

/// The pure-DP AdaptiveCov at a large ε (SVT ε/8 = 500: noise scales 0.004 and 0.008
/// of one user's largest contribution) on 1000 vectors of norm 0.1: it never clips
/// below 1/8 (the query at 1/16 is ≈ 6 users' worth above the threshold), its noise
/// sd is the discrete Laplace's at `⌈((p + 1)·2^30 + d)/(3ε/4)⌉` over `4^j`, the
/// residuals at the chosen radius have variance 1 (kurtosis 6: within 5·√(5/N)), and
/// it spends ρ = ε²/2.
#[test]
fn adaptive_cov_laplace_releases_at_its_radius_with_the_calibrated_noise() {
    let rows: Vec<Vec<f64>> = (0..1000)
        .map(|k| {
            let a = k as f64 * 0.37;
            vec![0.1 * a.cos(), 0.1 * a.sin(), 0.0]
        })
        .collect();
    let (collection, sums) = binned(&rows, 6);
    let epsilon: f64 = 4000.0;
    let mut sampler = DiscreteGaussianSampler::from_seed_for_simulation(51);
    let mut residuals = Vec::new();
    for _ in 0..200 {
        let r = release_sums(
            &collection,
            1000,
            &sums,
            Mechanism::AdaptiveCovLaplace,
            ReleaseBudget::Epsilon(epsilon),
            &mut sampler,
        )
        .unwrap();
        assert_eq!(r.rho, epsilon * epsilon / 2.0);
        let j = r.radius.recip().log2().round() as i32;
        assert!(j <= 3, "clipped below the data at 2^-{j}");
        let t = ((4.0 * (1u64 << 30) as f64 + 6.0) / (0.75 * epsilon)).ceil();
        let q = (-1.0 / t).exp();
        let want_sd = (2.0 * q).sqrt() / (1.0 - q) / 4f64.powi(j);
        assert!((r.noise_sd_grid / want_sd - 1.0).abs() < 1e-12, "j = {j}");
        for (got, want) in r.sums.iter().zip(&sums[..6]) {
            residuals.push((got - want) as f64 / want_sd);
        }
    }
    let n = residuals.len() as f64;
    assert_standardised(
        &residuals,
        5.0 * (2.0 / n).sqrt(),
        1.0,
        5.0 * (5.0 / n).sqrt(),
        "variance",
    );
}
