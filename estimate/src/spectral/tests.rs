//! Tests of the spectral estimators (fixed seeds; bounds from the noise model).

use super::*;
use nalgebra::DVector;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

/// Symmetric noise with every packed entry (diagonal included) iid `N(0, s²)`.
fn noise(p: usize, s: f64, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let mut w = DMatrix::zeros(p, p);
    for i in 0..p {
        for j in i..p {
            let z: f64 = StandardNormal.sample(rng);
            w[(i, j)] = s * z;
            w[(j, i)] = s * z;
        }
    }
    w
}

fn unit_vector(p: usize, rng: &mut ChaCha8Rng) -> DVector<f64> {
    let v = DVector::<f64>::from_fn(p, |_, _| StandardNormal.sample(rng));
    let n = v.norm();
    v / n
}

fn detect() -> SpectralOptions {
    SpectralOptions::default()
}

#[test]
fn debias_inverts_the_spike_location() {
    // θ + pσ²/θ at p = 16, σ = 0.25 (a = 1, exact in binary): θ = 3 → 3.333…,
    // c² = 1 − 1/9.
    let (theta, c2) = debias(3.0 + 1.0 / 3.0, 16, 0.25);
    assert!((theta - 3.0).abs() < 1e-12, "{theta}");
    assert!((c2 - 8.0 / 9.0).abs() < 1e-12, "{c2}");
    // At the edge 2σ√p = 2: the critical value, no overlap.
    assert_eq!(debias(2.0, 16, 0.25), (1.0, 0.0));
    assert_eq!(shrunk_eigenvalue(1.5, 16, 0.25, Shrinker::Frobenius), 0.0);
    assert_eq!(shrunk_eigenvalue(2.0, 16, 0.25, Shrinker::Balanced), 0.0);
    // The balanced value at θ = 3: θ·c^(2 − c²) with c² = 8/9.
    let balanced = shrunk_eigenvalue(3.0 + 1.0 / 3.0, 16, 0.25, Shrinker::Balanced);
    let want = 3.0 * (8.0_f64 / 9.0).powf(1.0 - 4.0 / 9.0);
    assert!((balanced - want).abs() < 1e-12, "{balanced} vs {want}");
    // Derivative against a central difference, near the edge and far from it.
    for shrinker in [Shrinker::Balanced, Shrinker::Frobenius, Shrinker::Operator] {
        for x in [2.1, 3.0] {
            let h = |x| shrunk_eigenvalue(x, 16, 0.25, shrinker);
            let num = (h(x + 1e-7) - h(x - 1e-7)) / 2e-7;
            let ana = shrunk_eigenvalue_derivative(x, 16, 0.25, shrinker);
            assert!(
                (num - ana).abs() < 1e-5 * ana,
                "{shrinker:?} at {x}: {num} vs {ana}"
            );
        }
    }
}

#[test]
fn balanced_shrinker_is_near_both_optima() {
    // In the plane of the true and the sample direction the error of ηûûᵀ for θuuᵀ
    // (θ = 1) has squared Frobenius norm η² − 2ηc² + 1 (optimum 1 − c⁴ at η = c²)
    // and operator norm (|η − 1| + √((η − 1)² + 4ηs²))/2 (optimum s at η = 1), as
    // the module docs derive. On a fine grid of c² the worst ratios to the optima,
    // computed from those closed forms, are 1.0077 (Frobenius norm) and 1.109
    // (operator) for η = c^(2 − c²); the bounds 1.01 / 1.11 hold them, while the
    // Frobenius shrinker exceeds the operator bound (1.155) and the operator
    // shrinker the Frobenius one (→ √2), so the test tells the three apart.
    let worst = |eta: &dyn Fn(f64) -> f64| {
        (1..1000).fold((0.0_f64, 0.0_f64), |(wf, wo), k| {
            let c2 = k as f64 / 1000.0;
            let s2 = 1.0 - c2;
            let e = eta(c2);
            let frobenius = ((e * e - 2.0 * e * c2 + 1.0) / (1.0 - c2 * c2)).sqrt();
            let d = e - 1.0;
            let operator = (d.abs() + (d * d + 4.0 * e * s2).sqrt()) / 2.0 / s2.sqrt();
            (wf.max(frobenius), wo.max(operator))
        })
    };
    // Through `shrunk_eigenvalue`: a spike θ = 1 at p = 16, σ = 0.25 (a = 1) has
    // c² = 1 − 1/θ²; pick θ for each c² and read η back.
    let via = |shrinker: Shrinker| {
        move |c2: f64| {
            let theta = 1.0 / (1.0 - c2).sqrt();
            shrunk_eigenvalue(theta + 1.0 / theta, 16, 0.25, shrinker) / theta
        }
    };
    let (f, o) = worst(&via(Shrinker::Balanced));
    assert!(f < 1.01 && o < 1.11, "balanced: {f} / {o}");
    let (f, o) = worst(&via(Shrinker::Frobenius));
    assert!((f - 1.0).abs() < 1e-9 && o > 1.15, "Frobenius: {f} / {o}");
    let (f, o) = worst(&via(Shrinker::Operator));
    assert!(f > 1.4 && (o - 1.0).abs() < 1e-9, "operator: {f} / {o}");
}

