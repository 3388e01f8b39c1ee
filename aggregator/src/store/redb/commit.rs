//! The commit thread: group commit of submissions, creations and closes.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, mpsc};
use std::time::{Duration, Instant};

use ldpcov_privacy::Collection;
use ldpcov_privacy::mechanism::ReportEntries;
use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable};

use super::hooks::Event;
use super::tables::{
    ACCUMULATORS, APPENDED, BATCH_COUNTS, CLOSED, COLLECTIONS, DELIVERED, META, RELEASES,
    ReleaseKey, ReleaseValue, SEEN, appended_range, batch_range, begin_durable, fold_appended,
    open_db,
};
use super::{Command, DurableConfig, Entry, LedgerRead, Reply, Shared, reopen_failed};
use crate::store::codec::{
    decode_accumulators, decode_collection, encode_accumulator, encode_report_log, log_is_smaller,
    report_log_len,
};
use crate::store::{
    BatchOutcome, Cause, DeliveredBatches, RecordedRelease, Snapshot, StoreError, ValidReport,
    check_lengths,
};
use ldpcov_estimate::{Accumulator, FOLDS};

/// A collection touched by the open batch: the reports it counts.
struct Pending {
    collection: Arc<Collection>,
    /// The reports this batch counts, each with its fold.
    counted: Vec<(usize, ReportEntries)>,
    created: bool,
}

/// What a batch's transaction wrote for one collection.
enum Written {
    /// No report counted: nothing.
    Nothing,
    /// Its report log, of this many bytes, appended.
    Appended(u64),
    /// Its new accumulator blob (the appended reports folded in, their rows removed).
    Folded(Accumulator),
}

enum Waiting {
    Submit(Reply<BatchOutcome>, BatchOutcome),
    Create(Reply<Arc<Collection>>, Arc<Collection>),
    Close(Reply<()>),
    /// A submission refused because of a close in this batch: answered with `Closed`
    /// once the close is committed (`Unavailable` if the batch fails).
    Refused(Reply<BatchOutcome>, String),
}

struct Batch {
    txn: redb::WriteTransaction,
    pending: HashMap<String, Pending>,
    waiting: Vec<Waiting>,
    /// Collections closed by this batch (in the transaction, not yet in the mirror).
    closing: HashSet<String>,
    reports: usize,
    /// The first storage error: the batch is failed as a whole.
    error: Option<Cause>,
}

/// The owner of the database: runs on its own thread until every sender is dropped.
pub(super) struct Committer {
    pub(super) db: Option<Database>,
    pub(super) path: PathBuf,
    pub(super) shared: Arc<Shared>,
    pub(super) config: DurableConfig,
    pub(super) rx: mpsc::Receiver<Command>,
    pub(super) commits: u64,
    /// When the appended reports are due to be folded ([`DurableConfig::fold_interval`]
    /// after the first append since the last fold); `None` while nothing is appended.
    pub(super) fold_due: Option<Instant>,
}

impl Committer {
    pub(super) fn run(mut self) {
        let mut next: Option<Command> = None;
        while let Some(first) = next.take().or_else(|| self.next_command()) {
            if let Command::ReadCommitted { id, reply } = first {
                let _ = reply.send(self.read_committed(&id));
                continue;
            }
            if let Command::ReadBatch { id, batch, reply } = first {
                let _ = reply.send(self.read_batch(&id, batch));
                continue;
            }
            let first = match first {
                Command::Delete { id, reply } => {
                    let _ = reply.send(self.delete(&id));
                    continue;
                }
                Command::ReadRelease { id, key, reply } => {
                    let _ = reply.send(self.read_release(&id, key.as_deref()));
                    continue;
                }
                Command::Release {
                    id,
                    key,
                    rho,
                    budget,
                    body,
                    reply,
                } => {
                    let _ = reply.send(self.release(&id, &key, rho, budget, body));
                    continue;
                }
                Command::Delivered { id, valid, reply } => {
                    let _ = reply.send(self.delivered(&id, valid));
                    continue;
                }
                other => other,
            };
            let txn = match self.db() {
                Ok(db) => begin_durable(db).map_err(Cause::from),
                Err(e) => Err(e),
            };
            let txn = match txn {
                Ok(txn) => txn,
                Err(e) => {
                    tracing::error!(error = %e, "cannot begin a write transaction");
                    self.set_write_health(false);
                    fail_command(first, StoreError::unavailable(e));
                    continue;
                }
            };
            let mut batch = Batch {
                txn,
                pending: HashMap::new(),
                waiting: Vec::new(),
                closing: HashSet::new(),
                reports: 0,
                error: None,
            };
            self.add(&mut batch, first);
            let deadline = Instant::now() + self.config.batch_delay;
            while batch.reports < self.config.batch_size.max(1) {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                match self.rx.recv_timeout(deadline - now) {
                    // A delete, a release or a batch record never shares a
                    // transaction: commit this batch first.
                    Ok(
                        command @ (Command::Delete { .. }
                        | Command::Release { .. }
                        | Command::ReadRelease { .. }
                        | Command::Delivered { .. }),
                    ) => {
                        next = Some(command);
                        break;
                    }
                    Ok(command) => self.add(&mut batch, command),
                    Err(_) => break,
                }
            }
            self.finish(batch);
            if self.fold_due.is_some_and(|due| due <= Instant::now()) {
                self.fold_all();
            }
        }
        // Stopping: fold what is appended, so that the next start replays nothing.
        if self.shared.hooks.fold_at_stop() {
            self.fold_all();
        }
        tracing::debug!(commits = self.commits, "commit thread done");
    }

