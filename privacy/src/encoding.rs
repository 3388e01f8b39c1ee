//! The byte level of a report, shared by the mechanisms and the collection: how wide an
//! entry is in each encoding, how a clamped vector of entries is written, the report
//! id, and the errors of a payload that does not decode.
//!
//! Nothing here knows a collection: [`mechanism`](crate::mechanism) builds on it, and
//! [`wire`](crate::wire) re-exports it under its established paths.

use ldpcov_proto::v1::{Encoding, PrivacyModel};
use thiserror::Error;

/// Length in bytes of a report id.
pub const REPORT_ID_LEN: usize = 16;

/// Why a report payload or id was rejected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The encoding value is not one this version knows.
    #[error("unknown encoding {0}")]
    UnknownEncoding(i32),
    /// The report uses another encoding than its collection.
    #[error("encoding {got:?} does not match the collection's {expected:?}")]
    EncodingMismatch {
        /// The collection's encoding.
        expected: Encoding,
        /// The report's encoding.
        got: Encoding,
    },
    /// The payload length is not `d × bytes per entry`.
    #[error("payload has {got} bytes, expected {expected} ({entries} entries)")]
    Length {
        /// Expected payload length in bytes.
        expected: usize,
        /// Actual length in bytes.
        got: usize,
        /// Number of entries d.
        entries: usize,
    },
    /// An entry lies outside the validation bound (±`max_abs_grid_value` grid units
    /// for i32, i.e. `±(1 + tσ)·2^k`; ±32 767 or ±127 wire units for i16 and i8).
    #[error("entry {index} = {value} is outside ±{bound}")]
    OutOfRange {
        /// Position in the packed triangle.
        index: usize,
        /// The value found.
        value: i64,
        /// The collection's bound.
        bound: i64,
    },
    /// A raw vector sent to a local collection, or a perturbed report to a central
    /// one.
    #[error(
        "a report in encoding {got:?} cannot go to a {privacy_model:?} collection: raw vectors (ENCODING_RAW_I32_LE) go to central collections only, perturbed reports to local ones"
    )]
    ModelMismatch {
        /// The collection's privacy model.
        privacy_model: PrivacyModel,
        /// The report's encoding.
        got: Encoding,
    },
    /// A central report's vector is not inside the unit ball exactly.
    #[error(
        "the vector's squared norm is {norm2} units of 2^-30, above the unit ball's 2^30: clip it to the collection's radius before sending"
    )]
    OutsideUnitBall {
        /// `Σ u_i²` in units of `2^−30`.
        norm2: i64,
    },
    /// An outer-product report's mean-block shift above 15 (a bug of the mechanism that
    /// built it: no payload chooses the shift).
    #[error("an outer product's mean block is shifted by {0} bits, at most 15 are allowed")]
    OuterProductShift(u32),
    /// A coordinate that is NaN or infinite.
    #[error("coordinate {index} is not a finite number")]
    NotFinite {
        /// The first such coordinate.
        index: usize,
    },
    /// The report id is not 16 bytes.
    #[error("report id has {0} bytes, expected 16")]
    ReportId(usize),
}

/// A report id: 16 random bytes chosen by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReportId(pub [u8; REPORT_ID_LEN]);

impl ReportId {
    /// The cross-validation fold of this report among `folds` (a stable hash of the
    /// id, FNV-1a; the same on every platform and release, since fold sums are
    /// persisted). `folds` must be at least 1.
    pub fn fold(&self, folds: usize) -> usize {
        use std::hash::Hasher;
        let mut h = fnv::FnvHasher::default();
        h.write(&self.0);
        (h.finish() % folds.max(1) as u64) as usize
    }
}

impl TryFrom<&[u8]> for ReportId {
    type Error = WireError;
    fn try_from(bytes: &[u8]) -> Result<Self, WireError> {
        let array: [u8; REPORT_ID_LEN] = bytes
            .try_into()
            .map_err(|_| WireError::ReportId(bytes.len()))?;
        Ok(ReportId(array))
    }
}

/// Bytes one entry takes in `encoding`.
pub fn bytes_per_entry(encoding: Encoding) -> Option<usize> {
    match encoding {
        Encoding::I32Le | Encoding::RawI32Le => Some(4),
        Encoding::I16Le => Some(2),
        Encoding::I8 => Some(1),
        Encoding::Unspecified => None,
    }
}

/// Writes `values` in `encoding`, each clamped to `±max` first (so the output always
/// decodes within that range); an unspecified encoding is written as i32.
pub fn encode_clamped(encoding: Encoding, max: i64, values: &[i32]) -> Vec<u8> {
    let max = max.clamp(0, i64::from(i32::MAX)) as i32;
    let clamped = values.iter().map(|v| (*v).clamp(-max, max));
    match encoding {
        Encoding::I32Le | Encoding::Unspecified | Encoding::RawI32Le => {
            clamped.flat_map(i32::to_le_bytes).collect()
        }
        // In range when max ≤ 32 767 (i16) or 127 (i8), as the collection ensures.
        Encoding::I16Le => clamped.flat_map(|v| (v as i16).to_le_bytes()).collect(),
        Encoding::I8 => clamped.map(|v| (v as i8) as u8).collect(),
    }
}
