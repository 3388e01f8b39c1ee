//! Precision matrices from the private covariance estimate (after Su, Guo & Zhang,
//! "Differentially Private Precision Matrix Estimation"): ridge (ROPE,
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

mod cv;
mod glasso;
mod ridge;
#[cfg(test)]
mod tests;

#[cfg(test)]
use cv::neg_log_likelihood;
pub use cv::{LambdaCv, cross_validate_lambda, lambda_grid};
pub(crate) use glasso::glasso;
pub use glasso::{
    GlassoOptions, GlassoResult, MAX_GLASSO_RHO, MAX_LAMBDA, check_lambda, validate_glasso,
};
pub(crate) use ridge::ridge_precision;

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::estimate::{CovarianceEstimate, EstimateOptions, estimate};
use crate::input::EstimationInput;
use nalgebra::DMatrix;

/// Which precision estimator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PrecisionMethod {
    /// Ridge (ROPE).
    Ridge,
    /// Graphical lasso by ADMM.
    Glasso(GlassoOptions),
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

/// A released precision matrix, with the covariance estimate it was computed from.
#[derive(Debug, Clone, PartialEq)]
pub struct PrecisionEstimate {
    /// The covariance estimate Θ was computed from.
    pub covariance: CovarianceEstimate,
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
    input: &EstimationInput,
    acc: &Accumulator,
    cov_options: &EstimateOptions,
    method: &PrecisionMethod,
    lambda: Option<f64>,
) -> Result<PrecisionEstimate, EstimateError> {
    if let PrecisionMethod::Glasso(opts) = method {
        validate_glasso(lambda.unwrap_or(0.0), opts)?;
    }
    let covariance = estimate(input, acc, cov_options)?;
    let (lambda, cv) = match lambda {
        Some(l) => (l, false),
        None => {
            let grid = lambda_grid(method, &covariance.matrix);
            match cross_validate_lambda(input, acc, cov_options, method, &grid)? {
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
