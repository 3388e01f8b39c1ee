//! The commit thread's batches: [`Committer`], the store's apply on `ldpcov-durable`'s
//! writer thread (group commit of submissions, creations and closes), the fold of
//! appended reports, and the mirror written after each commit.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ldpcov_durable::{AfterPanic, Apply, Group, GroupStats, Panicked, Route, begin_durable};
use ldpcov_privacy::Collection;
use ldpcov_privacy::mechanism::ReportEntries;
use prost::Message;
use redb::{Database, ReadableTable};

use super::command::{Command, Reply};
use super::hooks::Event;
use super::tables::{
    ACCUMULATORS, APPENDED, BATCH_COUNTS, CLOSED, COLLECTIONS, META, SEEN, dequeue, open_db,
    record_verdicts, seq_range,
};
use super::{DurableConfig, Entry, Shared, reopen_failed};
use crate::store::Along;
use crate::store::codec::{encode_accumulator, encode_report_log, log_is_smaller, report_log_len};
use crate::store::{BatchOutcome, Cause, StoreError, ValidReport, check_lengths};
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

/// A caller of the open batch, answered once it is committed.
pub(super) enum Waiting {
    Submit(Reply<BatchOutcome>, BatchOutcome),
    Create(Reply<Arc<Collection>>, Arc<Collection>),
    Close(Reply<()>),
    /// A submission refused because of a close in this batch: answered with `Closed`
    /// once the close is committed (`Unavailable` if the batch fails).
    Refused(Reply<BatchOutcome>, String),
    /// A queued upload: `true` if it was queued, `false` if its report id was already.
    Queued(Reply<bool>, bool),
    /// An upload refused because of a close in this batch (as `Refused`).
    QueueRefused(Reply<bool>, String),
}

impl Waiting {
    /// Answers the caller of a committed batch.
    fn committed(self) {
        match self {
            Waiting::Submit(reply, outcome) => drop(reply.send(Ok(outcome))),
            Waiting::Create(reply, c) => drop(reply.send(Ok(c))),
            Waiting::Close(reply) => drop(reply.send(Ok(()))),
            Waiting::Refused(reply, id) => drop(reply.send(Err(StoreError::Closed(id)))),
            Waiting::Queued(reply, fresh) => drop(reply.send(Ok(fresh))),
            Waiting::QueueRefused(reply, id) => drop(reply.send(Err(StoreError::Closed(id)))),
        }
    }

    /// Answers the caller of a failed batch.
    fn failed(self, error: StoreError) {
        match self {
            Waiting::Submit(reply, _) | Waiting::Refused(reply, _) => drop(reply.send(Err(error))),
            Waiting::Create(reply, _) => drop(reply.send(Err(error))),
            Waiting::Close(reply) => drop(reply.send(Err(error))),
            Waiting::Queued(reply, _) | Waiting::QueueRefused(reply, _) => {
                drop(reply.send(Err(error)));
            }
        }
    }
}

/// What the open batch gathers besides its transaction.
#[derive(Default)]
pub(super) struct Batch {
    pending: HashMap<String, Pending>,
    /// Collections closed by this batch (in the transaction, not yet in the mirror).
    pub(super) closing: HashSet<String>,
    /// What its transaction wrote per collection (`Committer::write_batch`).
    written: HashMap<String, Written>,
}

impl Batch {
    /// Whether collection `id` is created by this batch (not yet in the mirror).
    pub(super) fn created(&self, id: &str) -> bool {
        self.pending.get(id).is_some_and(|p| p.created)
    }
}

/// Why a batch failed on the commit thread.
pub(super) enum Failure {
    /// Its writes or its commit failed: the database is reopened before the next
    /// write, unless `reopen` is false (an injected failure, which leaves redb able to
    /// write).
    Batch { cause: Cause, reopen: bool },
    /// What the batch's callers are answered with.
    Answer(StoreError),
}

