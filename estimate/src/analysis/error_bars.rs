//! Per-entry standard errors of the raw (unregularised) matrix the estimators start
//! from, and of its correlations.

use crate::accumulator::Accumulator;
use crate::error::EstimateError;
use crate::input::EstimationInput;
use crate::moments::{check_sums, moments, unit_blocks, variance_above_noise};
use crate::threshold::entry_variances_of_sums;
use ldpcov_privacy::layout::{triangle_index, triangle_pairs};

/// Whether the accumulator's per-entry sums of squares may be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SumsOfSquares {
    /// A local collection: every report was privatised on its device, so its sums of
    /// squares are as private as its sums.
    Private,
    /// A central collection (or any accumulator of raw data): its squares are never
    /// read, the standard errors come from closed forms.
    NotPrivate,
}

/// How [`ErrorBars::standard_errors`] were computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StandardErrorMethod {
    /// From the reports' per-entry sums of squares: the variance of each entry across
    /// reports, noise and sampling together, whatever the data's law (for the
    /// rank-one report's off-diagonal entries, the mechanism's closed form at the
    /// estimated moments, see [`entry_variances`](crate::entry_variances)).
    Empirical,
    /// The mechanism's noise (leading order) plus the sampling variance of Gaussian
    /// data at the estimated matrix (Isserlis: `(Σ_ii·Σ_jj + Σ_ij²)/n`, `2Σ_ii²/n` on
    /// the diagonal); for a mean-and-covariance collection plus the noise the plug-in
    /// `μ̂μ̂ᵀ` adds. Heavier-tailed data than Gaussian have a larger sampling variance.
    ClosedForm,
}

impl StandardErrorMethod {
    /// `empirical` or `closed-form`.
    pub fn name(self) -> &'static str {
        match self {
            StandardErrorMethod::Empirical => "empirical",
            StandardErrorMethod::ClosedForm => "closed-form",
        }
    }
}

/// The raw matrix, its standard errors and its correlations with theirs; packed upper
/// triangles in data units.
///
/// `raw ± 1.96·se` is an approximate 95 % interval for the users' population matrix
/// (the average of many independent reports is close to normal). It covers the
/// privacy noise and the sampling of users, not clipping bias, and it is not an
/// interval for the regularised release.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorBars {
    /// The raw matrix (the second moment's average, or for a mean-and-covariance
    /// collection the de-biased covariance `M̂ − μ̂μ̂ᵀ + Cov(μ̂)`).
    pub raw: Vec<f64>,
    /// The standard error of each entry of `raw`.
    pub standard_errors: Vec<f64>,
    /// The correlation of `raw`: NaN (undefined) in the row and column of a variable
    /// whose variance is not above [`CORRELATION_VARIANCE_Z`](crate::CORRELATION_VARIANCE_Z)
    /// times its standard error; 1 on the other diagonal entries.
    pub raw_correlation: Vec<f64>,
    /// The standard error of each correlation, `se_ij/√(raw_ii·raw_jj)` (delta
    /// method with the variances taken as known; 0 on the diagonal, NaN where the
    /// correlation is undefined).
    pub correlation_standard_errors: Vec<f64>,
    /// How `standard_errors` were computed.
    pub method: StandardErrorMethod,
}

