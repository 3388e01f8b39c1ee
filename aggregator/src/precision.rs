//! Precision matrices from the private covariance estimate (seed 003): ridge (ROPE,
//! closed form) and the graphical lasso by ADMM, with λ chosen by K-fold
//! cross-validation on the held-out Gaussian negative log-likelihood.
//!
//! Both are functions of the released covariance estimate (or of the fold sums), which
//! are post-processing of the privatised reports, so they cost no privacy.
//!
//! Conventions:
//! * Ridge solves `min_Θ −log det Θ + tr(S̃Θ) + λ‖Θ‖_F²`: eigen `S̃ = M diag(φ) Mᵀ`,
//!   `Θ = M diag(2/(φ + √(φ² + 8λ))) Mᵀ`. Positive definite for every λ > 0 even when
//!   S̃ is indefinite.
//! * The graphical lasso solves `min_Θ −log det Θ + tr(S̃Θ) + λ·Σ_{i≠j}|Θ_ij|`: by
//!   default only **off-diagonal** entries are penalised (the usual choice: the
//!   diagonal of a precision matrix is never zero, and shrinking it only biases the
//!   variances); `penalize_diagonal` adds the diagonal, as Boyd et al. print it. It
//!   needs a positive semi-definite S̃ with a positive diagonal (run it on the
//!   projected estimate; a PSD floor > 0 makes it well posed at any λ ≥ 0).

use crate::accumulator::Accumulator;
use crate::estimate::{
    EstimateError, EstimateOptions, estimate, from_eigen, project_psd, symmetric_eigen,
};
use crate::threshold::ThresholdKind;
use ldpcov_proto::Collection;
use nalgebra::DMatrix;

/// The ridge (ROPE) precision `M diag(2/(φ + √(φ² + 8λ))) Mᵀ` of a symmetric `s`.
/// `lambda` must be finite and > 0.
pub fn ridge_precision(s: &DMatrix<f64>, lambda: f64) -> Result<DMatrix<f64>, EstimateError> {
    if !(lambda.is_finite() && lambda > 0.0) {
        return Err(EstimateError::Parameter {
            name: "lambda",
            value: lambda,
            requirement: "a finite number > 0 for the ridge precision",
        });
    }
    let (phi, m) = symmetric_eigen(s)?;
    Ok(from_eigen(
        &m,
        phi.iter()
            .map(|&f| 2.0 / (f + (f * f + 8.0 * lambda).sqrt())),
    ))
}

/// Settings of the graphical-lasso ADMM (Boyd et al. 2011, §6.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlassoOptions {
    /// Initial augmented-Lagrangian parameter ρ (seed 003 uses 100).
    pub rho: f64,
    /// Adapt ρ by residual balancing (Boyd et al. §3.4.1: ×2 when the primal residual
    /// exceeds 10× the dual one, ÷2 in the opposite case), which makes convergence
    /// insensitive to the scale of S̃.
    pub adaptive_rho: bool,
    /// Iteration cap.
    pub max_iterations: u32,
    /// Absolute tolerance (the stopping rule uses `p·abs_tol`, i.e. √(p²)·abs_tol).
    pub abs_tol: f64,
    /// Relative tolerance.
    pub rel_tol: f64,
    /// Penalise the diagonal too (default: off-diagonal only).
    pub penalize_diagonal: bool,
}

impl Default for GlassoOptions {
    fn default() -> Self {
        GlassoOptions {
            rho: 100.0,
            adaptive_rho: true,
            max_iterations: 2000,
            abs_tol: 1e-4,
            rel_tol: 1e-2,
            penalize_diagonal: false,
        }
    }
}

/// The graphical-lasso solution.
#[derive(Debug, Clone, PartialEq)]
pub struct GlassoResult {
    /// Θ, positive definite (the ADMM's Θ-iterate).
    pub theta: DMatrix<f64>,
    /// The sparse iterate Z (Θ − Z → 0 at convergence); its support is the graph.
    pub sparse: DMatrix<f64>,
    /// Edges `(i, j)`, `i < j`, with `Z_ij ≠ 0`.
    pub edges: Vec<(usize, usize)>,
    /// Iterations run.
    pub iterations: u32,
    /// Whether the residual stopping rule was met before the cap.
    pub converged: bool,
    /// Final primal residual `‖Θ − Z‖_F`.
    pub primal_residual: f64,
    /// Final dual residual `ρ‖Z − Z_prev‖_F`.
    pub dual_residual: f64,
}

