//! Shuffled collections on the aggregator's side (docs/PRIVACY.md §9): the HPKE keys
//! a collection publishes, the refusal of direct reports, and a relay's batch stream
//! (`SubmitShuffledBatch`): every report opened, decoded and checked as if sent alone,
//! bad ones refused individually, the rest counted (a report id once, so a resent
//! batch counts nothing twice).
//!
//! # Delivered users
//!
//! A completed batch is recorded with the users it delivered
//! ([`Store::record_delivered_batch`]), and the fewest over the collection's batches
//! sets the delivered central guarantee. A report id counts there once per
//! collection, toward the batch (relay batch id) that first counted it: each chunk is
//! counted with [`Store::submit_to_batch`], which adds the reports it newly counts to
//! its batch id's tally in the same transaction. At completion a send's delivered
//! users are
//!
//! `accepted + min(duplicates, counted_in_batch − accepted)`:
//!
//! its reports counted now, plus its duplicates up to the reports earlier sends of the
//! same batch id counted ([`Store::counted_in_batch`] minus this send's own). So a
//! batch resent under its 16-byte id (after a lost acknowledgement, or a stream broken
//! part-way) gets its earlier-counted reports back and records the same number, while
//! report ids counted in another batch count nothing: they cannot make a small batch
//! look large. A send's figure never exceeds its reports, nor its batch id's tally.
//!
//! Errs on the safe side: a tally is written in the transaction that counts its
//! reports, so no crash leaves a counted report outside its batch's tally; a crash
//! after the last chunk and before the record leaves the batch unrecorded, and the
//! relay's resend records it. A store upgraded while a batch was in flight has that
//! batch's reports counted before the upgrade in no tally: its resend then reads a
//! smaller tally, so fewer users, never more. Sends of one batch that race each other
//! each see the other's committed chunks in the tally, and neither can count a report
//! the other counted beyond the tally.
//! Not checked: that a resend's duplicates are the very report ids its earlier sends
//! counted (they are matched in number only; per-report attribution would double the
//! dedupe rows).
//!
//! [`Store::record_delivered_batch`]: crate::store::Store::record_delivered_batch
//! [`Store::submit_to_batch`]: crate::store::Store::submit_to_batch
//! [`Store::counted_in_batch`]: crate::store::Store::counted_in_batch
//!
//! Must not log or keep anything of a batch but counts: no batch order, no report.

use std::sync::Arc;
use std::time::Instant;

use super::keys::{public_key_message, unix_now};

use ldpcov_privacy::Collection;
use ldpcov_proto::v1::{
    CollectionParams, RefusedReport, Report, ShuffleDelivered, ShuffledBatchChunk,
    ShuffledBatchResponse,
};
use ldpcov_seal::{CollectionKeys, KeySchedule, OpenError, Opener};
use prost::Message;
use tokio_stream::StreamExt;
use tonic::{Code, Request, Status, Streaming};

use super::{AggregatorService, invalid, store_status};
use crate::auth::Right;
use crate::store::ValidReport;
use crate::telemetry;

/// Length of a batch id.
pub const BATCH_ID_LEN: usize = 16;

/// Most reports one batch may announce: the aggregator holds no batch in memory (each
/// chunk is counted as it arrives), so this only bounds what a stream may promise.
pub const MAX_BATCH_SIZE: u64 = 1 << 40;

impl AggregatorService {
    /// The HPKE keys of a shuffled collection (`None` for another), derived from this
    /// server's master secret.
    pub(super) fn collection_keys(&self, c: &Collection) -> Result<Option<CollectionKeys>, Status> {
        let Some(settings) = c.shuffle() else {
            return Ok(None);
        };
        let schedule = KeySchedule::new(
            settings.key_rotation_seconds(),
            settings.key_grace_rotations(),
        )
        .map_err(|e| Status::internal(format!("key schedule of {}: {e}", c.id())))?;
        CollectionKeys::new(&self.shuffle_secret, c.id(), schedule)
            .map(Some)
            .map_err(|e| Status::internal(format!("keys of {}: {e}", c.id())))
    }

    /// A collection's public parameters, with a shuffled collection's published keys
    /// (pending and active) at this moment.
    pub(super) fn params_of(&self, c: &Collection) -> Result<CollectionParams, Status> {
        let mut params = c.params();
        super::two_aggregator::with_helper_keys(&mut params, self.helper_keys(c)?, unix_now())?;
        if let (Some(keys), Some(shuffle)) = (self.collection_keys(c)?, params.shuffle.as_mut()) {
            let published = keys
                .published(unix_now())
                .map_err(|e| Status::internal(format!("keys of {}: {e}", c.id())))?;
            shuffle.keys = published.iter().map(public_key_message).collect();
        }
        Ok(params)
    }

