//! The full average and what else is derived from the sums over all folds, computed
//! once per request and handed to the selection, the cross-validation, SURE and the
//! signal tests (which used to rebuild it each).

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::input::EstimationInput;
use crate::moments::{MomentsEstimate, mean_product_noise_variances, moments};
use crate::packed::packed_to_matrix;
use crate::threshold::entry_variances_of_sums;
use nalgebra::DMatrix;
use std::cell::OnceCell;

/// One request's input, accumulators, and what is derived from their sums over all
/// folds: the total sums, the moments of the full average (its packed covariance is
/// the matrix the estimators act on), that matrix in full, its entry noise sd, and
/// (on first use) the per-entry variances of the entry-adaptive rule.
#[derive(Debug)]
pub(crate) struct FullAverage<'a> {
    input: &'a EstimationInput,
    acc: &'a Accumulator,
    sums: Vec<i64>,
    moments: MomentsEstimate,
    matrix: DMatrix<f64>,
    entry_noise_sd: f64,
    diagonal_noise_sd: f64,
    off_diagonal_test_sd: f64,
    spectral_noise_sd: f64,
    top_test_sd: f64,
    diagonal_test_sd: f64,
    variances: OnceCell<Vec<f64>>,
}

impl<'a> FullAverage<'a> {
    /// Sums the folds and averages them (refused when the sums do not have
    /// `input.entries()` values).
    pub(crate) fn new(
        input: &'a EstimationInput,
        acc: &'a Accumulator,
    ) -> Result<Self, EstimateError> {
        let n = acc.count;
        let sums = acc.sums();
        let moments = moments(input, &sums, n)?;
        let matrix = packed_to_matrix(input.dim(), &moments.covariance);
        let entry_noise_sd = input.mean_entry_noise_sd(n.max(1));
        let diagonal_noise_sd = input.diagonal_entry_noise_sd(n.max(1));
        let (mean_off, mean_diagonal) = mean_product_noise_variances(input, &sums, n);
        let spectral_noise_sd = input.spectral_noise_sd(n.max(1));
        Ok(FullAverage {
            input,
            acc,
            sums,
            moments,
            matrix,
            entry_noise_sd,
            diagonal_noise_sd,
            off_diagonal_test_sd: (entry_noise_sd * entry_noise_sd + mean_off).sqrt(),
            spectral_noise_sd,
            top_test_sd: (spectral_noise_sd * spectral_noise_sd + mean_off).sqrt(),
            diagonal_test_sd: (diagonal_noise_sd * diagonal_noise_sd + mean_diagonal).sqrt(),
            variances: OnceCell::new(),
        })
    }

    /// The request's input.
    pub(crate) fn input(&self) -> &'a EstimationInput {
        self.input
    }

    /// The request's accumulators.
    pub(crate) fn acc(&self) -> &'a Accumulator {
        self.acc
    }

    /// Reports averaged.
    pub(crate) fn reports(&self) -> u64 {
        self.acc.count
    }

    /// The per-entry sums over all folds, grid units.
    pub(crate) fn sums(&self) -> &[i64] {
        &self.sums
    }

    /// The packed matrix the estimators act on (the moments' covariance), data units.
    pub(crate) fn packed(&self) -> &[f64] {
        &self.moments.covariance
    }

    /// The same matrix in full.
    pub(crate) fn matrix(&self) -> &DMatrix<f64> {
        &self.matrix
    }

    /// Noise sd of one of its off-diagonal entries, data units.
    pub(crate) fn entry_noise_sd(&self) -> f64 {
        self.entry_noise_sd
    }

    /// Noise sd of one of its diagonal entries, data units (that of the off-diagonal
    /// entries for the raw Gaussian report, √2 times it for the `svec` and rank-one
    /// reports).
    pub(crate) fn diagonal_noise_sd(&self) -> f64 {
        self.diagonal_noise_sd
    }

    /// The noise sd the signal tests standardise an off-diagonal entry by: the second
    /// moment's ([`entry_noise_sd`](Self::entry_noise_sd)) with, for a collection with a
    /// mean block, the average noise of `μ̂μ̂ᵀ`
    /// ([`mean_product_noise_variances`](crate::moments::mean_product_noise_variances)).
    pub(crate) fn off_diagonal_test_sd(&self) -> f64 {
        self.off_diagonal_test_sd
    }

    /// The noise sd the spectral rules read
    /// ([`EstimationInput::spectral_noise_sd`]: the entry sd, or for the rank-one
    /// report the Wigner-equivalent σ of its Marchenko–Pastur edge).
    pub(crate) fn spectral_noise_sd(&self) -> f64 {
        self.spectral_noise_sd
    }

    /// The sd the top-eigenvalue test standardises by: the spectral sd with the
    /// `μ̂μ̂ᵀ` noise of [`off_diagonal_test_sd`](Self::off_diagonal_test_sd).
    pub(crate) fn top_test_sd(&self) -> f64 {
        self.top_test_sd
    }

    /// The same for a diagonal entry (the diagonal-spread test).
    pub(crate) fn diagonal_test_sd(&self) -> f64 {
        self.diagonal_test_sd
    }

    /// The per-entry variances across reports ([`entry_variances`](crate::threshold::entry_variances)), computed on
    /// first use.
    pub(crate) fn variances(&self) -> &[f64] {
        self.variances
            .get_or_init(|| entry_variances_of_sums(self.input, self.acc, &self.sums))
    }

    /// The moments of the full average, for the release.
    pub(crate) fn into_moments(self) -> MomentsEstimate {
        self.moments
    }
}
