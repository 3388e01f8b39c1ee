//! The redb backend, the durable store: [`DurableStore`] (its docs hold the design:
//! tables, one transaction per batch, failure handling, write amplification, memory).

mod alone;
mod command;
mod commit;
mod error;
mod hooks;
mod private;
mod tables;
#[cfg(test)]
mod tests;
mod two_aggregator;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use ldpcov_durable::{GroupLimits, Linger, Writer, catch_panic};
use ldpcov_privacy::{Collection, ReportId};
use tokio::sync::oneshot;

use super::{
    BatchOutcome, Cause, DEFAULT_BATCH_DELAY, DEFAULT_BATCH_SIZE, DEFAULT_FOLD_BYTES,
    DeliveredBatches, QueuedUpload, RecordedRelease, Snapshot, Store, StoreError, ValidReport,
    check_lengths, check_release,
};
use ldpcov_estimate::Accumulator;

use super::Along;
use command::{Command, Reply};
use commit::Committer;
pub use error::DurableError;
use error::reopen_failed;
use hooks::TestHooks;
use tables::open_db;

/// Name of the database file inside the data directory.
pub const DB_FILE: &str = "ldpcov.redb";

/// Version of the table layout and blob format; a store with another version is refused
/// (format 1, written before `appended_reports`, is upgraded in place when opened).
pub const FORMAT_VERSION: u64 = 2;

/// Group-commit settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurableConfig {
    /// A batch is committed as soon as it holds this many reports (0 is treated as 1).
    pub batch_size: usize,
    /// A batch is committed at most this long after its first command arrived.
    pub batch_delay: Duration,
    /// Bytes of redb's page cache (read cache and write buffer together): the bound on
    /// the store's resident memory beyond the accumulator mirror. See the module
    /// docs, "Memory".
    pub cache_size: usize,
    /// Start an empty store over a database file of 0 bytes (otherwise refused as
    /// [`DurableError::NotLdpcov`]: an empty file where a database was expected usually
    /// means the operator's data is gone). Daemon flag `--init-empty`.
    pub init_empty: bool,
    /// Appended reports are folded into the accumulator blobs at most this long after
    /// the first of them was committed (zero: only on the size trigger and at shutdown).
    /// See "Appending and folding" in [`DurableStore`]. Daemon flag `--fold-interval-ms`.
    pub fold_interval: Duration,
    /// A collection's appended reports are folded (in the transaction of the batch that
    /// would take them past it) once their report logs would exceed this many bytes:
    /// the bound on what a start replays. Daemon flag `--fold-mib`.
    pub fold_bytes: u64,
}

/// Default [`DurableConfig::fold_interval`]: 10 s (a fold writes every touched
/// collection's whole blob, 28 MB at p = 1000; what it bounds is only how long reports
/// stay appended on an idle store, since the size trigger bounds what a start replays).
pub(crate) const DEFAULT_FOLD_INTERVAL: Duration = Duration::from_secs(10);

/// Default redb page cache: 64 MiB (redb's own default is 1 GiB).
pub const DEFAULT_CACHE_SIZE: usize = 64 * 1024 * 1024;

impl Default for DurableConfig {
    /// 1024 reports or 5 ms, whichever comes first; a 64 MiB page cache; appended
    /// reports folded within 10 s, or beyond 64 MiB per collection.
    fn default() -> Self {
        DurableConfig {
            batch_size: DEFAULT_BATCH_SIZE,
            batch_delay: DEFAULT_BATCH_DELAY,
            cache_size: DEFAULT_CACHE_SIZE,
            init_empty: false,
            fold_interval: DEFAULT_FOLD_INTERVAL,
            fold_bytes: DEFAULT_FOLD_BYTES,
        }
    }
}

/// One collection in the in-memory mirror.
struct Entry {
    collection: Arc<Collection>,
    /// Exactly the committed accumulators.
    acc: RwLock<Accumulator>,
    /// Set (only) after a committed close.
    closed: AtomicBool,
    /// Bytes of the collection's committed report logs not yet folded into its
    /// accumulator blob (written by the commit thread only).
    unfolded_bytes: AtomicU64,
    /// Reports in those logs.
    unfolded_reports: AtomicU64,
}

