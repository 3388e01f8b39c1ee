//! The projection onto `{A : A ⪰ floor·I}` (floor 0: the PSD cone) and the symmetric
//! eigendecomposition behind it. The only module that calls the eigensolver
//! (faer's self-adjoint solver): the estimators, the cross-validation and the
//! precision matrices all go through it.

use crate::error::EstimateError;
use crate::packed::{matrix_to_packed, packed_to_matrix};
use nalgebra::DMatrix;

/// Projects a symmetric matrix onto the PSD cone in Frobenius norm: eigendecompose
/// (faer's self-adjoint solver) and raise negative eigenvalues to 0. Returns the
/// projection and how many eigenvalues were clamped. A PSD input is returned as is.
pub fn project_psd(m: &DMatrix<f64>) -> Result<(DMatrix<f64>, u32), EstimateError> {
    project_psd_floor(m, 0.0)
}

/// Projects a symmetric matrix onto `{A : A ⪰ floor·I}` in Frobenius norm: raise every
/// eigenvalue below `floor` to `floor`. `floor = 0` is the PSD projection; `floor > 0`
/// gives a positive definite (invertible) result. Returns the projection and how many
/// eigenvalues were raised; an input already above the floor is returned as is.
pub(crate) fn project_psd_floor(
    m: &DMatrix<f64>,
    floor: f64,
) -> Result<(DMatrix<f64>, u32), EstimateError> {
    let (values, vectors) = symmetric_eigen(m)?;
    let clamped = values.iter().filter(|&&l| l < floor).count() as u32;
    if clamped == 0 {
        return Ok((m.clone(), 0));
    }
    let out = from_eigen(&vectors, values.iter().map(|&l| l.max(floor)));
    Ok((out, clamped))
}

/// Eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix, by faer's
/// self-adjoint eigensolver (reads the lower triangle).
pub fn symmetric_eigen(m: &DMatrix<f64>) -> Result<(Vec<f64>, faer::Mat<f64>), EstimateError> {
    let p = m.nrows();
    let a = faer::Mat::<f64>::from_fn(p, p, |i, j| m[(i, j)]);
    let eig = a
        .self_adjoint_eigen(faer::Side::Lower)
        .map_err(|_| EstimateError::Eigen)?;
    let values: Vec<f64> = eig.S().column_vector().iter().copied().collect();
    if values.iter().any(|v| !v.is_finite()) {
        return Err(EstimateError::Eigen);
    }
    Ok((values, eig.U().to_owned()))
}

/// `U·diag(values)·Uᵀ`, symmetrised exactly (the product is symmetric only up to
/// rounding), with the rounding's leftovers made exact zeros: an entry of magnitude at
/// most [`rounding_tolerance`] (`p·ε·max|λ|`, the standard numerical-rank tolerance:
/// the error of the product itself) is 0. Without it a variable the projection gave no
/// variance keeps one of 10⁻³⁰ and covariances of 10⁻¹⁴, and its correlations come out
/// as large as 0.8 (a ratio of rounding errors).
pub(crate) fn from_eigen(
    u: &faer::Mat<f64>,
    values: impl IntoIterator<Item = f64>,
) -> DMatrix<f64> {
    let p = u.nrows();
    let values: Vec<f64> = values.into_iter().collect();
    let tolerance = rounding_tolerance(p, &values);
    let scaled = faer::Mat::<f64>::from_fn(p, p, |i, j| u[(i, j)] * values[j]);
    let product = &scaled * u.transpose();
    DMatrix::from_fn(p, p, |i, j| {
        let v = 0.5 * (product[(i, j)] + product[(j, i)]);
        if v.abs() <= tolerance { 0.0 } else { v }
    })
}

/// The magnitude below which an entry of `U·diag(values)·Uᵀ` (p × p) is rounding:
/// `p·ε·max|λ|` (ε the machine epsilon of f64).
pub(crate) fn rounding_tolerance(p: usize, values: &[f64]) -> f64 {
    let largest = values.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    p.max(1) as f64 * f64::EPSILON * largest
}

