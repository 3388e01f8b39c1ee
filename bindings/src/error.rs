//! The one error type of the bindings, mapped from the client's errors.

use ldpcov_client::{ClientError, LedgerError};
use tonic::Code;

/// Why a call failed. Each variant is an exception class in Python
/// (`LdpcovError.InvalidInput`, ...), a sealed exception subclass in Kotlin and an enum
/// case in Swift; `reason` is the human-readable cause (never the vector or the report).
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum LdpcovError {
    /// The input was refused before any noise was drawn or any byte was sent (wrong
    /// length, a NaN or infinite coordinate, a bad token or budget), or the server
    /// refused a request as invalid.
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },
    /// The collection asks for weaker privacy (a larger ε or δ) than this device's
    /// privacy policy accepts. Nothing was sent.
    #[error("refused by the privacy policy: {reason}")]
    PolicyRefused {
        /// The collection's (ε, δ) and the policy's bounds.
        reason: String,
    },
    /// The server's collection parameters disagree with their local re-derivation (for
    /// example less noise than the spec needs), or it answered for another collection.
    /// Nothing was sent.
    #[error("the server's collection parameters were refused: {reason}")]
    ServerMismatch {
        /// What disagrees.
        reason: String,
    },
    /// The report would exceed the device's privacy budget. Nothing was spent, drawn
    /// or sent.
    #[error("privacy budget exceeded: {reason}")]
    BudgetExceeded {
        /// The window (lifetime or period) and the amounts.
        reason: String,
    },
    /// The budget ledger file cannot be read or written, or is corrupt. The device
    /// refuses to report rather than forget its spending history.
    #[error("budget ledger: {reason}")]
    Ledger {
        /// The file and the cause.
        reason: String,
    },
    /// The aggregator is unreachable or did not answer in time, after the retries.
    /// Submitting again later is safe.
    #[error("aggregator unavailable: {reason}")]
    Unavailable {
        /// The transport error or status.
        reason: String,
    },
    /// The collection does not exist.
    #[error("not found: {reason}")]
    NotFound {
        /// The server's message.
        reason: String,
    },
    /// The token is missing, wrong, or does not allow this call.
    #[error("not authorized: {reason}")]
    Unauthorized {
        /// The server's message.
        reason: String,
    },
    /// The collection already exists (admin create with a different spec).
    #[error("already exists: {reason}")]
    AlreadyExists {
        /// The server's message.
        reason: String,
    },
    /// The server refused the call in the collection's current state: it is closed, or
    /// an estimate was asked for below its minimum number of reports.
    #[error("refused by the server: {reason}")]
    FailedPrecondition {
        /// The server's message.
        reason: String,
    },
    /// A shuffled collection's report could not be sealed for its relay: the device
    /// has no relay (`RelayConfig`), or the collection publishes no usable key.
    /// Nothing was sent.
    #[error("shuffled collection: {reason}")]
    Sealing {
        /// Why.
        reason: String,
    },
    /// A two-aggregator collection's report could not be built: the device has no
    /// helper (`HelperConfig`), or the helper does not describe the leader's collection
    /// or publishes no usable key. Nothing was sent.
    #[error("two-aggregator collection: {reason}")]
    TwoAggregator {
        /// Why.
        reason: String,
    },
    /// Anything else: the operating system's random number generator failed, the
    /// runtime could not start, or the server answered with an unexpected status.
    #[error("internal error: {reason}")]
    Internal {
        /// The cause.
        reason: String,
    },
}

impl From<LedgerError> for LdpcovError {
    fn from(err: LedgerError) -> Self {
        let reason = err.to_string();
        match err {
            LedgerError::BudgetExceeded { .. } => LdpcovError::BudgetExceeded { reason },
            LedgerError::InvalidBudget(_) => LdpcovError::InvalidInput { reason },
            _ => LdpcovError::Ledger { reason },
        }
    }
}

impl From<ClientError> for LdpcovError {
    fn from(err: ClientError) -> Self {
        let reason = err.to_string();
        match err {
            ClientError::Dimension { .. }
            | ClientError::NonFinite { .. }
            | ClientError::InvalidToken => LdpcovError::InvalidInput { reason },
            ClientError::PolicyViolation { .. } | ClientError::ShufflePolicyViolation { .. } => {
                LdpcovError::PolicyRefused { reason }
            }
            ClientError::Params(_)
            | ClientError::CollectionMismatch { .. }
            | ClientError::RelayMismatch { .. } => LdpcovError::ServerMismatch { reason },
            ClientError::Budget(ledger) => ledger.into(),
            ClientError::Sealing(_) => LdpcovError::Sealing { reason },
            ClientError::NoHelper { .. } | ClientError::HelperMismatch { .. } => {
                LdpcovError::TwoAggregator { reason }
            }
            ClientError::Transport(_) => LdpcovError::Unavailable { reason },
            ClientError::Status(status) => {
                let reason = status.message().to_string();
                match status.code() {
                    Code::InvalidArgument | Code::OutOfRange => {
                        LdpcovError::InvalidInput { reason }
                    }
                    Code::NotFound => LdpcovError::NotFound { reason },
                    Code::AlreadyExists => LdpcovError::AlreadyExists { reason },
                    Code::FailedPrecondition => LdpcovError::FailedPrecondition { reason },
                    Code::Unauthenticated | Code::PermissionDenied => {
                        LdpcovError::Unauthorized { reason }
                    }
                    Code::Unavailable
                    | Code::DeadlineExceeded
                    | Code::ResourceExhausted
                    | Code::Aborted
                    | Code::Unknown => LdpcovError::Unavailable {
                        reason: format!("{:?}: {reason}", status.code()),
                    },
                    code => LdpcovError::Internal {
                        reason: format!("{code:?}: {reason}"),
                    },
                }
            }
            // Wire (a malformed report id), Entropy, and variants added later.
            _ => LdpcovError::Internal { reason },
        }
    }
}