fn check_nonnegative(name: &'static str, value: f64) -> Result<(), EstimateError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(EstimateError::Parameter {
            name,
            value,
            requirement: "a finite number ≥ 0",
        })
    }
}

/// Validates glasso settings.
pub fn validate_glasso(lambda: f64, opts: &GlassoOptions) -> Result<(), EstimateError> {
    check_nonnegative("lambda", lambda)?;
    if !(opts.rho.is_finite() && opts.rho > 0.0) {
        return Err(EstimateError::Parameter {
            name: "rho",
            value: opts.rho,
            requirement: "a finite number > 0",
        });
    }
    check_nonnegative("abs_tol", opts.abs_tol)?;
    check_nonnegative("rel_tol", opts.rel_tol)?;
    if opts.max_iterations == 0 {
        return Err(EstimateError::Parameter {
            name: "max_iterations",
            value: 0.0,
            requirement: "at least 1",
        });
    }
    Ok(())
}

/// The graphical lasso of a symmetric `s` at penalty `lambda` by ADMM:
/// Θ-step eigen of `ρ(Z − U) − S = Q diag(μ) Qᵀ`, `Θ = Q diag((μ + √(μ² + 4ρ))/(2ρ)) Qᵀ`;
/// Z-step soft-threshold `Θ + U` at `λ/ρ` (off-diagonal only unless
/// `penalize_diagonal`); `U += Θ − Z`. Stops when `‖Θ − Z‖_F ≤ p·abs + rel·max(‖Θ‖_F,
/// ‖Z‖_F)` and `ρ‖Z − Z_prev‖_F ≤ p·abs + rel·ρ‖U‖_F`, or at the iteration cap
/// (`converged = false`).
pub fn glasso(
    s: &DMatrix<f64>,
    lambda: f64,
    opts: &GlassoOptions,
) -> Result<GlassoResult, EstimateError> {
    validate_glasso(lambda, opts)?;
    let p = s.nrows();
    let mut rho = opts.rho;
    // Start from the diagonal inverse (Z = diag(1/s_ii) where positive).
    let mut z = DMatrix::from_fn(p, p, |i, j| {
        if i == j && s[(i, i)] > 0.0 {
            1.0 / s[(i, i)]
        } else if i == j {
            1.0
        } else {
            0.0
        }
    });
    let mut u = DMatrix::<f64>::zeros(p, p);
    let mut theta = z.clone();
    let (mut r_norm, mut s_norm) = (f64::INFINITY, f64::INFINITY);
    let mut converged = false;
    let mut iterations = 0;
    for it in 1..=opts.max_iterations {
        iterations = it;
        let target = (&z - &u) * rho - s;
        let (mu, q) = symmetric_eigen(&target)?;
        theta = from_eigen(
            &q,
            mu.iter()
                .map(|&m| (m + (m * m + 4.0 * rho).sqrt()) / (2.0 * rho)),
        );
        let z_prev = z.clone();
        let kappa = lambda / rho;
        z = DMatrix::from_fn(p, p, |i, j| {
            let v = theta[(i, j)] + u[(i, j)];
            if i != j || opts.penalize_diagonal {
                ThresholdKind::Soft.apply(v, kappa)
            } else {
                v
            }
        });
        u += &theta - &z;
        r_norm = (&theta - &z).norm();
        s_norm = rho * (&z - &z_prev).norm();
        let eps_pri = p as f64 * opts.abs_tol + opts.rel_tol * theta.norm().max(z.norm());
        let eps_dual = p as f64 * opts.abs_tol + opts.rel_tol * rho * u.norm();
        if !(r_norm.is_finite() && s_norm.is_finite()) {
            return Err(EstimateError::Eigen);
        }
        if r_norm <= eps_pri && s_norm <= eps_dual {
            converged = true;
            break;
        }
        if opts.adaptive_rho {
            if r_norm > 10.0 * s_norm {
                rho *= 2.0;
                u /= 2.0;
            } else if s_norm > 10.0 * r_norm {
                rho /= 2.0;
                u *= 2.0;
            }
        }
    }
    let mut edges = Vec::new();
    for i in 0..p {
        for j in i + 1..p {
            if z[(i, j)] != 0.0 {
                edges.push((i, j));
            }
        }
    }
    Ok(GlassoResult {
        theta,
        sparse: z,
        edges,
        iterations,
        converged,
        primal_residual: r_norm,
        dual_residual: s_norm,
    })
}

