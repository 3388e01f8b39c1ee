//! The graphical lasso by ADMM (Boyd et al. 2011, §6.5), with residual balancing.

use crate::error::EstimateError;
use crate::psd::{from_eigen, symmetric_eigen};
use crate::threshold::ThresholdKind;
use nalgebra::DMatrix;

/// Settings of the graphical-lasso ADMM (Boyd et al. 2011, §6.5).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GlassoOptions {
    /// Initial augmented-Lagrangian parameter ρ (Su, Guo & Zhang use 100).
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

/// Largest ADMM step ρ the graphical lasso accepts. The Θ-step decomposes
/// `ρ(Z − U) − S` and takes `√(μ² + 4ρ)`: with ρ ≤ 1e100 both stay far inside f64's
/// range (μ² ≤ about 1e200 for the covariances a collection can hold), while at 1e300
/// the decomposition overflows and does not converge.
pub const MAX_GLASSO_RHO: f64 = 1e100;

/// Largest penalty λ (ridge or glasso): the scale of the largest covariance a
/// collection can hold (the square of the largest clip radius). A λ beyond it swamps
/// any data; at 1e308 the penalised matrix overflows.
pub const MAX_LAMBDA: f64 = 1e200;

/// Checks a penalty λ: a number in [0, [`MAX_LAMBDA`]].
pub fn check_lambda(lambda: f64) -> Result<(), EstimateError> {
    if (0.0..=MAX_LAMBDA).contains(&lambda) {
        Ok(())
    } else {
        Err(EstimateError::Parameter {
            name: "lambda",
            value: lambda,
            requirement: "a number in [0, 1e200]",
        })
    }
}

/// Validates glasso settings.
pub fn validate_glasso(lambda: f64, opts: &GlassoOptions) -> Result<(), EstimateError> {
    check_lambda(lambda)?;
    if !(opts.rho > 0.0 && opts.rho <= MAX_GLASSO_RHO) {
        return Err(EstimateError::Parameter {
            name: "rho",
            value: opts.rho,
            requirement: "a number in (0, 1e100]",
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
pub(crate) fn glasso(
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
