//! The planner: how far the raw average of a collection's reports is from the users'
//! own second moment, and how many users a target error needs — before any data is
//! collected. `ldpcov-aggregator plan` prints it, and `loadgen` prints the same number
//! as "predicted" next to what it measured.
//!
//! The predicted error is the root mean square Frobenius norm of the noise in the
//! unbiased raw average `M̂ = R²·(average of the reports, unbiased)` over the `p × p`
//! second moment (both triangles), in data units:
//! `√(E‖M̂ − M_n‖²_F) = R²·√(v/n)`, `M_n` the average of the users' `uuᵀ` (clipped data,
//! so clipping bias is not counted) and `v` one report's total variance
//! ([`ReportMechanism::second_moment_report_variance`](crate::mechanism::ReportMechanism::second_moment_report_variance)): `p·σ_diag² + p(p−1)·σ_off²` for
//! a Gaussian report (`σ_off = σ/√2` with the svec weighting), and
//! `[p(p+1) + 2κs(p+1) + (2κ² + e₄)s²]/κ²` for the rank-one report, which depends on the
//! users' mean squared norm `s = E‖u‖²` (`‖u‖ = ‖x‖/R` after clipping; 1 when most users
//! reach the clip radius, the worst case at the dimensions that matter).
//!
//! ```
//! use ldpcov_privacy::{Collection, plan};
//! use ldpcov_proto::v1::{CollectionSpec, LocalMechanism, Moments};
//!
//! let spec = |mechanism: LocalMechanism, delta: f64| CollectionSpec {
//!     collection_id: "plan".into(),
//!     dim: 100,
//!     epsilon: 1.0,
//!     delta,
//!     clip_radius: 1.0,
//!     min_reports: 1,
//!     local_mechanism: mechanism as i32,
//!     moments: Moments::SecondMoment as i32,
//!     ..Default::default()
//! };
//! let gaussian = Collection::create(&spec(LocalMechanism::Gaussian, 1e-6))?;
//! let rank_one = Collection::create(&spec(LocalMechanism::RankOne, 0.0))?;
//! let n = 10_000;
//! let g = plan::raw_average_error(&gaussian, n, 1.0);
//! let r = plan::raw_average_error(&rank_one, n, 1.0);
//! // p = 100, ε = 1: the rank-one report's noise is 0.41 of the svec Gaussian's.
//! assert!(r < 0.45 * g && r > 0.35 * g);
//! // The inverse: the users a target error needs.
//! let users = plan::users_for_error(&rank_one, r, 1.0);
//! assert!(users.abs_diff(n) <= 1);
//! # Ok::<(), ldpcov_privacy::SpecError>(())
//! ```

use crate::Collection;
use crate::shuffle::{ShuffleError, ShuffledPrivacy};

/// `√(E‖M̂ − M_n‖²_F)` of the raw average of `n` reports to `collection`, data units
/// (see the module docs); `mean_square_norm` is `s = E‖u‖²` in `[0, 1]` (only the
/// rank-one report's noise depends on it). 0 for a central collection, whose reports
/// carry no noise.
pub fn raw_average_error(collection: &Collection, n: u64, mean_square_norm: f64) -> f64 {
    (report_variance(collection, mean_square_norm) / n.max(1) as f64).sqrt()
}

/// `√(E‖M̂ − M_n‖²_F)` of the second moment a central or two-aggregator collection's
/// GaussCov release of `rho` over `n` reports gives, data units, `None` for a collection
/// of another model (its reports carry the noise: [`raw_average_error`]). Each released
/// mean and diagonal sum carries discrete Gaussian noise of sd `Δ/√(2ρ)` (unit-ball
/// units, Δ the collection's sensitivity), each off-diagonal one `1/√2` of that in the
/// `svec` weighting; averaged and scaled, `R²·Δ/(n·√(2ρ))`. A two-aggregator release
/// carries two such noises, one per aggregator (each alone makes it ρ-zCDP): `√2` times
/// the error.
pub fn release_error(collection: &Collection, n: u64, rho: f64) -> Option<f64> {
    use crate::mechanism::OffDiagonalWeighting;
    let copies = if collection.is_central() {
        1.0
    } else if collection.is_two_aggregator() {
        2.0
    } else {
        return None;
    };
    let r2 = collection.clip_radius() * collection.clip_radius();
    let sd = r2 * collection.sensitivity() / (n.max(1) as f64 * (2.0 * rho).sqrt());
    let off = match collection.central_weighting() {
        Some(OffDiagonalWeighting::Svec) => sd / 2f64.sqrt(),
        _ => sd,
    };
    let p = collection.dim() as f64;
    Some((copies * (p * sd * sd + p * (p - 1.0) * off * off)).sqrt())
}

