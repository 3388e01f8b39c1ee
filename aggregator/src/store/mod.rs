//! Where collections and their exact integer accumulators live.
//!
//! [`Store`] is the seam a backend plugs into; its errors ([`StoreError`], [`Cause`])
//! name no backend. [`MemoryStore`] keeps everything in memory; the persistent backends
//! live in submodules, each importing only this module and [`codec`] (what they store
//! and how it reads back), never each other:
//!
//! * `redb`: `DurableStore`, one redb file with group commit;
//! * `postgres`: `PostgresStore`, PostgreSQL shared by any number of replicas (the
//!   `postgres` feature, on by default).
//!
//! The crate root re-exports each backend's public types.
//!
//! A store receives only reports that were already validated, and applies a batch
//! atomically: after an error nothing of the batch is counted.
//!
//! A shuffled collection's chunks come with their relay batch id
//! ([`Store::submit_to_batch`]): a store keeps, per (collection, batch id), how many
//! reports that batch's sends counted, in the transaction that counts them, so that a
//! batch's delivered users ([`Store::record_delivered_batch`]) count a report id once
//! per collection.
//!
//! A two-aggregator collection's leader keeps each device's upload in a durable queue
//! until the helper has answered it ([`Store::queue_upload`],
//! [`Store::submit_from_queue`]); its helper keeps its verdict on every report id it
//! verified ([`Store::submit_with_verdicts`]), so that it verifies a report id once and
//! answers a retried request with the same verdict. Both count their output shares
//! through the ordinary accumulators (as limbs, `ldpcov_privacy::two_aggregator`).

mod codec;
#[cfg(test)]
mod contract;
mod error;
mod memory;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
pub(crate) mod redb;
#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;
use std::time::Duration;

use ldpcov_privacy::mechanism::ReportEntries;
use ldpcov_privacy::{Collection, ReportId};

pub use codec::{CodecError, Corruption};
pub use error::{BackendError, Cause, StoreError};
pub use ldpcov_estimate::{Accumulator, FOLDS};
pub use memory::MemoryStore;

/// The backends' group-commit default: a batch is committed once it holds this many
/// reports.
pub(crate) const DEFAULT_BATCH_SIZE: usize = 1024;

/// The backends' group-commit default: a batch is committed at most this long after
/// its first report arrived.
pub(crate) const DEFAULT_BATCH_DELAY: Duration = Duration::from_millis(5);

/// The backends' folding default: a collection's appended reports are folded once
/// their report logs exceed 64 MiB (16 000 rank-one reports at p = 1000, added in about
/// a second).
pub(crate) const DEFAULT_FOLD_BYTES: u64 = 64 << 20;

/// A report that passed validation: its id and grid-unit entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidReport {
    /// Client-chosen id; counted at most once per collection.
    pub report_id: ReportId,
    /// The d entries it adds, in grid units (a rank-one report as its outer product,
    /// which [`Accumulator::add_reports`] adds a batch at a time).
    pub entries: ReportEntries,
}

/// A device's upload that a two-aggregator collection's leader holds until the helper has
/// answered it ([`Store::queue_upload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedUpload {
    /// The device's report id (the Prio3 nonce).
    pub report_id: ReportId,
    /// The device's `TwoAggregatorReport`, encoded (opaque to the store).
    pub body: Vec<u8>,
}

/// What a submission writes along with the reports it counts, in the transaction that
/// counts them (so that no crash separates the two).
#[derive(Debug)]
pub(crate) enum Along {
    /// Nothing (`Store::submit`).
    Nothing,
    /// The shuffled batch the reports are a chunk of (`Store::submit_to_batch`): the
    /// reports counted join its tally.
    Tally([u8; 16]),
    /// A two-aggregator leader's done report ids (`Store::submit_from_queue`): their
    /// queued uploads are removed.
    Dequeue(Vec<ReportId>),
    /// A two-aggregator helper's verdicts (`Store::submit_with_verdicts`): each
    /// recorded unless its report id has one already.
    Verdicts(Vec<(ReportId, Vec<u8>)>),
}

impl Along {
    /// Whether the submission counts on a closed collection: a two-aggregator
    /// collection's queue drains, and its helper verifies, after the close (the uploads
    /// arrived before it).
    pub(crate) fn counts_when_closed(&self) -> bool {
        matches!(self, Along::Dequeue(_) | Along::Verdicts(_))
    }