    /// Refuses a report sent directly to a shuffled collection: `FAILED_PRECONDITION`.
    pub(super) fn ensure_direct(c: &Collection) -> Result<(), Status> {
        if c.is_two_aggregator() {
            return Err(Status::failed_precondition(format!(
                "collection {} is a two-aggregator collection: its reports are uploaded to the leader as Prio3 shares (UploadTwoAggregatorReport), never as a payload",
                c.id()
            )));
        }
        if c.shuffle().is_some() {
            return Err(Status::failed_precondition(format!(
                "collection {} is shuffled: its reports come sealed through its relay, in batches (docs/PRIVACY.md §9)",
                c.id()
            )));
        }
        if let Some(phase) = c.radius_phase().filter(|_| c.radius_pending()) {
            return Err(Status::failed_precondition(format!(
                "collection {}'s clip radius is still being chosen: devices report their norm to {} until an operator closes it",
                c.id(),
                phase.phase_collection_id()
            )));
        }
        Ok(())
    }

    /// The body of `SubmitShuffledBatch`.
    pub(super) async fn shuffled_batch(
        &self,
        request: Request<Streaming<ShuffledBatchChunk>>,
    ) -> Result<ShuffledBatchResponse, Status> {
        let started = Instant::now();
        self.auth.check(request.metadata(), Right::Relay)?;
        let mut stream = request.into_inner();
        let mut batch: Option<Batch> = None;
        let mut response = ShuffledBatchResponse::default();
        let mut received: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|status| partial(status.code(), status.message(), received, &response))?;
            let current = match &batch {
                Some(b) => {
                    b.check_header(&chunk)
                        .map_err(|s| partial(s.code(), s.message(), received, &response))?;
                    b
                }
                None => batch.insert(self.open_batch(&chunk).await?),
            };
            let n = chunk.reports.len() as u64;
            if received + n > current.size {
                return Err(partial(
                    Code::InvalidArgument,
                    &format!(
                        "the batch carries more reports than its batch_size {}",
                        current.size
                    ),
                    received,
                    &response,
                ));
            }
            let collection = Arc::clone(&current.collection);
            let keys = Arc::clone(&current.keys);
            let first = received;
            let (valid, refused) = tokio::task::spawn_blocking(move || {
                open_chunk(&collection, &keys, chunk, first, unix_now())
            })
            .await
            .map_err(|e| Status::internal(format!("batch task failed: {e}")))?;
            received += n;
            let id = current.collection.id();
            for r in &refused {
                telemetry::rejected(id, Code::from_i32(r.code), 1);
            }
            response.refused.extend(refused);
            if !valid.is_empty() {
                // Counted with the batch id: the reports it counts join the batch's
                // tally in the same transaction (see "Delivered users").
                let outcome = self
                    .store
                    .submit_to_batch(id, current.batch_id, valid)
                    .await
                    .map_err(store_status)
                    .map_err(|s| partial(s.code(), s.message(), received - n, &response))?;
                telemetry::counted(id, outcome.accepted, outcome.duplicates);
                response.accepted += outcome.accepted;
                response.duplicates += outcome.duplicates;
            }
        }
        let Some(batch) = batch else {
            // No chunk: the relay checking that this aggregator accepts its token (at
            // its start and while it runs). Nothing is counted.
            return Ok(ShuffledBatchResponse::default());
        };
        if received < batch.size {
            return Err(partial(
                Code::InvalidArgument,
                &format!(
                    "the batch stream ended after {received} of its {} reports",
                    batch.size
                ),
                received,
                &response,
            ));
        }
        // The batch is complete: the users it delivered, which set the guarantee shown,
        // are its reports counted now plus, for a resent batch, its duplicates up to
        // what earlier sends of this batch id counted; never a report id counted in
        // another batch (see "Delivered users"). The tally is read after this send's
        // last chunk committed, so it holds this send's reports and the earlier
        // sends'. Without duplicates there is nothing to read.
        let counted = if response.duplicates == 0 {
            response.accepted
        } else {
            self.store
                .counted_in_batch(batch.collection.id(), batch.batch_id)
                .await
                .map_err(store_status)
                .map_err(|s| partial(s.code(), s.message(), received, &response))?
        };
        let valid = delivered_users(response.accepted, response.duplicates, counted);
        self.store
            .record_delivered_batch(batch.collection.id(), valid)
            .await
            .map_err(store_status)
            .map_err(|s| partial(s.code(), s.message(), received, &response))?;
        if valid < batch.size {
            tracing::warn!(
                collection = %batch.collection.id(), reports = batch.size, valid,
                "a shuffled batch held reports that were refused or counted in another batch: the delivered guarantee is at its valid reports"
            );
        }
        tracing::info!(
            collection = %batch.collection.id(), reports = batch.size,
            accepted = response.accepted, duplicates = response.duplicates,
            refused = response.refused.len(), "shuffled batch counted"
        );
        telemetry::submit_duration("SubmitShuffledBatch", started.elapsed());
        Ok(response)
    }

    /// What collection `c`'s completed batches delivered (`None` if it is not
    /// shuffled): the central guarantee at the fewest valid reports any batch held.
    pub(super) async fn delivered(
        &self,
        c: &Arc<Collection>,
    ) -> Result<Option<ShuffleDelivered>, Status> {
        if c.shuffle().is_none() {
            return Ok(None);
        }
        let record = self
            .store
            .delivered_batches(c.id())
            .await
            .map_err(store_status)?;
        let Some(smallest) = record.smallest else {
            return Ok(Some(ShuffleDelivered {
                batches: record.batches,
                ..Default::default()
            }));
        };
        // The bound takes up to a fraction of a second at 10⁸ reports: off the reactor.
        let collection = Arc::clone(c);
        let privacy = tokio::task::spawn_blocking(move || collection.shuffled_privacy_at(smallest))
            .await
            .map_err(|e| Status::internal(format!("accounting task failed: {e}")))?;
        Ok(privacy.map(|p| ShuffleDelivered {
            batches: record.batches,
            smallest_batch: smallest,
            central_epsilon: p.central_epsilon,
            central_delta: p.central_delta,
        }))
    }

    /// Checks a batch's first chunk: a known, open, shuffled collection, a batch id,
    /// and a size of at least the collection's minimum.
    async fn open_batch(&self, chunk: &ShuffledBatchChunk) -> Result<Batch, Status> {
        let collection = self.collection(&chunk.collection_id).await?;
        let Some(settings) = collection.shuffle() else {
            return Err(Status::failed_precondition(format!(
                "collection {} is not shuffled: it takes no batches",
                collection.id()
            )));
        };
        self.ensure_open(collection.id()).await?;
        if chunk.batch_id.len() != BATCH_ID_LEN {
            return Err(invalid(format!(
                "batch_id has {} bytes; it must have {BATCH_ID_LEN}",
                chunk.batch_id.len()
            )));
        }
        let min = settings.min_batch_size();
        if chunk.batch_size < min {
            return Err(Status::failed_precondition(format!(
                "a batch of {} reports is below collection {}'s minimum batch size {min}: nothing was counted",
                chunk.batch_size,
                collection.id()
            )));
        }
        if chunk.batch_size > MAX_BATCH_SIZE {
            return Err(invalid(format!(
                "batch_size {} exceeds {MAX_BATCH_SIZE}",
                chunk.batch_size
            )));
        }
        let batch_id: [u8; BATCH_ID_LEN] = chunk
            .batch_id
            .as_slice()
            .try_into()
            .map_err(|_| invalid(format!("batch_id must have {BATCH_ID_LEN} bytes")))?;
        let keys = self
            .collection_keys(&collection)?
            .ok_or_else(|| Status::internal("a shuffled collection without keys"))?;
        Ok(Batch {
            keys: Arc::new(keys),
            collection,
            batch_id,
            size: chunk.batch_size,
        })
    }
}