/// The fewest users whose raw average has [`raw_average_error`] at most `target`
/// (data units): `⌈R⁴·v/target²⌉`, at least 1. `u64::MAX` when `target` is not positive.
pub fn users_for_error(collection: &Collection, target: f64, mean_square_norm: f64) -> u64 {
    if target.is_nan() || target <= 0.0 {
        return u64::MAX;
    }
    let n = (report_variance(collection, mean_square_norm) / (target * target)).ceil();
    if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        (n as u64).max(1)
    }
}

/// One report's total noise variance over the second moment in data units, `R⁴·v`, at
/// the users' mean squared norm (clamped to `[0, 1]`).
fn report_variance(collection: &Collection, mean_square_norm: f64) -> f64 {
    let r2 = collection.clip_radius() * collection.clip_radius();
    r2 * r2
        * collection
            .mechanism()
            .second_moment_report_variance(mean_square_norm.clamp(0.0, 1.0))
}

/// The central (ε, δ) against the aggregator of a rank-one (pure ε0) collection whose
/// reports arrive shuffled in batches of at least `min_batch`, at `central_delta`: the
/// bound of [`ShuffledPrivacy::of_reports`]. Each user in
/// one batch (parallel composition across batches), so the smallest batch sets the
/// guarantee. Refused for the Gaussian mechanisms, whose δ0 > 0 the bound does not
/// cover, and for central collections.
///
/// ```
/// use ldpcov_privacy::{Collection, plan};
/// use ldpcov_proto::v1::{CollectionSpec, LocalMechanism};
///
/// let spec = CollectionSpec {
///     collection_id: "shuffled".into(),
///     dim: 10,
///     epsilon: 8.0,
///     delta: 0.0,
///     clip_radius: 1.0,
///     min_reports: 1,
///     local_mechanism: LocalMechanism::RankOne as i32,
///     ..Default::default()
/// };
/// let c = Collection::create(&spec)?;
/// let s = plan::shuffled_privacy(&c, 1_000_000, 1e-6).unwrap();
/// assert_eq!(s.local_epsilon, 8.0);
/// assert!(s.central_epsilon > 0.303 && s.central_epsilon < 0.304);
/// # Ok::<(), ldpcov_privacy::SpecError>(())
/// ```
pub fn shuffled_privacy(
    collection: &Collection,
    min_batch: u64,
    central_delta: f64,
) -> Result<ShuffledPrivacy, ShuffleError> {
    ShuffledPrivacy::of_reports(
        collection.mechanism(),
        collection.epsilon(),
        collection.delta(),
        min_batch,
        central_delta,
    )
}

/// One candidate radius of [`radius_tradeoff`], every figure in data units (the
/// Frobenius norm over the `p × p` second moment).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RadiusCandidate {
    /// The clip radius R.
    pub radius: f64,
    /// [`raw_average_error`] at R: the noise, which grows as `R²`.
    pub noise: f64,
    /// An upper bound on the clipping bias at R, `E[(‖x‖² − R²)₊]`: clipping moves a
    /// user's `x·xᵀ` by at most `‖x‖² − R²` in Frobenius norm (exact when the clipped
    /// users all point one way), and not at all inside the ball.
    pub clipping_bias_bound: f64,
    /// The users' mean squared norm after clipping, `E[min(‖x‖/R, 1)²]` (the rank-one
    /// report's noise depends on it).
    pub mean_square_norm: f64,
}

