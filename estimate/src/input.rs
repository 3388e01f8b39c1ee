//! What the estimators know about the sums they act on: the report layout, the
//! public parameters that turn grid units into data units, and the noise model.
//!
//! An [`EstimationInput`] is built once per request, from a local collection
//! ([`EstimationInput::from_collection`]) or from a central release
//! ([`EstimationInput::from_central_release`]); every estimator reads it and nothing
//! else about the collection. Every noise level the estimators use goes through one
//! type, the collection's mechanism's [`NoiseModel`] (`ldpcov_privacy::mechanism`): a
//! mechanism with another noise model is one new variant there.

use ldpcov_privacy::Collection;
use ldpcov_privacy::mechanism::Entry;
pub use ldpcov_privacy::mechanism::{NoiseModel, Unbiasing};

/// What the estimators act on besides the accumulators: the dimension, the report
/// layout (entries; whether a mean block leads), the units (clip radius, centre, grid
/// scale), how averages become unbiased estimates ([`Unbiasing`]), the minimum number
/// of reports before a release, whether the variables are ordered, and the
/// [`NoiseModel`].
#[derive(Debug, Clone, PartialEq)]
pub struct EstimationInput {
    dim: usize,
    entries: usize,
    has_mean: bool,
    unbiasing: Unbiasing,
    clip_radius: f64,
    centre: Vec<f64>,
    grid_scale: f64,
    min_reports: u64,
    ordered_variables: bool,
    noise: NoiseModel,
}

impl EstimationInput {
    /// The input of a local collection: its reports' layout and parameters, with the
    /// noise the devices add.
    pub fn from_collection(collection: &Collection) -> Self {
        EstimationInput {
            dim: collection.dim(),
            entries: collection.entries(),
            has_mean: collection.has_mean(),
            unbiasing: collection.unbiasing(),
            clip_radius: collection.clip_radius(),
            centre: collection.centre().to_vec(),
            grid_scale: collection.grid_scale(),
            min_reports: collection.min_reports(),
            ordered_variables: collection.ordered_variables(),
            noise: collection.noise_model(),
        }
    }

    /// The input of a central collection's release: the release's `release_entries`
    /// noisy sums of `reports` reports (the moments only, without norm bins), whose
    /// total carries Gaussian noise of sd `sum_noise_sd_grid` grid units on each mean
    /// and diagonal entry and `off_diagonal_sum_noise_sd_grid` on each off-diagonal
    /// one (the same for the triangle; `σ/√2` for an `svec` release). The noise model
    /// is the per-report sd whose average has the release's noise:
    /// `σ_eq = sd_grid/(2^k·√n)`, so that `σ_eq/√n` per entry of the average equals
    /// `sd_grid/(2^k·n)`: [`NoiseModel::IidGaussian`] when the two sds are equal,
    /// [`NoiseModel::SplitGaussian`] otherwise. (With folds of about n/K reports each,
    /// a fold's average then has its own noise too, up to the folds' balance.)
    pub fn from_central_release(
        collection: &Collection,
        release_entries: usize,
        sum_noise_sd_grid: f64,
        off_diagonal_sum_noise_sd_grid: f64,
        reports: u64,
    ) -> Self {
        let per_report = |sd: f64| sd / (collection.grid_scale() * (reports as f64).sqrt());
        let sigma = per_report(sum_noise_sd_grid);
        let noise = if off_diagonal_sum_noise_sd_grid == sum_noise_sd_grid {
            NoiseModel::IidGaussian { sigma }
        } else {
            NoiseModel::SplitGaussian {
                sigma,
                off_diagonal_sigma: per_report(off_diagonal_sum_noise_sd_grid),
            }
        };
        EstimationInput {
            entries: release_entries,
            noise,
            ..Self::from_collection(collection)
        }
    }

    /// A copy with another minimum number of reports (0: any number; an internal
    /// estimate, such as a cross-validation's training fold, releases nothing).
    pub fn with_min_reports(&self, min_reports: u64) -> Self {
        EstimationInput {
            min_reports,
            ..self.clone()
        }
    }

    /// A copy that declares the variables ordered or not (the structures are
    /// candidates of the cross-validation only for ordered variables).
    pub fn with_ordered_variables(&self, ordered_variables: bool) -> Self {
        EstimationInput {
            ordered_variables,
            ..self.clone()
        }
    }

    /// Dimension p.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Entries per report (and per sum): `d = p(p+1)/2`, plus `p` with a mean block.
    pub fn entries(&self) -> usize {
        self.entries
    }

    /// Whether reports lead with a mean block.
    pub fn has_mean(&self) -> bool {
        self.has_mean
    }

    /// How averages of the summed entries become unbiased estimates.
    pub fn unbiasing(&self) -> Unbiasing {
        self.unbiasing
    }

    /// Entries of the mean block at the start of a report: `p`, or 0 without one.
    pub fn mean_entries(&self) -> usize {
        if self.has_mean() { self.dim } else { 0 }
    }

    /// Clip radius R.
    pub fn clip_radius(&self) -> f64 {
        self.clip_radius
    }

