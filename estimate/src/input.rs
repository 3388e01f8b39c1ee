//! What the estimators know about the sums they act on: the report layout, the
//! public parameters that turn grid units into data units, and the noise model.
//!
//! An [`EstimationInput`] is built once per request, from a local collection
//! ([`EstimationInput::from_collection`]) or from a central release
//! ([`EstimationInput::from_central_release`]); every estimator reads it and nothing
//! else about the collection. Every noise level the estimators use goes through one
//! type, the collection's mechanism's [`NoiseModel`] (`ldpcov_proto::mechanism`): a
//! mechanism with another noise model is one new variant there.

use ldpcov_proto::Collection;
pub use ldpcov_proto::mechanism::NoiseModel;

/// What the estimators act on besides the accumulators: the dimension, the report
/// layout (entries; whether a mean block leads and its weight), the units (clip
/// radius, centre, grid scale), the minimum number of reports before a release,
/// whether the variables are ordered, and the [`NoiseModel`].
#[derive(Debug, Clone, PartialEq)]
pub struct EstimationInput {
    dim: usize,
    entries: usize,
    mean_weight: Option<f64>,
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
            mean_weight: collection.has_mean().then_some(collection.mean_weight()),
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
    /// total carries Gaussian noise of sd `sum_noise_sd_grid` grid units per entry.
    /// The noise model is the per-report sd whose average has the release's noise:
    /// `σ_eq = sd_grid/(2^k·√n)`, so that `σ_eq/√n` per entry of the average equals
    /// `sd_grid/(2^k·n)`. (With folds of about n/K reports each, a fold's average then
    /// has its own noise too, up to the folds' balance.)
    pub fn from_central_release(
        collection: &Collection,
        release_entries: usize,
        sum_noise_sd_grid: f64,
        reports: u64,
    ) -> Self {
        let per_report_sd = sum_noise_sd_grid / (collection.grid_scale() * (reports as f64).sqrt());
        EstimationInput {
            entries: release_entries,
            noise: NoiseModel::IidGaussian {
                sigma: per_report_sd,
            },
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
        self.mean_weight.is_some()
    }

    /// The mean block's weight `w` (0 without a mean block).
    pub fn mean_weight(&self) -> f64 {
        self.mean_weight.unwrap_or(0.0)
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

    /// Noise sd of one entry of the average of `n` reports, in data units: `R²σ/√n`.
    pub fn mean_entry_noise_sd(&self, n: u64) -> f64 {
        self.clip_radius * self.clip_radius * self.noise.iid_sd() / (n as f64).sqrt()
    }

    /// Noise sd of each coordinate of the released mean over `n` reports, data units:
    /// `R·σ/(w·√n)`; 0 without a mean block.
    pub fn mean_noise_sd(&self, n: u64) -> f64 {
        match self.mean_weight {
            Some(w) => self.clip_radius * self.noise.iid_sd() / (w * (n.max(1) as f64).sqrt()),
            None => 0.0,
        }
    }

    /// The variance `τ² = σ²/(w²n)` of each coordinate of the mean of `u` over `n`
    /// reports, unit-ball units (0 without a mean block).
    pub(crate) fn mean_block_variance(&self, n: u64) -> f64 {
        match self.mean_weight {
            Some(w) => {
                let sigma = self.noise.iid_sd();
                sigma * sigma / (w * w * n.max(1) as f64)
            }
            None => 0.0,
        }
    }
}

impl From<&Collection> for EstimationInput {
    fn from(collection: &Collection) -> Self {
        EstimationInput::from_collection(collection)
    }
}