#[test]
fn rank_one_spike_above_threshold_is_debiased() {
    // θ = 3σ√p at p = 60, σ = 1. Detection: the top eigenvalue sits at
    // θ + pσ²/θ, i.e. (t − 1)²/t·σ√p = (4/3)·7.75σ = 10.3σ above the edge
    // (t = θ/σ√p = 3), against a margin of 3.27σ·p^(−1/6) = 1.65σ and a fluctuation
    // sd ≤ √2σ: detected except with probability far below 1e-6. (At θ = 1.5σ√p
    // the excess, 0.17σ√p = 1.29σ, is *below* the margin and the spike is missed
    // about half the time.) Accuracy: the top eigenvalue fluctuates with sd ≤ √2σ·c
    // (GOE outlier variance 2σ²c²; ours is smaller, see the module doc), so
    // θ̂ = θ(λ) with dθ/dλ = 1/c² has sd ≤ √2σ/c = 1.50σ (c² = 8/9); the mean of 10
    // independent replicates has sd ≤ 0.47σ. The finite-p bias is O(σ/√p·…)
    // (1000 replicates in numpy: −0.07σ, sd 1.46σ). Bound 1.5σ: 3.2 sd of the
    // mean above 0, below the pσ²/θ = σ√p/3 = 2.58σ bias of the raw eigenvalue.
    let (p, s) = (60, 1.0);
    let theta = 3.0 * s * (p as f64).sqrt();
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut sum_err = 0.0;
    for _ in 0..10 {
        let u = unit_vector(p, &mut rng);
        let y = &u * u.transpose() * theta + noise(p, s, &mut rng);
        let est = shrink(&y, s, &detect()).unwrap();
        assert_eq!(est.rank, 1);
        sum_err += est.spikes[0].signal - theta;
    }
    let mean_err = sum_err / 10.0;
    assert!(mean_err.abs() < 1.5 * s, "mean error of θ̂: {mean_err}");
}