/// Which precision estimator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PrecisionMethod {
    /// Ridge (ROPE).
    Ridge,
    /// Graphical lasso by ADMM.
    Glasso(GlassoOptions),
}

/// `−log det Θ + tr(SΘ)`, the Gaussian negative log-likelihood up to constants, or
/// `None` when Θ is not positive definite.
pub fn neg_log_likelihood(theta: &DMatrix<f64>, s: &DMatrix<f64>) -> Option<f64> {
    let chol = theta.clone().cholesky()?;
    let log_det = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    Some(-log_det + theta.component_mul(s).sum())
}

/// The λ grid cross-validation searches for `method` on the covariance estimate `s`:
/// glasso: `λ_max·2^{−i}`, i = 0..10, with `λ_max = max_{i≠j}|s_ij|` (above it Θ is
/// diagonal); ridge: `(tr s/p)²·4^{−i}`, i = 0..10.
pub fn lambda_grid(method: &PrecisionMethod, s: &DMatrix<f64>) -> Vec<f64> {
    let p = s.nrows();
    let top = match method {
        PrecisionMethod::Glasso(_) => {
            let mut m = 0.0f64;
            for i in 0..p {
                for j in 0..p {
                    if i != j {
                        m = m.max(s[(i, j)].abs());
                    }
                }
            }
            m
        }
        PrecisionMethod::Ridge => (s.trace() / p.max(1) as f64).powi(2),
    };
    let top = if top > 0.0 && top.is_finite() {
        top
    } else {
        1.0
    };
    let step: f64 = match method {
        PrecisionMethod::Glasso(_) => 0.5,
        PrecisionMethod::Ridge => 0.25,
    };
    (0..11).map(|i| top * step.powi(i)).collect()
}

/// Runs `method` on `s` at `lambda`, returning Θ (and the glasso result).
pub fn precision(
    method: &PrecisionMethod,
    s: &DMatrix<f64>,
    lambda: f64,
) -> Result<(DMatrix<f64>, Option<GlassoResult>), EstimateError> {
    match method {
        PrecisionMethod::Ridge => Ok((ridge_precision(s, lambda)?, None)),
        PrecisionMethod::Glasso(opts) => {
            let g = glasso(s, lambda, opts)?;
            Ok((g.theta.clone(), Some(g)))
        }
    }
}

/// The outcome of the λ cross-validation.
#[derive(Debug, Clone, PartialEq)]
pub struct LambdaCv {
    /// The λ with the smallest mean held-out negative log-likelihood.
    pub lambda: f64,
    /// Every λ with its mean held-out loss (∞ when some fold gave no PD Θ).
    pub losses: Vec<(f64, f64)>,
    /// Folds used.
    pub folds_used: usize,
}