impl RadiusCandidate {
    /// Noise plus the bias bound: what [`best_radius`] minimises.
    pub fn total(&self) -> f64 {
        self.noise + self.clipping_bias_bound
    }
}

/// Why [`radius_tradeoff`] cannot plan.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RadiusPlanError {
    /// No norms were given.
    #[error("no norms: give the norms ‖x − c‖ of a public sample (one per user)")]
    NoNorms,
    /// A norm is negative, NaN or infinite.
    #[error("norm {index} is {value}: every norm must be a finite number ≥ 0")]
    BadNorm {
        /// Its position among the norms.
        index: usize,
        /// Its value.
        value: f64,
    },
    /// A candidate radius makes an invalid collection.
    #[error("radius {radius}: {source}")]
    Spec {
        /// The radius.
        radius: f64,
        /// Why the collection is invalid.
        source: crate::SpecError,
    },
}

/// The noise (of a central collection: of a GaussCov release of its whole budget) and
/// the clipping-bias bound of the raw average of `n` reports at each candidate radius, for users whose norms about the collection's centre, `‖x − c‖`, are
/// distributed as `norms` — a **public** sample or a model of it, never the collection's
/// own data (a radius read off the data it then protects would leak it). `spec` is the
/// collection's spec; its `clip_radius` is replaced by each candidate.
///
/// The rule: choose the radius with the smallest noise + bias bound ([`best_radius`]).
/// Too small a radius clips the tails (the bias bound grows); too large a one inflates
/// the noise as `R²`. The bound is loose when the clipped users point many ways, so the
/// rule leans to larger radii than the exact optimum.
pub fn radius_tradeoff(
    spec: &ldpcov_proto::v1::CollectionSpec,
    n: u64,
    norms: &[f64],
    radii: &[f64],
) -> Result<Vec<RadiusCandidate>, RadiusPlanError> {
    if norms.is_empty() {
        return Err(RadiusPlanError::NoNorms);
    }
    if let Some((index, &value)) = norms
        .iter()
        .enumerate()
        .find(|(_, v)| !(v.is_finite() && **v >= 0.0))
    {
        return Err(RadiusPlanError::BadNorm { index, value });
    }
    let share = 1.0 / norms.len() as f64;
    let distribution: Vec<(f64, f64)> = norms.iter().map(|&v| (v, share)).collect();
    radius_tradeoff_of_distribution(spec, n, &distribution, radii)
}

/// [`radius_tradeoff`] for a distribution of norms given as `(norm, probability)`
/// pairs: a public sample (each norm `1/len`) or a private histogram's estimated
/// frequencies ([`crate::radius`]), which may be negative or not sum to one where noise
/// made them so. The functionals are linear in the probabilities (unbiased for unbiased
/// frequencies); the bias is then clamped at 0 and the mean squared norm to `[0, 1]`.
pub fn radius_tradeoff_of_distribution(
    spec: &ldpcov_proto::v1::CollectionSpec,
    n: u64,
    distribution: &[(f64, f64)],
    radii: &[f64],
) -> Result<Vec<RadiusCandidate>, RadiusPlanError> {
    if distribution.is_empty() {
        return Err(RadiusPlanError::NoNorms);
    }
    radii
        .iter()
        .map(|&radius| {
            let collection = Collection::create(&ldpcov_proto::v1::CollectionSpec {
                clip_radius: radius,
                ..spec.clone()
            })
            .map_err(|source| RadiusPlanError::Spec { radius, source })?;
            let r2 = radius * radius;
            let mean_square_norm = distribution
                .iter()
                .map(|(v, w)| w * (v * v / r2).min(1.0))
                .sum::<f64>()
                .clamp(0.0, 1.0);
            let clipping_bias_bound = distribution
                .iter()
                .map(|(v, w)| w * (v * v - r2).max(0.0))
                .sum::<f64>()
                .max(0.0);
            // A central collection's noise is its release's, at its whole budget.
            let noise = release_error(&collection, n, collection.rho())
                .unwrap_or_else(|| raw_average_error(&collection, n, mean_square_norm));
            Ok(RadiusCandidate {
                radius,
                noise,
                clipping_bias_bound,
                mean_square_norm,
            })
        })
        .collect()
}

