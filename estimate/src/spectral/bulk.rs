//! Bulk shrinkage chosen by SURE ([`bulk_shrink_sure`]) and the three spectral
//! cross-validation candidates fitted from one eigendecomposition ([`CvFits`]).

use super::*;

/// The eigenvalue map of [`bulk_shrink`] and its derivative at `lambda`: with
/// `x = λ − ψ` (`ψ = level`) and `a = pσ_n²`,
/// `h(λ) = max(0, ψ + max(αx, x − τ√a, η(x)))` for `x > 0`, with `η` the balanced
/// spike shrinker of [`shrunk_eigenvalue`] (read as 0 at and below the edge `2√a`),
/// and `h(λ) = max(0, ψ + αx)` otherwise.
///
/// Above the edge `η(x) = θ·c^(2 − c²)` lies between the Frobenius shrinker
/// `θc² = √(x² − 4a)` (`x = θ + a/θ` gives `x² − 4a = (θ − a/θ)²`) and `θ ≤ x`; it is 0
/// at the edge, rises there like `√(x − 2√a)`, and tends to slope 1. The soft piece
/// `x − τ√a` (slope 1, the eigenvalue soft threshold: the proximal map of the nuclear
/// norm) serves the eigenvalues near the edge, where a signal below the detection
/// threshold `√a` still lifts the top sample eigenvalues; it crosses the line at
/// `x = τ√a/(1 − α)`, and `η` overtakes it for strong spikes (`x − η(x)` falls
/// towards 0 as θ grows). `τ = 2` never beats the spike piece
/// (`x − 2√a ≤ √(x² − 4a) ≤ η(x)` for `x ≥ 2√a`): the map without a soft piece. A
/// maximum of continuous pieces, `h` is continuous and piecewise differentiable:
/// Stein's identity, hence [`sure_spectral`], applies to it (with `ψ` held fixed). `α = 0, τ = 2` flattens the bulk to `ψ` (the shrinker of
/// [`shrink`] without the margin); `α = 1` gives `max(λ, 0)`, the PSD projection.
pub fn bulk_shrunk_eigenvalue(
    lambda: f64,
    level: f64,
    p: usize,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> (f64, f64) {
    let a = p as f64 * sigma_n * sigma_n;
    let x = lambda - level;
    let (mut value, mut slope) = (level + alpha * x, alpha);
    if x > 0.0 {
        let soft = x - tau * a.sqrt();
        if soft > value - level {
            (value, slope) = (level + soft, 1.0);
        }
        let spike = shrunk_eigenvalue(x, p, sigma_n, Shrinker::Balanced);
        if spike > value - level {
            let spike_slope = shrunk_eigenvalue_derivative(x, p, sigma_n, Shrinker::Balanced);
            (value, slope) = (level + spike, spike_slope);
        }
    }
    if value < 0.0 {
        (0.0, 0.0)
    } else {
        (value, slope)
    }
}

/// Checks that `value` of the bulk map's parameter `name` lies in `[0, max]`
/// (`requirement` says so in the error).
pub(super) fn check_bulk_parameter(
    name: &'static str,
    value: f64,
    max: f64,
    requirement: &'static str,
) -> Result<(), EstimateError> {
    if (0.0..=max).contains(&value) {
        Ok(())
    } else {
        Err(EstimateError::Parameter {
            name,
            value,
            requirement,
        })
    }
}

pub(super) fn check_alpha(alpha: f64) -> Result<(), EstimateError> {
    check_bulk_parameter("alpha", alpha, 1.0, "in [0, 1]")
}

pub(super) fn check_tau(tau: f64) -> Result<(), EstimateError> {
    check_bulk_parameter("tau", tau, 2.0, "in [0, 2]")
}

/// Checks a non-empty grid of one parameter of the bulk map.
pub(super) fn check_grid(
    name: &'static str,
    grid: &[f64],
    check: fn(f64) -> Result<(), EstimateError>,
) -> Result<(), EstimateError> {
    if grid.is_empty() {
        return Err(EstimateError::Parameter {
            name,
            value: 0.0,
            requirement: "non-empty",
        });
    }
    grid.iter().try_for_each(|&v| check(v))
}

/// Spikes over a bulk shrunk toward its mean: `U·diag(h(λ))·Uᵀ` with `h` the map of
/// [`bulk_shrunk_eigenvalue`] at weight `alpha ∈ [0, 1]`, edge soft threshold
/// `tau ∈ [0, 2]` (in units of `σ_n√p`; 2: none) and level `ψ̂` the bulk level of
/// [`shrink`] (default margin). Where the bulk carries structure (a correlation
/// spectrum decaying gradually, not a flat floor) `α > 0` keeps a fraction `α` of it
/// instead of replacing it by its mean. PSD by construction. `rank` and `spikes`
/// report the eigenvalues on the spike branch.
pub fn bulk_shrink(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> Result<SpectralEstimate, EstimateError> {
    check_alpha(alpha)?;
    check_tau(tau)?;
    let (values, vectors, level) = bulk_fit(y, sigma_n)?;
    Ok(bulk_estimate(&values, &vectors, level, sigma_n, alpha, tau))
}

/// The default candidate weights of [`bulk_shrink_sure`]: 0, 0.1, …, 1.
pub const DEFAULT_BULK_ALPHAS: [f64; 11] = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0];

/// The default candidate edge soft thresholds of [`bulk_shrink_sure`], in units of
/// `σ_n√p`: 1, 1.5 and 2 (no soft piece). Chosen by measurement on the `unordered`
/// reproduction (lab/docs/REPRODUCTION.md §6): finer or wider grids (0.5 to 2 by 0.25)
/// gained nothing over these three.
pub const DEFAULT_BULK_TAUS: [f64; 3] = [1.0, 1.5, 2.0];

/// The bulk map [`bulk_shrink_sure`] chose and its risk estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BulkChoice {
    /// The weight α kept of each bulk eigenvalue's distance to the level.
    pub alpha: f64,
    /// The edge soft threshold τ, in units of `σ_n√p` (2: no soft piece).
    pub tau: f64,
    /// SURE of the estimate at (α, τ): an unbiased estimate of its squared Frobenius
    /// error, up to the level's own fluctuation (held fixed).
    pub risk: f64,
}

