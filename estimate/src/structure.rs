//! Structural regularisers for variables with a natural order (time lags, positions
//! on a line): banding (Bickel & Levina 2008) and Toeplitz band averaging (the
//! stationary-covariance estimator of Cai, Ren & Zhou 2013), as alternatives to
//! entry-wise thresholding that cross-validation ([`CrossValidation`](crate::CrossValidation)) may choose.
//!
//! # Why
//!
//! Under local privacy every averaged entry carries noise of sd `σ_n = R²σ/√n`, which
//! at realistic n exceeds most true entries: thresholding can then only return the
//! diagonal. When the variables are ordered and the covariance decays with `|i − j|`,
//! dropping the far bands removes their noise without touching the signal; when it is
//! also stationary (`σ_ij` depends only on `|i − j|`), averaging the `p − h` entries of
//! band h divides that band's noise sd by `√(p − h)`. Both are functions of the noisy
//! average only, so they cost no privacy (post-processing). Neither is assumed:
//! cross-validation scores them on held-out users against thresholding and "no
//! threshold", and keeps them only when they predict the held-out fold better — on
//! data with no order (or a permuted order) they lose and are not chosen.

use crate::packed::{matrix_to_packed, packed_to_matrix};
use ldpcov_privacy::layout::triangle_index;
use nalgebra::DMatrix;

/// A structural regulariser of a symmetric matrix. The diagonal is never changed
/// (diagonal shrinkage is a separate, orthogonal choice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Structure {
    /// Leave the matrix as it is.
    #[default]
    Unstructured,
    /// Zero every entry with `|i − j| > bandwidth` (Bickel & Levina's banding).
    Banded {
        /// The widest band kept (0 keeps only the diagonal).
        bandwidth: usize,
    },
    /// Replace every entry of band `h = |i − j|`, `1 ≤ h ≤ bandwidth`, by the band's
    /// mean and zero the bands beyond.
    Toeplitz {
        /// The widest band kept (0 keeps only the diagonal).
        bandwidth: usize,
    },
}

impl Structure {
    /// A short name such as `toeplitz(bandwidth=3)`.
    pub(crate) fn name(&self) -> String {
        match self {
            Structure::Unstructured => "unstructured".to_string(),
            Structure::Banded { bandwidth } => format!("banded(bandwidth={bandwidth})"),
            Structure::Toeplitz { bandwidth } => format!("toeplitz(bandwidth={bandwidth})"),
        }
    }

    /// Applies the regulariser to a packed upper triangle (row-major, `i ≤ j`) of a
    /// `p × p` symmetric matrix.
    ///
    /// # Panics
    ///
    /// If `packed` does not have `p(p+1)/2` entries.
    pub(crate) fn apply_packed(&self, p: usize, packed: &mut [f64]) {
        assert_eq!(packed.len(), p * (p + 1) / 2, "packed length");
        match *self {
            Structure::Unstructured => {}
            Structure::Banded { bandwidth } => {
                for h in bandwidth + 1..p {
                    for i in 0..p - h {
                        packed[triangle_index(p, i, i + h)] = 0.0;
                    }
                }
            }
            Structure::Toeplitz { bandwidth } => {
                for h in 1..p {
                    let value = if h <= bandwidth {
                        (0..p - h)
                            .map(|i| packed[triangle_index(p, i, i + h)])
                            .sum::<f64>()
                            / (p - h) as f64
                    } else {
                        0.0
                    };
                    for i in 0..p - h {
                        packed[triangle_index(p, i, i + h)] = value;
                    }
                }
            }
        }
    }

    /// Applies the regulariser to a symmetric matrix (reads the upper triangle, writes
    /// both): the same arithmetic as [`Structure::apply_packed`].
    pub(crate) fn apply(&self, m: &mut DMatrix<f64>) {
        if *self == Structure::Unstructured {
            return;
        }
        let p = m.nrows();
        let mut packed = matrix_to_packed(m);
        self.apply_packed(p, &mut packed);
        *m = packed_to_matrix(p, &packed);
    }
}

