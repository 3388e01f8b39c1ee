//! Error measures the papers report (relative spectral, Frobenius and ℓ₁ errors), and
//! an estimate's matrices.

use ldpcov_estimate::packed_to_matrix;
use nalgebra::DMatrix;

/// Spectral norm of a symmetric matrix (largest |eigenvalue|).
pub fn spectral_norm_symmetric(m: &DMatrix<f64>) -> f64 {
    m.clone()
        .symmetric_eigenvalues()
        .iter()
        .fold(0.0f64, |acc, v| acc.max(v.abs()))
}

/// `‖Σ̂ − Σ‖₂ / ‖Σ‖₂` for symmetric matrices.
pub fn relative_spectral_error(estimate: &DMatrix<f64>, truth: &DMatrix<f64>) -> f64 {
    spectral_norm_symmetric(&(estimate - truth)) / spectral_norm_symmetric(truth)
}

/// `‖Σ̂ − Σ‖_F / ‖Σ‖_F`.
pub fn relative_frobenius_error(estimate: &DMatrix<f64>, truth: &DMatrix<f64>) -> f64 {
    (estimate - truth).norm() / truth.norm()
}

/// `‖Σ̂ − Σ‖₁ / ‖Σ‖₁` with the matrix ℓ₁ norm (largest absolute column sum).
pub fn relative_l1_error(estimate: &DMatrix<f64>, truth: &DMatrix<f64>) -> f64 {
    let l1 = |m: &DMatrix<f64>| {
        m.column_iter()
            .map(|c| c.iter().map(|v| v.abs()).sum::<f64>())
            .fold(0.0, f64::max)
    };
    l1(&(estimate - truth)) / l1(truth)
}

/// The full symmetric matrix of a released estimate.
pub fn estimate_matrix(estimate: &ldpcov_proto::v1::Estimate) -> DMatrix<f64> {
    packed_to_matrix(estimate.dim as usize, &estimate.upper_triangle)
}

/// The full correlation matrix a released estimate carries (its `correlation` field).
///
/// An undefined correlation (NaN: a variable whose released variance is not above the
/// noise) is scored as what a reader can do with no correlation: 0 off the diagonal, 1
/// on it (a correlation matrix's diagonal, by definition).
pub fn estimate_correlation_matrix(estimate: &ldpcov_proto::v1::Estimate) -> DMatrix<f64> {
    let mut m = packed_to_matrix(estimate.dim as usize, &estimate.correlation);
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            if m[(i, j)].is_nan() {
                m[(i, j)] = if i == j { 1.0 } else { 0.0 };
            }
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn norms_of_known_matrices() {
        let a = DMatrix::from_row_slice(2, 2, &[2.0, 0.0, 0.0, -3.0]);
        assert!((spectral_norm_symmetric(&a) - 3.0).abs() < 1e-12);
        let i = DMatrix::<f64>::identity(2, 2);
        assert!((relative_spectral_error(&(&i * 1.5), &i) - 0.5).abs() < 1e-12);
        assert!((relative_frobenius_error(&(&i * 1.5), &i) - 0.5).abs() < 1e-12);
        assert!((relative_l1_error(&(&i * 0.5), &i) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn an_estimates_matrices_are_unpacked_from_their_own_fields() {
        // Packed row-major upper triangle of [[4, 2], [2, 9]] and its correlation.
        let estimate = ldpcov_proto::v1::Estimate {
            dim: 2,
            upper_triangle: vec![4.0, 2.0, 9.0],
            correlation: vec![1.0, 2.0 / 6.0, 1.0],
            ..Default::default()
        };
        let m = estimate_matrix(&estimate);
        assert_eq!(m, DMatrix::from_row_slice(2, 2, &[4.0, 2.0, 2.0, 9.0]));
        let r = estimate_correlation_matrix(&estimate);
        assert_eq!(
            r,
            DMatrix::from_row_slice(2, 2, &[1.0, 2.0 / 6.0, 2.0 / 6.0, 1.0])
        );
    }
}