    /// The next command; while appended reports wait, folds them when they fall due.
    /// `None` once every sender is gone.
    fn next_command(&mut self) -> Option<Command> {
        loop {
            let Some(due) = self.fold_due else {
                return self.rx.recv().ok();
            };
            let wait = due.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(command) => return Some(command),
                Err(mpsc::RecvTimeoutError::Timeout) => self.fold_all(),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    /// Folds every collection's appended reports into its accumulator blob and removes
    /// them, in one transaction of its own. The mirror already holds these sums (it is
    /// the blob plus the appended reports), so this writes it and changes no sum; after
    /// a failure the reports stay appended and the fold is retried when due again.
    fn fold_all(&mut self) {
        // Open first: a reopen reloads the mirror, whose entries are the ones to write.
        if let Err(e) = self.db() {
            tracing::warn!(error = %e, "cannot fold the appended reports; retried later");
            self.fold_due = Some(Instant::now() + self.retry_delay());
            return;
        }
        let Ok(entries) = self.shared.mirror.read().map(|m| {
            m.iter()
                .filter(|(_, e)| e.unfolded_bytes.load(Ordering::SeqCst) > 0)
                .map(|(id, e)| (id.clone(), e.clone()))
                .collect::<Vec<_>>()
        }) else {
            tracing::error!("mirror lock poisoned; appended reports not folded");
            return;
        };
        if entries.is_empty() {
            self.fold_due = None;
            return;
        }
        let started = Instant::now();
        let written = (|| -> Result<redb::WriteTransaction, Cause> {
            let db = self
                .db
                .as_ref()
                .ok_or_else(|| Cause::Mirror("the database closed while folding".into()))?;
            let txn = begin_durable(db)?;
            {
                let mut accumulators = txn.open_table(ACCUMULATORS)?;
                let mut appended = txn.open_table(APPENDED)?;
                for (id, entry) in &entries {
                    let blob = {
                        let acc = entry
                            .acc
                            .read()
                            .map_err(|_| Cause::Poisoned("accumulator"))?;
                        encode_accumulator(&acc)
                    };
                    accumulators.insert(id.as_str(), blob.as_slice())?;
                    appended.retain_in(appended_range(id), |_, _| false)?;
                }
            }
            Ok(txn)
        })();
        let result = written.and_then(|txn| txn.commit().map_err(Cause::from));
        match result {
            Ok(()) => {
                let mut reports = 0;
                for (id, entry) in &entries {
                    entry.unfolded_bytes.store(0, Ordering::SeqCst);
                    reports += entry.unfolded_reports.swap(0, Ordering::SeqCst);
                    crate::telemetry::unfolded_reports("redb", id, 0);
                }
                self.fold_due = None;
                crate::telemetry::fold("redb", started.elapsed());
                tracing::debug!(
                    collections = entries.len(),
                    reports,
                    fold_ms = started.elapsed().as_secs_f64() * 1e3,
                    "appended reports folded"
                );
            }
            Err(e) => {
                tracing::error!(error = %e, "appended reports not folded; retried later");
                // As after a failed batch: reopen before the next write.
                self.db = None;
                self.fold_due = Some(Instant::now() + self.retry_delay());
            }
        }
    }

    /// How long a failed fold waits before it is tried again.
    fn retry_delay(&self) -> Duration {
        self.config.fold_interval.max(Duration::from_secs(1))
    }

    /// Writes, for every collection of the batch, either its report log (appended) or
    /// its new accumulator blob with its appended rows removed (folded): the log when
    /// it is smaller than the blob and keeps the collection's appended bytes within
    /// [`DurableConfig::fold_bytes`], the blob otherwise. Also the commit counter.
    fn write_batch(
        &self,
        txn: &redb::WriteTransaction,
        pending: &HashMap<String, Pending>,
        commit: u64,
    ) -> Result<HashMap<String, Written>, Cause> {
        let mut written = HashMap::with_capacity(pending.len());
        let mut accumulators = txn.open_table(ACCUMULATORS)?;
        let mut appended = txn.open_table(APPENDED)?;
        for (id, p) in pending {
            let counted: Vec<(usize, &ReportEntries)> =
                p.counted.iter().map(|(f, e)| (*f, e)).collect();
            if counted.is_empty() {
                written.insert(id.clone(), Written::Nothing);
                continue;
            }
            let entry = if p.created {
                None
            } else {
                Some(self.shared.entry(id).map_err(|e| {
                    Cause::Mirror(format!("collection {id:?} of the open batch: {e}"))
                })?)
            };
            let unfolded = entry
                .as_ref()
                .map_or(0, |e| e.unfolded_bytes.load(Ordering::SeqCst));
            let entries = p.collection.entries();
            let log_len = report_log_len(&counted) as u64;
            if log_is_smaller(entries, &counted)
                && unfolded.saturating_add(log_len) <= self.config.fold_bytes
            {
                // The next sequence number of the collection's appended rows.
                let seq = appended
                    .range(appended_range(id))?
                    .next_back()
                    .transpose()?
                    .map_or(0, |(key, _)| key.value().1 + 1);
                let log = encode_report_log(entries, &counted);
                appended.insert((id.as_str(), seq), log.as_slice())?;
                written.insert(id.clone(), Written::Appended(log_len));
            } else {
                let started = Instant::now();
                let mut acc = match &entry {
                    Some(e) => e
                        .acc
                        .read()
                        .map_err(|_| Cause::Poisoned("accumulator"))?
                        .clone(),
                    None => Accumulator::new(entries, FOLDS),
                };
                acc.add_reports(&counted);
                accumulators.insert(id.as_str(), encode_accumulator(&acc).as_slice())?;
                if unfolded > 0 {
                    appended.retain_in(appended_range(id), |_, _| false)?;
                    crate::telemetry::fold("redb", started.elapsed());
                }
                written.insert(id.clone(), Written::Folded(acc));
            }
        }
        txn.open_table(META)?.insert("commits", commit)?;
        Ok(written)
    }

    /// The database, reopened (and the mirror reloaded) if a failed commit closed it.
    fn db(&mut self) -> Result<&Database, Cause> {
        let db = match self.db.take() {
            Some(db) => db,
            None => {
                let (db, mirror) = open_db(&self.path, &self.config, &self.shared, false)
                    .map_err(reopen_failed)?;
                let mut map = self
                    .shared
                    .mirror
                    .write()
                    .map_err(|_| Cause::Poisoned("mirror"))?;
                *map = mirror;
                self.fold_due = unfolded_fold_due(&map, &self.config);
                tracing::warn!(path = %self.path.display(), "database reopened, state reloaded from disk");
                db
            }
        };
        Ok(self.db.insert(db))
    }

    fn read_committed(&mut self, id: &str) -> Result<Snapshot, StoreError> {
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let collections = txn.open_table(COLLECTIONS).map_err(StoreError::internal)?;
        let spec = collections
            .get(id)
            .map_err(StoreError::internal)?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let collection = decode_collection(id, spec.value()).map_err(StoreError::internal)?;
        let accumulators = txn.open_table(ACCUMULATORS).map_err(StoreError::internal)?;
        let blob = accumulators.get(id).map_err(StoreError::internal)?;
        let mut acc = decode_accumulators(id, &collection, blob.as_ref().map(|b| b.value()))
            .map_err(StoreError::internal)?;
        // The committed batches not yet folded: the sums are the blob's plus theirs.
        let appended = txn.open_table(APPENDED).map_err(StoreError::internal)?;
        fold_appended(&appended, id, &mut acc)
            .map_err(|e| StoreError::internal(Cause::backend("appended reports", e)))?;
        Ok(Snapshot {
            collection: Arc::new(collection),
            acc,
        })
    }

    fn add(&mut self, batch: &mut Batch, command: Command) {
        if !matches!(
            command,
            Command::ReadCommitted { .. } | Command::ReadBatch { .. }
        ) {
            self.shared.hooks.record(Event::Added);
        }
        match command {
            Command::ReadCommitted { id, reply } => {
                let _ = reply.send(self.read_committed(&id));
            }
            // Committed state: a chunk in the open batch is not answered yet, so its
            // caller cannot be asking.
            Command::ReadBatch { id, batch, reply } => {
                let _ = reply.send(self.read_batch(&id, batch));
            }
            Command::Create { collection, reply } => self.add_create(batch, *collection, reply),
            Command::Submit {
                id,
                batch: shuffled,
                reports,
                reply,
            } => self.add_submit(batch, id, shuffled, reports, reply),
            Command::Close { id, reply } => self.add_close(batch, id, reply),
            // `run` never adds a delete to a batch; should one get here, it still runs
            // alone, after the open batch (the batch's transaction is not touched).
            Command::Delete { id, reply } => {
                let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                    "delete of {id:?} reached an open batch"
                )))));
            }
            Command::Release { id, reply, .. } => {
                let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                    "release of {id:?} reached an open batch"
                )))));
            }
            Command::ReadRelease { id, reply, .. } => {
                let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                    "release read of {id:?} reached an open batch"
                )))));
            }
            Command::Delivered { id, reply, .. } => {
                let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                    "batch record of {id:?} reached an open batch"
                )))));
            }
        }
    }

    fn add_close(&self, batch: &mut Batch, id: String, reply: Reply<()>) {
        if batch.closing.contains(&id) {
            // Closed earlier in this very batch: answer after the commit.
            batch.waiting.push(Waiting::Close(reply));
            return;
        }
        if !batch.pending.get(&id).is_some_and(|p| p.created) {
            match self.shared.entry(&id) {
                Ok(e) if e.closed.load(Ordering::SeqCst) => {
                    let _ = reply.send(Ok(()));
                    return;
                }
                Ok(_) => {}
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            }
        }
        if batch.error.is_none() {
            let inserted = (|| -> Result<(), Cause> {
                batch.txn.open_table(CLOSED)?.insert(id.as_str(), ())?;
                Ok(())
            })();
            if let Err(e) = inserted {
                batch.error = Some(e);
            }
        }
        batch.closing.insert(id);
        batch.waiting.push(Waiting::Close(reply));
    }

    fn add_create(&self, batch: &mut Batch, collection: Collection, reply: Reply<Arc<Collection>>) {
        let existing = match batch.pending.get(collection.id()) {
            Some(p) => Some((p.collection.clone(), p.created)),
            None => match self.shared.entry(collection.id()) {
                Ok(e) => Some((e.collection.clone(), false)),
                Err(StoreError::NotFound(_)) => None,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            },
        };
        match existing {
            Some((c, _)) if *c != collection => {
                let _ = reply.send(Err(StoreError::AlreadyExists(collection.id().to_string())));
            }
            // Created in this very batch: answer after the commit.
            Some((c, true)) => batch.waiting.push(Waiting::Create(reply, c)),
            Some((c, false)) => {
                let _ = reply.send(Ok(c));
            }
            None => {
                if batch.error.is_none() {
                    let spec = collection.spec().encode_to_vec();
                    let inserted = (|| -> Result<(), Cause> {
                        batch
                            .txn
                            .open_table(COLLECTIONS)?
                            .insert(collection.id(), spec.as_slice())?;
                        Ok(())
                    })();
                    if let Err(e) = inserted {
                        batch.error = Some(e);
                    }
                }
                let collection = Arc::new(collection);
                batch.pending.insert(
                    collection.id().to_string(),
                    Pending {
                        collection: collection.clone(),
                        counted: Vec::new(),
                        created: true,
                    },
                );
                batch.waiting.push(Waiting::Create(reply, collection));
            }
        }
    }

    fn add_submit(
        &self,
        batch: &mut Batch,
        id: String,
        shuffled: Option<[u8; 16]>,
        reports: Vec<ValidReport>,
        reply: Reply<BatchOutcome>,
    ) {
        if batch.closing.contains(&id) {
            batch.waiting.push(Waiting::Refused(reply, id));
            return;
        }
        if !batch.pending.contains_key(&id) {
            let entry = match self.shared.entry(&id) {
                Ok(e) => e,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            };
            if entry.closed.load(Ordering::SeqCst) {
                let _ = reply.send(Err(StoreError::Closed(id)));
                return;
            }
            batch.pending.insert(
                id.clone(),
                Pending {
                    collection: entry.collection.clone(),
                    counted: Vec::new(),
                    created: false,
                },
            );
        }
        let Some(pending) = batch.pending.get_mut(&id) else {
            let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                "collection {id:?} missing from the open batch"
            )))));
            return;
        };
        if let Err(e) = check_lengths(&pending.collection, &reports) {
            let _ = reply.send(Err(e));
            return;
        }
        let mut outcome = BatchOutcome::default();
        batch.reports += reports.len();
        // Counted reports join `pending.counted`; should the batch fail half-way (a
        // storage error), the whole batch is failed and nothing of it is applied.
        if batch.error.is_none() {
            let counted = (|| -> Result<(), Cause> {
                let mut seen = batch.txn.open_table(SEEN)?;
                for report in reports {
                    if seen
                        .insert((id.as_str(), report.report_id.0), ())?
                        .is_some()
                    {
                        outcome.duplicates += 1;
                    } else {
                        pending
                            .counted
                            .push((report.report_id.fold(FOLDS), report.entries));
                        outcome.accepted += 1;
                    }
                }
                // A shuffled chunk: the reports it counted join its batch's tally in
                // this transaction (the table also sees the open batch's earlier
                // chunks of the same batch).
                if let Some(shuffled) = shuffled
                    && outcome.accepted > 0
                {
                    let mut tallies = batch.txn.open_table(BATCH_COUNTS)?;
                    let key = (id.as_str(), shuffled);
                    let before = tallies.get(key)?.map_or(0, |v| v.value());
                    tallies.insert(key, before.saturating_add(outcome.accepted))?;
                }
                Ok(())
            })();
            if let Err(e) = counted {
                batch.error = Some(e);
            }
        }
        batch.waiting.push(Waiting::Submit(reply, outcome));
    }

    fn finish(&mut self, batch: Batch) {
        let Batch {
            txn,
            pending,
            waiting,
            closing,
            reports,
            error,
        } = batch;
        if waiting.is_empty() {
            // Nothing to commit (e.g. only refused commands).
            if let Err(e) = txn.abort() {
                tracing::warn!(error = %e, "aborting an empty transaction failed");
            }
            return;
        }
        let started = Instant::now();
        let prepared = match error {
            Some(e) => Err(e),
            None => self.write_batch(&txn, &pending, self.commits + 1),
        };
        let injected = self.shared.hooks.injected_failure();
        // The flag says whether the database must be reopened: after any real storage
        // error (redb may refuse further writes), not after an injected failure.
        // A transaction that is not committed is aborted when dropped.
        let result = match (prepared, injected) {
            (Err(e), _) => Err((e, true)),
            (Ok(_), Some(e)) => Err((e, false)),
            // Durability::Immediate (begin_durable): the data is fsynced once this returns.
            (Ok(written), None) => {
                self.shared.hooks.before_commit();
                txn.commit()
                    .map(|()| written)
                    .map_err(|e| (Cause::from(e), true))
            }
        };
        crate::telemetry::commit("redb", reports, started.elapsed(), result.is_ok());
        match result {
            Ok(written) => {
                self.shared.hooks.record(Event::Committed);
                self.commits += 1;
                self.set_write_health(true);
                if let Err(e) = self.apply(pending, written, closing) {
                    tracing::error!(error = %e, "cannot update the mirror; reloading from disk");
                    self.db = None;
                }
                tracing::debug!(
                    reports,
                    commands = waiting.len(),
                    commit = self.commits,
                    commit_ms = started.elapsed().as_secs_f64() * 1e3,
                    "batch committed"
                );
                // Only now, after the commit, are the callers answered.
                for w in waiting {
                    self.shared.hooks.record(Event::Answered);
                    match w {
                        Waiting::Submit(reply, outcome) => {
                            let _ = reply.send(Ok(outcome));
                        }
                        Waiting::Create(reply, c) => {
                            let _ = reply.send(Ok(c));
                        }
                        Waiting::Close(reply) => {
                            let _ = reply.send(Ok(()));
                        }
                        Waiting::Refused(reply, id) => {
                            let _ = reply.send(Err(StoreError::Closed(id)));
                        }
                    }
                }
            }
            Err((e, reopen)) => {
                tracing::error!(error = %e, reports, "batch not committed; its callers are told to retry");
                self.set_write_health(false);
                if reopen {
                    // After a failed commit redb cannot tell whether the batch became
                    // durable and refuses further writes: reopen, reload the mirror.
                    self.db = None;
                }
                let error = StoreError::unavailable(Cause::NotCommitted(Box::new(e)));
                for w in waiting {
                    match w {
                        Waiting::Submit(reply, _) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                        Waiting::Create(reply, _) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                        Waiting::Close(reply) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                        Waiting::Refused(reply, _) => {
                            let _ = reply.send(Err(error.clone()));
                        }
                    }
                }
            }
        }
    }

    /// Records whether the last write transaction committed (see
    /// `Store::write_health`); watchers are woken only on a change.
    fn set_write_health(&self, healthy: bool) {
        self.shared.write_healthy.send_if_modified(|h| {
            let changed = *h != healthy;
            *h = healthy;
            changed
        });
    }

    /// The reports counted under shuffled batch `shuffled` of `id` (0 for a batch never
    /// seen), from a read transaction of committed state.
    fn read_batch(&mut self, id: &str, shuffled: [u8; 16]) -> Result<u64, StoreError> {
        self.shared.entry(id)?;
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(BATCH_COUNTS).map_err(StoreError::internal)?;
        Ok(table
            .get((id, shuffled))
            .map_err(StoreError::internal)?
            .map_or(0, |v| v.value()))
    }

    /// The ρ spent by `id`'s releases and the release under `key`, from a read
    /// transaction of committed state.
    fn read_release(&mut self, id: &str, key: Option<&[u8]>) -> Result<LedgerRead, StoreError> {
        let db = self.db().map_err(StoreError::unavailable)?;
        let txn = db.begin_read().map_err(StoreError::internal)?;
        let table = txn.open_table(RELEASES).map_err(StoreError::internal)?;
        read_ledger(&table, id, key).map_err(StoreError::internal)
    }

    /// Records a release in a transaction of its own (see `Store::record_release`):
    /// one write transaction reads the spent ρ and the key, then inserts, so nothing
    /// can overspend between the check and the write (this thread is the only writer).
    fn release(
        &mut self,
        id: &str,
        key: &[u8],
        rho: f64,
        budget: f64,
        body: Vec<u8>,
    ) -> Result<RecordedRelease, StoreError> {
        self.shared.entry(id)?;
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.set_write_health(false);
                return Err(StoreError::unavailable(e));
            }
        };
        let txn = begin_durable(db).map_err(|e| StoreError::unavailable(Cause::from(e)))?;
        let (spent, found) = {
            let table = txn.open_table(RELEASES).map_err(StoreError::internal)?;
            read_ledger(&table, id, Some(key)).map_err(StoreError::internal)?
        };
        if let Some((old_rho, old_body)) = found {
            let _ = txn.abort();
            return Ok(RecordedRelease {
                body: old_body,
                rho: old_rho,
                spent,
                fresh: false,
            });
        }
        if spent + rho > budget {
            let _ = txn.abort();
            return Err(StoreError::BudgetExhausted {
                id: id.to_string(),
                spent,
                requested: rho,
                budget,
            });
        }
        let written = (|| -> Result<(), Cause> {
            txn.open_table(RELEASES)?
                .insert((id, key), (rho, body.as_slice()))?;
            Ok(())
        })();
        let result = match written {
            Err(e) => Err(e),
            Ok(()) => txn.commit().map_err(Cause::from),
        };
        match result {
            Ok(()) => {
                self.set_write_health(true);
                Ok(RecordedRelease {
                    body,
                    rho,
                    spent: spent + rho,
                    fresh: true,
                })
            }
            Err(e) => {
                tracing::error!(error = %e, collection = %id, "release not recorded");
                self.set_write_health(false);
                // As after a failed batch: reopen before the next write.
                self.db = None;
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }

    /// Records a completed shuffled batch of `valid` valid reports of `id` (`Some`)
    /// in a transaction of its own, or reads the record from committed state (`None`).
    fn delivered(&mut self, id: &str, valid: Option<u64>) -> Result<DeliveredBatches, StoreError> {
        self.shared.entry(id)?;
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.set_write_health(false);
                return Err(StoreError::unavailable(e));
            }
        };
        let Some(valid) = valid else {
            let txn = db.begin_read().map_err(StoreError::internal)?;
            let table = txn.open_table(DELIVERED).map_err(StoreError::internal)?;
            return read_delivered(&table, id).map_err(StoreError::internal);
        };
        let written = (|| -> Result<(redb::WriteTransaction, DeliveredBatches), Cause> {
            let txn = begin_durable(db)?;
            let record = {
                let mut table = txn.open_table(DELIVERED)?;
                let record = read_delivered(&table, id)?.with_batch(valid);
                table.insert(id, (record.batches, record.smallest.unwrap_or(valid)))?;
                record
            };
            Ok((txn, record))
        })();
        let result = written.and_then(|(txn, record)| {
            txn.commit().map_err(Cause::from)?;
            Ok(record)
        });
        match result {
            Ok(record) => {
                self.set_write_health(true);
                Ok(record)
            }
            Err(e) => {
                tracing::error!(error = %e, collection = %id, "shuffled batch not recorded");
                self.set_write_health(false);
                // As after a failed batch: reopen before the next write.
                self.db = None;
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }

    /// Deletes collection `id` in a transaction of its own and, once that is
    /// committed, from the mirror. Returns the reports it had counted.
    fn delete(&mut self, id: &str) -> Result<u64, StoreError> {
        let count = {
            let entry = self.shared.entry(id)?;
            let acc = entry
                .acc
                .read()
                .map_err(|_| StoreError::internal(Cause::Poisoned("accumulator")))?;
            acc.count
        };
        let commit = self.commits + 1;
        let db = match self.db() {
            Ok(db) => db,
            Err(e) => {
                self.set_write_health(false);
                return Err(StoreError::unavailable(e));
            }
        };
        let written = (|| -> Result<redb::WriteTransaction, Cause> {
            let txn = begin_durable(db)?;
            {
                txn.open_table(COLLECTIONS)?.remove(id)?;
                txn.open_table(ACCUMULATORS)?.remove(id)?;
                txn.open_table(APPENDED)?
                    .retain_in(appended_range(id), |_, _| false)?;
                txn.open_table(CLOSED)?.remove(id)?;
                txn.open_table(DELIVERED)?.remove(id)?;
                txn.open_table(BATCH_COUNTS)?
                    .retain_in(batch_range(id), |_, _| false)?;
                // Every release of this collection: keys (id, *) sort together.
                txn.open_table(RELEASES)?.retain_in::<(&str, &[u8]), _>(
                    (id, &[][..])..(next_id(id).as_str(), &[][..]),
                    |_, _| false,
                )?;
                // Every report id of this collection: keys (id, *) sort together.
                txn.open_table(SEEN)?
                    .retain_in((id, [0u8; 16])..=(id, [0xffu8; 16]), |_, _| false)?;
                txn.open_table(META)?.insert("commits", commit)?;
            }
            Ok(txn)
        })();
        let injected = self.shared.hooks.injected_failure();
        let result = match (written, injected) {
            (Err(e), _) => Err((e, true)),
            (Ok(_), Some(e)) => Err((e, false)),
            (Ok(txn), None) => txn.commit().map_err(|e| (Cause::from(e), true)),
        };
        match result {
            Ok(()) => {
                self.shared.hooks.record(Event::Committed);
                self.commits = commit;
                self.set_write_health(true);
                match self.shared.mirror.write() {
                    Ok(mut map) => {
                        map.remove(id);
                    }
                    Err(_) => {
                        tracing::error!("mirror lock poisoned after a delete; reloading from disk");
                        self.db = None;
                    }
                }
                tracing::info!(collection = %id, reports = count, "collection deleted");
                Ok(count)
            }
            Err((e, reopen)) => {
                tracing::error!(error = %e, collection = %id, "delete not committed; nothing was deleted");
                self.set_write_health(false);
                if reopen {
                    self.db = None;
                }
                Err(StoreError::unavailable(Cause::NotCommitted(Box::new(e))))
            }
        }
    }

    /// Writes what a batch committed into the mirror: appended reports added to the
    /// mirror's sums, folded accumulators in place of them, and the closed flags.
    fn apply(
        &mut self,
        pending: HashMap<String, Pending>,
        mut written: HashMap<String, Written>,
        closing: HashSet<String>,
    ) -> Result<(), Cause> {
        let mut map = self
            .shared
            .mirror
            .write()
            .map_err(|_| Cause::Poisoned("mirror"))?;
        for (id, p) in pending {
            let entry = match map.get(&id) {
                Some(entry) if !p.created => entry.clone(),
                _ => {
                    let entry = Arc::new(Entry {
                        acc: RwLock::new(Accumulator::new(p.collection.entries(), FOLDS)),
                        collection: p.collection,
                        closed: AtomicBool::new(false),
                        unfolded_bytes: AtomicU64::new(0),
                        unfolded_reports: AtomicU64::new(0),
                    });
                    map.insert(id.clone(), entry.clone());
                    entry
                }
            };
            let mut acc = entry
                .acc
                .write()
                .map_err(|_| Cause::Poisoned("accumulator"))?;
            match written.remove(&id) {
                None | Some(Written::Nothing) => {}
                Some(Written::Appended(bytes)) => {
                    let counted: Vec<(usize, &ReportEntries)> =
                        p.counted.iter().map(|(f, e)| (*f, e)).collect();
                    acc.add_reports(&counted);
                    entry.unfolded_bytes.fetch_add(bytes, Ordering::SeqCst);
                    let reports = entry
                        .unfolded_reports
                        .fetch_add(counted.len() as u64, Ordering::SeqCst)
                        + counted.len() as u64;
                    crate::telemetry::unfolded_reports("redb", &id, reports);
                    if self.fold_due.is_none() && !self.config.fold_interval.is_zero() {
                        self.fold_due = Some(Instant::now() + self.config.fold_interval);
                    }
                }
                Some(Written::Folded(folded)) => {
                    *acc = folded;
                    entry.unfolded_bytes.store(0, Ordering::SeqCst);
                    entry.unfolded_reports.store(0, Ordering::SeqCst);
                    crate::telemetry::unfolded_reports("redb", &id, 0);
                }
            }
        }
        for id in closing {
            match map.get(&id) {
                Some(entry) => entry.closed.store(true, Ordering::SeqCst),
                None => {
                    return Err(Cause::Mirror(format!(
                        "closed collection {id:?} is not in the mirror"
                    )));
                }
            }
        }
        Ok(())
    }
}

