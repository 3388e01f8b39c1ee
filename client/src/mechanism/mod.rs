//! The device half of each report mechanism, keyed by the collection's
//! [`ReportMechanism`]: what a device adds to the exact statistic that
//! [`ldpcov_privacy::mechanism`] defines (noise draws, clamp, stochastic rounding to the
//! wire step) before the bytes are encoded. A new mechanism is one new arm here and one
//! new module beside [`gaussian`].

mod gaussian;
mod rank_one;
mod raw_vector;

pub(crate) use raw_vector::raw_vector_payload;

use crate::ClientError;
use ldpcov_noise::NoiseSampler;
use ldpcov_privacy::{Collection, ReportMechanism};

/// The perturbed values of one report of `collection` for the clipped vector `u`: a
/// Gaussian report's noisy entries in grid units (before the wire step), a rank-one
/// report's wire values. Refuses a central collection, whose reports a device does not
/// perturb, and a two-aggregator collection, whose reports are only secret-shared.
pub(crate) fn perturb(
    collection: &Collection,
    u: &[f64],
    noise: &mut (impl NoiseSampler + ?Sized),
) -> Result<Vec<i32>, ClientError> {
    if collection.is_two_aggregator() {
        return Err(ClientError::TwoAggregatorCollection {
            id: collection.id().to_string(),
        });
    }
    match collection.mechanism() {
        ReportMechanism::Gaussian(report) => Ok(gaussian::perturb(report, u, noise)),
        ReportMechanism::RankOne(report) => rank_one::perturb(report, u, noise),
        ReportMechanism::RawVector(_) => Err(ClientError::CentralCollection {
            id: collection.id().to_string(),
        }),
    }
}

/// Perturbed values re-quantised to the mechanism's wire step (unchanged when the step
/// is 1, and for a rank-one report, whose values are already wire values).
pub(crate) fn to_wire(
    mechanism: &ReportMechanism,
    entries: &[i32],
    noise: &mut (impl NoiseSampler + ?Sized),
) -> Vec<i32> {
    match mechanism {
        ReportMechanism::Gaussian(report) => gaussian::to_wire(report, entries, noise),
        ReportMechanism::RankOne(_) | ReportMechanism::RawVector(_) => entries.to_vec(),
    }
}