/// The candidate with the smallest noise + bias bound (the first of equals), `None` for
/// no candidates.
pub fn best_radius(candidates: &[RadiusCandidate]) -> Option<RadiusCandidate> {
    candidates
        .iter()
        .copied()
        .min_by(|a, b| a.total().total_cmp(&b.total()))
}

/// Candidate radii from a public sample of norms: its quantiles at 50, 60, 70, 80, 90,
/// 95 and 99 % and its largest value (positive ones, each once, ascending).
pub fn quantile_radii(norms: &[f64]) -> Vec<f64> {
    let mut sorted: Vec<f64> = norms.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let Some(&largest) = sorted.last() else {
        return Vec::new();
    };
    let mut radii: Vec<f64> = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]
        .iter()
        .map(|q| sorted[((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1])
        .chain(std::iter::once(largest))
        .filter(|r| *r > 0.0)
        .collect();
    radii.dedup();
    radii
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ldpcov_proto::v1::{CollectionSpec, LocalMechanism, PrivacyModel};

    fn collection(mechanism: LocalMechanism, delta: f64) -> Collection {
        Collection::create(&CollectionSpec {
            collection_id: "shuffle".into(),
            dim: 5,
            epsilon: 6.0,
            delta,
            clip_radius: 1.0,
            min_reports: 1,
            local_mechanism: mechanism as i32,
            ..Default::default()
        })
        .unwrap()
    }

    /// A Gaussian collection at p = 10, ε = 1, δ = 10⁻⁶, R = 1 (radius tests).
    pub(crate) fn radius_spec() -> CollectionSpec {
        CollectionSpec {
            collection_id: "radius".into(),
            dim: 10,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            ..Default::default()
        }
    }

    /// The noise grows as R² (the same collection otherwise); the bias bound is
    /// `E[(‖x‖² − R²)₊]` exactly, 0 once no user is clipped; with heavy tails the best
    /// radius is inside the sample's range, and with more users it does not shrink.
    #[test]
    fn the_radius_tradeoff_balances_noise_and_clipping() {
        // 90 users at norm 1, 9 at 3, 1 at 30: a heavy tail.
        let mut norms = vec![1.0; 90];
        norms.extend([3.0; 9]);
        norms.push(30.0);
        let radii = [1.0, 3.0, 30.0];
        let plan = radius_tradeoff(&radius_spec(), 100_000, &norms, &radii).unwrap();
        // Bias bounds: at 1, (9·8 + 899)/100; at 3, 891/100; at 30, 0.
        assert!((plan[0].clipping_bias_bound - 9.71).abs() < 1e-9);
        assert!((plan[1].clipping_bias_bound - 8.91).abs() < 1e-9);
        assert_eq!(plan[2].clipping_bias_bound, 0.0);
        // The Gaussian report's noise does not depend on the norms: exactly ∝ R².
        assert!((plan[1].noise / plan[0].noise - 9.0).abs() < 1e-9);
        assert!((plan[2].noise / plan[0].noise - 900.0).abs() < 1e-6);
        // s(R) = E[min(‖x‖/R, 1)²].
        assert!((plan[1].mean_square_norm - (90.0 / 9.0 + 9.0 + 1.0) / 100.0).abs() < 1e-12);
        let quantiles = quantile_radii(&norms);
        assert_eq!(quantiles, vec![1.0, 3.0, 30.0]);
        let few = best_radius(&radius_tradeoff(&radius_spec(), 1_000, &norms, &quantiles).unwrap())
            .unwrap();
        let many =
            best_radius(&radius_tradeoff(&radius_spec(), 100_000_000, &norms, &quantiles).unwrap())
                .unwrap();
        assert!(few.radius < 30.0, "{few:?}");
        assert!(many.radius >= few.radius, "{few:?} {many:?}");
        assert_eq!(
            many.radius, 30.0,
            "with 10^8 users the noise is cheap: clip nobody"
        );
    }

    #[test]
    fn bad_norms_and_radii_are_refused() {
        let spec = radius_spec();
        assert_eq!(
            radius_tradeoff(&spec, 10, &[], &[1.0]),
            Err(RadiusPlanError::NoNorms)
        );
        assert!(matches!(
            radius_tradeoff(&spec, 10, &[1.0, -2.0], &[1.0]),
            Err(RadiusPlanError::BadNorm { index: 1, .. })
        ));
        assert!(matches!(
            radius_tradeoff(&spec, 10, &[1.0, f64::NAN], &[1.0]),
            Err(RadiusPlanError::BadNorm { index: 1, .. })
        ));
        assert!(matches!(
            radius_tradeoff(&spec, 10, &[1.0], &[-1.0]),
            Err(RadiusPlanError::Spec { .. })
        ));
        assert!(quantile_radii(&[0.0, 0.0]).is_empty());
    }

    #[test]
    fn a_two_aggregator_release_has_twice_the_central_noise_variance() {
        let spec = |model: PrivacyModel| CollectionSpec {
            collection_id: "r".into(),
            dim: 2,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 2.0,
            min_reports: 10,
            privacy_model: model as i32,
            ..Default::default()
        };
        let central = Collection::create(&spec(PrivacyModel::Central)).unwrap();
        let two = Collection::create(&spec(PrivacyModel::TwoAggregator)).unwrap();
        let rho = central.rho();
        let c = release_error(&central, 1000, rho).unwrap();
        // p = 2: two diagonal entries of sd s, two off-diagonal ones of s/√2 (svec),
        // s = R²·Δ/(n·√(2ρ)), Δ = (2 + 1/4)/√2 with the mean block.
        let s = 4.0 * (2.25 / 2f64.sqrt()) / (1000.0 * (2.0 * rho).sqrt());
        assert!(
            (c / (s * 3f64.sqrt()) - 1.0).abs() < 1e-12,
            "{c} vs {}",
            s * 3f64.sqrt()
        );
        let t = release_error(&two, 1000, rho).unwrap();
        assert!((t / c - 2f64.sqrt()).abs() < 1e-12);
        assert!((release_error(&central, 4000, rho).unwrap() * 4.0 / c - 1.0).abs() < 1e-12);
        let local = Collection::create(&CollectionSpec {
            privacy_model: PrivacyModel::Local as i32,
            ..spec(PrivacyModel::Local)
        })
        .unwrap();
        assert_eq!(release_error(&local, 1000, rho), None);
    }

    #[test]
    fn shuffled_privacy_is_for_rank_one_collections_only() {
        // ε0 = 6, n = 10⁵, δ = 10⁻⁶: 0.357 by the variation-ratio bound (FMT21: 0.524).
        let s = shuffled_privacy(&collection(LocalMechanism::RankOne, 0.0), 100_000, 1e-6).unwrap();
        assert_eq!(
            (s.min_batch, s.local_epsilon, s.central_delta),
            (100_000, 6.0, 1e-6)
        );
        assert!((s.central_epsilon - 0.357).abs() < 0.001, "{s:?}");
        let gaussian = collection(LocalMechanism::Gaussian, 1e-6);
        let err = shuffled_privacy(&gaussian, 100_000, 1e-6).unwrap_err();
        assert_eq!(
            err,
            ShuffleError::NotPure {
                mechanism: "LOCAL_MECHANISM_GAUSSIAN",
                delta: 1e-6
            }
        );
        assert!(err.to_string().contains("pure epsilon0"), "{err}");
        let central = Collection::create(&CollectionSpec {
            collection_id: "central".into(),
            dim: 5,
            epsilon: 1.0,
            delta: 1e-6,
            clip_radius: 1.0,
            min_reports: 1,
            privacy_model: PrivacyModel::Central as i32,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            shuffled_privacy(&central, 100_000, 1e-6),
            Err(ShuffleError::Central)
        );
        let rank_one = collection(LocalMechanism::RankOne, 0.0);
        assert!(matches!(
            shuffled_privacy(&rank_one, 1, 1e-6),
            Err(ShuffleError::Amplification(_))
        ));
    }
}
