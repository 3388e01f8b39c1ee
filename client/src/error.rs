//! The client's error type.

use ldpcov_privacy::{SpecError, WireError};
use rand::rand_core::OsError;
use thiserror::Error;

/// Everything that can go wrong on the device side.
///
/// Errors that come from the input (`Dimension`, `NonFinite`) are raised before any
/// noise is drawn or any byte is sent.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The vector does not have the collection's dimension.
    #[error("vector has {got} coordinates, the collection expects {expected}")]
    Dimension {
        /// The collection's dimension p.
        expected: usize,
        /// Length of the vector given.
        got: usize,
    },
    /// A coordinate is NaN or infinite.
    #[error("coordinate {index} of the vector is not a finite number")]
    NonFinite {
        /// Index of the first non-finite coordinate.
        index: usize,
    },
    /// The collection is invalid, or its parameters disagree with the local
    /// derivation (for example a server announcing less noise than the spec needs).
    #[error(transparent)]
    Params(#[from] SpecError),
    /// The collection asks for weaker privacy than this client accepts.
    #[error(
        "collection asks for epsilon {epsilon} and delta {delta}, this client accepts at most epsilon {max_epsilon} and delta {max_delta}"
    )]
    PolicyViolation {
        /// ε of the collection.
        epsilon: f64,
        /// δ of the collection.
        delta: f64,
        /// Largest ε the client's [`PrivacyPolicy`](crate::PrivacyPolicy) accepts.
        max_epsilon: f64,
        /// Largest δ the client's [`PrivacyPolicy`](crate::PrivacyPolicy) accepts.
        max_delta: f64,
    },
    /// The device requires a shuffled collection ([`ShufflePolicy`](crate::ShufflePolicy))
    /// and this one falls short.
    #[error("collection {id:?} is refused by this device's shuffle policy: {reason}")]
    ShufflePolicyViolation {
        /// The collection.
        id: String,
        /// What falls short.
        reason: String,
    },
    /// The relay's answer for a collection cannot be reported to: not a shuffled
    /// collection, or without a usable key of the relay's own.
    #[error("collection {id:?}: the relay's copy cannot be reported to: {reason}")]
    RelayMismatch {
        /// The collection.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A local-model operation on a central collection: its reports are raw vectors
    /// that the operator sees, so nothing here perturbs them.
    #[error(
        "collection {id:?} is central: the operator sees each raw vector, so a device perturbs nothing for it; use trusted_curator_report / submit_to_trusted_curator only if you trust the operator"
    )]
    CentralCollection {
        /// The collection.
        id: String,
    },
    /// A plain or trusted-curator report for a two-aggregator collection, whose
    /// reports are only ever secret-shared.
    #[error(
        "collection {id:?} is a two-aggregator collection: its reports are secret-shared between the leader and the helper (ReportBuilder::two_aggregator_report), never sent whole"
    )]
    TwoAggregatorCollection {
        /// The collection.
        id: String,
    },
    /// A two-aggregator report for a collection of another model.
    #[error("collection {id:?} is not a two-aggregator collection")]
    NotTwoAggregator {
        /// The collection.
        id: String,
    },
    /// A two-aggregator collection asked for on a client without its helper.
    #[error(
        "collection {id:?} is a two-aggregator collection: the device needs the helper's own keys (AggregatorClient::with_helper)"
    )]
    NoHelper {
        /// The collection.
        id: String,
    },
    /// The helper's answer cannot be used for the leader's collection.
    #[error("collection {id:?}: {reason}")]
    HelperMismatch {
        /// The collection.
        id: String,
        /// Why.
        reason: String,
    },
    /// The Prio3 shares of a report could not be built (a vector the circuit refuses).
    #[error("the report's Prio3 shares: {0}")]
    Shares(String),
    /// A main report for a collection whose clip radius is still being chosen.
    #[error(
        "collection {id:?}'s clip radius is still being chosen: report the norm to {phase:?} first (submit does), and the vector once the phase is closed"
    )]
    RadiusPending {
        /// The collection.
        id: String,
        /// Its radius phase's collection.
        phase: String,
    },
    /// A radius-phase report for a collection with no pending radius phase.
    #[error("collection {id:?} has no radius phase waiting for reports")]
    NoRadiusPhase {
        /// The collection.
        id: String,
    },
    /// A trusted-curator report for a local collection.
    #[error("collection {id:?} is local: its reports must be perturbed on the device")]
    LocalCollection {
        /// The collection.
        id: String,
    },
    /// The server answered with the parameters of another collection.
    #[error("asked for collection {requested:?}, the server answered with {got:?}")]
    CollectionMismatch {
        /// Collection id asked for.
        requested: String,
        /// Collection id in the answer.
        got: String,
    },
    /// A report is malformed (for example a report id that is not 16 bytes).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The rank-one sampler refused its parameters or the lifted input (a bug: a
    /// validated collection and a clipped vector always satisfy it).
    #[error("rank-one report: {0}")]
    RankOne(String),
    /// The device's privacy budget ledger refused the report, or could not record it.
    #[error(transparent)]
    Budget(#[from] crate::ledger::LedgerError),
    /// A shuffled collection's report could not be sealed (no usable key, the
    /// collection is not shuffled, or no relay is configured).
    #[error("cannot seal the report for the relay: {0}")]
    Sealing(String),
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed: {0}")]
    Entropy(OsError),
    /// The aggregator (or the transport under it) answered a call with an error status,
    /// after any retries.
    #[cfg(feature = "grpc")]
    #[error("aggregator call failed with {:?}: {}", .0.code(), .0.message())]
    Status(tonic::Status),
    /// A bearer token cannot be sent as gRPC metadata (it must be visible ASCII).
    #[cfg(feature = "grpc")]
    #[error("the bearer token must be 1 or more visible ASCII characters")]
    InvalidToken,
    /// Connecting to the aggregator failed (bad URL, unreachable host, ...).
    #[cfg(feature = "grpc")]
    #[error("cannot connect to the aggregator: {}", error_chain(.0))]
    Transport(tonic::transport::Error),
}

impl From<OsError> for ClientError {
    fn from(err: OsError) -> Self {
        ClientError::Entropy(err)
    }
}

#[cfg(feature = "grpc")]
impl From<tonic::Status> for ClientError {
    fn from(status: tonic::Status) -> Self {
        ClientError::Status(status)
    }
}

#[cfg(feature = "grpc")]
impl From<tonic::transport::Error> for ClientError {
    fn from(err: tonic::transport::Error) -> Self {
        ClientError::Transport(err)
    }
}

#[cfg(feature = "grpc")]
impl ClientError {
    /// The gRPC status, when the error is one.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            ClientError::Status(status) => Some(status),
            _ => None,
        }
    }
}

/// `err: source: source ...` on one line (tonic's transport error alone only says
/// "transport error").
#[cfg(feature = "grpc")]
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text.replace('\n', " ")
}