/// The bandwidths cross-validation tries for a `p × p` matrix: every k from 0 to
/// `min(8, p − 1)`, then a ×1.25 geometric grid up to `p − 1` (included), so
/// `O(log p)` values: 20 for p = 20 … 30 for p = 1000. Bandwidth `p − 1` keeps every
/// band (for Toeplitz: the full stationary average).
pub(crate) fn bandwidth_grid(p: usize) -> Vec<usize> {
    if p == 0 {
        return Vec::new();
    }
    let top = p - 1;
    let mut out: Vec<usize> = (0..=top.min(8)).collect();
    let mut k = top.min(8);
    while k < top {
        k = ((k as f64 * 1.25).ceil() as usize).clamp(k + 1, top);
        out.push(k);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ldpcov_privacy::layout::{pack_upper, unpack_symmetric};

    /// The example the module docs used to carry.
    #[test]
    fn toeplitz_replaces_band_one_by_its_mean_and_drops_band_two() {
        let mut m = DMatrix::from_row_slice(3, 3, &[1.0, 0.4, 0.3, 0.4, 2.0, 0.6, 0.3, 0.6, 3.0]);
        Structure::Toeplitz { bandwidth: 1 }.apply(&mut m);
        // Band 1 is replaced by its mean (0.4 + 0.6)/2; band 2 is dropped; the diagonal
        // is left alone.
        assert_eq!(m[(0, 1)], 0.5);
        assert_eq!(m[(2, 1)], 0.5);
        assert_eq!(m[(0, 2)], 0.0);
        assert_eq!(m[(2, 2)], 3.0);
    }

    fn sample(p: usize) -> DMatrix<f64> {
        // Asymmetric-looking values on a symmetric matrix: m_ij = 1/(1 + i + 2j) for i ≤ j.
        DMatrix::from_fn(p, p, |i, j| {
            let (a, b) = (i.min(j), i.max(j));
            1.0 / (1.0 + a as f64 + 2.0 * b as f64)
        })
    }

    #[test]
    fn banding_zeroes_exactly_the_far_bands() {
        let p = 6;
        for bandwidth in 0..p {
            let mut m = sample(p);
            Structure::Banded { bandwidth }.apply(&mut m);
            let original = sample(p);
            for i in 0..p {
                for j in 0..p {
                    let want = if i.abs_diff(j) <= bandwidth {
                        original[(i, j)]
                    } else {
                        0.0
                    };
                    assert_eq!(m[(i, j)], want, "bandwidth {bandwidth} ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn toeplitz_replaces_bands_by_their_means() {
        let p = 5;
        let original = sample(p);
        let mut m = original.clone();
        Structure::Toeplitz { bandwidth: 2 }.apply(&mut m);
        for i in 0..p {
            assert_eq!(m[(i, i)], original[(i, i)], "diagonal untouched");
        }
        for h in 1..p {
            let mean = (0..p - h).map(|i| original[(i, i + h)]).sum::<f64>() / (p - h) as f64;
            for i in 0..p - h {
                let want = if h <= 2 { mean } else { 0.0 };
                assert!((m[(i, i + h)] - want).abs() < 1e-15);
                assert_eq!(m[(i, i + h)], m[(i + h, i)]);
            }
        }
        // A Toeplitz matrix is a fixed point at full bandwidth.
        let t = DMatrix::from_fn(p, p, |i, j| 0.6f64.powi(i.abs_diff(j) as i32));
        let mut u = t.clone();
        Structure::Toeplitz { bandwidth: p - 1 }.apply(&mut u);
        assert!((&u - &t).abs().max() < 1e-15);
    }

    #[test]
    fn packed_and_matrix_forms_agree() {
        let p = 7;
        for s in [
            Structure::Unstructured,
            Structure::Banded { bandwidth: 2 },
            Structure::Toeplitz { bandwidth: 3 },
            Structure::Toeplitz { bandwidth: 0 },
        ] {
            let mut m = sample(p);
            s.apply(&mut m);
            let mut packed = pack_upper(p, sample(p).as_slice());
            s.apply_packed(p, &mut packed);
            let full = unpack_symmetric(p, &packed);
            assert_eq!(DMatrix::from_column_slice(p, p, &full), m, "{}", s.name());
        }
    }

    #[test]
    fn toeplitz_averaging_divides_band_noise_variance_by_its_length() {
        // Pure noise with unit variance per entry: band h's mean has variance 1/(p − h).
        // Over 4000 draws the sample variance of the (0, 1) entry has relative sd
        // √(2/3999) ≈ 0.022; a 5-sd band is ±0.11 around 1/(p − 1).
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let p = 10;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let draws = 4000;
        let mut sum_sq = 0.0;
        for _ in 0..draws {
            let mut packed: Vec<f64> = (0..p * (p + 1) / 2)
                .map(|_| StandardNormal.sample(&mut rng))
                .collect();
            Structure::Toeplitz { bandwidth: 1 }.apply_packed(p, &mut packed);
            sum_sq += packed[triangle_index(p, 0, 1)].powi(2);
        }
        let ratio = (sum_sq / draws as f64) * (p - 1) as f64;
        assert!((ratio - 1.0).abs() < 0.11, "variance ratio {ratio}");
    }

    #[test]
    fn bandwidth_grid_is_increasing_and_ends_at_p_minus_one() {
        assert!(bandwidth_grid(0).is_empty());
        assert_eq!(bandwidth_grid(1), vec![0]);
        assert_eq!(bandwidth_grid(4), vec![0, 1, 2, 3]);
        let g = bandwidth_grid(20);
        assert_eq!(&g[..9], &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(*g.last().unwrap(), 19);
        for p in [2, 9, 10, 50, 1000, 4096] {
            let g = bandwidth_grid(p);
            assert!(g.windows(2).all(|w| w[0] < w[1]), "p = {p}: {g:?}");
            assert_eq!(*g.last().unwrap(), p - 1);
            assert!(g.len() <= 45, "p = {p}: {} bandwidths", g.len());
        }
    }
}
