//! Store errors: what the caller is told ([`StoreError`], mapped to a gRPC status by
//! the service) and, for failures of the store itself, why ([`Cause`], kept as the
//! error's [`source`](std::error::Error::source)).
//!
//! Both are backend-neutral: an error of a backend's database or driver is kept as a
//! boxed [`std::error::Error`] ([`Cause::Backend`]), so this module names no backend.

use std::sync::Arc;

use thiserror::Error;

use super::codec::Corruption;

/// A backend's own error, kept as the source of a [`Cause`].
pub type BackendError = Box<dyn std::error::Error + Send + Sync>;

/// Why a store operation failed.
#[derive(Debug, Clone, Error)]
pub enum StoreError {
    /// No collection with this id.
    #[error("collection {0:?} does not exist")]
    NotFound(String),
    /// A different collection with this id exists.
    #[error("collection {0:?} already exists with other parameters")]
    AlreadyExists(String),
    /// The collection was closed: it takes no more reports.
    #[error("collection {0:?} is closed and takes no more reports")]
    Closed(String),
    /// The store cannot go on (poisoned lock, storage error, corrupt data, ...).
    #[error("store failure: {0}")]
    Internal(#[source] Arc<Cause>),
    /// The operation did not take effect but may succeed if retried (a failed commit,
    /// a store shutting down). Resending the same report ids is safe.
    #[error("store temporarily unavailable: {0}")]
    Unavailable(#[source] Arc<Cause>),
    /// A release would spend more than the collection's privacy budget: nothing was
    /// spent or recorded.
    #[error(
        "collection {id:?}: a release of rho = {requested} would exceed the budget (spent {spent} of {budget})"
    )]
    BudgetExhausted {
        /// The collection.
        id: String,
        /// ρ already spent.
        spent: f64,
        /// ρ the release asked for.
        requested: f64,
        /// The collection's total ρ.
        budget: f64,
    },
}

/// Errors about a collection are equal when they name the same collection; errors with
/// a [`Cause`] only when they share the very same cause (one failure, e.g. the failed
/// batch every caller of that batch is told about), since causes such as I/O errors
/// cannot be compared.
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StoreError::NotFound(a), StoreError::NotFound(b))
            | (StoreError::AlreadyExists(a), StoreError::AlreadyExists(b))
            | (StoreError::Closed(a), StoreError::Closed(b)) => a == b,
            (
                StoreError::BudgetExhausted {
                    id: a,
                    spent: sa,
                    requested: ra,
                    budget: ba,
                },
                StoreError::BudgetExhausted {
                    id: b,
                    spent: sb,
                    requested: rb,
                    budget: bb,
                },
            ) => a == b && sa == sb && ra == rb && ba == bb,
            (StoreError::Internal(a), StoreError::Internal(b))
            | (StoreError::Unavailable(a), StoreError::Unavailable(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for StoreError {}

impl StoreError {
    /// [`StoreError::Internal`] with this cause.
    pub fn internal(cause: impl Into<Cause>) -> Self {
        StoreError::Internal(Arc::new(cause.into()))
    }

    /// [`StoreError::Unavailable`] with this cause.
    pub fn unavailable(cause: impl Into<Cause>) -> Self {
        StoreError::Unavailable(Arc::new(cause.into()))
    }
}

/// The cause of a [`StoreError::Internal`] or [`StoreError::Unavailable`]: the original
/// error where there is one.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Cause {
    /// An error of the storage backend (its database, driver or connection pool):
    /// `what` says what failed ("database", "commit", "PostgreSQL", ...), `source` is
    /// the backend's error.
    #[error("{what}: {source}")]
    Backend {
        /// What failed, as the message's prefix.
        what: &'static str,
        /// The backend's error.
        #[source]
        source: BackendError,
    },
    /// An I/O error outside the database.
    #[error("I/O: {0}")]
    Io(#[from] std::io::Error),
    /// The stored data cannot be read.
    #[error("{0}")]
    Corrupt(#[from] Corruption),
    /// A thread panicked while holding this lock.
    #[error("{0} lock poisoned")]
    Poisoned(&'static str),
    /// A report of the wrong length got past validation.
    #[error("unvalidated report with {entries} entries reached the store")]
    Unvalidated {
        /// Its number of entries.
        entries: usize,
    },
    /// The store does not implement [`Store::close_collection`](super::Store::close_collection).
    #[error("this store cannot close collections (asked to close {0:?})")]
    CloseUnsupported(String),
    /// The store does not implement [`Store::delete_collection`](super::Store::delete_collection).
    #[error("this store cannot delete collections (asked to delete {0:?})")]
    DeleteUnsupported(String),
    /// The store does not implement the release ledger ([`Store::record_release`](super::Store::record_release)).
    #[error("this store keeps no release ledger (asked about {0:?})")]
    LedgerUnsupported(String),
    /// The store does not record shuffled batches ([`Store::record_delivered_batch`](super::Store::record_delivered_batch),
    /// [`Store::submit_to_batch`](super::Store::submit_to_batch)).
    #[error("this store records no shuffled batches (asked about {0:?})")]
    DeliveredUnsupported(String),
    /// The store keeps no two-aggregator state (a leader's upload queue, a helper's
    /// verdicts: [`Store::queue_upload`](super::Store::queue_upload),
    /// [`Store::submit_with_verdicts`](super::Store::submit_with_verdicts)).
    #[error("this store keeps no two-aggregator uploads or verdicts (asked about {0:?})")]
    TwoAggregatorUnsupported(String),
    /// A release with a ρ or budget that is not a finite number > 0.
    #[error("a release needs a finite rho > 0 and budget > 0 (got rho = {rho}, budget = {budget})")]
    BadRelease {
        /// The ρ asked for.
        rho: f64,
        /// The budget given.
        budget: f64,
    },
    /// The store is being dropped.
    #[error("the store is shutting down")]
    ShuttingDown,
    /// The commit thread ended before answering.
    #[error("the commit thread stopped")]
    CommitThreadStopped,
    /// The commit thread stopped for good (it panicked): the store takes no more
    /// writes; the reason names the database file.
    #[error("the store takes no more writes: {0}")]
    StoppedForGood(String),
    /// A batch failed as a whole; its callers may retry.
    #[error("batch not committed ({0}); retry with the same report ids")]
    NotCommitted(#[source] Box<Cause>),
    /// The in-memory state disagrees with what was just committed.
    #[error("inconsistent in-memory state: {0}")]
    Mirror(String),
    /// The connection failed while a commit was in flight: the batch may or may not
    /// have been committed. Retrying with the same report ids is safe (a report that was
    /// counted comes back as a duplicate).
    #[error("commit outcome unknown ({0}); retry with the same report ids")]
    CommitOutcomeUnknown(#[source] Box<Cause>),
    /// The database holds or returned something that cannot be (PostgreSQL store: a
    /// count column that disagrees with its blob, a negative count, ...).
    #[error("inconsistent stored data: {0}")]
    Inconsistent(String),
    /// Any other failure, told as its own message (a test's injected commit failure).
    #[error("{0}")]
    Other(#[source] BackendError),
}

impl Cause {
    /// [`Cause::Backend`]: `source`, a backend's error, with what failed.
    pub fn backend(what: &'static str, source: impl Into<BackendError>) -> Self {
        Cause::Backend {
            what,
            source: source.into(),
        }
    }
}
