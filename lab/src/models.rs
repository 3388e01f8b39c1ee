//! Data generators of the papers the lab reproduces: the heavy-tailed paper's Models 1
//! and 2 and Wang & Xu's sparse model, sampled as Gaussian or multivariate t vectors.

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::{ChiSquared, Distribution, StandardNormal, Uniform};
use thiserror::Error;

/// Why a model could not be built.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    /// The covariance is not positive definite (no Cholesky factor).
    #[error("covariance matrix is not positive definite")]
    NotPositiveDefinite,
    /// A parameter is out of range.
    #[error("{0}")]
    Parameter(String),
}

/// A population covariance model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Model {
    /// The heavy-tailed paper's Model 1: `σ_ij = 0.6^|i−j|`.
    BandedGeometric,
    /// The heavy-tailed paper's Model 2: `σ_ii = 1`, `σ_{i,i±1} = 0.6`, `σ_{i,i±2} = 0.3`, else 0.
    Tridiagonal2,
    /// Wang & Xu's sparse model: `U = (Ũ + 50·I)/200`, `Ũ` symmetric with about
    /// `sparsity·p²` non-zeros drawn uniformly from [−1, 1] (the paper leaves the
    /// values unspecified), at positions chosen with the seed.
    SparseWangXu {
        /// Fraction sr of non-zero entries of Ũ.
        sparsity: f64,
        /// Seed of the positions and values.
        seed: u64,
    },
}

impl Model {
    /// The `p × p` covariance matrix of the model.
    pub fn covariance(&self, p: usize) -> DMatrix<f64> {
        match *self {
            Model::BandedGeometric => {
                DMatrix::from_fn(p, p, |i, j| 0.6f64.powi(i.abs_diff(j) as i32))
            }
            Model::Tridiagonal2 => DMatrix::from_fn(p, p, |i, j| match i.abs_diff(j) {
                0 => 1.0,
                1 => 0.6,
                2 => 0.3,
                _ => 0.0,
            }),
            Model::SparseWangXu { sparsity, seed } => {
                use rand::SeedableRng;
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
                let mut u = DMatrix::<f64>::zeros(p, p);
                // sr·p² non-zeros in a symmetric matrix: each off-diagonal pair is
                // non-zero with probability sr (two entries each).
                let unit = Uniform::new_inclusive(-1.0, 1.0).expect("valid range");
                for i in 0..p {
                    for j in i + 1..p {
                        if rng.random_bool(sparsity.clamp(0.0, 1.0)) {
                            let v = unit.sample(&mut rng);
                            u[(i, j)] = v;
                            u[(j, i)] = v;
                        }
                    }
                }
                (u + DMatrix::identity(p, p) * 50.0) / 200.0
            }
        }
    }

    /// A short name for output.
    pub fn name(&self) -> String {
        match self {
            Model::BandedGeometric => "model1".into(),
            Model::Tridiagonal2 => "model2".into(),
            Model::SparseWangXu { sparsity, .. } => format!("sparse-wang-xu(sr={sparsity})"),
        }
    }
}

/// `P Σ Pᵀ` for the permutation `perm` (variable `k` of the result is variable
/// `perm[k]` of `sigma`): the same covariance with the variables in another order.
///
/// # Panics
///
/// If `perm` is not a permutation of `0..p` for `p = sigma.nrows()`.
pub fn permute(sigma: &DMatrix<f64>, perm: &[usize]) -> DMatrix<f64> {
    let p = sigma.nrows();
    let mut seen = vec![false; p];
    assert!(
        perm.len() == p
            && perm
                .iter()
                .all(|&k| k < p && !std::mem::replace(&mut seen[k], true)),
        "not a permutation of 0..{p}"
    );
    DMatrix::from_fn(p, p, |i, j| sigma[(perm[i], perm[j])])
}

/// A uniformly random permutation of `0..p` from a seed.
pub fn random_permutation(p: usize, seed: u64) -> Vec<usize> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut perm: Vec<usize> = (0..p).collect();
    perm.shuffle(&mut rand::rngs::StdRng::seed_from_u64(seed));
    perm
}

/// The distribution of the vectors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tails {
    /// `x ~ N(0, Σ)`.
    Gaussian,
    /// Multivariate t with `nu` degrees of freedom and scale matrix Σ
    /// (covariance `Σ·ν/(ν−2)`).
    StudentT {
        /// Degrees of freedom ν.
        nu: f64,
    },
}