/// When reports found appended in a freshly loaded mirror fall due to be folded: one
/// [`DurableConfig::fold_interval`] from now, or never (`None`) if none is appended.
pub(super) fn unfolded_fold_due(mirror: &super::Mirror, config: &DurableConfig) -> Option<Instant> {
    mirror
        .values()
        .any(|e| e.unfolded_bytes.load(Ordering::SeqCst) > 0)
        .then(|| Instant::now() + config.fold_interval)
}

fn fail_command(command: Command, e: StoreError) {
    match command {
        Command::Submit { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Create { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::ReadCommitted { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Close { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Delete { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Release { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::ReadRelease { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::Delivered { reply, .. } => {
            let _ = reply.send(Err(e));
        }
        Command::ReadBatch { reply, .. } => {
            let _ = reply.send(Err(e));
        }
    }
}

/// `id`'s record of completed shuffled batches (the default when none was recorded).
fn read_delivered(
    table: &impl redb::ReadableTable<&'static str, (u64, u64)>,
    id: &str,
) -> Result<DeliveredBatches, Cause> {
    Ok(match table.get(id)? {
        Some(row) => {
            let (batches, smallest) = row.value();
            DeliveredBatches {
                batches,
                smallest: Some(smallest),
            }
        }
        None => DeliveredBatches::default(),
    })
}

/// The smallest string above every string that starts with `id` followed by anything
/// in key order (`id` plus U+10FFFF would do only for ASCII-free tails; a NUL-terminated
/// upper bound is exact for tuple keys, which compare `id` first): used as the end of
/// the range of `id`'s ledger rows.
fn next_id(id: &str) -> String {
    let mut next = id.to_string();
    next.push('\0');
    next
}

/// The ρ spent by `id`'s releases and the release under `key`.
fn read_ledger(
    table: &impl redb::ReadableTable<ReleaseKey, ReleaseValue>,
    id: &str,
    key: Option<&[u8]>,
) -> Result<LedgerRead, Cause> {
    let mut spent = 0.0;
    let mut found = None;
    for row in table.range::<(&str, &[u8])>((id, &[][..])..(next_id(id).as_str(), &[][..]))? {
        let (k, v) = row?;
        let (_, row_key) = k.value();
        let (rho, body) = v.value();
        spent += rho;
        if key == Some(row_key) {
            found = Some((rho, body.to_vec()));
        }
    }
    Ok((spent, found))
}
