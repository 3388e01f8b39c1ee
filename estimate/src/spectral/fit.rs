//! Detecting and fitting spikes: the rank rule, the bulk level, the de-biased and
//! shrunk eigenvalues ([`shrink`]) and the low-rank plus diagonal [`factor`] model.

use super::*;

pub(super) fn check_input(
    y: &DMatrix<f64>,
    sigma_n: f64,
    rank: &RankRule,
) -> Result<(), EstimateError> {
    if y.nrows() != y.ncols() || y.nrows() == 0 {
        return Err(EstimateError::Parameter {
            name: "rows",
            value: y.nrows() as f64,
            requirement: "equal to the columns and > 0",
        });
    }
    if !(sigma_n.is_finite() && sigma_n > 0.0) {
        return Err(EstimateError::Parameter {
            name: "sigma_n",
            value: sigma_n,
            requirement: "a finite number > 0",
        });
    }
    match *rank {
        RankRule::Detect { margin } if !(margin.is_finite() && margin >= 0.0) => {
            Err(EstimateError::Parameter {
                name: "margin",
                value: margin,
                requirement: "a finite number ≥ 0",
            })
        }
        RankRule::Fixed(k) if k >= y.nrows() => Err(EstimateError::Parameter {
            name: "rank",
            value: k as f64,
            requirement: "below the dimension",
        }),
        _ => Ok(()),
    }
}

/// Mean of the lowest `p − r` of the ascending `values`.
pub(super) fn bulk_mean(values: &[f64], r: usize) -> f64 {
    let bulk = &values[..values.len() - r];
    bulk.iter().sum::<f64>() / bulk.len() as f64
}

/// Chooses the rank and the (unclamped) bulk level from ascending eigenvalues.
/// Detection starts from the median (robust to spikes) and alternates "count the
/// eigenvalues above level + edge + margin" and "level = mean of the rest" until the
/// count is stable.
pub(super) fn rank_and_level(
    values: &[f64],
    p: usize,
    sigma_n: f64,
    rule: &RankRule,
) -> (usize, f64) {
    match *rule {
        RankRule::Fixed(k) => (k, bulk_mean(values, k)),
        RankRule::Detect { margin } => {
            let cut = bulk_edge(p, sigma_n) + edge_margin(p, sigma_n, margin);
            let mut level = values[p / 2];
            let mut rank = usize::MAX;
            for _ in 0..16 {
                let r = values
                    .iter()
                    .filter(|&&l| l - level > cut)
                    .count()
                    .min(p - 1);
                level = bulk_mean(values, r);
                if r == rank {
                    break;
                }
                rank = r;
            }
            (rank, level)
        }
    }
}

/// The common part of [`shrink`] and [`factor`]: eigendecomposition, rank, bulk
/// level, shrunk spikes.
pub(super) struct Fit {
    pub(super) values: Vec<f64>,
    pub(super) vectors: faer::Mat<f64>,
    pub(super) rank: usize,
    pub(super) level: f64,
    pub(super) spikes: Vec<Spike>,
}

pub(super) fn fit(
    y: &DMatrix<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Result<Fit, EstimateError> {
    check_input(y, sigma_n, &options.rank)?;
    let (values, vectors) = symmetric_eigen(y)?;
    Ok(fit_eigen(values, vectors, sigma_n, options))
}

/// [`fit`] on a decomposition already made (ascending `values`, `vectors` in columns).
pub(super) fn fit_eigen(
    values: Vec<f64>,
    vectors: faer::Mat<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Fit {
    let p = values.len();
    let (rank, level) = rank_and_level(&values, p, sigma_n, &options.rank);
    let level = level.max(0.0);
    let spikes = values[p - rank..]
        .iter()
        .rev()
        .map(|&l| {
            let excess = l - level;
            let (signal, overlap) = debias(excess, p, sigma_n);
            Spike {
                excess,
                signal,
                overlap,
                shrunk: shrunk_eigenvalue(excess, p, sigma_n, options.shrinker),
            }
        })
        .collect();
    tracing::debug!(p, rank, level, "spectral fit");
    Fit {
        values,
        vectors,
        rank,
        level,
        spikes,
    }
}

impl Fit {
    /// The new eigenvalues in the decomposition's (ascending) order: `base` plus the
    /// shrunk spike on the last `rank`, `base` on the bulk.
    pub(super) fn new_values(&self, base: f64) -> Vec<f64> {
        let p = self.values.len();
        (0..p)
            .map(|j| {
                if j >= p - self.rank {
                    base + self.spikes[p - 1 - j].shrunk
                } else {
                    base
                }
            })
            .collect()
    }

    /// The diagonal `L_ii` of the low-rank part `L = U·diag(low)·Uᵀ` (only the last
    /// `rank` of `low` are non-zero), in `O(p·rank)`.
    pub(super) fn low_rank_diagonal(&self, low: &[f64]) -> Vec<f64> {
        let p = self.values.len();
        (0..p)
            .map(|i| {
                (p - self.rank..p)
                    .map(|a| low[a] * self.vectors[(i, a)] * self.vectors[(i, a)])
                    .sum()
            })
            .collect()
    }
}

/// The factor model's fitted diagonal `max(0, Y_ii − L_ii)` from the low-rank part's
/// diagonal `l_diag`.
pub(super) fn factor_diagonal(y: &DMatrix<f64>, l_diag: &[f64]) -> Vec<f64> {
    l_diag
        .iter()
        .enumerate()
        .map(|(i, l)| (y[(i, i)] - l).max(0.0))
        .collect()
}

/// Shrunk spikes over a flat bulk: `ψ̂I + Σ_k η_k û_kû_kᵀ` with `ψ̂` the mean of the
/// eigenvalues not kept (clamped at 0) and `η_k` the chosen [`Shrinker`]'s value
/// (≥ 0). PSD by construction. Reads the lower triangle of `y`.
pub fn shrink(
    y: &DMatrix<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Result<SpectralEstimate, EstimateError> {
    let fit = fit(y, sigma_n, options)?;
    Ok(SpectralEstimate {
        matrix: from_eigen(&fit.vectors, fit.new_values(fit.level)),
        rank: fit.rank,
        bulk_level: fit.level,
        spikes: fit.spikes,
    })
}

/// Low rank plus diagonal: `L̂ + D̂` with `L̂ = Σ_k η_k û_kû_kᵀ` the shrunk spikes
/// (above the bulk level, which the diagonal absorbs) and
/// `D̂ = diag(max(0, Y_ii − L̂_ii))` fitted to the residual diagonal. PSD by
/// construction (a PSD plus a non-negative diagonal). `bulk_level` reports the level
/// the spikes were measured from.
pub fn factor(
    y: &DMatrix<f64>,
    sigma_n: f64,
    options: &SpectralOptions,
) -> Result<SpectralEstimate, EstimateError> {
    let fit = fit(y, sigma_n, options)?;
    let low = fit.new_values(0.0);
    let diagonal = factor_diagonal(y, &fit.low_rank_diagonal(&low));
    let mut matrix = from_eigen(&fit.vectors, low);
    for (i, d) in diagonal.into_iter().enumerate() {
        matrix[(i, i)] += d;
    }
    Ok(SpectralEstimate {
        matrix,
        rank: fit.rank,
        bulk_level: fit.level,
        spikes: fit.spikes,
    })
}
