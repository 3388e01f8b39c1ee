//! The device half of the raw-vector report of a central collection
//! ([`RawVectorReport`]): no randomness at all, only the grid and the bytes.

use crate::ClientError;
use ldpcov_privacy::mechanism::RawVectorReport;
use ldpcov_privacy::wire::encode_raw;

/// The payload of a raw-vector report for the clipped `u`: its coordinates on the
/// grid `2^−15`, inside the unit ball exactly, as little-endian i32.
pub(crate) fn raw_vector_payload(
    report: &RawVectorReport,
    u: &[f64],
) -> Result<Vec<u8>, ClientError> {
    Ok(encode_raw(&report.statistic(u)?))
}
