//! The private radius phase: a collection's clip radius R chosen from its own users'
//! norms, privately, instead of guessed.
//!
//! Each device first reports which of a few **geometric norm bins** its norm
//! `‖x − c‖` falls in, as a one-hot vector with Gaussian noise; the sums of those
//! reports, divided by the number of reports, are unbiased estimates of the bins'
//! frequencies. The radius is then the bin edge with the smallest predicted error of
//! the main collection's raw average — noise plus clipping-bias bound, the planner's
//! rule ([`crate::plan::radius_tradeoff_of_distribution`]) on the estimated
//! distribution. Only the noisy sums are read: no radius is ever computed from a raw
//! norm.
//!
//! **Budget.** A stated share of the collection's per-report zCDP ρ goes to the phase
//! ([`split_budget`]); the main report's ε is lowered so that the two phases' ρ add up
//! to exactly what the collection's (ε, δ) alone would have spent, so a device's
//! ledger is charged no more than without the phase.
//!
//! **In a collection.** A spec's `radius_phase` ([`RadiusPhaseSettings`]) makes the
//! phase a collection of its own, `<id>.radius`, in the main collection's trust model
//! (local Gaussian or central); the aggregator sets R from it once it is closed
//! ([`RadiusPhase::choose_collection_radius`]).
//!
//! **Measured** (`reproduce radius`, lab/docs/REPRODUCTION.md §6): on six real data
//! sets, standardized, the rule ties `R = √(2p)` (which knows the scale there); in the
//! data's own units it halves the error.
//!
//! **Calibration.** Moving one user from one bin to another changes the one-hot vector
//! in two entries by 1: L2 sensitivity √2. Gaussian noise of sd σ per entry is then
//! ρ-zCDP with ρ = Δ²/(2σ²) = 1/σ² (Bun & Steinke 2016), so [`RadiusPhase::sigma`] is
//! `1/√ρ`.
//!
//! ```
//! use ldpcov_privacy::radius::{NormBins, RadiusPhase, split_budget};
//! use ldpcov_proto::v1::CollectionSpec;
//!
//! let spec = CollectionSpec {
//!     collection_id: "survey".into(),
//!     dim: 4,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 1.0, // replaced by the phase's choice
//!     min_reports: 1,
//!     ..Default::default()
//! };
//! let (phase_rho, main) = split_budget(&spec, 0.2)?;
//! let phase = RadiusPhase::new(NormBins::geometric(0.5, 8.0, 9)?, phase_rho)?;
//! // Every user's norm is 1.5: noise-free sums put all the mass in one bin.
//! let n = 100_000u64;
//! let mut sums = vec![0.0; phase.bins().len()];
//! sums[phase.bins().bin_of(1.5)] = n as f64;
//! let chosen = phase.choose_radius(&main, n, &sums, n)?;
//! // The smallest edge at or above every norm: nothing clipped, least noise.
//! assert_eq!(chosen.radius, phase.bins().upper_norm(phase.bins().bin_of(1.5)));
//! assert_eq!(chosen.clipping_bias_bound, 0.0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use ldpcov_proto::v1::CollectionSpec;

use crate::Collection;
use crate::plan::{RadiusCandidate, RadiusPlanError, best_radius, radius_tradeoff_of_distribution};
pub use bins::{NormBins, NormBinsError};
pub use settings::{DEFAULT_RADII, DEFAULT_SHARE, PHASE_COLLECTION_SUFFIX, RadiusPhaseSettings};

/// L2 sensitivity of a one-hot bin report: one user moved from one bin to another
/// changes two entries by 1.
pub const ONE_HOT_SENSITIVITY: f64 = std::f64::consts::SQRT_2;