/// A batch being received: its collection, keys and header.
struct Batch {
    collection: Arc<Collection>,
    keys: Arc<CollectionKeys>,
    batch_id: [u8; BATCH_ID_LEN],
    size: u64,
}

impl Batch {
    /// Every chunk repeats the first one's header.
    fn check_header(&self, chunk: &ShuffledBatchChunk) -> Result<(), Status> {
        if chunk.collection_id != self.collection.id()
            || chunk.batch_id.as_slice() != self.batch_id.as_slice()
            || chunk.batch_size != self.size
        {
            return Err(invalid(
                "a chunk's collection id, batch id or batch size differs from the first chunk's",
            ));
        }
        Ok(())
    }
}

/// The users a completed send of a batch delivered: its `accepted` reports (counted
/// now) plus its `duplicates` up to the reports earlier sends of the same batch id
/// counted (`counted`, the batch id's tally, this send's included, minus this send's
/// `accepted`). Never more than the send's reports, nor than its batch id's tally.
fn delivered_users(accepted: u64, duplicates: u64, counted: u64) -> u64 {
    let earlier = counted.saturating_sub(accepted);
    accepted.saturating_add(duplicates.min(earlier))
}

/// A failure after part of the batch was counted: the status says what stays counted.
fn partial(code: Code, message: &str, received: u64, so_far: &ShuffledBatchResponse) -> Status {
    Status::new(
        code,
        format!(
            "{message}; of the first {received} reports, {} were counted and {} were already counted (resending the whole batch is harmless)",
            so_far.accepted, so_far.duplicates
        ),
    )
}