    /// Public centre in data units (empty: none).
    pub fn centre(&self) -> &[f64] {
        &self.centre
    }

    /// `2^k`: grid units per unit-ball unit.
    pub fn grid_scale(&self) -> f64 {
        self.grid_scale
    }

    /// Minimum number of reports before an estimate is released.
    pub fn min_reports(&self) -> u64 {
        self.min_reports
    }

    /// Whether the variables have a natural order (banding and Toeplitz averaging are
    /// then candidates of the cross-validation).
    pub fn ordered_variables(&self) -> bool {
        self.ordered_variables
    }

    /// The noise model of the sums.
    pub fn noise(&self) -> NoiseModel {
        self.noise
    }

    /// The noise sd of one report's unbiased estimate of an `entry`, unit-ball units:
    /// the [`NoiseModel`]'s sd over the [`Unbiasing`] divisor.
    pub fn unbiased_report_noise_sd(&self, entry: Entry) -> f64 {
        self.noise.unbiased_sd(&self.unbiasing, entry)
    }

    /// Noise sd of one off-diagonal entry of the unbiased average of `n` reports, in
    /// data units: `R²·σ_off/√n` (`σ_off`: σ for the raw Gaussian report, σ/√2 for the
    /// `svec` one, 1/κ for the rank-one report). The noise level every threshold, the
    /// spectral edge and the cross-validation grids read.
    pub fn mean_entry_noise_sd(&self, n: u64) -> f64 {
        self.clip_radius * self.clip_radius * self.unbiased_report_noise_sd(Entry::OffDiagonal)
            / (n.max(1) as f64).sqrt()
    }

    /// The noise sd the spectral rules and the top-eigenvalue test read, data units: the
    /// off-diagonal sd ([`mean_entry_noise_sd`](Self::mean_entry_noise_sd)) for reports
    /// with independent Gaussian noise per entry, whose average's noise is a Wigner
    /// matrix with the edge `2σ√p`; for the rank-one report, whose average's noise is
    /// a sum of `n` rank-one terms (a centred Wishart, Marchenko–Pastur with
    /// `γ = p/n`, edge `σ(2√p + p/√n)`), the σ whose Wigner edge is that edge:
    /// `σ·(1 + √(p/n)/2)`. The Wigner approximation of the rank-one noise holds for
    /// `n ≫ p` (1 % at `n = 2 500p`); at `n = 5p` the Wigner edge is 10 % short, which
    /// read every top eigenvalue of pure noise as signal (p = 1 000, n = 5 000: top
    /// z = 41.5, 30 noise spikes kept). Spike positions and shrinkers keep their
    /// Wigner forms with this σ (an approximation away from `n ≫ p`).
    pub fn spectral_noise_sd(&self, n: u64) -> f64 {
        let sd = self.mean_entry_noise_sd(n);
        match self.noise {
            NoiseModel::RankOne { .. } => {
                sd * (1.0 + 0.5 * (self.dim() as f64 / n.max(1) as f64).sqrt())
            }
            NoiseModel::IidGaussian { .. }
            | NoiseModel::SplitGaussian { .. }
            | NoiseModel::Noiseless => sd,
        }
    }

    /// Noise sd of one diagonal entry of the unbiased average of `n` reports, in data
    /// units: `R²·σ_diag/√n` (σ for a Gaussian report, √2/κ for the rank-one report).
    pub fn diagonal_entry_noise_sd(&self, n: u64) -> f64 {
        self.clip_radius * self.clip_radius * self.unbiased_report_noise_sd(Entry::Diagonal)
            / (n.max(1) as f64).sqrt()
    }

    /// Noise sd of each coordinate of the released mean over `n` reports, data units:
    /// `R·σ/(w·√n)` (Gaussian), `R/(c·√n)` at `u = 0` (rank-one); 0 without a mean
    /// block.
    pub fn mean_noise_sd(&self, n: u64) -> f64 {
        if self.has_mean {
            self.clip_radius * self.unbiased_report_noise_sd(Entry::Mean) / (n.max(1) as f64).sqrt()
        } else {
            0.0
        }
    }

    /// `(a, b)` with `Cov(μ̂) = a·I + b·M` for the mean `μ̂` of `u` over `n` reports and
    /// `M` the second moment of `u` (unit-ball units; `(0, 0)` without a mean block):
    /// `a = σ²/(w²n)`, `b = 0` for the Gaussian report, whose noise is independent of
    /// the signal; `a = 1/(c²n)`, `b = (κ − c²)/(c²n)` for the rank-one report, whose
    /// mean entry has covariance `I + (κ − c²)ũũᵀ`.
    pub(crate) fn mean_block_covariance(&self, n: u64) -> (f64, f64) {
        if !self.has_mean {
            return (0.0, 0.0);
        }
        let d2 = self.unbiasing.mean_divisor * self.unbiasing.mean_divisor * n.max(1) as f64;
        let sd = self.noise.mean_sd();
        (sd * sd / d2, self.noise.mean_signal_coupling() / d2)
    }
}

impl From<&Collection> for EstimationInput {
    fn from(collection: &Collection) -> Self {
        EstimationInput::from_collection(collection)
    }
}