type Mirror = HashMap<String, Arc<Entry>>;

struct Shared {
    mirror: RwLock<Mirror>,
    /// Whether the last write transaction committed ([`Store::write_health`]); written
    /// by the commit thread only.
    write_healthy: tokio::sync::watch::Sender<bool>,
    /// Why the commit thread stopped for good (it panicked), once it has: see
    /// [`DurableStore::failed`].
    failure: tokio::sync::watch::Sender<Option<String>>,
    /// The commit thread's test hooks (no-ops outside the unit tests).
    hooks: Arc<TestHooks>,
}

impl Shared {
    /// Opens (or creates) the database file; in the unit tests through a backend that
    /// records every fsync.
    fn create_db(
        &self,
        builder: &redb::Builder,
        path: &Path,
    ) -> Result<redb::Database, redb::DatabaseError> {
        self.hooks.create_db(builder, path)
    }

    fn entry(&self, id: &str) -> Result<Arc<Entry>, StoreError> {
        let map = self
            .mirror
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("mirror")))?;
        map.get(id)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }
}

/// A [`Store`] in a redb database with group commit.
///
/// # Design
///
/// One commit thread owns the database (`ldpcov-durable`'s writer thread, applying
/// commands with the store's `Committer`). Submissions and collection creations are
/// sent to it over a channel; it opens a write transaction for the first command, folds every
/// command that arrives within `batch_delay` (or until `batch_size` reports) into the
/// same transaction, and commits once. Every write transaction is set to
/// [`Durability::Immediate`](redb::Durability), so its commit returns only once the
/// database file is fsynced, and only after the commit returns are the callers
/// answered: an acknowledged report is on disk. (The unit tests check both through a
/// storage backend that records every fsync: each answer must follow a commit that
/// followed an fsync.)
///
/// Tables (file `ldpcov.redb` in the data directory):
///
/// | table              | key                        | value                                |
/// |--------------------|----------------------------|--------------------------------------|
/// | `meta`             | `"format"`, `"commits"`    | `u64`                                |
/// | `collections`      | collection id              | `CollectionSpec` (protobuf bytes)    |
/// | `accumulators`     | collection id              | accumulator blob (see below)         |
/// | `seen_report_ids`  | (collection id, report id) | `()`                                 |
/// | `closed_collections` | collection id            | `()`                                 |
/// | `releases`         | (collection id, request key) | (ρ spent, release body)           |
/// | `delivered_batches` | collection id             | (batches, fewest valid reports in one) |
/// | `appended_reports` | (collection id, sequence) | report log: a committed batch's counted reports (see "Appending and folding") |
/// | `shuffled_batch_counts` | (collection id, relay batch id) | `u64`: reports counted under that shuffled batch |
/// | `queued_uploads`   | (collection id, arrival number) | (report id, upload body): a two-aggregator leader's queue |
/// | `queued_report_ids` | (collection id, report id) | `u64`: the arrival number of a queued upload |
/// | `verdicts`         | (collection id, report id) | a two-aggregator helper's verdict bytes |
///
/// `closed_collections` (added with collection closing), `releases` (added with the
/// release ledger), `delivered_batches` (added with the delivered guarantee of
/// shuffled collections), `shuffled_batch_counts` (added when a batch's delivered
/// users stopped counting report ids counted in another batch) and the two-aggregator
/// tables (`queued_uploads`, `queued_report_ids`, `verdicts`) are created on open
/// when missing, so a store written before them opens unchanged, at the same format
/// version (format 1: no collection closed, nothing released, no batch recorded; no
/// batch tally: a batch sent before the upgrade and resent after it then counts only
/// the reports counted after it, too few, never too many). Recording a completed
/// batch is a command of the commit thread in a transaction of its own, like a
/// release; a shuffled chunk's tally is written in the transaction that counts its
/// reports, so no crash separates the two.
///
/// Recording a release ([`Store::record_release`]) is a command of the commit thread
/// that runs in a write transaction of its own, like a delete: it reads the ρ spent by
/// the collection's releases and the key, and inserts only if the key is new and the
/// budget allows; the thread is the only writer, so nothing can overspend between the
/// check and the commit.
///
/// One batch's transaction holds: the specs of collections created in it, one
/// `seen_report_ids` row per newly counted report, for every collection the batch
/// counted reports of either their report log (appended) or the complete new
/// accumulator blob (see "Appending and folding"), the `shuffled_batch_counts` row of
/// every shuffled batch a chunk in it counted reports of, a two-aggregator
/// collection's uploads queued in it ([`Store::queue_upload`]: a close is checked in
/// order with them) and drained by its submissions ([`Store::submit_from_queue`]) or
/// its verdicts recorded by them ([`Store::submit_with_verdicts`]), and the commit
/// counter. A
/// report id is deduped by inserting it into `seen_report_ids` inside the open
/// transaction, which also sees the ids of the uncommitted batch; a duplicate is not
/// added to the sums.
///
/// Closing a collection ([`Store::close_collection`]) is a command of the commit thread
/// too: it inserts the id into `closed_collections` in the batch's transaction and is
/// acknowledged after the commit. Submissions and closes of one batch are processed in
/// arrival order: reports before the close are counted, a submission after it (in the
/// same batch or later) fails with [`StoreError::Closed`] and counts nothing.
///
/// Deleting a collection ([`Store::delete_collection`]) is a command of the commit
/// thread as well, but never shares a transaction: the open batch is committed first,
/// then one transaction removes the collection's spec, accumulator blob, closed flag,
/// releases, batch records and every `seen_report_ids` row under its id, and only
/// after that commit is the collection removed from the mirror and the caller
/// answered. A crash leaves either
/// the whole collection or nothing of it. A submission that reaches the commit thread
/// after the delete finds no collection and fails with [`StoreError::NotFound`]; one
/// that arrived before it was committed with the batch before and is deleted with the
/// rest. redb reuses the freed pages but does not shrink the file by itself: see the
/// `compact` subcommand of the daemon.
///
/// [`Store::write_health`] is `false` from a failed commit (or a write transaction
/// that could not begin) until the next successful commit: nothing but a commit that
/// succeeded turns it back on. A panic on the commit thread (redb panics on some
/// damaged files) is caught: the store then refuses every write for good, its write
/// health stays `false`, and [`DurableStore::failed`] resolves with the reason and the
/// file's path.
///
/// The accumulators also live in memory (the *mirror*) so snapshots and estimates never
/// read the disk. The mirror is written only after a successful commit, with exactly
/// the accumulators that were committed. If anything fails before the commit, the
/// transaction is aborted, every caller of the batch gets
/// [`StoreError::Unavailable`] (safe to retry with the same ids) and the mirror is
/// unchanged. If `commit` itself fails, redb cannot say whether the batch became durable
/// and refuses further writes: the database is then closed, reopened, and the mirror is
/// reloaded from what is actually on disk (a retried report then comes back as a
/// duplicate if its batch did make it).
///
/// On start the file is checked before anything is written to it: a file of 0 bytes
/// is refused unless [`DurableConfig::init_empty`] is set, a file that is not a redb
/// database (or a redb database without ldpcov's `meta` table) is refused as
/// [`DurableError::NotLdpcov`], and redb's integrity check
/// (`Database::check_integrity`, which verifies every page's checksum) must pass or
/// repair the file ([`DurableError::Damaged`] otherwise); a panic of redb while opening
/// is caught ([`DurableError::Panicked`]).
///
/// On start the store loads every collection (re-derived with
/// [`Collection::from_spec`] from the stored spec) and its accumulator blob: it
/// recovers exactly the last committed state.
///
/// # Appending and folding
///
/// Per collection, a batch writes whichever is smaller: the report log of the reports
/// it counts (`store/codec.rs`, "Report log": 4 bytes per value, 4 KB per rank-one
/// report at p = 1000), appended as one `appended_reports` row, or the collection's
/// whole accumulator blob, `d·(8·FOLDS + 16)` bytes (28 MB at p = 1000, d = 500 500).
/// Rank-one reports are appended; Gaussian reports at large p, each as large as its
/// entries, are appended only in small batches.
///
/// Folding writes a collection's accumulator blob and removes its appended rows, in
/// one transaction, so each appended report is in the blob or in a row, never both. A
/// batch folds instead of appending when its log would take the collection's appended
/// bytes past [`DurableConfig::fold_bytes`] (64 MiB: the bound on what a start
/// replays) or is larger than the blob; the commit thread folds every collection with
/// appended rows once [`DurableConfig::fold_interval`] passed since the first append
/// after the last fold (10 s), and when it stops. The mirror is the blob plus the
/// appended reports at every commit, so snapshots never wait for a fold, and a fold
/// changes no sum. On start, each collection's appended rows are added to its blob in
/// the mirror (what a crash left appended is recovered exactly), and folded one
/// interval later. Metrics: `ldpcov_reports_unfolded{store="redb"}` and
/// `ldpcov_fold_duration_seconds{store="redb"}`.
///
/// # Write amplification
///
/// At p = 1000, a batch of rank-one reports writes 4 KB per report plus one 28 MB blob
/// per fold (every 64 MiB of logs or 10 s), instead of the 28 MB blob per commit that
/// whole-blob commits cost (~27 KB per report at 1024 reports per batch, and far more
/// in small batches). The `seen_report_ids` table grows by 16 bytes + the collection
/// id (plus B-tree overhead) per report and is never rewritten.
///
/// # Memory
///
/// The store's resident memory is the accumulator mirror (`d·(8·FOLDS + 16)` bytes per
/// collection, independent of the number of reports) plus redb's page cache, which
/// holds read pages and the write buffer and is bounded by
/// [`DurableConfig::cache_size`] (default [`DEFAULT_CACHE_SIZE`], 64 MiB; daemon flag
/// `--cache-mib`). Report ids are deduped on disk (`seen_report_ids`), but the cache
/// keeps the pages that random-id inserts touch, so until it is full the resident
/// memory grows with the table (≈ 44 MiB per million reports at p = 10, measured in
/// docs/BENCHMARKS.md) and then stays flat. redb's own default cache is 1 GiB, which
/// would let the daemon grow to that size before plateauing; a smaller cache costs
/// little, since pages outside it are read from the operating system's page cache.
///
/// # Accumulator blob
///
/// Little-endian: magic `LDPACC01`, folds `u32`, reserved `u32`, entries `u64`, count
/// `u64`, `folds × u64` fold counts, `folds × entries × i64` fold sums (fold-major),
/// `entries × u128` sums of squares.
pub struct DurableStore {
    shared: Arc<Shared>,
    writer: Writer<Command>,
    path: PathBuf,
}