/// Why a radius phase cannot be set up or cannot choose.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RadiusPhaseError {
    /// The bins' range or count is unusable.
    #[error(transparent)]
    Bins(#[from] NormBinsError),
    /// The phase's share of the budget, or its ρ, is not in range.
    #[error("radius phase budget: {0}")]
    Budget(String),
    /// The collection's spec is invalid (with the lowered ε, or as given).
    #[error("collection: {0}")]
    Spec(#[from] crate::SpecError),
    /// The sums do not match the bins, or count no report.
    #[error("radius phase sums: {0}")]
    Sums(String),
    /// The planner could not compare the radii.
    #[error(transparent)]
    Plan(#[from] RadiusPlanError),
}

/// A collection's radius phase: its bins and the zCDP ρ of one device's bin report.
#[derive(Debug, Clone, PartialEq)]
pub struct RadiusPhase {
    bins: NormBins,
    rho: f64,
    noise_sd: f64,
    empty_bin_sds: f64,
}

/// [`RadiusPhase::choose_radius`] reads a bin as empty unless its estimated frequency
/// exceeds this many noise sds (`σ/√reports`): a far bin holds almost no one, and its
/// noise, multiplied by its squared norm in the bias bound, would otherwise decide the
/// radius (a negative draw wiping out the real tail, a positive one inventing one and
/// a radius 16 times too large). At 3.5 sds a bin with no one in it passes with
/// probability 2.3·10⁻⁴, so among 13 bins some empty one passes in 0.3 % of phases.
pub const DEFAULT_EMPTY_BIN_SDS: f64 = 3.5;

impl RadiusPhase {
    /// A phase over `bins` spending `rho` (> 0, finite) per report.
    pub fn new(bins: NormBins, rho: f64) -> Result<Self, RadiusPhaseError> {
        if !(rho.is_finite() && rho > 0.0) {
            return Err(RadiusPhaseError::Budget(format!(
                "ρ of the phase must be > 0 and finite, got {rho}"
            )));
        }
        Ok(RadiusPhase {
            bins,
            rho,
            noise_sd: ONE_HOT_SENSITIVITY / (2.0 * rho).sqrt(),
            empty_bin_sds: DEFAULT_EMPTY_BIN_SDS,
        })
    }

    /// The phase with another threshold for empty bins (≥ 0; 0 keeps every bin with a
    /// positive estimate).
    pub fn with_empty_bin_sds(mut self, sds: f64) -> Result<Self, RadiusPhaseError> {
        if !(sds.is_finite() && sds >= 0.0) {
            return Err(RadiusPhaseError::Budget(format!(
                "the empty-bin threshold must be ≥ 0, got {sds}"
            )));
        }
        self.empty_bin_sds = sds;
        Ok(self)
    }

    /// The bins.
    pub fn bins(&self) -> &NormBins {
        &self.bins
    }

    /// zCDP ρ of one device's bin report.
    pub fn rho(&self) -> f64 {
        self.rho
    }

    /// Gaussian noise sd on each entry of the one-hot report: `Δ/√(2ρ) = 1/√ρ`, or
    /// the one a collection derived (for
    /// [`choose_collection_radius`](Self::choose_collection_radius)).
    pub fn sigma(&self) -> f64 {
        self.noise_sd
    }

    /// The phase of collection `main`, which has one, over `reports` reports: its bins,
    /// and the noise of its phase collection's unbiased diagonal entries as a
    /// per-report sd — a local phase's (`1/√ρ` plus the grid's rounding term, which the
    /// calibration adds to the sensitivity), or for a central phase its one release of
    /// the whole ρ, whose averaged entries carry sd `Δ/(√(2ρ)·n)`, i.e. `Δ/√(2ρ)/√n` per
    /// report.
    fn for_collection(main: &Collection, reports: u64) -> Result<Self, RadiusPhaseError> {
        let settings = main.radius_phase().ok_or_else(|| {
            RadiusPhaseError::Budget(format!("collection {} has no radius phase", main.id()))
        })?;
        let phase = Collection::from_spec(settings.phase_spec())?;
        let mut this = RadiusPhase::new(settings.bins().clone(), settings.phase_rho())?;
        this.noise_sd = if phase.is_central() {
            phase.sensitivity() / (2.0 * phase.rho()).sqrt() / (reports.max(1) as f64).sqrt()
        } else {
            phase.unbiased_report_noise_sd(crate::collection::Entry::Diagonal)
        };
        Ok(this)
    }

    /// The radius collection `main`'s phase chooses from its phase collection's
    /// unbiased diagonal averages `frequencies` (the intervals' estimated frequencies)
    /// over `reports` reports: [`choose_radius`](Self::choose_radius) for the main
    /// report's ε at `reports` users. A post-processing of the noisy sums alone.
    pub fn choose_collection_radius(
        main: &Collection,
        frequencies: &[f64],
        reports: u64,
    ) -> Result<RadiusCandidate, RadiusPhaseError> {
        let phase = Self::for_collection(main, reports)?;
        let planned = CollectionSpec {
            epsilon: main.report_epsilon(),
            radius_phase: None,
            clip_radius: 1.0,
            ..main.spec()
        };
        let sums: Vec<f64> = frequencies.iter().map(|f| f * reports as f64).collect();
        phase.choose_radius(&planned, reports, &sums, reports)
    }

    /// The noise-free report of a user with norm `norm`: 1 in its bin, 0 elsewhere. A
    /// device adds independent noise of sd [`sigma`](Self::sigma) to every entry.
    pub fn one_hot(&self, norm: f64) -> Vec<f64> {
        self.bins.one_hot(norm)
    }

    /// Unbiased estimates of the bins' frequencies from the sums of `reports` noisy
    /// reports (noise has mean zero): `sums / reports`. Each has sd
    /// `σ/√reports` from the noise.
    pub fn frequencies(&self, sums: &[f64], reports: u64) -> Result<Vec<f64>, RadiusPhaseError> {
        if sums.len() != self.bins.len() {
            return Err(RadiusPhaseError::Sums(format!(
                "{} sums for {} bins",
                sums.len(),
                self.bins.len()
            )));
        }
        if reports == 0 {
            return Err(RadiusPhaseError::Sums("no reports".into()));
        }
        if let Some(bad) = sums.iter().find(|s| !s.is_finite()) {
            return Err(RadiusPhaseError::Sums(format!("a sum is {bad}")));
        }
        Ok(sums.iter().map(|s| s / reports as f64).collect())
    }

    /// The radius for the main collection `main` (its `clip_radius` ignored) at `n`
    /// users: the edge with the smallest predicted noise + clipping-bias bound over the
    /// distribution estimated from the phase's `sums` of `reports` reports, bins at or
    /// below the empty-bin threshold ([`DEFAULT_EMPTY_BIN_SDS`]) read as empty — a
    /// post-processing of the noisy sums alone.
    pub fn choose_radius(
        &self,
        main: &CollectionSpec,
        n: u64,
        sums: &[f64],
        reports: u64,
    ) -> Result<RadiusCandidate, RadiusPhaseError> {
        let floor = self.empty_bin_sds * self.sigma() / (reports as f64).sqrt();
        let frequencies: Vec<f64> = self
            .frequencies(sums, reports)?
            .into_iter()
            .map(|f| if f > floor { f } else { 0.0 })
            .collect();
        let distribution: Vec<(f64, f64)> = frequencies
            .iter()
            .enumerate()
            .map(|(bin, &f)| (self.bins.upper_norm(bin), f))
            .collect();
        let candidates =
            radius_tradeoff_of_distribution(main, n, &distribution, self.bins.edges())?;
        best_radius(&candidates).ok_or(RadiusPhaseError::Plan(RadiusPlanError::NoNorms))
    }
}

/// Splits the per-report budget of `spec` between a radius phase and the main report
/// as a collection with a radius phase of this `share` (in (0, 1)) does
/// ([`RadiusPhaseSettings`]): the phase's ρ, at most `share` of the ρ the collection's
/// (ε, δ) would spend alone, and the main spec at the largest ε at the same δ whose ρ
/// is at most the rest. Returns the phase's ρ and the main spec (its `clip_radius`
/// kept).
pub fn split_budget(
    spec: &CollectionSpec,
    share: f64,
) -> Result<(f64, CollectionSpec), RadiusPhaseError> {
    if !(share > 0.0 && share < 1.0) {
        return Err(RadiusPhaseError::Budget(format!(
            "the phase's share must be in (0, 1), got {share}"
        )));
    }
    let with_phase = Collection::create(&CollectionSpec {
        clip_radius: 0.0,
        radius_phase: Some(ldpcov_proto::v1::RadiusPhaseSpec {
            share,
            ..Default::default()
        }),
        ..spec.clone()
    })?;
    let settings = with_phase
        .radius_phase()
        .ok_or_else(|| RadiusPhaseError::Budget("the collection has no radius phase".into()))?;
    let main = CollectionSpec {
        epsilon: settings.main_epsilon(),
        ..Collection::create(spec)?.spec()
    };
    Ok((settings.phase_rho(), main))
}

mod bins;
pub(crate) mod settings;
#[cfg(test)]
mod tests;