#[test]
fn spike_below_threshold_is_not_detected() {
    // θ = 0.7σ√p < σ√p: the top eigenvalue sticks to the edge, and the margin keeps
    // it out except with the pure-noise false-positive rate (≈ 0.1%).
    let (p, s) = (50, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let u = unit_vector(p, &mut rng);
    let y = &u * u.transpose() * (0.7 * s * (p as f64).sqrt()) + noise(p, s, &mut rng);
    let est = shrink(&y, s, &detect()).unwrap();
    assert_eq!(est.rank, 0);
    assert!(est.spikes.is_empty());
}

#[test]
fn pure_noise_gives_rank_zero() {
    // 200 pure-noise matrices at p = 30. With the margin at TW₁'s 99.9% quantile
    // the false-positive rate is ≈ 0.1% (0/2000 in a simulation at p = 30); even
    // at a rate of 0.5%, P(≥ 4 of 200) = 1.9%. Without the margin the largest
    // eigenvalue crosses the edge (measured from the bulk mean, which sits below
    // the centre by the finite-p fluctuations) in 17 of these 200 draws, and a
    // wrong edge constant (σ√p) flags all 200.
    let (p, s) = (30, 0.3);
    let mut rng = ChaCha8Rng::seed_from_u64(13);
    let flagged = (0..200)
        .filter(|_| shrink(&noise(p, s, &mut rng), s, &detect()).unwrap().rank > 0)
        .count();
    assert!(flagged < 4, "{flagged} of 200 pure-noise matrices flagged");
}

#[test]
fn rank_three_plus_diagonal() {
    // Σ = Σ_k θ_k u_ku_kᵀ + D, θ = (3, 4, 5)·σ√p on orthonormal u_k, D_ii in
    // [2, 6]σ. Each spike is far above the edge (≥ 3× the critical value), so all
    // three are detected. Frobenius error of the factor estimate: per spike
    // θ√(c²(1 − c²)) ≈ 0.31·θ̃·σ√p·… ≈ 7.5σ, the diagonal ≈ σ√p ≈ 7.7σ, total ≈
    // 14σ; "no threshold + PSD" keeps ‖W‖_F ≈ pσ = 60σ minus what the PSD
    // projection removes (≤ half). Dropping the diagonal fit costs ‖D‖_F ≈ 33σ.
    // Bound: factor error ≤ 0.5 × (none + PSD).
    let (p, s) = (60, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let g = DMatrix::<f64>::from_fn(p, 3, |_, _| StandardNormal.sample(&mut rng));
    let q = g.qr().q();
    let root_p = (p as f64).sqrt();
    let mut sigma = DMatrix::<f64>::zeros(p, p);
    for (k, t) in [3.0, 4.0, 5.0].into_iter().enumerate() {
        let u = q.column(k);
        sigma += u * u.transpose() * (t * s * root_p);
    }
    for i in 0..p {
        sigma[(i, i)] += s * (2.0 + 4.0 * i as f64 / (p - 1) as f64);
    }
    let y = &sigma + noise(p, s, &mut rng);
    let est = factor(&y, s, &detect()).unwrap();
    assert_eq!(est.rank, 3);
    let (psd, _) = crate::psd::project_psd(&y).unwrap();
    let err_factor = (&est.matrix - &sigma).norm();
    let err_none = (&psd - &sigma).norm();
    assert!(
        err_factor <= 0.5 * err_none,
        "factor {err_factor} vs none+PSD {err_none}"
    );
    let min_eig = est.matrix.clone().symmetric_eigen().eigenvalues.min();
    assert!(min_eig >= -1e-9, "factor estimate not PSD: {min_eig}");
    // The fixed rank gives the same three spikes.
    let fixed = SpectralOptions {
        rank: RankRule::Fixed(3),
        ..detect()
    };
    assert_eq!(factor(&y, s, &fixed).unwrap().spikes, est.spikes);
}

#[test]
fn sure_of_identity_is_the_noise_energy() {
    // h(λ) = λ: f(Y) = Y, divergence p², SURE = p²σ² exactly (E‖W‖_F²).
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let y = noise(8, 1.0, &mut rng);
    let r = sure_spectral(&y, 0.5, |l| l, |_| 1.0).unwrap();
    assert!((r - 64.0 * 0.25).abs() < 1e-9, "{r}");
}

#[test]
fn sure_is_unbiased_by_monte_carlo() {
    // Σ = θuuᵀ (θ = 2σ√p) at p = 20, f = the Frobenius shrinker over level 0 (a
    // continuous h, so Stein's identity holds). Over N = 400 replicates the mean of
    // SURE − loss has expectation 0; bound 4 standard errors (estimated from the
    // replicates), a false alarm rate of 6e-5. This guards the spike part of the
    // divergence; it cannot see the GOE weighting (divergence 2·tr(Df)): with
    // h = 0 on the bulk, Γ is non-zero only in the spike's row and the omitted
    // 2σ²Σ_ab M_abΓ_ab ≈ 2σ²·O(1) is below the standard error. That weighting is
    // caught by the two tests of SURE below and above.
    let (p, s) = (20, 1.0);
    let theta = 2.0 * s * (p as f64).sqrt();
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let u = unit_vector(p, &mut rng);
    let sigma = &u * u.transpose() * theta;
    let h = |l: f64| shrunk_eigenvalue(l, p, s, Shrinker::Frobenius);
    let dh = |l: f64| shrunk_eigenvalue_derivative(l, p, s, Shrinker::Frobenius);
    assert_sure_unbiased(&sigma, s, h, dh, &mut rng);
}

/// `Q·diag(d)·Qᵀ` with `d` evenly spread over `[0, top]` and `Q` random orthogonal.
fn spread_spectrum(p: usize, top: f64, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let g = DMatrix::<f64>::from_fn(p, p, |_, _| StandardNormal.sample(rng));
    let q = g.qr().q();
    let d =
        DMatrix::<f64>::from_diagonal(&DVector::from_fn(p, |i, _| top * i as f64 / (p - 1) as f64));
    &q * d * q.transpose()
}

#[test]
fn bulk_shrinker_endpoints_and_continuity() {
    // α = 1 is max(λ, 0): exactly the PSD projection.
    let (p, s) = (30, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let u = unit_vector(p, &mut rng);
    let y = &u * u.transpose() * (3.0 * s * (p as f64).sqrt()) + noise(p, s, &mut rng);
    let (psd, clamped) = crate::psd::project_psd(&y).unwrap();
    assert!(clamped > 0);
    // Whatever τ: the soft piece and the spike piece never exceed x.
    for tau in [1.0, 2.0] {
        let one = bulk_shrink(&y, s, 1.0, tau).unwrap();
        let gap = (&one.matrix - &psd).amax();
        assert!(
            gap < 1e-9,
            "α = 1, τ = {tau} differs from the PSD projection by {gap}"
        );
    }
    // α = 0: the spike gets ψ̂ + η(x̂) as in `shrink` (same level, same shrinker).
    let zero = bulk_shrink(&y, s, 0.0, 2.0).unwrap();
    let flat = shrink(&y, s, &detect()).unwrap();
    assert_eq!(flat.rank, 1);
    assert_eq!(zero.spikes[0], flat.spikes[0]);
    // Continuity everywhere, for maps with and without a soft piece: on a grid of
    // x across the line, the soft piece and the spike piece, a step of 1e-9 moves
    // h by less than 1e-3. The steepest continuous part is the spike piece's rise
    // at the edge, like the Frobenius root's √(x² − 4a) ≈ 2a^(1/4)·√δ ≈ 1.5e-4 for
    // δ = 1e-9 (a = 30); a jump such as the operator shrinker's √a ≈ 5.5 at the
    // edge fails it.
    let level = 0.7;
    let a = p as f64 * s * s;
    let edge = 2.0 * a.sqrt();
    let h =
        |x: f64, alpha: f64, tau: f64| bulk_shrunk_eigenvalue(level + x, level, p, s, alpha, tau);
    for (alpha, tau) in [(0.6, 2.0), (0.2, 1.2), (0.0, 1.0), (0.9, 1.5)] {
        for k in 0..4000 {
            let x = -5.0 + 0.01 * k as f64;
            for x in [x, edge] {
                let (below, above) = (h(x, alpha, tau).0, h(x + 1e-9, alpha, tau).0);
                assert!(
                    (below - above).abs() < 1e-3,
                    "α = {alpha}, τ = {tau}, x = {x}: {below} vs {above}"
                );
            }
        }
    }
    // τ = 1.2, α = 0.2: the soft piece takes over from the line at
    // x = τ√a/(1 − α) = 1.5√a (before the edge 2√a, where the spike piece is 0),
    // with slope 1, until the spike piece, rising faster, overtakes it; from there
    // the slope stays above 1 (the spike piece's, which tends to 1 from above).
    let (tau, soft_alpha) = (1.2, 0.2);
    let from = tau * a.sqrt() / (1.0 - soft_alpha);
    assert_eq!(h(from - 0.1, soft_alpha, tau).1, soft_alpha);
    let (value, slope) = h(from + 0.1, soft_alpha, tau);
    assert!((value - (level + from + 0.1 - tau * a.sqrt())).abs() < 1e-12 && slope == 1.0);
    let to = (0..4000)
        .map(|k| from + 0.01 * k as f64)
        .find(|&x| h(x, soft_alpha, tau).1 > 1.0)
        .expect("the spike piece overtakes the soft piece");
    assert!(to > edge, "{to}");
    for k in 0..1000 {
        let x = to + 0.05 * k as f64;
        let (value, slope) = h(x, soft_alpha, tau);
        let spike = shrunk_eigenvalue(x, p, s, Shrinker::Balanced);
        assert!(
            slope > 1.0 && (value - (level + spike)).abs() < 1e-12,
            "x = {x}"
        );
    }
    // τ = 2 is the map without a soft piece: max(αx, η(x)) everywhere, η the
    // balanced shrinker of `shrink` (0 at and below the edge).
    let alpha = 0.6;
    for k in 0..200 {
        let x = -5.0 + 0.1 * k as f64;
        let shrunk = if x > edge {
            (alpha * x).max(shrunk_eigenvalue(x, p, s, Shrinker::Balanced))
        } else {
            alpha * x
        };
        let want = (level + shrunk).max(0.0);
        assert!((h(x, alpha, 2.0).0 - want).abs() < 1e-12, "x = {x}");
    }
    assert!(bulk_shrink(&y, s, 1.5, 2.0).is_err());
    assert!(bulk_shrink(&y, s, 0.5, 2.5).is_err());
    assert!(bulk_shrink(&y, s, 0.5, -0.1).is_err());
    assert!(bulk_shrink_sure(&y, s, &[], &DEFAULT_BULK_TAUS).is_err());
    assert!(bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &[]).is_err());
    assert!(bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &[3.0]).is_err());
}

#[test]
fn sure_of_bulk_shrinker_is_unbiased_by_monte_carlo() {
    // A spread spectrum (no flat bulk) at p = 20, level fixed at 1: h is continuous
    // and piecewise differentiable, so E[SURE] = E[loss] exactly (Stein's
    // identity). Mean of N = 400 differences within 4 standard errors (false alarm
    // 6e-5). Two maps:
    // * α = 0.5, τ = 2 (no soft piece). Dropping the line's slope from h' (dh = 0
    //   below the shrinker) lowers SURE by 2σ²·Σ_a (2 − M_aa)·α ≈ 2σ²·2α·m over the
    //   m eigenvalues on the line (about 10 here): ≈ −20σ², ten standard errors
    //   (measured −20.6 ± 1.8). The GOE weighting (divergence 2·tr(Df)) omits
    //   2σ²Σ_ab M_abΓ_ab ≈ 2σ²·Σ_a h' ≈ +20σ² (measured +29).
    // * α = 0.2, τ = 1: the soft piece (slope 1) serves x ∈ [√a/0.8, 2.5√a] =
    //   [5.6, 11.2] at √a = √20, where the spread spectrum puts several
    //   eigenvalues. Reading its slope as α instead of 1 lowers SURE by about
    //   2σ²·Σ_a (2 − M_aa)(1 − α) over its eigenvalues, ≈ 2·2·0.8 ≈ 3σ² each
    //   (measured with that mistake: −15.7 ± 2.1, caught at 7.6 standard errors).
    let (p, s) = (20, 1.0);
    for (seed, alpha, tau) in [(18, 0.5, 2.0), (21, 0.2, 1.0)] {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let sigma = spread_spectrum(p, 3.0 * s * (p as f64).sqrt(), &mut rng);
        let h = |l: f64| bulk_shrunk_eigenvalue(l, 1.0, p, s, alpha, tau).0;
        let dh = |l: f64| bulk_shrunk_eigenvalue(l, 1.0, p, s, alpha, tau).1;
        assert_sure_unbiased(&sigma, s, h, dh, &mut rng);
    }
}

#[test]
fn sure_keeps_a_structured_bulk() {
    // Σ with eigenvalues evenly spread over [0, 3σ√p] at p = 40, σ = 1: no flat
    // floor. Expected Frobenius losses: α = 0 replaces the spread by its mean, about
    // p·Var(U[0, 19]) ≈ 40·30 = 1200; α = 1 keeps all the noise minus the PSD clamp,
    // below p²σ² = 1600; α = ½ about ¼·1200 + ¼·1600 = 700. So the gain of α = ½
    // is ≈ 500 over α = 0 and ≈ 600 over α = 1, while the SURE differences between
    // weights have sd ≤ 120 (200 replicates of this model in numpy: 57–117), a
    // margin above 4 sd: SURE must pick an interior weight, and its estimate must
    // beat both the flat bulk and the PSD projection on this draw.
    let (p, s) = (40, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let sigma = spread_spectrum(p, 3.0 * s * (p as f64).sqrt(), &mut rng);
    let y = &sigma + noise(p, s, &mut rng);
    let alphas = [0.0, 0.25, 0.5, 0.75, 1.0];
    // τ = 2 only: the map these expectations are derived for.
    let (choice, est) = bulk_shrink_sure(&y, s, &alphas, &[2.0]).unwrap();
    let alpha = choice.alpha;
    assert!(alpha > 0.0 && alpha < 1.0, "chosen α = {alpha}");
    let loss = (&est.matrix - &sigma).norm_squared();
    let flat = (&bulk_shrink(&y, s, 0.0, 2.0).unwrap().matrix - &sigma).norm_squared();
    let (psd, _) = crate::psd::project_psd(&y).unwrap();
    let none = (&psd - &sigma).norm_squared();
    assert!(
        loss < flat && loss < none,
        "α = {alpha}: {loss} vs flat {flat}, PSD {none}"
    );
}

#[test]
fn cv_fits_score_exactly_what_the_rules_return() {
    // The eigen-form held-out losses of `CvFits` against the plain
    // ‖f(Y) − T‖_F² of `shrink`, `factor` and `bulk_shrink_sure` on the same Y:
    // equal up to rounding (relative 1e-9), on a two-spike Y with a heterogeneous
    // diagonal (so the factor's diagonal fit and every term of its loss are
    // exercised) and an independent test matrix T.
    let (p, s) = (25, 1.0);
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    let root_p = (p as f64).sqrt();
    let (u, v) = (unit_vector(p, &mut rng), unit_vector(p, &mut rng));
    let mut sigma =
        &u * u.transpose() * (4.0 * s * root_p) + &v * v.transpose() * (3.0 * s * root_p);
    for i in 0..p {
        sigma[(i, i)] += 2.0 + i as f64 / p as f64;
    }
    let y = &sigma + noise(p, s, &mut rng);
    let t = &sigma + noise(p, 2.0 * s, &mut rng);
    let fits = CvFits::new(&y, s).unwrap();
    let got = fits.losses(&t);
    let want = [
        (&shrink(&y, s, &detect()).unwrap().matrix - &t).norm_squared(),
        (&factor(&y, s, &detect()).unwrap().matrix - &t).norm_squared(),
        (&bulk_shrink_sure(&y, s, &DEFAULT_BULK_ALPHAS, &DEFAULT_BULK_TAUS)
            .unwrap()
            .1
            .matrix
            - &t)
            .norm_squared(),
    ];
    assert!(factor(&y, s, &detect()).unwrap().rank == 2);
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-9 * w, "{got:?} vs {want:?}");
    }
}