impl std::fmt::Debug for DurableStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DurableStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl DurableStore {
    /// Opens (or creates) the store in directory `dir`, recovering the last committed
    /// state, and starts the commit thread. On Unix the directory is made 0700 and the
    /// database file 0600 whatever the umask (an existing one open to other users is
    /// tightened, with a WARN, once the file was accepted).
    pub fn open(dir: &Path, config: DurableConfig) -> Result<Self, DurableError> {
        private::create_dir(dir)?;
        let path = dir.join(DB_FILE);
        let started = Instant::now();
        let mut shared = Shared {
            mirror: RwLock::new(Mirror::new()),
            write_healthy: tokio::sync::watch::channel(true).0,
            failure: tokio::sync::watch::channel(None).0,
            hooks: Arc::new(TestHooks::from_env()),
        };
        let (db, mirror) =
            catch_panic(|| open_db(&path, &config, &shared, true)).map_err(|panic| {
                DurableError::Panicked {
                    path: path.clone(),
                    message: panic.message_or("a panic without a message"),
                }
            })??;
        let reports: u64 = mirror
            .values()
            .map(|e| e.acc.read().map(|a| a.count).unwrap_or(0))
            .sum();
        // Reports a crash left appended, added back from their rows.
        let appended: u64 = mirror
            .values()
            .map(|e| e.unfolded_reports.load(Ordering::SeqCst))
            .sum();
        tracing::info!(
            path = %path.display(), collections = mirror.len(), reports, appended,
            elapsed_ms = started.elapsed().as_millis() as u64, "durable store opened"
        );
        *shared.mirror.get_mut().unwrap_or_else(|e| e.into_inner()) = mirror;
        let shared = Arc::new(shared);
        let committer = Committer {
            db: Some(db),
            path: path.clone(),
            shared: shared.clone(),
            config,
            commits: 0,
            // Reports appended before a crash are folded one interval after the start.
            fold_due: commit::unfolded_fold_due(
                &shared.mirror.read().unwrap_or_else(|e| e.into_inner()),
                &config,
            ),
        };
        let limits = GroupLimits {
            max_weight: config.batch_size,
            linger: Linger::For(config.batch_delay),
        };
        // A panic on the commit thread is caught by the writer: see
        // `Committer::panicked` and `DurableStore::failed`.
        let writer =
            Writer::start("ldpcov-commit", limits, committer).map_err(DurableError::Thread)?;
        Ok(DurableStore {
            shared,
            writer,
            path,
        })
    }

