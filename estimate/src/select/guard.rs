//! The spectral-norm guard of the cross-validation
//! ([`CrossValidation::spectral_norm_guard`](super::CrossValidation::spectral_norm_guard)):
//! a release must not be worse in spectral norm than the plain projected average or
//! the zero matrix, measured on the held-out folds along directions chosen on the
//! training folds.
//!
//! Why directions: the held-out average `T_k` carries noise of `K` times the full
//! average's variance, whose spectral norm, `2σ_k√p`, is larger than the errors to be
//! compared; `‖X − T_k‖₂` then mostly measures the held-out noise (a low-rank error
//! below `σ_k√p` does not move the top eigenvalue of `X − Σ − E_k` at all, by the
//! BBP transition). Along a unit direction v fixed by the training fold,
//! `vᵀ(X − T_k)v = vᵀ(X − Σ)v − vᵀE_k·v` is unbiased for the error along v with
//! noise of sd about `√2·σ_k` only (not `σ_k√p`), the same for every X. The spectral
//! error is the largest `|vᵀ(X − Σ)v|` over unit v, attained at the top eigenvector
//! of the error; the guard looks where the errors that matter lie: the top
//! eigenvectors of the training average (a spike that a release drops or misjudges,
//! the noise directions that the projected average keeps) and those of the difference
//! between the release and the projected average (where the two disagree most).

use super::standard_error::earns_its_place;
use crate::packed::packed_to_matrix;
use crate::psd::{from_eigen, symmetric_eigen};
use nalgebra::{DMatrix, DVector};

/// Top eigenvectors of each training average the guard scores along.
pub(crate) const TRAINING_DIRECTIONS: usize = 3;

/// Eigenvectors of the difference between a release and the projected average (the
/// largest |eigenvalue| first) the guard adds on each fold.
pub(crate) const DIFFERENCE_DIRECTIONS: usize = 2;

/// One fold as the guard sees it: the held-out average, the training average
/// projected onto the PSD cone (what "none" releases there), and the training
/// average's top eigenvectors.
pub(crate) struct GuardFold {
    test: DMatrix<f64>,
    projected: DMatrix<f64>,
    directions: Vec<DVector<f64>>,
}

impl GuardFold {
    /// From packed training and held-out averages of a `p × p` matrix; `None` if the
    /// eigensolver fails.
    pub(crate) fn new(p: usize, train: &[f64], test: &[f64]) -> Option<Self> {
        let y = packed_to_matrix(p, train);
        let (values, vectors) = symmetric_eigen(&y).ok()?;
        let projected = from_eigen(&vectors, values.iter().map(|&l| l.max(0.0)));
        // Eigenvalues ascend: the top ones are the last columns.
        let directions = (0..TRAINING_DIRECTIONS.min(p))
            .map(|k| column(&vectors, p - 1 - k))
            .collect();
        Some(GuardFold {
            test: packed_to_matrix(p, test),
            projected,
            directions,
        })
    }

    /// The largest held-out error `|vᵀ(x − T)v|` over the fold's directions and
    /// `extra`.
    fn statistic(&self, x: &DMatrix<f64>, extra: &[DVector<f64>]) -> f64 {
        let error = x - &self.test;
        self.directions
            .iter()
            .chain(extra)
            .map(|v| (v.transpose() * &error * v)[(0, 0)].abs())
            .fold(0.0, f64::max)
    }
}

/// Column `k` of an eigenvector matrix.
fn column(vectors: &faer::Mat<f64>, k: usize) -> DVector<f64> {
    DVector::from_fn(vectors.nrows(), |i, _| vectors[(i, k)])
}

/// The guard's per-fold statistics of a release (`release[k]`: its estimate on fold
/// k's training average, as the loss scored it) and of the two references, the
/// projected average and the zero matrix, along the same directions: `None` if an
/// eigensolver fails.
pub(crate) struct GuardScores {
    /// The release's, per fold.
    pub(crate) release: Vec<f64>,
    /// The projected average's.
    pub(crate) projected: Vec<f64>,
    /// The zero matrix's.
    pub(crate) zero: Vec<f64>,
}

impl GuardScores {
    /// Scores `release` on `folds` (same order).
    pub(crate) fn new(folds: &[GuardFold], release: &[DMatrix<f64>]) -> Option<Self> {
        let mut scores = GuardScores {
            release: Vec::with_capacity(folds.len()),
            projected: Vec::with_capacity(folds.len()),
            zero: Vec::with_capacity(folds.len()),
        };
        for (fold, x) in folds.iter().zip(release) {
            let p = x.nrows();
            let difference = x - &fold.projected;
            let (values, vectors) = symmetric_eigen(&difference).ok()?;
            let mut order: Vec<usize> = (0..p).collect();
            order.sort_by(|&a, &b| values[b].abs().total_cmp(&values[a].abs()));
            let extra: Vec<DVector<f64>> = order
                .iter()
                .take(DIFFERENCE_DIRECTIONS)
                .map(|&k| column(&vectors, k))
                .collect();
            scores.release.push(fold.statistic(x, &extra));
            scores
                .projected
                .push(fold.statistic(&fold.projected, &extra));
            scores
                .zero
                .push(fold.statistic(&DMatrix::zeros(p, p), &extra));
        }
        Some(scores)
    }

    /// Whether the release passes: neither reference beats it by one standard error
    /// of the paired fold-wise differences ([`earns_its_place`], the rule between the
    /// families).
    pub(crate) fn passes(&self) -> bool {
        !earns_its_place(&self.projected, &self.release)
            && !earns_its_place(&self.zero, &self.release)
    }
}
