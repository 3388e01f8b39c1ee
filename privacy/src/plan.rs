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

#[cfg(test)]
mod tests {
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