    /// Whether it writes nothing beyond the reports it counts.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Along::Nothing | Along::Tally(_) => true,
            Along::Dequeue(done) => done.is_empty(),
            Along::Verdicts(verdicts) => verdicts.is_empty(),
        }
    }
}

/// What a batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchOutcome {
    /// Reports newly counted.
    pub accepted: u64,
    /// Reports whose id was already counted (ignored).
    pub duplicates: u64,
}

/// A release recorded against a collection's privacy budget.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRelease {
    /// The release as it was answered (opaque to the store).
    pub body: Vec<u8>,
    /// The ρ it spent when it was recorded.
    pub rho: f64,
    /// The collection's total ρ spent, this release included.
    pub spent: f64,
    /// Whether this call recorded it (`false`: it was recorded before, under the same
    /// key, and is returned at no cost).
    pub fresh: bool,
}

/// What a shuffled collection's completed batches delivered
/// ([`Store::record_delivered_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveredBatches {
    /// Completed batches recorded (a resent batch is recorded again).
    pub batches: u64,
    /// The fewest valid reports in any recorded batch; `None` before the first.
    pub smallest: Option<u64>,
}

impl DeliveredBatches {
    /// This record with one more completed batch of `valid` valid reports.
    pub fn with_batch(self, valid: u64) -> Self {
        Self {
            batches: self.batches.saturating_add(1),
            smallest: Some(self.smallest.map_or(valid, |s| s.min(valid))),
        }
    }
}

/// A consistent copy of a collection's accumulators.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The collection.
    pub collection: Arc<Collection>,
    /// The accumulators.
    pub acc: Accumulator,
}

