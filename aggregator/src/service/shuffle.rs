//! Shuffled collections on the aggregator's side (docs/PRIVACY.md §9): the HPKE keys
//! a collection publishes, the refusal of direct reports, and a relay's batch stream
//! (`SubmitShuffledBatch`): every report opened, decoded and checked as if sent alone,
//! bad ones refused individually, the rest counted (a report id once, so a resent
//! batch counts nothing twice).
//!
//! Must not log or keep anything of a batch but counts: no batch order, no report.

use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ldpcov_privacy::Collection;
use ldpcov_proto::v1::{
    CollectionParams, HpkeKeyState, HpkePublicKey, RefusedReport, Report, ShuffleDelivered,
    ShuffledBatchChunk, ShuffledBatchResponse,
};
use ldpcov_seal::{CollectionKeys, KeySchedule, KeyState, OpenError, Opener, PublicKeyConfig};
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

/// Seconds since the Unix epoch (0 before it: the key schedule then refuses).
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

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
        if c.shuffle().is_some() {
            return Err(Status::failed_precondition(format!(
                "collection {} is shuffled: its reports come sealed through its relay, in batches (docs/PRIVACY.md §9)",
                c.id()
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
                let outcome = self
                    .store
                    .submit(id, valid)
                    .await
                    .map_err(store_status)
                    .map_err(|s| partial(s.code(), s.message(), received - n, &response))?;
                telemetry::counted(id, outcome.accepted, outcome.duplicates);
                response.accepted += outcome.accepted;
                response.duplicates += outcome.duplicates;
            }
        }
        let Some(batch) = batch else {
            return Err(invalid("the batch stream carried no chunk"));
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
        // The batch is complete: its valid reports (counted now or before, for a
        // resent batch) are the users it delivered, which sets the guarantee shown.
        let valid = response.accepted + response.duplicates;
        self.store
            .record_delivered_batch(batch.collection.id(), valid)
            .await
            .map_err(store_status)
            .map_err(|s| partial(s.code(), s.message(), received, &response))?;
        if valid < batch.size {
            tracing::warn!(
                collection = %batch.collection.id(), reports = batch.size, valid,
                "a shuffled batch held reports that were refused: the delivered guarantee is at its valid reports"
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
        let keys = self
            .collection_keys(&collection)?
            .ok_or_else(|| Status::internal("a shuffled collection without keys"))?;
        Ok(Batch {
            keys: Arc::new(keys),
            collection,
            batch_id: chunk.batch_id.clone(),
            size: chunk.batch_size,
        })
    }
}

/// A batch being received: its collection, keys and header.
struct Batch {
    collection: Arc<Collection>,
    keys: Arc<CollectionKeys>,
    batch_id: Vec<u8>,
    size: u64,
}

impl Batch {
    /// Every chunk repeats the first one's header.
    fn check_header(&self, chunk: &ShuffledBatchChunk) -> Result<(), Status> {
        if chunk.collection_id != self.collection.id()
            || chunk.batch_id != self.batch_id
            || chunk.batch_size != self.size
        {
            return Err(invalid(
                "a chunk's collection id, batch id or batch size differs from the first chunk's",
            ));
        }
        Ok(())
    }
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

/// A published key as the wire shows it.
fn public_key_message(config: &PublicKeyConfig) -> HpkePublicKey {
    HpkePublicKey {
        key_id: config.key_id,
        kem_id: u32::from(config.kem_id),
        kdf_id: u32::from(config.kdf_id),
        aead_id: u32::from(config.aead_id),
        public_key: config.public_key.to_vec(),
        state: match config.state {
            KeyState::Pending => HpkeKeyState::Pending,
            KeyState::Active => HpkeKeyState::Active,
            KeyState::Retired => HpkeKeyState::Retired,
            KeyState::Expired => HpkeKeyState::Expired,
            KeyState::Unknown => HpkeKeyState::Unspecified,
        } as i32,
        not_before: config.not_before,
        not_after: config.not_after,
        active_until: config.active_until,
    }
}
