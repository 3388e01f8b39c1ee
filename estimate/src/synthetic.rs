//! Synthetic rows drawn from a released estimate.
//!
//! Rows `x = m + V·diag(√λ₊)·z`, `z ~ N(0, I)`, where `Σ̂ = V·diag(λ)·Vᵀ` is the released
//! covariance (negative eigenvalues, which a projected estimate does not have, count
//! as 0) and `m` the released mean (or the collection's centre). The rows are a
//! function of the released numbers and of randomness independent of the data, so they
//! are post-processing: they carry exactly the guarantee of the release they come from
//! (local or central), and none of their values is a user's. They reproduce the
//! estimate's first two moments, not the data's higher-order structure.

use crate::error::EstimateError;
use crate::psd::symmetric_eigen;
use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::StandardNormal;

/// `rows` synthetic rows of `N(mean, covariance)` (see the module docs); `mean` empty
/// means 0. Refuses a non-square or non-finite covariance and a mean of the wrong
/// length.
pub fn synthetic_rows(
    mean: &[f64],
    covariance: &DMatrix<f64>,
    rows: usize,
    rng: &mut impl Rng,
) -> Result<Vec<Vec<f64>>, EstimateError> {
    let p = covariance.nrows();
    if covariance.ncols() != p || !(mean.is_empty() || mean.len() == p) {
        return Err(EstimateError::SumLength {
            expected: p,
            got: if covariance.ncols() != p {
                covariance.ncols()
            } else {
                mean.len()
            },
        });
    }
    let (values, vectors) = symmetric_eigen(covariance)?;
    let roots: Vec<f64> = values.iter().map(|&l| l.max(0.0).sqrt()).collect();
    let mut out = Vec::with_capacity(rows);
    let mut z = vec![0.0; p];
    for _ in 0..rows {
        for (zk, root) in z.iter_mut().zip(&roots) {
            *zk = root * rng.sample::<f64, _>(StandardNormal);
        }
        let row = (0..p)
            .map(|i| {
                let centre = mean.get(i).copied().unwrap_or(0.0);
                centre + (0..p).map(|k| vectors[(i, k)] * z[k]).sum::<f64>()
            })
            .collect();
        out.push(row);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The rows' sample mean and covariance converge to the given ones. With n =
    /// 40 000 rows the sample covariance entry (i, j) has sd `√((σ_ii σ_jj + σ_ij²)/n)`
    /// ≤ √(2·4/40 000) = 0.0141 here; 6 sd = 0.085. The mean's sd is ≤ √(2/40 000) =
    /// 0.0071, 6 sd = 0.043. A wrong factor (Σ instead of √Σ) is off by > 0.5.
    #[test]
    fn rows_have_the_released_moments() {
        let sigma = DMatrix::from_row_slice(3, 3, &[2.0, 0.8, -0.3, 0.8, 1.0, 0.0, -0.3, 0.0, 0.5]);
        let mean = [1.0, -2.0, 0.5];
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let rows = synthetic_rows(&mean, &sigma, 40_000, &mut rng).unwrap();
        let n = rows.len() as f64;
        let m: Vec<f64> = (0..3)
            .map(|i| rows.iter().map(|r| r[i]).sum::<f64>() / n)
            .collect();
        for i in 0..3 {
            assert!((m[i] - mean[i]).abs() < 0.043, "mean {i}: {}", m[i]);
            for j in 0..3 {
                let c = rows
                    .iter()
                    .map(|r| (r[i] - m[i]) * (r[j] - m[j]))
                    .sum::<f64>()
                    / n;
                assert!((c - sigma[(i, j)]).abs() < 0.085, "cov {i}{j}: {c}");
            }
        }
        // A PSD-deficient matrix (one negative eigenvalue) is drawn on its PSD part.
        let indefinite = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        let rows = synthetic_rows(&[], &indefinite, 100, &mut rng).unwrap();
        assert!(rows.iter().all(|r| r[1] == 0.0 || r[1].abs() < 1e-12));
        assert!(synthetic_rows(&[0.0], &sigma, 1, &mut rng).is_err());
    }
}
