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
//! use ldpcov_proto::{Collection, plan};
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
//! # Ok::<(), ldpcov_proto::SpecError>(())
//! ```

use crate::Collection;

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