/// Draws vectors with a given covariance (Gaussian) or scale matrix (t), or from the
/// eigen-axis mixture of [`Sampler::eigen_mixture`], centred at 0 or at the mean set by
/// [`Sampler::with_mean`].
#[derive(Debug, Clone)]
pub struct Sampler {
    shape: Shape,
    mean: Option<Vec<f64>>,
}

/// How a [`Sampler`] draws a centred vector.
#[derive(Debug, Clone)]
enum Shape {
    /// `L·z·scale`, `L` the Cholesky factor, z standard normal, the scale from the tails.
    Linear { chol: DMatrix<f64>, tails: Tails },
    /// `±√(tr Σ)·v_k`, eigenvector k drawn with probability `λ_k / tr Σ`.
    EigenMixture {
        /// Eigenvectors as columns.
        vectors: DMatrix<f64>,
        /// Cumulative probabilities `Σ_{j ≤ k} λ_j / tr Σ` (the last is 1).
        cumulative: Vec<f64>,
        /// `√(tr Σ)`, every vector's norm.
        norm: f64,
    },
}

impl Sampler {
    /// Gaussian vectors with covariance `sigma`.
    pub fn gaussian(sigma: &DMatrix<f64>) -> Result<Self, ModelError> {
        Self::new(sigma, Tails::Gaussian)
    }

    /// Vectors with scale matrix `sigma` and the given tails.
    pub fn new(sigma: &DMatrix<f64>, tails: Tails) -> Result<Self, ModelError> {
        if let Tails::StudentT { nu } = tails
            && !(nu.is_finite() && nu > 0.0)
        {
            return Err(ModelError::Parameter(format!(
                "degrees of freedom {nu} must be > 0"
            )));
        }
        let chol = sigma
            .clone()
            .cholesky()
            .ok_or(ModelError::NotPositiveDefinite)?
            .l();
        Ok(Sampler {
            shape: Shape::Linear { chol, tails },
            mean: None,
        })
    }

    /// Vectors whose second moment is exactly `sigma` and whose norm is always
    /// `√(tr Σ)`: `±√(tr Σ)·v_k` with the eigenvector `v_k` drawn with probability
    /// `λ_k / tr Σ` (so `E[xxᵀ] = Σ_k λ_k v_k v_kᵀ = Σ`).
    ///
    /// This is the per-user counterpart of the population fast path
    /// ([`SignalSums::population`](crate::sim::SignalSums::population)): with a clip
    /// radius `R ≥ √(tr Σ)` no user is clipped, so the collection's estimand `M` is `Σ`
    /// itself and a per-user mechanism (the rank-one report) can be compared with the
    /// Gaussian report's fast path on the same target. Not a model of real data:
    /// every vector lies on an eigen-axis.
    pub fn eigen_mixture(sigma: &DMatrix<f64>) -> Result<Self, ModelError> {
        if sigma.nrows() != sigma.ncols() || sigma.nrows() == 0 {
            return Err(ModelError::Parameter(
                "Σ must be a non-empty square matrix".into(),
            ));
        }
        let eig = sigma.clone().symmetric_eigen();
        if eig.eigenvalues.iter().any(|&l| !(l > 0.0 && l.is_finite())) {
            return Err(ModelError::NotPositiveDefinite);
        }
        let trace: f64 = eig.eigenvalues.iter().sum();
        let mut running = 0.0;
        let mut cumulative: Vec<f64> = eig
            .eigenvalues
            .iter()
            .map(|l| {
                running += l / trace;
                running
            })
            .collect();
        if let Some(last) = cumulative.last_mut() {
            *last = 1.0;
        }
        Ok(Sampler {
            shape: Shape::EigenMixture {
                vectors: eig.eigenvectors,
                cumulative,
                norm: trace.sqrt(),
            },
            mean: None,
        })
    }

    /// The same distribution shifted to mean `mean` (p values; non-centred data).
    ///
    /// # Panics
    /// If `mean` does not have p values (a caller bug).
    pub fn with_mean(mut self, mean: Vec<f64>) -> Self {
        assert_eq!(mean.len(), self.dim(), "mean of the wrong dimension");
        self.mean = Some(mean);
        self
    }

    /// Dimension p.
    pub fn dim(&self) -> usize {
        match &self.shape {
            Shape::Linear { chol, .. } => chol.nrows(),
            Shape::EigenMixture { vectors, .. } => vectors.nrows(),
        }
    }