/// PSD projection of a packed symmetric matrix (None if the eigensolver fails).
pub(crate) fn project_packed(p: usize, packed: &[f64]) -> Option<Vec<f64>> {
    let (out, _) = project_psd(&packed_to_matrix(p, packed)).ok()?;
    Some(matrix_to_packed(&out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A variable the projection gives no variance: its row is exactly 0, not
    /// 10⁻³⁰ (whose ratios made correlations of 0.6–0.8). The matrix: variables 0 and 1
    /// correlated with large variances, variable 2 with a negative raw variance and
    /// small covariances, so the projection clamps its direction.
    #[test]
    fn a_projected_zero_variance_is_exactly_zero() {
        let m = DMatrix::from_row_slice(
            3,
            3,
            &[
                1.0e3, 4.0e2, 1.0e-9, //
                4.0e2, 8.0e2, -1.0e-9, //
                1.0e-9, -1.0e-9, -5.0e-3,
            ],
        );
        let (out, clamped) = project_psd(&m).unwrap();
        assert_eq!(clamped, 1);
        // The largest kept entry is unchanged to rounding.
        assert!((out[(0, 0)] - 1.0e3).abs() < 1e-6, "{out}");
        // What the projection leaves of variable 2 is below p·ε·λmax (≈ 8·10⁻¹³):
        // exact zeros, and the remaining entries exact mirror images.
        let tolerance = 3.0 * f64::EPSILON * 1.3e3;
        for k in 0..3 {
            assert!(out[(2, k)] == 0.0 || out[(2, k)].abs() > tolerance, "{out}");
            assert_eq!(out[(2, k)], out[(k, 2)]);
        }
        assert_eq!(out[(2, 2)], 0.0, "{out}");
    }

    #[test]
    fn psd_projection_clamps_negative_eigenvalues() {
        // Eigenvalues 3 and -1 of [[1, 2], [2, 1]]; projection is 1.5·[[1,1],[1,1]].
        let m = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let (out, clamped) = project_psd(&m).unwrap();
        assert_eq!(clamped, 1);
        for v in out.iter() {
            assert!((v - 1.5).abs() < 1e-12, "{out}");
        }
        // Already PSD: unchanged.
        let pd = DMatrix::from_row_slice(2, 2, &[2.0, 1.0, 1.0, 2.0]);
        assert_eq!(project_psd(&pd).unwrap(), (pd, 0));
    }

    #[test]
    fn psd_floor_raises_small_eigenvalues_to_the_floor() {
        // [[1, 2], [2, 1]] has eigenvalues 3 and −1 with eigenvectors (1, ±1)/√2.
        // Floor 0.5: 3·vvᵀ + 0.5·wwᵀ = [[1.75, 1.25], [1.25, 1.75]].
        let m = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 1.0]);
        let (out, clamped) = project_psd_floor(&m, 0.5).unwrap();
        assert_eq!(clamped, 1);
        let want = DMatrix::from_row_slice(2, 2, &[1.75, 1.25, 1.25, 1.75]);
        assert!((&out - &want).abs().max() < 1e-12, "{out}");
        // A PSD input with an eigenvalue below the floor is changed too: diag(2, 0.1).
        let d = DMatrix::from_row_slice(2, 2, &[2.0, 0.0, 0.0, 0.1]);
        let (out, clamped) = project_psd_floor(&d, 0.25).unwrap();
        assert_eq!(clamped, 1);
        assert!((out[(1, 1)] - 0.25).abs() < 1e-12 && (out[(0, 0)] - 2.0).abs() < 1e-12);
    }

    #[test]
    fn projection_of_random_symmetric_matrix_is_psd_and_nearest() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let p = 40;
        let mut m = DMatrix::<f64>::zeros(p, p);
        for i in 0..p {
            for j in i..p {
                let v = rng.random_range(-1.0..1.0);
                m[(i, j)] = v;
                m[(j, i)] = v;
            }
        }
        let (out, clamped) = project_psd(&m).unwrap();
        assert!(clamped > 0);
        assert_eq!(out, out.transpose());
        let eig = out.clone().symmetric_eigen();
        let min = eig
            .eigenvalues
            .iter()
            .cloned()
            .fold(f64::INFINITY, f64::min);
        assert!(min >= -1e-9 * out.norm(), "min eigenvalue {min}");
        // Nearest: M − P(M) is negative semi-definite and orthogonal to P(M).
        let diff = &m - &out;
        let max_diff = diff
            .clone()
            .symmetric_eigen()
            .eigenvalues
            .iter()
            .cloned()
            .fold(f64::NEG_INFINITY, f64::max);
        assert!(max_diff <= 1e-9);
        assert!(diff.dot(&out).abs() <= 1e-9 * m.norm_squared());
    }
}
