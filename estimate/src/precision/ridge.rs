//! The ridge (ROPE) precision, in closed form from the eigendecomposition.

use crate::error::EstimateError;
use crate::psd::{from_eigen, symmetric_eigen};
use nalgebra::DMatrix;

/// The ridge (ROPE) precision `M diag(2/(φ + √(φ² + 8λ))) Mᵀ` of a symmetric `s`.
/// `lambda` must be finite and > 0.
pub(crate) fn ridge_precision(
    s: &DMatrix<f64>,
    lambda: f64,
) -> Result<DMatrix<f64>, EstimateError> {
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