#[test]
fn refuses_bad_input() {
    let y = DMatrix::<f64>::identity(3, 3);
    assert!(shrink(&y, 0.0, &detect()).is_err());
    assert!(shrink(&y, f64::NAN, &detect()).is_err());
    let fixed = SpectralOptions {
        rank: RankRule::Fixed(3),
        ..detect()
    };
    assert!(factor(&y, 1.0, &fixed).is_err());
    let neg = SpectralOptions {
        rank: RankRule::Detect { margin: -1.0 },
        ..detect()
    };
    assert!(shrink(&y, 1.0, &neg).is_err());
    assert!(shrink(&DMatrix::zeros(2, 3), 1.0, &detect()).is_err());
}
/// Monte Carlo check that SURE is unbiased for the eigenvalue map `h` (derivative
/// `dh`): over 400 draws of `Y = sigma + W`, the mean of SURE − ‖f(Y) − sigma‖² is
/// within 4 standard errors of 0 (a false failure has probability ≈ 6e-5).
fn assert_sure_unbiased(
    sigma: &DMatrix<f64>,
    s: f64,
    h: impl Fn(f64) -> f64 + Copy,
    dh: impl Fn(f64) -> f64 + Copy,
    rng: &mut ChaCha8Rng,
) {
    let p = sigma.nrows();
    let n = 400;
    let diffs: Vec<f64> = (0..n)
        .map(|_| {
            let y = sigma + noise(p, s, rng);
            let (values, vectors) = symmetric_eigen(&y).unwrap();
            let f = from_eigen(&vectors, values.iter().map(|&l| h(l)));
            sure_spectral(&y, s, h, dh).unwrap() - (&f - sigma).norm_squared()
        })
        .collect();
    let mean = diffs.iter().sum::<f64>() / n as f64;
    let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    assert!(mean.abs() < 4.0 * se, "mean SURE − loss {mean}, se {se}");
}