/// Opens, decodes and checks a chunk's reports (`first` is the first one's position in
/// the batch), on every core: the valid ones, and the refused ones with their status,
/// each in the chunk's order.
fn open_chunk(
    collection: &Collection,
    keys: &CollectionKeys,
    chunk: ShuffledBatchChunk,
    first: u64,
    now: u64,
) -> (Vec<ValidReport>, Vec<RefusedReport>) {
    use rayon::prelude::*;
    let opened: Vec<Result<ValidReport, Status>> = chunk
        .reports
        .into_par_iter()
        // One opener per piece of the chunk a thread takes: each key derived once there.
        .map_init(
            || keys.opener(),
            |opener, sealed| open_one(collection, opener, sealed, now),
        )
        .collect();
    let mut valid = Vec::with_capacity(opened.len());
    let mut refused = Vec::new();
    for (offset, result) in opened.into_iter().enumerate() {
        match result {
            Ok(v) => valid.push(v),
            Err(status) => refused.push(RefusedReport {
                index: first + offset as u64,
                code: status.code() as i32,
                message: status.message().to_string(),
            }),
        }
    }
    (valid, refused)
}

/// One sealed report: opened with the collection's keys, its plaintext a `Report` of
/// this collection, validated as a direct report would be.
fn open_one(
    collection: &Collection,
    opener: &mut Opener<'_>,
    sealed: ldpcov_proto::v1::SealedReport,
    now: u64,
) -> Result<ValidReport, Status> {
    let plaintext = opener
        .open_owned(
            ldpcov_seal::SealedReport {
                key_id: sealed.key_id,
                enc: sealed.enc,
                ciphertext: sealed.ciphertext,
            },
            now,
        )
        .map_err(open_status)?;
    let report = Report::decode(plaintext.as_slice())
        .map_err(|e| invalid(format!("the opened report is not a Report message: {e}")))?;
    if report.collection_id != collection.id() {
        return Err(invalid(format!(
            "the opened report names collection {:?}, not the batch's",
            report.collection_id
        )));
    }
    AggregatorService::validate(collection, &report)
}

/// The status of a report that does not open.
fn open_status(e: OpenError) -> Status {
    match e {
        OpenError::Expired { .. } => Status::failed_precondition(e.to_string()),
        _ => invalid(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::delivered_users;

    /// A send's delivered users: its reports counted now, plus its duplicates only up
    /// to what earlier sends of its batch id counted.
    #[test]
    fn duplicates_count_only_up_to_what_earlier_sends_of_the_batch_counted() {
        // A first send: 37 counted, its tally 37.
        assert_eq!(delivered_users(37, 0, 37), 37);
        // Another batch id carrying 10 new reports and 30 counted elsewhere.
        assert_eq!(delivered_users(10, 30, 10), 10);
        // The first batch resent unchanged: all duplicates, the tally unchanged.
        assert_eq!(delivered_users(0, 37, 37), 37);
        // Resent after a first send broken after 16: 24 now, 16 back.
        assert_eq!(delivered_users(24, 16, 40), 40);
        // A repeat within one send is not an earlier send's report.
        assert_eq!(delivered_users(20, 1, 20), 20);
        // A tally that lost reports (a store upgraded mid-batch): fewer, never more.
        assert_eq!(delivered_users(5, 30, 3), 5);
        assert_eq!(delivered_users(u64::MAX, u64::MAX, u64::MAX), u64::MAX);
    }
}
