//! [`SpecError`]: why a collection spec, or the parameters derived from it, was
//! rejected. One variant per reason, each message naming the field and the allowed
//! range, so that a gRPC status or a CLI line can carry it unchanged.

use crate::limits::{
    MAX_DIM, MAX_EPSILON, MAX_NAME_BYTES, MAX_NORM_BINS, MAX_RANK_ONE_EPSILON, ShortNumber,
};
use ldpcov_accounting::calibration::CalibrationError;
use ldpcov_proto::v1;
use thiserror::Error;

/// Why a collection spec (or the parameters derived from it) was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// Bad collection id.
    #[error("collection id {0:?} must be 1-128 characters from [A-Za-z0-9._-]")]
    CollectionId(String),
    /// p out of range.
    #[error("dimension {0} must be between 1 and {max}", max = MAX_DIM)]
    Dim(u32),
    /// ε not a positive finite number.
    #[error("epsilon {} must be a positive number of at most {max}", ShortNumber(*.0), max = MAX_EPSILON)]
    Epsilon(f64),
    /// δ outside (0, 1).
    #[error("delta {} must lie strictly between 0 and 1", ShortNumber(*.0))]
    Delta(f64),
    /// R not a positive finite number.
    #[error("clip radius {} must be a positive finite number", ShortNumber(*.0))]
    ClipRadius(f64),
    /// Sensitivity not a positive finite number.
    #[error("sensitivity {} must be a positive finite number", ShortNumber(*.0))]
    Sensitivity(f64),
    /// min_reports is zero.
    #[error("min_reports must be at least 1")]
    MinReports,
    /// Unknown encoding value.
    #[error("unknown encoding {0}")]
    Encoding(i32),
    /// Unknown privacy model value.
    #[error("unknown privacy model {0} (1 = local, 2 = central, 0 = the default, local)")]
    PrivacyModel(i32),
    /// An encoding of the other privacy model.
    #[error(
        "encoding {encoding:?} cannot be used by a {privacy_model:?} collection: raw vectors (ENCODING_RAW_I32_LE) are for central and two-aggregator collections only, perturbed reports for local ones"
    )]
    EncodingForModel {
        /// The encoding asked for.
        encoding: v1::Encoding,
        /// The collection's privacy model.
        privacy_model: v1::PrivacyModel,
    },
    /// Norm bins on a collection that cannot keep them.
    #[error("norm_bins is for central collections of moments SECOND_MOMENT only")]
    NormBinsModel,
    /// The compressed release on a collection that cannot offer it.
    #[error("allow_compressed_release is for central collections of moments SECOND_MOMENT only")]
    CompressedModel,
    /// Norm bins that would make the sums too large.
    #[error(
        "{entries} entries per report with these norm bins; at most {max} are allowed: use fewer norm_bins or a smaller dim"
    )]
    TooManyEntries {
        /// Entries the spec asks for.
        entries: usize,
        /// The limit, [`MAX_ENTRIES`](crate::limits::MAX_ENTRIES).
        max: usize,
    },
    /// Too many norm bins.
    #[error("norm_bins {0} must be at most {max}", max = MAX_NORM_BINS)]
    NormBins(u32),
    /// Unknown moments value.
    #[error("unknown moments {0} (1 = second moment, 2 = mean and covariance, 0 = the default)")]
    Moments(i32),
    /// Centre of the wrong length.
    #[error("centre has {got} values; it must be empty or have dim = {expected}")]
    CentreLength {
        /// p.
        expected: usize,
        /// Values given.
        got: usize,
    },
    /// Centre with a NaN or infinite value.
    #[error("centre[{index}] = {} must be a finite number", ShortNumber(*value))]
    CentreNonFinite {
        /// Position of the first bad value.
        index: usize,
        /// The value.
        value: f64,
    },
    /// Variable names of the wrong length.
    #[error("{got} variable names given; there must be none or dim = {expected}")]
    NamesLength {
        /// p.
        expected: usize,
        /// Names given.
        got: usize,
    },
    /// An empty variable name.
    #[error("variable name {index} is empty")]
    NameEmpty {
        /// Its position.
        index: usize,
    },
    /// A variable name over the length limit.
    #[error("variable name {index} has {bytes} bytes of UTF-8; at most {max} are allowed", max = MAX_NAME_BYTES)]
    NameTooLong {
        /// Its position.
        index: usize,
        /// Its length in bytes.
        bytes: usize,
    },
    /// The same name twice.
    #[error("variable name {name:?} appears twice (positions {first} and {second})")]
    NameDuplicate {
        /// The name.
        name: String,
        /// First position.
        first: usize,
        /// Second position.
        second: usize,
    },
    /// A number of a new collection's spec outside the range where its derived
    /// quantities stay finite and meaningful (checked by [`Collection::create`](crate::Collection::create) only).
    #[error("{field} = {} is outside the allowed range {range}", ShortNumber(*value))]
    OutOfRange {
        /// The spec field (`clip_radius`, `delta`, `centre[3]`).
        field: String,
        /// The value given.
        value: f64,
        /// The allowed range, as text.
        range: &'static str,
    },
    /// A variable name holding a control character (checked by
    /// [`Collection::create`](crate::Collection::create) only).
    #[error(
        "variable name {index} contains a control character (U+{code:04X}); names must be printable"
    )]
    NameNotPrintable {
        /// Its position.
        index: usize,
        /// The first control character's code point.
        code: u32,
    },
    /// No grid fits the noise this (ε, δ) needs into an i32.
    #[error("epsilon {} and delta {} need more noise than a report can carry", ShortNumber(*epsilon), ShortNumber(*delta))]
    Uncalibratable {
        /// ε asked for.
        epsilon: f64,
        /// δ asked for.
        delta: f64,
    },
    /// An unknown local mechanism.
    #[error(
        "unknown local mechanism {0} (1 = gaussian, 2 = gaussian_triu, 3 = rank_one, 0 = the default)"
    )]
    LocalMechanism(i32),
    /// A local mechanism named for a central collection.
    #[error(
        "local_mechanism {0} is for local collections; a central collection's must be unspecified"
    )]
    LocalMechanismForCentral(i32),
    /// An unknown central weighting.
    #[error("unknown central weighting {0} (1 = svec, 2 = triu, 0 = the default)")]
    CentralWeighting(i32),
    /// A central weighting named for a local collection.
    #[error(
        "central_weighting {0} is for central collections; a local collection's must be unspecified"
    )]
    CentralWeightingForLocal(i32),
    /// A rank-one collection with a δ.
    #[error("the rank-one mechanism is pure epsilon-LDP: delta must be 0, not {}", ShortNumber(*.0))]
    RankOneDelta(f64),
    /// A rank-one collection with another encoding than i16.
    #[error("the rank-one mechanism's reports are ENCODING_I16_LE, not {0:?}")]
    RankOneEncoding(v1::Encoding),
    /// ε outside the rank-one mechanism's range.
    #[error(
        "epsilon {} must be a positive number of at most {max} for the rank-one mechanism",
        ShortNumber(*.0),
        max = MAX_RANK_ONE_EPSILON
    )]
    RankOneEpsilon(f64),
    /// A shuffled collection whose mechanism is not pure ε-LDP, or that is central.
    #[error(
        "a shuffled collection needs a pure epsilon-LDP mechanism (local_mechanism LOCAL_MECHANISM_RANK_ONE, delta 0): the amplification bound does not cover {0}"
    )]
    ShuffleMechanism(&'static str),
    /// A radius phase the collection cannot have, or whose settings are unusable.
    #[error("radius phase: {0}")]
    RadiusPhase(String),
    /// Parameters without a spec.
    #[error("collection parameters carry no spec")]
    MissingSpec,
    /// The server's derived parameters disagree with the local derivation.
    #[error(
        "server parameters disagree with local derivation (server sigma {server_sigma}, local {local_sigma}): refusing to report"
    )]
    ParamsMismatch {
        /// σ the server announced.
        server_sigma: f64,
        /// σ derived locally.
        local_sigma: f64,
    },
}

impl From<CalibrationError> for SpecError {
    /// The calibration's refusals are the spec's: the same reasons, the same fields.
    fn from(e: CalibrationError) -> Self {
        match e {
            CalibrationError::Epsilon(v) => SpecError::Epsilon(v),
            CalibrationError::Delta(v) => SpecError::Delta(v),
            CalibrationError::Sensitivity(v) => SpecError::Sensitivity(v),
            CalibrationError::Uncalibratable { epsilon, delta } => {
                SpecError::Uncalibratable { epsilon, delta }
            }
        }
    }
}