    /// Compacts the database file in directory `dir`, which no running store may hold
    /// (redb locks the file: a running daemon makes this fail). redb reuses the pages a
    /// delete frees but never gives them back to the file system by itself; this does.
    /// Returns the file size in bytes before and after.
    pub fn compact(dir: &Path) -> Result<(u64, u64), DurableError> {
        let path = dir.join(DB_FILE);
        let size = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.len())
                .map_err(|source| DurableError::Io {
                    path: p.to_path_buf(),
                    source,
                })
        };
        let before = size(&path)?;
        {
            let mut db = redb::Database::open(&path).map_err(redb::Error::from)?;
            while db.compact().map_err(redb::Error::from)? {}
        }
        Ok((before, size(&path)?))
    }

    /// Resolves, with a one-line reason, once the commit thread has stopped for good:
    /// it panicked (inside redb, which panics on some damaged files, or in ours). From
    /// then on every write fails `UNAVAILABLE` and [`Store::write_health`] is `false`
    /// for good; the daemon exits non-zero with this reason and leaves restarting to
    /// its supervisor. Never resolves while the thread runs or after a normal stop.
    pub fn failed(&self) -> impl std::future::Future<Output = String> + Send + 'static {
        let mut failure = self.shared.failure.subscribe();
        async move {
            let reason = failure
                .wait_for(Option::is_some)
                .await
                .map(|reason| reason.clone().unwrap_or_default());
            match reason {
                Ok(reason) => reason,
                // The store is gone without a failure.
                Err(_) => std::future::pending().await,
            }
        }
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The accumulators of collection `id` as read from the database (not the mirror).
    /// Answered between two reads of the commit thread, even while a batch is open.
    pub async fn read_committed(&self, id: &str) -> Result<Snapshot, StoreError> {
        let (reply, rx) = oneshot::channel();
        self.send(Command::ReadCommitted {
            id: id.to_string(),
            reply,
        })?;
        self.receive(rx).await
    }

    /// Counts `reports` for collection `id` on the commit thread (see
    /// [`Store::submit`]), and writes what comes `along` with them (a shuffled batch's
    /// tally, a leader's dequeued uploads, a helper's verdicts) in the same transaction.
    async fn count_reports(
        &self,
        id: &str,
        along: Along,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let entry = self.shared.entry(id)?;
        check_lengths(&entry.collection, &reports)?;
        // A committed close is final: refuse early. A close still in flight is checked
        // by the commit thread, in order with this batch.
        if !along.counts_when_closed() && entry.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed(id.to_string()));
        }
        if reports.is_empty() && along.is_empty() {
            return Ok(BatchOutcome::default());
        }
        self.ask(id, |reply| Command::Submit {
            id: id.to_string(),
            along,
            reports,
            reply,
        })
        .await
    }

    /// Sends the commit thread the command `command` builds around its reply, about
    /// collection `id` (refused at once with `NotFound` if the mirror has no such
    /// collection), and waits for the answer.
    async fn ask<T>(
        &self,
        id: &str,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> Result<T, StoreError> {
        self.shared.entry(id)?;
        let (reply, rx) = oneshot::channel();
        self.send(command(reply))?;
        self.receive(rx).await
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        self.writer
            .send(command)
            .map_err(|_| self.stopped(Cause::ShuttingDown))
    }

    /// The answer of the commit thread, or, if it stopped without one, why.
    async fn receive<T>(
        &self,
        rx: oneshot::Receiver<Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match rx.await {
            Ok(answer) => answer,
            Err(_) => {
                // The thread dropped the reply while unwinding from a panic: its catch
                // handler records the reason a moment later. Wait for it (briefly: a
                // normal stop never sets one) so that the caller is told why.
                let mut failure = self.shared.failure.subscribe();
                let _ =
                    tokio::time::timeout(Duration::from_secs(1), failure.wait_for(Option::is_some))
                        .await;
                Err(self.stopped(Cause::CommitThreadStopped))
            }
        }
    }

    /// `UNAVAILABLE` with the reason the commit thread stopped for good, if it did,
    /// and with `otherwise` if not.
    fn stopped(&self, otherwise: Cause) -> StoreError {
        match self.shared.failure.borrow().clone() {
            Some(reason) => StoreError::unavailable(Cause::StoppedForGood(reason)),
            None => StoreError::unavailable(otherwise),
        }
    }
}