/// K-fold cross-validation of λ on the held-out negative log-likelihood
/// `−log det Θ_{−k} + tr(S_k Θ_{−k})`.
///
/// For fold k: the training covariance is the full covariance pipeline (`cov_options`:
/// threshold rule, PSD projection/floor) run on the other K−1 folds (sums of squares are
/// not kept per fold, so the training accumulator carries the full ones scaled by
/// `n_train/n`: used only by the entry-adaptive rule's variance estimate), Θ_{−k} is
/// `method` at λ on it, and S_k is fold k's raw average projected onto the PSD cone
/// (clamped at 0; the likelihood needs a PSD S). `grid` defaults to [`lambda_grid`] of
/// the full estimate `full`. Returns `None` with fewer than two usable folds.
pub fn cross_validate_lambda(
    collection: &Collection,
    acc: &Accumulator,
    cov_options: &EstimateOptions,
    method: &PrecisionMethod,
    grid: &[f64],
) -> Result<Option<LambdaCv>, EstimateError> {
    let mut losses = vec![0.0; grid.len()];
    let mut folds_used = 0;
    let n = acc.count;
    for k in 0..acc.fold_sums.len() {
        let n_k = acc.fold_counts[k];
        let n_train = n.saturating_sub(n_k);
        if n_k == 0 || n_train == 0 {
            continue;
        }
        folds_used += 1;
        let mut train = Accumulator::new(acc.entries(), acc.fold_sums.len() - 1);
        let mut slot = 0;
        for f in 0..acc.fold_sums.len() {
            if f == k {
                continue;
            }
            train.fold_sums[slot].clone_from(&acc.fold_sums[f]);
            train.fold_counts[slot] = acc.fold_counts[f];
            slot += 1;
        }
        train.count = n_train;
        let frac = n_train as f64 / n as f64;
        train.sum_squares = acc
            .sum_squares
            .iter()
            .map(|&q| (q as f64 * frac) as u128)
            .collect();
        // The training estimate may sit below min_reports: CV is internal, nothing is
        // released from it.
        let mut c = collection.clone();
        c.min_reports = 0;
        let s_train = estimate(&c, &train, cov_options)?.matrix;
        let raw = crate::estimate::average(collection, &acc.fold_sums[k], n_k)?;
        let (s_test, _) = project_psd(&raw)?;
        for (loss, &lambda) in losses.iter_mut().zip(grid) {
            let l = match precision(method, &s_train, lambda) {
                Ok((theta, _)) => neg_log_likelihood(&theta, &s_test).unwrap_or(f64::INFINITY),
                Err(EstimateError::Eigen) => f64::INFINITY,
                Err(e) => return Err(e),
            };
            *loss += l;
        }
    }
    if folds_used < 2 {
        return Ok(None);
    }
    let losses: Vec<(f64, f64)> = grid
        .iter()
        .zip(losses)
        .map(|(&l, s)| (l, s / folds_used as f64))
        .collect();
    let best = losses
        .iter()
        .fold(None::<(f64, f64)>, |best, &(l, s)| match best {
            Some((_, bs)) if bs <= s => best,
            _ if s.is_finite() => Some((l, s)),
            _ => best,
        });
    Ok(best.map(|(lambda, _)| LambdaCv {
        lambda,
        losses,
        folds_used,
    }))
}

/// A released precision matrix, with the covariance estimate it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct PrecisionEstimate {
    /// The covariance estimate Θ was computed from.
    pub covariance: crate::estimate::CovarianceEstimate,
    /// Θ, symmetric positive definite, data units⁻¹.
    pub theta: DMatrix<f64>,
    /// λ used.
    pub lambda: f64,
    /// Whether λ was chosen by cross-validation.
    pub lambda_cross_validated: bool,
    /// The glasso details (None for ridge).
    pub glasso: Option<GlassoResult>,
}

/// Covariance estimate (`cov_options`), then `method` at `lambda`, or at the λ chosen
/// by [`cross_validate_lambda`] over [`lambda_grid`] of the full estimate when `lambda`
/// is `None` (falling back to the grid's middle value when fewer than two folds have
/// reports on both sides).
pub fn estimate_precision(
    collection: &Collection,
    acc: &Accumulator,
    cov_options: &EstimateOptions,
    method: &PrecisionMethod,
    lambda: Option<f64>,
) -> Result<PrecisionEstimate, EstimateError> {
    if let PrecisionMethod::Glasso(opts) = method {
        validate_glasso(lambda.unwrap_or(0.0), opts)?;
    }
    let covariance = estimate(collection, acc, cov_options)?;
    let (lambda, cv) = match lambda {
        Some(l) => (l, false),
        None => {
            let grid = lambda_grid(method, &covariance.matrix);
            match cross_validate_lambda(collection, acc, cov_options, method, &grid)? {
                Some(cv) => (cv.lambda, true),
                None => (grid[grid.len() / 2], false),
            }
        }
    };
    let (theta, glasso) = precision(method, &covariance.matrix, lambda)?;
    Ok(PrecisionEstimate {
        covariance,
        theta,
        lambda,
        lambda_cross_validated: cv,
        glasso,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