impl Failure {
    /// The error a caller is answered with.
    fn answer(&self) -> StoreError {
        match self {
            Failure::Answer(e) => e.clone(),
            Failure::Batch { cause, .. } => {
                StoreError::unavailable(Cause::Mirror(cause.to_string()))
            }
        }
    }
}

impl From<Cause> for Failure {
    fn from(cause: Cause) -> Self {
        Failure::Batch {
            cause,
            reopen: true,
        }
    }
}

/// redb's errors as batch failures (through their [`Cause`]).
macro_rules! redb_failures {
    ($($error:ty),* $(,)?) => {$(
        impl From<$error> for Failure {
            fn from(e: $error) -> Self {
                Failure::from(Cause::from(e))
            }
        }
    )*};
}

redb_failures!(
    redb::Error,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

/// The owner of the database, applying the store's commands on the writer thread
/// until every sender is dropped.
pub(super) struct Committer {
    pub(super) db: Option<Database>,
    pub(super) path: PathBuf,
    pub(super) shared: Arc<Shared>,
    pub(super) config: DurableConfig,
    pub(super) commits: u64,
    /// When the appended reports are due to be folded ([`DurableConfig::fold_interval`]
    /// after the first append since the last fold); `None` while nothing is appended.
    pub(super) fold_due: Option<Instant>,
}

impl Apply for Committer {
    type Command = Command;
    type State = Batch;
    type Answer = Waiting;
    type Error = Failure;

    fn route(&self, command: &Command) -> Route {
        match command {
            Command::Submit { .. }
            | Command::Create { .. }
            | Command::Close { .. }
            | Command::Queue { .. } => Route::Group,
            // Committed state: a chunk (or an upload) in the open batch is not answered
            // yet, so its caller cannot be asking.
            Command::ReadCommitted { .. }
            | Command::ReadBatch { .. }
            | Command::ReadQueue { .. }
            | Command::QueuedCount { .. }
            | Command::ReadVerdicts { .. } => Route::Now,
            // A delete, a release or a batch record never shares a transaction: the
            // open batch is committed first.
            Command::Delete { .. }
            | Command::Release { .. }
            | Command::ReadRelease { .. }
            | Command::Delivered { .. } => Route::Alone,
        }
    }

    fn run(&mut self, command: Command) {
        self.run_alone(command);
    }

    fn database(&mut self) -> Result<&Database, Failure> {
        self.db().map_err(Failure::from)
    }

    fn cannot_begin(&mut self, command: Command, error: Failure) {
        let error = match error {
            Failure::Batch { cause, .. } => {
                tracing::error!(error = %cause, "cannot begin a write transaction");
                StoreError::unavailable(cause)
            }
            Failure::Answer(e) => e,
        };
        self.set_write_health(false);
        command.fail(error);
    }

    fn add(&mut self, group: &mut Group<'_, Self>, command: Command) {
        self.shared.hooks.record(Event::Added);
        match command {
            Command::Create { collection, reply } => self.add_create(group, *collection, reply),
            Command::Submit {
                id,
                along,
                reports,
                reply,
            } => self.add_submit(group, id, along, reports, reply),
            Command::Close { id, reply } => self.add_close(group, id, reply),
            Command::Queue { id, upload, reply } => self.add_queue(group, id, upload, reply),
            // `route` never adds another command to a batch; should one get here, it
            // runs alone (the batch's transaction is not touched).
            other => self.run_alone(other),
        }
    }

    fn prepare(&mut self, txn: &redb::WriteTransaction, batch: &mut Batch) -> Result<(), Failure> {
        batch.written = self.write_batch(txn, &batch.pending, self.commits + 1)?;
        if let Some(cause) = self.shared.hooks.injected_failure() {
            // Not a storage error: redb can still write, no reopen.
            return Err(Failure::Batch {
                cause,
                reopen: false,
            });
        }
        // Durability::Immediate (begin_durable): the data is fsynced once the commit
        // returns.
        self.shared.hooks.before_commit();
        Ok(())
    }

    fn committed(&mut self, batch: Batch, stats: &GroupStats) {
        crate::telemetry::commit("redb", stats.weight, stats.committing.elapsed(), true);
        self.shared.hooks.record(Event::Committed);
        self.commits += 1;
        self.set_write_health(true);
        if let Err(e) = self.apply(batch.pending, batch.written, batch.closing) {
            tracing::error!(error = %e, "cannot update the mirror; reloading from disk");
            self.db = None;
        }
        tracing::debug!(
            reports = stats.weight,
            commands = stats.answers,
            commit = self.commits,
            commit_ms = stats.committing.elapsed().as_secs_f64() * 1e3,
            "batch committed"
        );
    }

    fn not_committed(&mut self, error: Failure, stats: &GroupStats) -> Failure {
        crate::telemetry::commit("redb", stats.weight, stats.committing.elapsed(), false);
        let Failure::Batch { cause, reopen } = error else {
            return error;
        };
        tracing::error!(error = %cause, reports = stats.weight, "batch not committed; its callers are told to retry");
        self.set_write_health(false);
        if reopen {
            // After a failed commit redb cannot tell whether the batch became
            // durable and refuses further writes: reopen, reload the mirror.
            self.db = None;
        }
        Failure::Answer(StoreError::unavailable(Cause::NotCommitted(Box::new(
            cause,
        ))))
    }

    fn answer(&mut self, waiting: Waiting, result: Result<(), &Failure>) {
        match result {
            Ok(()) => {
                self.shared.hooks.record(Event::Answered);
                waiting.committed();
            }
            Err(failure) => waiting.failed(failure.answer()),
        }
    }

    /// A panic on the commit thread (inside redb, which panics on some damaged files,
    /// or ours): the store stops taking writes for good, says so through its write
    /// health and `failed`, and the daemon exits (see `DurableStore::failed`).
    fn panicked(&mut self, panic: Panicked) -> AfterPanic<Failure> {
        let reason = format!(
            "the commit thread panicked while writing {} ({}): the database file may be corrupt; stop the daemon and restore the file from a backup",
            self.path.display(),
            panic.message_or("a panic without a message"),
        );
        tracing::error!("{reason}");
        self.shared.write_healthy.send_replace(false);
        self.shared.failure.send_replace(Some(reason.clone()));
        AfterPanic::Stop(Failure::Answer(StoreError::unavailable(
            Cause::StoppedForGood(reason),
        )))
    }

    fn next_due(&self) -> Option<Instant> {
        self.fold_due
    }

    fn due(&mut self) {
        self.fold_all();
    }

    fn stopping(&mut self) {
        // Fold what is appended, so that the next start replays nothing.
        if self.shared.hooks.fold_at_stop() {
            self.fold_all();
        }
        tracing::debug!(commits = self.commits, "commit thread done");
    }
}

impl Committer {
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
                    appended.retain_in(seq_range(id), |_, _| false)?;
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
                    .range(seq_range(id))?
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
                    appended.retain_in(seq_range(id), |_, _| false)?;
                    crate::telemetry::fold("redb", started.elapsed());
                }
                written.insert(id.clone(), Written::Folded(acc));
            }
        }
        txn.open_table(META)?.insert("commits", commit)?;
        Ok(written)
    }

    /// The database, reopened (and the mirror reloaded) if a failed commit closed it.
    pub(super) fn db(&mut self) -> Result<&Database, Cause> {
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

    fn add_close(&self, group: &mut Group<'_, Self>, id: String, reply: Reply<()>) {
        if group.state().closing.contains(&id) {
            // Closed earlier in this very batch: answer after the commit.
            group.wait(Waiting::Close(reply));
            return;
        }
        if !group.state().created(&id) {
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
        group.write(|txn, _| {
            txn.open_table(CLOSED)?.insert(id.as_str(), ())?;
            Ok(())
        });
        group.state().closing.insert(id);
        group.wait(Waiting::Close(reply));
    }

    fn add_create(
        &self,
        group: &mut Group<'_, Self>,
        collection: Collection,
        reply: Reply<Arc<Collection>>,
    ) {
        let existing = match group.state().pending.get(collection.id()) {
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
            Some((c, true)) => group.wait(Waiting::Create(reply, c)),
            Some((c, false)) => {
                let _ = reply.send(Ok(c));
            }
            None => {
                group.write(|txn, _| {
                    let spec = collection.spec().encode_to_vec();
                    txn.open_table(COLLECTIONS)?
                        .insert(collection.id(), spec.as_slice())?;
                    Ok(())
                });
                let collection = Arc::new(collection);
                group.state().pending.insert(
                    collection.id().to_string(),
                    Pending {
                        collection: collection.clone(),
                        counted: Vec::new(),
                        created: true,
                    },
                );
                group.wait(Waiting::Create(reply, collection));
            }
        }
    }

    fn add_submit(
        &self,
        group: &mut Group<'_, Self>,
        id: String,
        along: Along,
        reports: Vec<ValidReport>,
        reply: Reply<BatchOutcome>,
    ) {
        let refuse_closed = !along.counts_when_closed();
        if refuse_closed && group.state().closing.contains(&id) {
            group.wait(Waiting::Refused(reply, id));
            return;
        }
        if !group.state().pending.contains_key(&id) {
            let entry = match self.shared.entry(&id) {
                Ok(e) => e,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    return;
                }
            };
            if refuse_closed && entry.closed.load(Ordering::SeqCst) {
                let _ = reply.send(Err(StoreError::Closed(id)));
                return;
            }
            group.state().pending.insert(
                id.clone(),
                Pending {
                    collection: entry.collection.clone(),
                    counted: Vec::new(),
                    created: false,
                },
            );
        }
        let Some(collection) = group.state().pending.get(&id).map(|p| p.collection.clone()) else {
            let _ = reply.send(Err(StoreError::internal(Cause::Mirror(format!(
                "collection {id:?} missing from the open batch"
            )))));
            return;
        };
        if let Err(e) = check_lengths(&collection, &reports) {
            let _ = reply.send(Err(e));
            return;
        }
        let mut outcome = BatchOutcome::default();
        group.add_weight(reports.len());
        // Counted reports join `pending.counted`; should the batch fail half-way (a
        // storage error), the whole batch is failed and nothing of it is applied.
        group.write(|txn, batch| {
            let pending = batch.pending.get_mut(&id).ok_or_else(|| {
                Cause::Mirror(format!("collection {id:?} missing from the open batch"))
            })?;
            let mut seen = txn.open_table(SEEN)?;
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
            Self::write_along(txn, &id, along, outcome.accepted)?;
            Ok(())
        });
        group.wait(Waiting::Submit(reply, outcome));
    }

    /// Writes what comes along with the reports a submission counted (`accepted` of
    /// them), in the transaction that counts them.
    fn write_along(
        txn: &redb::WriteTransaction,
        id: &str,
        along: Along,
        accepted: u64,
    ) -> Result<(), Cause> {
        match along {
            Along::Nothing => Ok(()),
            // A shuffled chunk: the reports it counted join its batch's tally (the table
            // also sees the open batch's earlier chunks of the same batch).
            Along::Tally(shuffled) => {
                if accepted > 0 {
                    let mut tallies = txn.open_table(BATCH_COUNTS)?;
                    let key = (id, shuffled);
                    let before = tallies.get(key)?.map_or(0, |v| v.value());
                    tallies.insert(key, before.saturating_add(accepted))?;
                }
                Ok(())
            }
            Along::Dequeue(done) => dequeue(txn, id, &done),
            Along::Verdicts(verdicts) => record_verdicts(txn, id, verdicts),
        }
    }

    /// Records whether the last write transaction committed (see
    /// `Store::write_health`); watchers are woken only on a change.
    pub(super) fn set_write_health(&self, healthy: bool) {
        self.shared.write_healthy.send_if_modified(|h| {
            let changed = *h != healthy;
            *h = healthy;
            changed
        });
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