impl Drop for DurableStore {
    /// Commits what is pending and waits for the commit thread.
    fn drop(&mut self) {
        if self.writer.stop().is_err() {
            tracing::error!("the commit thread panicked");
        }
    }
}

#[tonic::async_trait]
impl Store for DurableStore {
    async fn create_collection(
        &self,
        collection: Collection,
    ) -> Result<Arc<Collection>, StoreError> {
        match self.shared.entry(collection.id()) {
            Ok(e) if *e.collection == collection => return Ok(e.collection.clone()),
            Ok(_) => return Err(StoreError::AlreadyExists(collection.id().to_string())),
            Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        let (reply, rx) = oneshot::channel();
        self.send(Command::Create {
            collection: Box::new(collection),
            reply,
        })?;
        self.receive(rx).await
    }

    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        Ok(self.shared.entry(id)?.collection.clone())
    }

    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Nothing, reports).await
    }

    async fn submit_to_batch(
        &self,
        id: &str,
        batch: [u8; 16],
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Tally(batch), reports).await
    }

    async fn counted_in_batch(&self, id: &str, batch: [u8; 16]) -> Result<u64, StoreError> {
        self.ask(id, |reply| Command::ReadBatch {
            id: id.to_string(),
            batch,
            reply,
        })
        .await
    }

    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        let entry = self.shared.entry(id)?;
        let acc = entry
            .acc
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("accumulator")))?;
        Ok(acc.count)
    }

    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        let entry = self.shared.entry(id)?;
        let acc = entry
            .acc
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("accumulator")))?
            .clone();
        Ok(Snapshot {
            collection: entry.collection.clone(),
            acc,
        })
    }

    async fn close_collection(&self, id: &str) -> Result<(), StoreError> {
        if self.shared.entry(id)?.closed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (reply, rx) = oneshot::channel();
        self.send(Command::Close {
            id: id.to_string(),
            reply,
        })?;
        self.receive(rx).await
    }

    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.shared.entry(id)?.closed.load(Ordering::SeqCst))
    }

    async fn record_delivered_batch(&self, id: &str, valid: u64) -> Result<(), StoreError> {
        self.ask(id, |reply| Command::Delivered {
            id: id.to_string(),
            valid: Some(valid),
            reply,
        })
        .await
        .map(|_| ())
    }

    async fn delivered_batches(&self, id: &str) -> Result<DeliveredBatches, StoreError> {
        self.ask(id, |reply| Command::Delivered {
            id: id.to_string(),
            valid: None,
            reply,
        })
        .await
    }

    async fn recorded_release(
        &self,
        id: &str,
        key: &[u8],
    ) -> Result<Option<RecordedRelease>, StoreError> {
        let (spent, found) = self
            .ask(id, |reply| Command::ReadRelease {
                id: id.to_string(),
                key: Some(key.to_vec()),
                reply,
            })
            .await?;
        Ok(found.map(|(rho, body)| RecordedRelease {
            body,
            rho,
            spent,
            fresh: false,
        }))
    }

    async fn record_release(
        &self,
        id: &str,
        key: &[u8],
        rho: f64,
        budget: f64,
        body: Vec<u8>,
    ) -> Result<RecordedRelease, StoreError> {
        check_release(rho, budget)?;
        self.ask(id, |reply| Command::Release {
            id: id.to_string(),
            key: key.to_vec(),
            rho,
            budget,
            body,
            reply,
        })
        .await
    }

    async fn budget_spent(&self, id: &str) -> Result<f64, StoreError> {
        Ok(self
            .ask(id, |reply| Command::ReadRelease {
                id: id.to_string(),
                key: None,
                reply,
            })
            .await?
            .0)
    }

    async fn collection_count(&self) -> Result<u64, StoreError> {
        let map = self
            .shared
            .mirror
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("mirror")))?;
        Ok(map.len() as u64)
    }

    async fn collection_ids(&self) -> Result<Vec<String>, StoreError> {
        let map = self
            .shared
            .mirror
            .read()
            .map_err(|_| StoreError::internal(Cause::Poisoned("mirror")))?;
        let mut ids: Vec<String> = map.keys().cloned().collect();
        ids.sort();
        Ok(ids)
    }

    async fn delete_collection(&self, id: &str) -> Result<u64, StoreError> {
        self.ask(id, |reply| Command::Delete {
            id: id.to_string(),
            reply,
        })
        .await
    }

    async fn queue_upload(&self, id: &str, upload: QueuedUpload) -> Result<bool, StoreError> {
        // A committed close is final: refuse early (one in flight is checked in order).
        if self.shared.entry(id)?.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed(id.to_string()));
        }
        self.ask(id, |reply| Command::Queue {
            id: id.to_string(),
            upload,
            reply,
        })
        .await
    }

    async fn queued_uploads(
        &self,
        id: &str,
        limit: usize,
    ) -> Result<Vec<QueuedUpload>, StoreError> {
        self.ask(id, |reply| Command::ReadQueue {
            id: id.to_string(),
            limit,
            reply,
        })
        .await
    }

    async fn queued_count(&self, id: &str) -> Result<u64, StoreError> {
        self.ask(id, |reply| Command::QueuedCount {
            id: id.to_string(),
            reply,
        })
        .await
    }

    async fn submit_from_queue(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        done: Vec<ReportId>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Dequeue(done), reports).await
    }

    async fn verdicts(
        &self,
        id: &str,
        report_ids: &[ReportId],
    ) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        self.ask(id, |reply| Command::ReadVerdicts {
            id: id.to_string(),
            report_ids: report_ids.to_vec(),
            reply,
        })
        .await
    }

    async fn submit_with_verdicts(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
        verdicts: Vec<(ReportId, Vec<u8>)>,
    ) -> Result<BatchOutcome, StoreError> {
        self.count_reports(id, Along::Verdicts(verdicts), reports)
            .await
    }

    fn write_health(&self) -> tokio::sync::watch::Receiver<bool> {
        self.shared.write_healthy.subscribe()
    }
}
