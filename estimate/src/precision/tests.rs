use super::*;
use nalgebra::DMatrix;

/// A well-conditioned SPD matrix: tridiagonal 2 on the diagonal, −0.6 off.
fn tridiag(p: usize) -> DMatrix<f64> {
    DMatrix::from_fn(p, p, |i, j| match i.abs_diff(j) {
        0 => 2.0,
        1 => -0.6,
        _ => 0.0,
    })
}

#[test]
fn ridge_matches_a_hand_computation() {
    // S = [[2, 1], [1, 2]]: eigenvalues 3 (v = (1,1)/√2) and 1 (w = (1,−1)/√2).
    // λ = 0.5: θ(3) = 2/(3 + √13), θ(1) = 2/(1 + √5).
    // Θ = θ(3)·vvᵀ + θ(1)·wwᵀ: diagonal (θ3 + θ1)/2, off-diagonal (θ3 − θ1)/2.
    let s = DMatrix::from_row_slice(2, 2, &[2.0, 1.0, 1.0, 2.0]);
    let theta = ridge_precision(&s, 0.5).unwrap();
    let t3 = 2.0 / (3.0 + 13f64.sqrt());
    let t1 = 2.0 / (1.0 + 5f64.sqrt());
    assert!((theta[(0, 0)] - (t3 + t1) / 2.0).abs() < 1e-12, "{theta}");
    assert!((theta[(0, 1)] - (t3 - t1) / 2.0).abs() < 1e-12);
    assert_eq!(theta[(0, 1)], theta[(1, 0)]);
    // Each θ solves the stationarity 2λθ² + φθ − 1 = 0.
    for (phi, t) in [(3.0, t3), (1.0, t1)] {
        assert!((2.0 * 0.5 * t * t + phi * t - 1.0).abs() < 1e-12);
    }
    // Indefinite input: still positive definite.
    let ind = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
    let th = ridge_precision(&ind, 0.1).unwrap();
    assert!(th.cholesky().is_some());
    assert!(ridge_precision(&s, 0.0).is_err());
    assert!(ridge_precision(&s, f64::NAN).is_err());
}

#[test]
fn glasso_at_zero_penalty_inverts() {
    let s = tridiag(8);
    let inv = s.clone().try_inverse().unwrap();
    let opts = GlassoOptions {
        abs_tol: 1e-9,
        rel_tol: 1e-9,
        max_iterations: 5000,
        ..Default::default()
    };
    let g = glasso(&s, 0.0, &opts).unwrap();
    assert!(g.converged, "{} iterations", g.iterations);
    let err = (&g.theta - &inv).norm() / inv.norm();
    assert!(err < 1e-6, "relative error {err}");
}

#[test]
fn glasso_satisfies_kkt_and_is_positive_definite() {
    // S = a dense SPD matrix (0.5^|i−j|, p = 10) so that the penalty has work to do.
    // KKT of min −log det Θ + tr(SΘ) + λΣ_{i≠j}|Θ_ij|: W = Θ⁻¹ satisfies
    // W_ii = S_ii, W_ij − S_ij = λ·sign(Θ_ij) where Θ_ij ≠ 0, |W_ij − S_ij| ≤ λ else.
    // With tolerances 1e-10 the ADMM iterates agree to ~1e-8, so 1e-5 is ample.
    let p = 10;
    let s = DMatrix::from_fn(p, p, |i, j| 0.5f64.powi(i.abs_diff(j) as i32));
    let lambda = 0.1;
    let opts = GlassoOptions {
        abs_tol: 1e-10,
        rel_tol: 1e-10,
        max_iterations: 20_000,
        ..Default::default()
    };
    let g = glasso(&s, lambda, &opts).unwrap();
    assert!(g.converged);
    assert!(g.theta.clone().cholesky().is_some(), "not PD");
    let w = g.theta.clone().try_inverse().unwrap();
    let tol = 1e-5;
    let mut zeros = 0;
    for i in 0..p {
        assert!((w[(i, i)] - s[(i, i)]).abs() < tol);
        for j in 0..p {
            if i == j {
                continue;
            }
            let gap = w[(i, j)] - s[(i, j)];
            let zij = g.sparse[(i, j)];
            if zij != 0.0 {
                assert!((gap - lambda * zij.signum()).abs() < tol, "({i},{j}) {gap}");
            } else {
                zeros += 1;
                assert!(gap.abs() <= lambda + tol, "({i},{j}) {gap}");
            }
        }
    }
    // The penalty produced a sparse graph: S⁻¹ of an AR(1) is tridiagonal, and the
    // far entries of Θ are zeroed.
    assert!(zeros > 0);
    assert!(g.edges.len() < p * (p - 1) / 2);
}

#[test]
fn glasso_rejects_bad_parameters() {
    let s = tridiag(3);
    for (lambda, rho) in [
        (-1.0, 1.0),
        (f64::NAN, 1.0),
        (0.1, 0.0),
        (0.1, f64::INFINITY),
    ] {
        let opts = GlassoOptions {
            rho,
            ..Default::default()
        };
        assert!(matches!(
            glasso(&s, lambda, &opts),
            Err(EstimateError::Parameter { .. })
        ));
    }
}

#[test]
fn neg_log_likelihood_is_minimised_at_the_inverse() {
    // f(Θ) = −log det Θ + tr(SΘ) has its minimum p + log det S at Θ = S⁻¹.
    let s = tridiag(5);
    let inv = s.clone().try_inverse().unwrap();
    let at_inv = neg_log_likelihood(&inv, &s).unwrap();
    let log_det_s = 2.0
        * s.clone()
            .cholesky()
            .unwrap()
            .l()
            .diagonal()
            .map(|v| v.ln())
            .sum();
    assert!((at_inv - (5.0 + log_det_s)).abs() < 1e-10);
    let other = &inv * 1.1;
    assert!(neg_log_likelihood(&other, &s).unwrap() > at_inv);
    assert!(neg_log_likelihood(&(-inv), &s).is_none());
}