/// Collections and their accumulators.
#[tonic::async_trait]
pub trait Store: Send + Sync + 'static {
    /// Creates a collection. Creating one that exists with the same parameters is a
    /// no-op that returns it; with other parameters it is [`StoreError::AlreadyExists`].
    async fn create_collection(
        &self,
        collection: Collection,
    ) -> Result<Arc<Collection>, StoreError>;
    /// The collection with this id.
    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError>;
    /// Counts a batch of validated reports for collection `id`, skipping ids already
    /// counted (also within the batch). All or nothing.
    async fn submit(&self, id: &str, reports: Vec<ValidReport>)
    -> Result<BatchOutcome, StoreError>;
    /// Reports counted so far.
    async fn count(&self, id: &str) -> Result<u64, StoreError>;
    /// How many collections the store holds (closed ones included).
    async fn collection_count(&self) -> Result<u64, StoreError>;
    /// The ids of the collections the store holds (closed ones included), sorted.
    async fn collection_ids(&self) -> Result<Vec<String>, StoreError>;
    /// A consistent copy of the accumulators.
    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError>;

    /// Closes collection `id` for good: from then on [`submit`](Store::submit) fails
    /// with [`StoreError::Closed`] (checked atomically with the batch), while
    /// [`count`](Store::count) and [`snapshot`](Store::snapshot) keep working.
    /// Closing a closed collection is a no-op.
    ///
    /// Added with collection closing. The default refuses, so a store that predates it still
    /// compiles; a durable store must override it (and
    /// [`is_closed`](Store::is_closed)) and persist the flag, as `DurableStore` does.
    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        Err(StoreError::internal(Cause::CloseUnsupported(
            id.to_string(),
        )))
    }

    /// Whether collection `id` is closed. The default: never (see
    /// [`close_collection`](Store::close_collection)).
    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        self.collection(id).await.map(|_| false)
    }

    /// Deletes collection `id` for good: its spec, accumulators, closed flag and the
    /// ids of the reports it counted, all at once (one transaction in a durable store).
    /// Returns the number of reports it had counted. Afterwards every call naming `id`
    /// fails with [`StoreError::NotFound`] until it is created again, from scratch (an
    /// old report id is then counted again). A batch that races the delete is either
    /// counted before it (and deleted with it) or refused with `NotFound`: never half.
    ///
    /// The default refuses, so a store that predates it still compiles.
    async fn delete_collection(&self, id: &str) -> Result<u64, StoreError> {
        Err(StoreError::internal(Cause::DeleteUnsupported(
            id.to_string(),
        )))
    }

    /// The release recorded for collection `id` under `key`, if any.
    ///
    /// The default refuses, like [`record_release`](Store::record_release).
    async fn recorded_release(
        &self,
        id: &str,
        key: &[u8],
    ) -> Result<Option<RecordedRelease>, StoreError> {
        let _ = key;
        Err(StoreError::internal(Cause::LedgerUnsupported(
            id.to_string(),
        )))
    }

    /// Records `body` under `key` for collection `id`, spending `rho` of its total
    /// `budget`, atomically (one transaction in a durable store): a key already
    /// recorded returns its stored release at no cost (`fresh: false`, whatever
    /// `rho` and `body` say now); a release that would take the spent ρ above `budget`
    /// is refused with [`StoreError::BudgetExhausted`] and records nothing. Concurrent
    /// callers, on any replica, never spend more than `budget` together. A deleted
    /// collection's releases go with it.
    ///
    /// The default refuses, so a store that predates the ledger still compiles.
    async fn record_release(
        &self,
        id: &str,
        key: &[u8],
        rho: f64,
        budget: f64,
        body: Vec<u8>,
    ) -> Result<RecordedRelease, StoreError> {
        let _ = (key, rho, budget, body);
        Err(StoreError::internal(Cause::LedgerUnsupported(
            id.to_string(),
        )))
    }

    /// The ρ spent by collection `id`'s recorded releases (0 without any).
    async fn budget_spent(&self, id: &str) -> Result<f64, StoreError> {
        Err(StoreError::internal(Cause::LedgerUnsupported(
            id.to_string(),
        )))
    }

    /// Counts a chunk of the shuffled batch `batch` (the relay's 16-byte batch id) of
    /// collection `id` exactly as [`submit`](Store::submit) does, and adds the reports
    /// it newly counts (its `accepted`) to that batch's tally,
    /// [`counted_in_batch`](Store::counted_in_batch), atomically with them (in the
    /// same transaction in a durable store): a report is never counted without its
    /// batch knowing, nor the other way round. A duplicate adds nothing to any tally,
    /// so a report id is in the tally of at most one batch of the collection. A deleted
    /// collection's tallies go with it.
    ///
    /// The default refuses, so a store that predates it still compiles.
    async fn submit_to_batch(
        &self,
        id: &str,
        batch: [u8; 16],
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let _ = (batch, reports);
        Err(StoreError::internal(Cause::DeliveredUnsupported(
            id.to_string(),
        )))
    }

    /// The reports [`submit_to_batch`](Store::submit_to_batch) counted so far under
    /// shuffled batch `batch` of collection `id`, over all its sends (0 for a batch
    /// never seen). Durable on the durable backends, like the counts.
    ///
    /// The default refuses, like [`submit_to_batch`](Store::submit_to_batch).
    async fn counted_in_batch(&self, id: &str, batch: [u8; 16]) -> Result<u64, StoreError> {
        let _ = batch;
        Err(StoreError::internal(Cause::DeliveredUnsupported(
            id.to_string(),
        )))
    }

    /// Records that a shuffled batch of collection `id` completed holding `valid`
    /// valid reports: the smallest such number sets the central guarantee the
    /// collection's batches delivered. The caller (`service/shuffle.rs`) counts a
    /// report id toward one batch only: its reports counted now, plus, for a resent
    /// batch, its duplicates up to what [`counted_in_batch`](Store::counted_in_batch)
    /// says earlier sends of the same batch id counted — never a report id counted in
    /// another batch. A resend of the same batch thus records the same number, and
    /// recording only ever lowers the minimum, so a resend changes nothing but the
    /// batch tally. A deleted collection's record goes with it.
    ///
    /// The default refuses, so a store that predates it still compiles.
    async fn record_delivered_batch(&self, id: &str, valid: u64) -> Result<(), StoreError> {
        let _ = valid;
        Err(StoreError::internal(Cause::DeliveredUnsupported(
            id.to_string(),
        )))
    }

    /// What collection `id`'s recorded batches delivered (nothing recorded: the
    /// default [`DeliveredBatches`]).
    ///
    /// The default refuses, like [`record_delivered_batch`](Store::record_delivered_batch).
    async fn delivered_batches(&self, id: &str) -> Result<DeliveredBatches, StoreError> {
        Err(StoreError::internal(Cause::DeliveredUnsupported(
            id.to_string(),
        )))
    }

    /// A two-aggregator collection's leader: queues `upload` for verification with the
    /// helper, durably, unless an upload with its report id is queued already
    /// (`Ok(false)`: nothing changes, the first upload stays). Refused with
    /// [`StoreError::Closed`] once the collection is closed, checked atomically with the
    /// insert. Whether the id was counted before is not checked here: the verification
    /// then counts it at most once (the helper answers its first verdict, the
    /// accumulators skip a counted id). A deleted collection's queue goes with it.
    ///
    /// The default refuses, so a store that predates it still compiles.
    async fn queue_upload(&self, id: &str, upload: QueuedUpload) -> Result<bool, StoreError> {
        let _ = upload;
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// The oldest `limit` uploads queued for collection `id`, oldest first.
    ///
    /// The default refuses, like [`queue_upload`](Store::queue_upload).
    async fn queued_uploads(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        let _ = limit;
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// How many uploads of collection `id` are queued.
    ///
    /// The default refuses, like [`queue_upload`](Store::queue_upload).
    async fn queued_count(&self, id: &str) -> Result<u64, StoreError> {
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// The leader, once the helper has answered: counts `reports` exactly as
    /// [`submit`](Store::submit) does (skipping counted ids), but also on a closed
    /// collection (they were uploaded before it closed), and removes the uploads of
    /// the `done` report ids (counted or refused) from the queue, atomically with the
    /// count. A `done` id that is not queued is ignored.
    ///
    /// The default refuses, like [`queue_upload`](Store::queue_upload).
    async fn submit_from_queue(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        done: Vec<ReportId>,
    ) -> Result<BatchOutcome, StoreError> {
        let _ = (reports, done);
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// The helper: the verdict recorded for each of `report_ids` (same order), `None`
    /// for an id never verified.
    ///
    /// The default refuses, like [`queue_upload`](Store::queue_upload).
    async fn verdicts(
        &self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let _ = report_ids;
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// The helper: records each of `verdicts` (opaque bytes) under its report id
    /// unless one is recorded already (the first stays), and counts `reports` as
    /// [`submit`](Store::submit) does, also on a closed collection, atomically: a
    /// report is never counted without its verdict, nor the other way round. A
    /// deleted collection's verdicts go with it.
    ///
    /// The default refuses, like [`queue_upload`](Store::queue_upload).
    async fn submit_with_verdicts(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        verdicts: Vec<(ReportId, Vec<u8>)>,
    ) -> Result<BatchOutcome, StoreError> {
        let _ = (reports, verdicts);
        Err(StoreError::internal(Cause::TwoAggregatorUnsupported(
            id.to_string(),
        )))
    }

    /// Whether the store currently accepts writes: `true` until a write fails for a
    /// reason of the store itself (a failed commit), `true` again after the next write
    /// succeeds. The gRPC health service reports `NOT_SERVING` while it is `false`.
    ///
    /// The default is always healthy (a store whose writes cannot fail, such as
    /// [`MemoryStore`]).
    fn write_health(&self) -> tokio::sync::watch::Receiver<bool> {
        tokio::sync::watch::channel(true).1
    }
}

/// Refuses a batch holding a report whose length is not the collection's number of
/// entries ([`Collection::entries`], never recomputed from the dimension): such a report
/// got past validation, so the store fails with [`Cause::Unvalidated`] and counts nothing.
pub(crate) fn check_lengths(
    collection: &Collection,
    reports: &[ValidReport],
) -> Result<(), StoreError> {
    match reports
        .iter()
        .find(|r| r.entries.len() != collection.entries())
    {
        Some(bad) => Err(StoreError::internal(Cause::Unvalidated {
            entries: bad.entries.len(),
        })),
        None => Ok(()),
    }
}

/// Refuses a release whose ρ is not a finite number ≥ 0 (0: a release that is not
/// differentially private and spends nothing, recorded so that it is answered once) or
/// whose budget is not a finite number > 0 (a caller bug: the service validates
/// requests), before anything is read or written.
pub(crate) fn check_release(rho: f64, budget: f64) -> Result<(), StoreError> {
    if rho.is_finite() && rho >= 0.0 && budget.is_finite() && budget > 0.0 {
        Ok(())
    } else {
        Err(StoreError::internal(Cause::BadRelease { rho, budget }))
    }
}
