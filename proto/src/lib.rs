//! The ldpcov wire format and the privacy arithmetic that devices and the aggregator
//! must agree on.
//!
//! * [`v1`] — the generated `ldpcov.v1` protobuf messages and gRPC stubs.
//! * [`amplification`] — amplification by shuffling: the central (ε, δ) of a shuffled
//!   batch of pure ε0-LDP reports (Feldman, McMillan & Talwar 2021).
//! * [`calibration`] — the analytic Gaussian mechanism (σ from ε, δ, Δ), the classic
//!   formula and zCDP ρ.
//! * [`Collection`] — a validated collection spec with its derived grid, sensitivity,
//!   σ and validation bound, and its report mechanism. Both sides derive these with
//!   this code; a `Collection` cannot be edited after it is built.
//! * [`mechanism`] — the seam for report mechanisms: what a device computes, how it
//!   is encoded, how the aggregator checks and sums it, and the noise model the
//!   estimators read, one type per mechanism.
//! * [`encoding`] — the byte level: entry widths, report ids, wire errors.
//! * [`layout`] — the packed upper-triangle order of entries.
//! * [`wire`] — a collection's payloads: encoding and the ingest check.
//!
//! ```
//! use ldpcov_proto::{v1::CollectionSpec, Collection};
//!
//! let spec = CollectionSpec {
//!     collection_id: "demo".into(),
//!     dim: 20,
//!     epsilon: 1.0,
//!     delta: 1e-6,
//!     clip_radius: 6.0,
//!     min_reports: 1000,
//!     encoding: 0,
//!     ..Default::default()
//! };
//! let c = Collection::from_spec(&spec)?;
//! // Local sensitivity √2, plus the grid rounding of 210 entries at 2^-k.
//! assert!(c.sensitivity() > 2f64.sqrt() && c.sensitivity() < 1.415);
//! // The analytic Gaussian mechanism needs less noise than the classic formula.
//! let classic = ldpcov_proto::calibration::classic_sigma(c.sensitivity(), 1.0, 1e-6)?;
//! assert!(c.sigma() < classic);
//! # Ok::<(), ldpcov_proto::SpecError>(())
//! ```

pub mod amplification;
pub mod calibration;
pub mod collection;
pub mod encoding;
pub mod layout;
pub mod mechanism;
pub mod plan;
pub mod shuffle;
pub mod wire;

pub use collection::Collection;
pub use encoding::{ReportId, WireError};
pub use mechanism::{NoiseModel, ReportMechanism};

/// Generated code for the `ldpcov.v1` protobuf package.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    tonic::include_proto!("ldpcov.v1");
}

/// The encoded `google.protobuf.FileDescriptorSet` of `ldpcov/v1/ldpcov.proto`
/// (written by the build script from the same compilation as [`v1`]): what a gRPC
/// server reflection service registers so that `grpcurl list` / `describe` work.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/ldpcov_descriptor.bin"));

use thiserror::Error;

/// Why a collection spec (or the parameters derived from it) was rejected.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum SpecError {
    /// Bad collection id.
    #[error("collection id {0:?} must be 1-128 characters from [A-Za-z0-9._-]")]
    CollectionId(String),
    /// p out of range.
    #[error("dimension {0} must be between 1 and {max}", max = collection::MAX_DIM)]
    Dim(u32),
    /// ε not a positive finite number.
    #[error("epsilon {} must be a positive number of at most {max}", collection::ShortNumber(*.0), max = collection::MAX_EPSILON)]
    Epsilon(f64),
    /// δ outside (0, 1).
    #[error("delta {} must lie strictly between 0 and 1", collection::ShortNumber(*.0))]
    Delta(f64),
    /// R not a positive finite number.
    #[error("clip radius {} must be a positive finite number", collection::ShortNumber(*.0))]
    ClipRadius(f64),
    /// Sensitivity not a positive finite number.
    #[error("sensitivity {} must be a positive finite number", collection::ShortNumber(*.0))]
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
        "encoding {encoding:?} cannot be used by a {privacy_model:?} collection: raw vectors (ENCODING_RAW_I32_LE) go to central collections only, perturbed reports to local ones"
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
        /// The limit, [`collection::MAX_ENTRIES`].
        max: usize,
    },
    /// Too many norm bins.
    #[error("norm_bins {0} must be at most {max}", max = collection::MAX_NORM_BINS)]
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
    #[error("centre[{index}] = {} must be a finite number", collection::ShortNumber(*value))]
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
    #[error("variable name {index} has {bytes} bytes of UTF-8; at most {max} are allowed", max = collection::MAX_NAME_BYTES)]
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
    /// quantities stay finite and meaningful (checked by [`Collection::create`] only).
    #[error("{field} = {} is outside the allowed range {range}", collection::ShortNumber(*value))]
    OutOfRange {
        /// The spec field (`clip_radius`, `delta`, `centre[3]`).
        field: String,
        /// The value given.
        value: f64,
        /// The allowed range, as text.
        range: &'static str,
    },
    /// A variable name holding a control character (checked by
    /// [`Collection::create`] only).
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
    #[error("epsilon {} and delta {} need more noise than a report can carry", collection::ShortNumber(*epsilon), collection::ShortNumber(*delta))]
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
    #[error("the rank-one mechanism is pure epsilon-LDP: delta must be 0, not {}", collection::ShortNumber(*.0))]
    RankOneDelta(f64),
    /// A rank-one collection with another encoding than i16.
    #[error("the rank-one mechanism's reports are ENCODING_I16_LE, not {0:?}")]
    RankOneEncoding(v1::Encoding),
    /// ε outside the rank-one mechanism's range.
    #[error(
        "epsilon {} must be a positive number of at most {max} for the rank-one mechanism",
        collection::ShortNumber(*.0),
        max = mechanism::rank_one::MAX_RANK_ONE_EPSILON
    )]
    RankOneEpsilon(f64),
    /// A shuffled collection whose mechanism is not pure ε-LDP, or that is central.
    #[error(
        "a shuffled collection needs a pure epsilon-LDP mechanism (local_mechanism LOCAL_MECHANISM_RANK_ONE, delta 0): the amplification bound does not cover {0}"
    )]
    ShuffleMechanism(&'static str),
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