/// The error bars of the raw matrix of `acc`'s reports (see [`ErrorBars`]):
/// [`StandardErrorMethod::Empirical`] for a second-moment collection whose squares
/// are [`SumsOfSquares::Private`], [`StandardErrorMethod::ClosedForm`] otherwise (a
/// mean-and-covariance collection's centred products have no observed squares).
pub fn error_bars(
    input: &EstimationInput,
    acc: &Accumulator,
    squares: SumsOfSquares,
) -> Result<ErrorBars, EstimateError> {
    let sums = acc.sums();
    check_sums(input, &sums)?;
    let n = acc.count.max(1);
    let nf = n as f64;
    let p = input.dim();
    let raw = moments(input, &sums, n)?.covariance;
    let (standard_errors, method) = if squares == SumsOfSquares::Private && !input.has_mean() {
        let variances = entry_variances_of_sums(input, acc, &sums);
        let se = variances.iter().map(|v| (v.max(0.0) / nf).sqrt()).collect();
        (se, StandardErrorMethod::Empirical)
    } else {
        (
            closed_form(input, &sums, &raw, n),
            StandardErrorMethod::ClosedForm,
        )
    };
    let diagonal: Vec<f64> = (0..p).map(|i| raw[triangle_index(p, i, i)]).collect();
    // A variable's correlations only where its variance stands clearly above its own
    // standard error (see `released_correlation`).
    let defined: Vec<bool> = (0..p)
        .map(|i| variance_above_noise(diagonal[i], standard_errors[triangle_index(p, i, i)]))
        .collect();
    let scale = |i: usize, j: usize| -> Option<f64> {
        let d = diagonal[i] * diagonal[j];
        (defined[i] && defined[j] && d.is_finite()).then(|| 1.0 / d.sqrt())
    };
    let mut raw_correlation = Vec::with_capacity(raw.len());
    let mut correlation_standard_errors = Vec::with_capacity(raw.len());
    for (((i, j), &v), &se) in triangle_pairs(p).zip(&raw).zip(&standard_errors) {
        match scale(i, j) {
            Some(_) if i == j => {
                raw_correlation.push(1.0);
                correlation_standard_errors.push(0.0);
            }
            Some(s) => {
                raw_correlation.push((v * s).clamp(-1.0, 1.0));
                correlation_standard_errors.push(se * s);
            }
            None => {
                raw_correlation.push(f64::NAN);
                correlation_standard_errors.push(f64::NAN);
            }
        }
    }
    Ok(ErrorBars {
        raw,
        standard_errors,
        raw_correlation,
        correlation_standard_errors,
        method,
    })
}

/// The closed-form standard errors of [`StandardErrorMethod::ClosedForm`] for the raw
/// packed matrix `raw` (data units) of `n` reports with grid sums `sums`.
fn closed_form(input: &EstimationInput, sums: &[i64], raw: &[f64], n: u64) -> Vec<f64> {
    let p = input.dim();
    let nf = n as f64;
    let off_noise = input.mean_entry_noise_sd(n).powi(2);
    let diagonal_noise = input.diagonal_entry_noise_sd(n).powi(2);
    let diagonal: Vec<f64> = (0..p)
        .map(|i| raw[triangle_index(p, i, i)].max(0.0))
        .collect();
    // The plug-in μ̂μ̂ᵀ's noise, per coordinate: τᵢ² = a + b·M̂ᵢᵢ and μᵢ² estimated by
    // max(μ̂ᵢ² − τᵢ², 0), in data units (as `mean_product_noise_variances` averages).
    let r2 = input.clip_radius() * input.clip_radius();
    let (mean, second) = unit_blocks(input, sums, n);
    let (a, b) = input.mean_block_covariance(n);
    let per_coordinate: Option<Vec<(f64, f64)>> = mean.map(|mu| {
        (0..p)
            .map(|i| {
                let tau2 = (a + b * second[triangle_index(p, i, i)]).max(0.0);
                let mu2 = (mu[i] * mu[i] - tau2).max(0.0);
                (tau2 * r2, mu2 * r2)
            })
            .collect()
    });
    triangle_pairs(p)
        .zip(raw)
        .map(|((i, j), &v)| {
            let (noise, sampling) = if i == j {
                (diagonal_noise, 2.0 * diagonal[i] * diagonal[i] / nf)
            } else {
                (off_noise, (diagonal[i] * diagonal[j] + v * v) / nf)
            };
            let plug_in = per_coordinate.as_ref().map_or(0.0, |c| {
                let ((ti, mi), (tj, mj)) = (c[i], c[j]);
                if i == j {
                    4.0 * mi * ti + 2.0 * ti * ti
                } else {
                    tj * mi + ti * mj + ti * tj
                }
            });
            (noise + sampling + plug_in).sqrt()
        })
        .collect()
}