    /// One vector.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Vec<f64> {
        let p = self.dim();
        let (x, scale) = match &self.shape {
            Shape::Linear { chol, tails } => {
                let z = DVector::from_fn(p, |_, _| StandardNormal.sample(rng));
                let scale = match *tails {
                    Tails::Gaussian => 1.0,
                    Tails::StudentT { nu } => {
                        let chi: f64 = ChiSquared::new(nu).map(|c| c.sample(rng)).unwrap_or(nu);
                        (nu / chi).sqrt()
                    }
                };
                (chol * z, scale)
            }
            Shape::EigenMixture {
                vectors,
                cumulative,
                norm,
            } => {
                let u: f64 = rng.random();
                let k = cumulative.partition_point(|&c| c <= u).min(p - 1);
                let sign = if rng.random::<bool>() { 1.0 } else { -1.0 };
                (vectors.column(k).into_owned(), sign * norm)
            }
        };
        match &self.mean {
            None => x.iter().map(|v| v * scale).collect(),
            Some(m) => x.iter().zip(m).map(|(v, m)| v * scale + m).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn models_are_positive_definite() {
        for m in [
            Model::BandedGeometric,
            Model::Tridiagonal2,
            Model::SparseWangXu {
                sparsity: 0.2,
                seed: 1,
            },
        ] {
            assert!(Sampler::gaussian(&m.covariance(50)).is_ok(), "{}", m.name());
        }
    }

    #[test]
    fn sample_covariance_converges() {
        // 20 000 draws: each entry's standard error is about √((1+σ_ij²)/n) ≤ 0.01,
        // so 0.06 is six standard errors.
        let sigma = Model::Tridiagonal2.covariance(4);
        let s = Sampler::gaussian(&sigma).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let n = 20_000;
        let mut acc = DMatrix::<f64>::zeros(4, 4);
        for _ in 0..n {
            let x = DVector::from_vec(s.sample(&mut rng));
            acc += &x * x.transpose();
        }
        acc /= n as f64;
        assert!((acc - sigma).abs().max() < 0.06);
    }

    #[test]
    fn eigen_mixture_has_the_second_moment_and_a_constant_norm() {
        // Every draw has ‖x‖² = tr Σ = 4 exactly. The second moment's entries are
        // averages of 20 000 draws of x_i x_j, bounded by tr Σ·|v_ki v_kj| ≤ 4, so each
        // has a standard error ≤ 4/√20 000 ≈ 0.028; 0.15 is over five of them.
        let sigma = Model::Tridiagonal2.covariance(4);
        let s = Sampler::eigen_mixture(&sigma).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let n = 20_000;
        let mut acc = DMatrix::<f64>::zeros(4, 4);
        for _ in 0..n {
            let x = DVector::from_vec(s.sample(&mut rng));
            assert!((x.norm_squared() - sigma.trace()).abs() < 1e-9);
            acc += &x * x.transpose();
        }
        acc /= n as f64;
        assert!((acc - sigma).abs().max() < 0.15);
        assert!(Sampler::eigen_mixture(&DMatrix::from_element(2, 2, 1.0)).is_err());
    }

    #[test]
    fn permutation_reorders_variables() {
        let sigma = Model::BandedGeometric.covariance(5);
        let perm = random_permutation(5, 4);
        let mut sorted = perm.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 4]);
        let permuted = permute(&sigma, &perm);
        for i in 0..5 {
            for j in 0..5 {
                assert_eq!(permuted[(i, j)], sigma[(perm[i], perm[j])]);
            }
        }
        // Same spectrum: the trace and Frobenius norm are unchanged.
        assert!((permuted.trace() - sigma.trace()).abs() < 1e-12);
        assert!((permuted.norm() - sigma.norm()).abs() < 1e-12);
    }

    #[test]
    fn sparse_model_has_requested_density() {
        let p = 100;
        let u = Model::SparseWangXu {
            sparsity: 0.3,
            seed: 9,
        }
        .covariance(p);
        let off = (0..p)
            .flat_map(|i| (0..p).map(move |j| (i, j)))
            .filter(|&(i, j)| i != j && u[(i, j)] != 0.0)
            .count() as f64;
        // Binomial(4950, 0.3) pairs: sd ≈ 32 pairs = 64 entries; allow 6 sd.
        assert!(
            (off - 0.3 * (p * (p - 1)) as f64).abs() < 6.0 * 64.0,
            "{off}"
        );
        assert!(u.iter().all(|v| v.abs() <= 0.255));
    }
}
