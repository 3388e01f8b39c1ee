//! Choosing λ by K-fold cross-validation on the held-out Gaussian negative
//! log-likelihood, over a grid scaled to the covariance estimate.

use super::{PrecisionMethod, precision};
use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::estimate::{EstimateOptions, average, estimate};
use crate::psd::project_psd;
use ldpcov_proto::Collection;
use nalgebra::DMatrix;

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
    // The training estimates may sit below min_reports: CV is internal, nothing is
    // released from them. Every training set holds at least one report (empty ones are
    // skipped), so a minimum of 1 never refuses one.
    let train_collection = Collection::from_spec(&ldpcov_proto::v1::CollectionSpec {
        min_reports: 1,
        ..collection.spec()
    })
    .expect("the spec of a valid collection with min_reports = 1 is valid");
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
        let s_train = estimate(&train_collection, &train, cov_options)?.matrix;
        let raw = average(collection, &acc.fold_sums[k], n_k)?;
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