/// [`bulk_shrink`] with `(alpha, tau)` chosen on the grid `alphas × taus` by the
/// smallest [`sure_spectral`] risk (level held fixed), from one eigendecomposition:
/// each candidate costs `O(p²)` beyond the `O(p³)` decomposition and
/// `M = (U∘U)ᵀ(U∘U)`. Returns the choice and the estimate.
pub fn bulk_shrink_sure(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<(BulkChoice, SpectralEstimate), EstimateError> {
    let (choice, basis, vectors, level) = fit_bulk_choice(y, sigma_n, alphas, taus)?;
    let estimate = bulk_estimate(
        &basis.values,
        &vectors,
        level,
        sigma_n,
        choice.alpha,
        choice.tau,
    );
    Ok((choice, estimate))
}

/// [`bulk_shrink_sure`]'s choice without the estimate (one eigendecomposition, no
/// reconstruction).
pub(crate) fn bulk_shrink_choice(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<BulkChoice, EstimateError> {
    Ok(fit_bulk_choice(y, sigma_n, alphas, taus)?.0)
}

/// The grids checked, then [`bulk_fit`] and the SURE choice on `alphas × taus`, with
/// the basis, eigenvectors and level the estimate is built from.
pub(super) fn fit_bulk_choice(
    y: &DMatrix<f64>,
    sigma_n: f64,
    alphas: &[f64],
    taus: &[f64],
) -> Result<(BulkChoice, SureBasis, faer::Mat<f64>, f64), EstimateError> {
    check_grid("alphas", alphas, check_alpha)?;
    check_grid("taus", taus, check_tau)?;
    let (values, vectors, level) = bulk_fit(y, sigma_n)?;
    let basis = SureBasis::new(values, &vectors);
    let choice = basis.best_bulk(level, sigma_n, alphas, taus);
    Ok((choice, basis, vectors, level))
}

impl SureBasis {
    /// The `(α, τ)` on the grid `alphas × taus` (both non-empty) whose bulk shrinkage
    /// at `level` has the smallest SURE, and that risk; ties go to the earlier τ, then
    /// the earlier α.
    pub(super) fn best_bulk(
        &self,
        level: f64,
        sigma_n: f64,
        alphas: &[f64],
        taus: &[f64],
    ) -> BulkChoice {
        let mut best = BulkChoice {
            alpha: alphas[0],
            tau: taus[0],
            risk: f64::INFINITY,
        };
        for &tau in taus {
            for &alpha in alphas {
                let risk = self.bulk_risk(level, sigma_n, alpha, tau);
                if risk < best.risk {
                    best = BulkChoice { alpha, tau, risk };
                }
            }
        }
        let p = self.values.len();
        tracing::debug!(
            p,
            alpha = best.alpha,
            tau = best.tau,
            risk = best.risk,
            "bulk shrinkage chosen by SURE"
        );
        best
    }

    /// SURE of the bulk shrinkage at weight `alpha`, edge threshold `tau` and bulk
    /// level `level`.
    pub(super) fn bulk_risk(&self, level: f64, sigma_n: f64, alpha: f64, tau: f64) -> f64 {
        let p = self.values.len();
        let (hv, dv): (Vec<f64>, Vec<f64>) = self
            .values
            .iter()
            .map(|&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau))
            .unzip();
        self.risk(sigma_n, &hv, &dv)
    }
}

/// The three spectral cross-validation candidates — [`shrink`] (Frobenius, detected
/// rank), [`factor`] and [`bulk_shrink_sure`] on [`DEFAULT_BULK_ALPHAS`] ×
/// [`DEFAULT_BULK_TAUS`] — fitted to
/// one training average from a single eigendecomposition, kept in eigen form so that
/// their held-out losses cost `O(p²)` each beyond one product with the test matrix
/// ([`CvFits::losses`]).
///
/// Invariant: each fit is exactly what the named rule returns on the same `y` and
/// `sigma_n` (same rank, level, α and eigenvalue maps), so the cross-validation scores
/// what the chosen rule then computes on the full average.
pub(crate) struct CvFits {
    vectors: faer::Mat<f64>,
    /// New eigenvalues of [`shrink`].
    shrink: Vec<f64>,
    /// New eigenvalues of the low-rank part `L` of [`factor`], `L`'s diagonal and the
    /// fitted diagonal `D`.
    factor_low: Vec<f64>,
    factor_low_diagonal: Vec<f64>,
    factor_diagonal: Vec<f64>,
    /// New eigenvalues of [`bulk_shrink`] at the SURE-chosen α and τ.
    bulk: Vec<f64>,
}

impl CvFits {
    /// Fits the three candidates to the training average `y` (noise sd `sigma_n` at
    /// the training size).
    pub(crate) fn new(y: &DMatrix<f64>, sigma_n: f64) -> Result<Self, EstimateError> {
        let options = SpectralOptions::default();
        check_input(y, sigma_n, &options.rank)?;
        let (values, vectors) = symmetric_eigen(y)?;
        let fit = fit_eigen(values, vectors, sigma_n, &options);
        let shrink = fit.new_values(fit.level);
        let factor_low = fit.new_values(0.0);
        let factor_low_diagonal = fit.low_rank_diagonal(&factor_low);
        let factor_diagonal = factor_diagonal(y, &factor_low_diagonal);
        // `bulk_fit`'s level is `fit`'s (same default rank rule, clamped at 0).
        let p = fit.values.len();
        let basis = SureBasis::new(fit.values, &fit.vectors);
        let BulkChoice { alpha, tau, .. } =
            basis.best_bulk(fit.level, sigma_n, &DEFAULT_BULK_ALPHAS, &DEFAULT_BULK_TAUS);
        let bulk = basis
            .values
            .iter()
            .map(|&l| bulk_shrunk_eigenvalue(l, fit.level, p, sigma_n, alpha, tau).0)
            .collect();
        Ok(CvFits {
            vectors: fit.vectors,
            shrink,
            factor_low,
            factor_low_diagonal,
            factor_diagonal,
            bulk,
        })
    }

    /// The estimate of the candidate at `index` in [`CvFits::losses`]' order (0 the
    /// flat-bulk shrinkage, 1 the factor model, 2 the bulk shrinkage): exactly what
    /// the named rule returns on the training average.
    pub(crate) fn estimate(&self, index: usize) -> DMatrix<f64> {
        match index {
            0 => from_eigen(&self.vectors, self.shrink.iter().copied()),
            1 => {
                let mut m = from_eigen(&self.vectors, self.factor_low.iter().copied());
                for (i, d) in self.factor_diagonal.iter().enumerate() {
                    m[(i, i)] += d;
                }
                m
            }
            _ => from_eigen(&self.vectors, self.bulk.iter().copied()),
        }
    }

    /// Squared Frobenius distances `‖f(Y) − T‖_F²` of the shrink, factor and bulk
    /// estimates to the symmetric test matrix `t`. With `d_a = u_aᵀTu_a`, a spectral
    /// estimate `U·diag(h)·Uᵀ` is at `Σ h_a² − 2Σ h_a d_a + ‖T‖²`; the factor estimate
    /// `L + D` adds `2Σ_i D_i(L_ii − T_ii) + Σ D_i²` to the low-rank part's distance.
    pub(crate) fn losses(&self, t: &DMatrix<f64>) -> [f64; 3] {
        let p = t.nrows();
        let tm = faer::Mat::<f64>::from_fn(p, p, |i, j| t[(i, j)]);
        let tu = &tm * &self.vectors;
        let d: Vec<f64> = (0..p)
            .map(|a| (0..p).map(|i| self.vectors[(i, a)] * tu[(i, a)]).sum())
            .collect();
        let t2 = t.norm_squared();
        let spectral = |h: &[f64]| -> f64 {
            h.iter()
                .zip(&d)
                .map(|(h, d)| h * h - 2.0 * h * d)
                .sum::<f64>()
                + t2
        };
        let mut factor = spectral(&self.factor_low);
        for (i, (&di, &l_ii)) in self
            .factor_diagonal
            .iter()
            .zip(&self.factor_low_diagonal)
            .enumerate()
        {
            factor += 2.0 * di * (l_ii - t[(i, i)]) + di * di;
        }
        [spectral(&self.shrink), factor, spectral(&self.bulk)]
    }
}

/// Eigendecomposition and bulk level (default margin, clamped at 0).
pub(super) fn bulk_fit(
    y: &DMatrix<f64>,
    sigma_n: f64,
) -> Result<(Vec<f64>, faer::Mat<f64>, f64), EstimateError> {
    let rule = RankRule::default();
    check_input(y, sigma_n, &rule)?;
    let (values, vectors) = symmetric_eigen(y)?;
    let (_, level) = rank_and_level(&values, y.nrows(), sigma_n, &rule);
    Ok((values, vectors, level.max(0.0)))
}

pub(super) fn bulk_estimate(
    values: &[f64],
    vectors: &faer::Mat<f64>,
    level: f64,
    sigma_n: f64,
    alpha: f64,
    tau: f64,
) -> SpectralEstimate {
    let p = values.len();
    let hv: Vec<f64> = values
        .iter()
        .map(|&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau).0)
        .collect();
    // The spike branch: where the map takes the spike piece, the only one with slope
    // above 1 (the line has α ≤ 1, the soft piece 1); ascending, so the top.
    let spikes: Vec<Spike> = values
        .iter()
        .rev()
        .take_while(|&&l| bulk_shrunk_eigenvalue(l, level, p, sigma_n, alpha, tau).1 > 1.0)
        .map(|&l| l - level)
        .map(|excess| {
            let (signal, overlap) = debias(excess, p, sigma_n);
            Spike {
                excess,
                signal,
                overlap,
                shrunk: shrunk_eigenvalue(excess, p, sigma_n, Shrinker::Balanced),
            }
        })
        .collect();
    SpectralEstimate {
        matrix: from_eigen(vectors, hv),
        rank: spikes.len(),
        bulk_level: level,
        spikes,
    }
}
