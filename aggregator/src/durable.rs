//! The durable [`Store`]: collections, accumulators and the report-id dedupe in an
//! embedded [redb](https://www.redb.org) database, with group commit.
//!
//! # Design
//!
//! One commit thread owns the database. Submissions and collection creations are sent
//! to it over a channel; it opens a write transaction for the first command, folds every
//! command that arrives within `batch_delay` (or until `batch_size` reports) into the
//! same transaction, and commits once. Only after the commit returns are the callers
//! answered, so an acknowledged report is on disk (redb's default
//! [`Durability::Immediate`](redb::Durability) fsyncs at commit).
//!
//! Tables (file `ldpcov.redb` in the data directory):
//!
//! | table              | key                        | value                                |
//! |--------------------|----------------------------|--------------------------------------|
//! | `meta`             | `"format"`, `"commits"`    | `u64`                                |
//! | `collections`      | collection id              | `CollectionSpec` (protobuf bytes)    |
//! | `accumulators`     | collection id              | accumulator blob (see below)         |
//! | `seen_report_ids`  | (collection id, report id) | `()`                                 |
//! | `closed_collections` | collection id            | `()`                                 |
//!
//! `closed_collections` (issue 5) is created on open when missing, so a store written
//! before it opens unchanged (format 1: no collection closed).
//!
//! One batch's transaction holds: the specs of collections created in it, one
//! `seen_report_ids` row per newly counted report, the complete new accumulator blob of
//! every collection the batch touched, and the commit counter. A report id is deduped by
//! inserting it into `seen_report_ids` inside the open transaction, which also sees the
//! ids of the uncommitted batch; a duplicate is not added to the sums.
//!
//! Closing a collection ([`Store::close_collection`]) is a command of the commit thread
//! too: it inserts the id into `closed_collections` in the batch's transaction and is
//! acknowledged after the commit. Submissions and closes of one batch are processed in
//! arrival order: reports before the close are counted, a submission after it (in the
//! same batch or later) fails with [`StoreError::Closed`] and counts nothing.
//!
//! The accumulators also live in memory (the *mirror*) so snapshots and estimates never
//! read the disk. The mirror is written only after a successful commit, with exactly
//! the accumulators that were committed. If anything fails before the commit, the
//! transaction is aborted, every caller of the batch gets
//! [`StoreError::Unavailable`] (safe to retry with the same ids) and the mirror is
//! unchanged. If `commit` itself fails, redb cannot say whether the batch became durable
//! and refuses further writes: the database is then closed, reopened, and the mirror is
//! reloaded from what is actually on disk (a retried report then comes back as a
//! duplicate if its batch did make it).
//!
//! On start the store loads every collection (re-derived with
//! [`Collection::from_spec`] from the stored spec) and its accumulator blob: it
//! recovers exactly the last committed state.
//!
//! # Write amplification
//!
//! Every commit rewrites the whole accumulator blob of each collection it touches:
//! `d·(8·FOLDS + 16)` bytes, i.e. 28 MB per commit at p = 1000 (d = 500 500). That is
//! why reports are committed in groups: with 1024 reports per batch the blob costs
//! ~27 KB per report (a p = 1000 report is 2 MB on the wire). Under light load each
//! commit carries few reports and the per-report cost is high, but then there is
//! bandwidth to spare. The `seen_report_ids` table grows by 16 bytes + the collection
//! id (plus B-tree overhead) per report and is never rewritten.
//!
//! # Memory
//!
//! The store's resident memory is the accumulator mirror (`d·(8·FOLDS + 16)` bytes per
//! collection, independent of the number of reports) plus redb's page cache, which
//! holds read pages and the write buffer and is bounded by
//! [`DurableConfig::cache_size`] (default [`DEFAULT_CACHE_SIZE`], 64 MiB; daemon flag
//! `--cache-mib`). Report ids are deduped on disk (`seen_report_ids`), but the cache
//! keeps the pages that random-id inserts touch, so until it is full the resident
//! memory grows with the table (≈ 44 MiB per million reports at p = 10, measured in
//! docs/BENCHMARKS.md) and then stays flat. redb's own default cache is 1 GiB, which
//! would let the daemon grow to that size before plateauing; a smaller cache costs
//! little, since pages outside it are read from the operating system's page cache.
//!
//! # Accumulator blob
//!
//! Little-endian: magic `LDPACC01`, folds `u32`, reserved `u32`, entries `u64`, count
//! `u64`, `folds × u64` fold counts, `folds × entries × i64` fold sums (fold-major),
//! `entries × u128` sums of squares.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ldpcov_proto::Collection;
use ldpcov_proto::v1::CollectionSpec;
use prost::Message;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use thiserror::Error;
use tokio::sync::oneshot;

use crate::store::{BatchOutcome, Snapshot, Store, StoreError, ValidReport};
use ldpcov_estimate::{Accumulator, FOLDS};

/// Name of the database file inside the data directory.
pub const DB_FILE: &str = "ldpcov.redb";

/// Version of the table layout and blob format; a store with another version is refused.
pub const FORMAT_VERSION: u64 = 1;

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const COLLECTIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("collections");
const ACCUMULATORS: TableDefinition<&str, &[u8]> = TableDefinition::new("accumulators");
const SEEN: TableDefinition<(&str, [u8; 16]), ()> = TableDefinition::new("seen_report_ids");
const CLOSED: TableDefinition<&str, ()> = TableDefinition::new("closed_collections");

const BLOB_MAGIC: &[u8; 8] = b"LDPACC01";

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
}

/// Default redb page cache: 64 MiB (redb's own default is 1 GiB).
pub const DEFAULT_CACHE_SIZE: usize = 64 * 1024 * 1024;

impl Default for DurableConfig {
    /// 1024 reports or 5 ms, whichever comes first; a 64 MiB page cache.
    fn default() -> Self {
        DurableConfig {
            batch_size: 1024,
            batch_delay: Duration::from_millis(5),
            cache_size: DEFAULT_CACHE_SIZE,
        }
    }
}

/// Why the durable store could not be opened.
#[derive(Debug, Error)]
pub enum DurableError {
    /// The data directory could not be created.
    #[error("cannot create data directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The database reported an error.
    #[error("database: {0}")]
    Db(#[from] redb::Error),
    /// The database holds something this version cannot read.
    #[error("corrupt or incompatible store: {0}")]
    Corrupt(String),
    /// The commit thread could not be started.
    #[error("cannot start the commit thread: {0}")]
    Thread(std::io::Error),
}

fn db_err<E: Into<redb::Error>>(e: E) -> DurableError {
    DurableError::Db(e.into())
}

/// One collection in the in-memory mirror.
struct Entry {
    collection: Arc<Collection>,
    /// Exactly the committed accumulators.
    acc: RwLock<Accumulator>,
    /// Set (only) after a committed close.
    closed: AtomicBool,
}

type Mirror = HashMap<String, Arc<Entry>>;

struct Shared {
    mirror: RwLock<Mirror>,
    /// Commits still to fail on purpose (tests).
    fail_commits: AtomicU32,
}

impl Shared {
    fn entry(&self, id: &str) -> Result<Arc<Entry>, StoreError> {
        let map = self
            .mirror
            .read()
            .map_err(|_| StoreError::Internal("mirror lock poisoned".into()))?;
        map.get(id)
            .cloned()
            .ok_or_else(|| StoreError::NotFound(id.to_string()))
    }
}

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Command {
    Submit {
        id: String,
        reports: Vec<ValidReport>,
        reply: Reply<BatchOutcome>,
    },
    Create {
        collection: Collection,
        reply: Reply<Arc<Collection>>,
    },
    ReadCommitted {
        id: String,
        reply: Reply<Snapshot>,
    },
    Close {
        id: String,
        reply: Reply<()>,
    },
}

/// A [`Store`] in a redb database with group commit; see the [module docs](self).
pub struct DurableStore {
    shared: Arc<Shared>,
    tx: Option<mpsc::Sender<Command>>,
    committer: Option<JoinHandle<()>>,
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
    /// state, and starts the commit thread.
    pub fn open(dir: &Path, config: DurableConfig) -> Result<Self, DurableError> {
        std::fs::create_dir_all(dir).map_err(|source| DurableError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(DB_FILE);
        let started = Instant::now();
        let (db, mirror) = open_db(&path, config.cache_size)?;
        let reports: u64 = mirror
            .values()
            .map(|e| e.acc.read().map(|a| a.count).unwrap_or(0))
            .sum();
        tracing::info!(
            path = %path.display(), collections = mirror.len(), reports,
            elapsed_ms = started.elapsed().as_millis() as u64, "durable store opened"
        );
        let shared = Arc::new(Shared {
            mirror: RwLock::new(mirror),
            fail_commits: AtomicU32::new(0),
        });
        let (tx, rx) = mpsc::channel();
        let committer = Committer {
            db: Some(db),
            path: path.clone(),
            shared: shared.clone(),
            config,
            rx,
            commits: 0,
        };
        let handle = std::thread::Builder::new()
            .name("ldpcov-commit".into())
            .spawn(move || committer.run())
            .map_err(DurableError::Thread)?;
        Ok(DurableStore {
            shared,
            tx: Some(tx),
            committer: Some(handle),
            path,
        })
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
        receive(rx).await
    }

    /// Makes the next `n` batch commits fail (the transaction is aborted just before
    /// its commit), to test failure handling.
    #[doc(hidden)]
    pub fn fail_next_commits(&self, n: u32) {
        self.shared.fail_commits.store(n, Ordering::SeqCst);
    }

    fn send(&self, command: Command) -> Result<(), StoreError> {
        self.tx
            .as_ref()
            .and_then(|tx| tx.send(command).ok())
            .ok_or_else(|| StoreError::Unavailable("the store is shutting down".into()))
    }
}

async fn receive<T>(rx: oneshot::Receiver<Result<T, StoreError>>) -> Result<T, StoreError> {
    rx.await
        .map_err(|_| StoreError::Unavailable("the commit thread stopped".into()))?
}

impl Drop for DurableStore {
    /// Commits what is pending and waits for the commit thread.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(handle) = self.committer.take()
            && handle.join().is_err()
        {
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
        match self.shared.entry(&collection.id) {
            Ok(e) if *e.collection == collection => return Ok(e.collection.clone()),
            Ok(_) => return Err(StoreError::AlreadyExists(collection.id)),
            Err(StoreError::NotFound(_)) => {}
            Err(e) => return Err(e),
        }
        let (reply, rx) = oneshot::channel();
        self.send(Command::Create { collection, reply })?;
        receive(rx).await
    }

    async fn collection(&self, id: &str) -> Result<Arc<Collection>, StoreError> {
        Ok(self.shared.entry(id)?.collection.clone())
    }

    async fn submit(
        &self,
        id: &str,
        reports: Vec<ValidReport>,
    ) -> Result<BatchOutcome, StoreError> {
        let entry = self.shared.entry(id)?;
        check_lengths(&entry.collection, &reports)?;
        // A committed close is final: refuse early. A close still in flight is checked
        // by the commit thread, in order with this batch.
        if entry.closed.load(Ordering::SeqCst) {
            return Err(StoreError::Closed(id.to_string()));
        }
        if reports.is_empty() {
            return Ok(BatchOutcome::default());
        }
        let (reply, rx) = oneshot::channel();
        self.send(Command::Submit {
            id: id.to_string(),
            reports,
            reply,
        })?;
        receive(rx).await
    }

    async fn count(&self, id: &str) -> Result<u64, StoreError> {
        let entry = self.shared.entry(id)?;
        let acc = entry
            .acc
            .read()
            .map_err(|_| StoreError::Internal("accumulator lock poisoned".into()))?;
        Ok(acc.count)
    }

    async fn snapshot(&self, id: &str) -> Result<Snapshot, StoreError> {
        let entry = self.shared.entry(id)?;
        let acc = entry
            .acc
            .read()
            .map_err(|_| StoreError::Internal("accumulator lock poisoned".into()))?
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
        receive(rx).await
    }

    async fn is_closed(&self, id: &str) -> Result<bool, StoreError> {
        Ok(self.shared.entry(id)?.closed.load(Ordering::SeqCst))
    }
}

fn check_lengths(collection: &Collection, reports: &[ValidReport]) -> Result<(), StoreError> {
    match reports
        .iter()
        .find(|r| r.entries.len() != collection.entries)
    {
        Some(bad) => Err(StoreError::Internal(format!(
            "unvalidated report with {} entries reached the store",
            bad.entries.len()
        ))),
        None => Ok(()),
    }
}

/// Opens the database with a page cache of `cache_size` bytes, creates missing tables,
/// checks the format and loads the mirror.
fn open_db(path: &Path, cache_size: usize) -> Result<(Database, Mirror), DurableError> {
    let db = redb::Builder::new()
        .set_cache_size(cache_size)
        .create(path)
        .map_err(db_err)?;
    let txn = db.begin_write().map_err(db_err)?;
    {
        let mut meta = txn.open_table(META).map_err(db_err)?;
        let format = meta.get("format").map_err(db_err)?.map(|v| v.value());
        match format {
            None => {
                meta.insert("format", FORMAT_VERSION).map_err(db_err)?;
            }
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(DurableError::Corrupt(format!(
                    "store format {other}, this version reads {FORMAT_VERSION}"
                )));
            }
        }
        txn.open_table(COLLECTIONS).map_err(db_err)?;
        txn.open_table(ACCUMULATORS).map_err(db_err)?;
        txn.open_table(SEEN).map_err(db_err)?;
        txn.open_table(CLOSED).map_err(db_err)?;
    }
    txn.commit().map_err(db_err)?;
    let mirror = load_mirror(&db)?;
    Ok((db, mirror))
}

fn load_mirror(db: &Database) -> Result<Mirror, DurableError> {
    let txn = db.begin_read().map_err(db_err)?;
    let collections = txn.open_table(COLLECTIONS).map_err(db_err)?;
    let accumulators = txn.open_table(ACCUMULATORS).map_err(db_err)?;
    let closed = txn.open_table(CLOSED).map_err(db_err)?;
    let mut mirror = Mirror::new();
    for item in collections.iter().map_err(db_err)? {
        let (key, value) = item.map_err(db_err)?;
        let id = key.value().to_string();
        let spec = CollectionSpec::decode(value.value())
            .map_err(|e| DurableError::Corrupt(format!("spec of collection {id:?}: {e}")))?;
        let collection = Collection::from_spec(&spec)
            .map_err(|e| DurableError::Corrupt(format!("spec of collection {id:?}: {e}")))?;
        if collection.id != id {
            return Err(DurableError::Corrupt(format!(
                "collection stored under {id:?} is {:?}",
                collection.id
            )));
        }
        let acc = match accumulators.get(id.as_str()).map_err(db_err)? {
            Some(blob) => decode_accumulator(blob.value())
                .map_err(|e| DurableError::Corrupt(format!("collection {id:?}: {e}")))?,
            None => Accumulator::new(collection.entries, FOLDS),
        };
        if acc.entries() != collection.entries || acc.fold_sums.len() != FOLDS {
            return Err(DurableError::Corrupt(format!(
                "collection {id:?}: accumulators of {} entries × {} folds, expected {} × {FOLDS}",
                acc.entries(),
                acc.fold_sums.len(),
                collection.entries
            )));
        }
        let is_closed = closed.get(id.as_str()).map_err(db_err)?.is_some();
        mirror.insert(
            id,
            Arc::new(Entry {
                collection: Arc::new(collection),
                acc: RwLock::new(acc),
                closed: AtomicBool::new(is_closed),
            }),
        );
    }
    for item in closed.iter().map_err(db_err)? {
        let (key, _) = item.map_err(db_err)?;
        let id = key.value();
        if !mirror.contains_key(id) {
            return Err(DurableError::Corrupt(format!(
                "unknown collection {id:?} is marked closed"
            )));
        }
    }
    Ok(mirror)
}

/// A collection touched by the open batch: its new accumulators.
struct Pending {
    collection: Arc<Collection>,
    acc: Accumulator,
    created: bool,
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
    error: Option<String>,
}

struct Committer {
    db: Option<Database>,
    path: PathBuf,
    shared: Arc<Shared>,
    config: DurableConfig,
    rx: mpsc::Receiver<Command>,
    commits: u64,
}

impl Committer {
    fn run(mut self) {
        while let Ok(first) = self.rx.recv() {
            if let Command::ReadCommitted { id, reply } = first {
                let _ = reply.send(self.read_committed(&id));
                continue;
            }
            let txn = match self.db() {
                Ok(db) => db.begin_write().map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            let txn = match txn {
                Ok(txn) => txn,
                Err(e) => {
                    tracing::error!(error = %e, "cannot begin a write transaction");
                    fail_command(first, &e);
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
                    Ok(command) => self.add(&mut batch, command),
                    Err(_) => break,
                }
            }
            self.finish(batch);
        }
        tracing::debug!(commits = self.commits, "commit thread done");
    }

    /// The database, reopened (and the mirror reloaded) if a failed commit closed it.
    fn db(&mut self) -> Result<&Database, String> {
        if self.db.is_none() {
            let (db, mirror) =
                open_db(&self.path, self.config.cache_size).map_err(|e| e.to_string())?;
            let mut map = self
                .shared
                .mirror
                .write()
                .map_err(|_| "mirror lock poisoned".to_string())?;
            *map = mirror;
            tracing::warn!(path = %self.path.display(), "database reopened, state reloaded from disk");
            self.db = Some(db);
        }
        self.db
            .as_ref()
            .ok_or_else(|| "database not open".to_string())
    }

    fn read_committed(&mut self, id: &str) -> Result<Snapshot, StoreError> {
        let db = self.db().map_err(StoreError::Unavailable)?;
        let internal = |e: redb::Error| StoreError::Internal(e.to_string());
        let txn = db.begin_read().map_err(|e| internal(e.into()))?;
        let collections = txn
            .open_table(COLLECTIONS)
            .map_err(|e| internal(e.into()))?;
        let spec = collections
            .get(id)
            .map_err(|e| internal(e.into()))?
            .ok_or_else(|| StoreError::NotFound(id.to_string()))?;
        let spec = CollectionSpec::decode(spec.value())
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        let collection =
            Collection::from_spec(&spec).map_err(|e| StoreError::Internal(e.to_string()))?;
        let accumulators = txn
            .open_table(ACCUMULATORS)
            .map_err(|e| internal(e.into()))?;
        let acc = match accumulators.get(id).map_err(|e| internal(e.into()))? {
            Some(blob) => decode_accumulator(blob.value()).map_err(StoreError::Internal)?,
            None => Accumulator::new(collection.entries, FOLDS),
        };
        Ok(Snapshot {
            collection: Arc::new(collection),
            acc,
        })
    }

    fn add(&mut self, batch: &mut Batch, command: Command) {
        match command {
            Command::ReadCommitted { id, reply } => {
                let _ = reply.send(self.read_committed(&id));
            }
            Command::Create { collection, reply } => self.add_create(batch, collection, reply),
            Command::Submit { id, reports, reply } => self.add_submit(batch, id, reports, reply),
            Command::Close { id, reply } => self.add_close(batch, id, reply),
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
            let inserted = batch
                .txn
                .open_table(CLOSED)
                .map_err(redb::Error::from)
                .and_then(|mut t| {
                    t.insert(id.as_str(), ())
                        .map(|_| ())
                        .map_err(redb::Error::from)
                })
                .map_err(|e| e.to_string());
            if let Err(e) = inserted {
                batch.error = Some(e);
            }
        }
        batch.closing.insert(id);
        batch.waiting.push(Waiting::Close(reply));
    }

    fn add_create(&self, batch: &mut Batch, collection: Collection, reply: Reply<Arc<Collection>>) {
        let existing = match batch.pending.get(&collection.id) {
            Some(p) => Some((p.collection.clone(), p.created)),
            None => match self.shared.entry(&collection.id) {
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
                let _ = reply.send(Err(StoreError::AlreadyExists(collection.id)));
            }
            // Created in this very batch: answer after the commit.
            Some((c, true)) => batch.waiting.push(Waiting::Create(reply, c)),
            Some((c, false)) => {
                let _ = reply.send(Ok(c));
            }
            None => {
                if batch.error.is_none() {
                    let spec = collection.spec().encode_to_vec();
                    let inserted = batch
                        .txn
                        .open_table(COLLECTIONS)
                        .map_err(redb::Error::from)
                        .and_then(|mut t| {
                            t.insert(collection.id.as_str(), spec.as_slice())
                                .map(|_| ())
                                .map_err(redb::Error::from)
                        })
                        .map_err(|e| e.to_string());
                    if let Err(e) = inserted {
                        batch.error = Some(e);
                    }
                }
                let collection = Arc::new(collection);
                batch.pending.insert(
                    collection.id.clone(),
                    Pending {
                        collection: collection.clone(),
                        acc: Accumulator::new(collection.entries, FOLDS),
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
            let acc = match entry.acc.read() {
                Ok(acc) => acc.clone(),
                Err(_) => {
                    let _ = reply.send(Err(StoreError::Internal(
                        "accumulator lock poisoned".into(),
                    )));
                    return;
                }
            };
            batch.pending.insert(
                id.clone(),
                Pending {
                    collection: entry.collection.clone(),
                    acc,
                    created: false,
                },
            );
        }
        let Some(pending) = batch.pending.get_mut(&id) else {
            let _ = reply.send(Err(StoreError::Internal("batch bookkeeping".into())));
            return;
        };
        if let Err(e) = check_lengths(&pending.collection, &reports) {
            let _ = reply.send(Err(e));
            return;
        }
        let mut outcome = BatchOutcome::default();
        batch.reports += reports.len();
        if batch.error.is_none() {
            let counted = (|| -> Result<(), redb::Error> {
                let mut seen = batch.txn.open_table(SEEN)?;
                for report in &reports {
                    if seen
                        .insert((id.as_str(), report.report_id.0), ())?
                        .is_some()
                    {
                        outcome.duplicates += 1;
                    } else {
                        pending
                            .acc
                            .add(report.report_id.fold(FOLDS), &report.entries);
                        outcome.accepted += 1;
                    }
                }
                Ok(())
            })();
            if let Err(e) = counted {
                batch.error = Some(e.to_string());
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
            None => write_accumulators(&txn, &pending, self.commits + 1).map_err(|e| e.to_string()),
        };
        let injected = self
            .shared
            .fail_commits
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        // The flag says whether the database must be reopened: after any real storage
        // error (redb may refuse further writes), not after an injected failure.
        // A transaction that is not committed is aborted when dropped.
        let result = match prepared {
            Err(e) => Err((e, true)),
            Ok(()) if injected => Err(("injected commit failure".to_string(), false)),
            Ok(()) => txn.commit().map_err(|e| (e.to_string(), true)),
        };
        match result {
            Ok(()) => {
                self.commits += 1;
                if let Err(e) = self.apply(pending, closing) {
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
                for w in waiting {
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
                if reopen {
                    // After a failed commit redb cannot tell whether the batch became
                    // durable and refuses further writes: reopen, reload the mirror.
                    self.db = None;
                }
                let status = format!("batch not committed ({e}); retry with the same report ids");
                for w in waiting {
                    match w {
                        Waiting::Submit(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Create(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Close(reply) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                        Waiting::Refused(reply, _) => {
                            let _ = reply.send(Err(StoreError::Unavailable(status.clone())));
                        }
                    }
                }
            }
        }
    }

    /// Writes the committed accumulators and closed flags into the mirror.
    fn apply(
        &self,
        pending: HashMap<String, Pending>,
        closing: HashSet<String>,
    ) -> Result<(), String> {
        let mut map = self
            .shared
            .mirror
            .write()
            .map_err(|_| "mirror lock poisoned".to_string())?;
        for (id, p) in pending {
            match map.get(&id) {
                Some(entry) if !p.created => {
                    *entry
                        .acc
                        .write()
                        .map_err(|_| "accumulator lock poisoned".to_string())? = p.acc;
                }
                _ => {
                    map.insert(
                        id,
                        Arc::new(Entry {
                            collection: p.collection,
                            acc: RwLock::new(p.acc),
                            closed: AtomicBool::new(false),
                        }),
                    );
                }
            }
        }
        for id in closing {
            match map.get(&id) {
                Some(entry) => entry.closed.store(true, Ordering::SeqCst),
                None => return Err(format!("closed collection {id:?} is not in the mirror")),
            }
        }
        Ok(())
    }
}

fn write_accumulators(
    txn: &redb::WriteTransaction,
    pending: &HashMap<String, Pending>,
    commit: u64,
) -> Result<(), redb::Error> {
    let mut table = txn.open_table(ACCUMULATORS)?;
    for (id, p) in pending {
        table.insert(id.as_str(), encode_accumulator(&p.acc).as_slice())?;
    }
    txn.open_table(META)?.insert("commits", commit)?;
    Ok(())
}

fn fail_command(command: Command, error: &str) {
    let e = StoreError::Unavailable(format!("store unavailable: {error}"));
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
    }
}

/// Serializes accumulators (little-endian; see the module docs).
fn encode_accumulator(acc: &Accumulator) -> Vec<u8> {
    let folds = acc.fold_sums.len();
    let entries = acc.entries();
    let mut out = Vec::with_capacity(32 + 8 * folds + entries * (8 * folds + 16));
    out.extend_from_slice(BLOB_MAGIC);
    out.extend_from_slice(&(folds as u32).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(entries as u64).to_le_bytes());
    out.extend_from_slice(&acc.count.to_le_bytes());
    for c in &acc.fold_counts {
        out.extend_from_slice(&c.to_le_bytes());
    }
    for fold in &acc.fold_sums {
        for s in fold {
            out.extend_from_slice(&s.to_le_bytes());
        }
    }
    for q in &acc.sum_squares {
        out.extend_from_slice(&q.to_le_bytes());
    }
    out
}

/// Parses [`encode_accumulator`]'s output, checking lengths and totals.
fn decode_accumulator(blob: &[u8]) -> Result<Accumulator, String> {
    fn take<const N: usize>(blob: &mut &[u8]) -> Result<[u8; N], String> {
        let (head, rest) = blob
            .split_first_chunk::<N>()
            .ok_or_else(|| "accumulator blob truncated".to_string())?;
        *blob = rest;
        Ok(*head)
    }
    let mut b = blob;
    if &take::<8>(&mut b)? != BLOB_MAGIC {
        return Err("accumulator blob has a wrong magic".into());
    }
    let folds = u32::from_le_bytes(take(&mut b)?) as usize;
    let _reserved = take::<4>(&mut b)?;
    let entries = usize::try_from(u64::from_le_bytes(take(&mut b)?))
        .map_err(|_| "accumulator blob: entry count too large".to_string())?;
    let expected = folds
        .checked_mul(8)
        .and_then(|f| entries.checked_mul(8 * folds + 16).map(|e| (f, e)))
        .and_then(|(f, e)| f.checked_add(e).and_then(|n| n.checked_add(8)))
        .ok_or_else(|| "accumulator blob: sizes overflow".to_string())?;
    if b.len() != expected || folds == 0 {
        return Err(format!(
            "accumulator blob: {} bytes after the header, expected {expected} for {folds} folds × {entries} entries",
            b.len()
        ));
    }
    let count = u64::from_le_bytes(take(&mut b)?);
    let mut fold_counts = Vec::with_capacity(folds);
    for _ in 0..folds {
        fold_counts.push(u64::from_le_bytes(take(&mut b)?));
    }
    let mut fold_sums = Vec::with_capacity(folds);
    for _ in 0..folds {
        let mut sums = Vec::with_capacity(entries);
        for _ in 0..entries {
            sums.push(i64::from_le_bytes(take(&mut b)?));
        }
        fold_sums.push(sums);
    }
    let mut sum_squares = Vec::with_capacity(entries);
    for _ in 0..entries {
        sum_squares.push(u128::from_le_bytes(take(&mut b)?));
    }
    if fold_counts.iter().sum::<u64>() != count {
        return Err("accumulator blob: fold counts do not add up to the count".into());
    }
    Ok(Accumulator {
        count,
        fold_counts,
        fold_sums,
        sum_squares,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;
    use ldpcov_proto::ReportId;

    use crate::store::tests::collection;

    fn report(id: u32, v: i32, entries: usize) -> ValidReport {
        let mut rid = [0u8; 16];
        rid[..4].copy_from_slice(&id.to_le_bytes());
        ValidReport {
            report_id: ReportId(rid),
            entries: (0..entries as i32).map(|k| v * (k + 1) - 3).collect(),
        }
    }

    /// A store on `dir` whose batches close at `batch_size` reports or after `delay`
    /// (default page cache), shared between tasks.
    fn open_batched(dir: &Path, batch_size: usize, delay: Duration) -> Arc<DurableStore> {
        Arc::new(
            DurableStore::open(
                dir,
                DurableConfig {
                    batch_size,
                    batch_delay: delay,
                    ..DurableConfig::default()
                },
            )
            .unwrap(),
        )
    }

    fn quick() -> DurableConfig {
        DurableConfig {
            batch_size: 64,
            batch_delay: Duration::from_millis(2),
            // A tiny page cache: the tests also exercise redb's eviction.
            cache_size: 64 * 1024,
        }
    }

    #[test]
    fn blob_round_trips_and_rejects_damage() {
        let mut acc = Accumulator::new(3, FOLDS);
        acc.add(0, &[i32::MAX, -7, 0]);
        acc.add(4, &[-i32::MAX, 5, 1]);
        let blob = encode_accumulator(&acc);
        assert_eq!(blob.len(), 32 + 8 * FOLDS + 3 * (8 * FOLDS + 16));
        assert_eq!(decode_accumulator(&blob).unwrap(), acc);
        assert!(decode_accumulator(&blob[..blob.len() - 1]).is_err());
        let mut bad = blob.clone();
        bad[0] = b'X';
        assert!(decode_accumulator(&bad).is_err());
        let mut bad = blob;
        bad[24] ^= 1; // count no longer equals the sum of the fold counts
        assert!(decode_accumulator(&bad).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn restart_recovers_collections_sums_and_dedupe() {
        let dir = tempfile::tempdir().unwrap();
        let memory = MemoryStore::new();
        let (a, b) = (collection("a", 3), collection("b", 2));
        {
            let s = DurableStore::open(dir.path(), quick()).unwrap();
            for c in [&a, &b] {
                s.create_collection(c.clone()).await.unwrap();
                memory.create_collection(c.clone()).await.unwrap();
            }
            for k in 0..40u32 {
                let r = vec![
                    report(k, k as i32 * 1000, a.entries),
                    report(k % 7, 1, a.entries),
                ];
                let o1 = s.submit("a", r.clone()).await.unwrap();
                let o2 = memory.submit("a", r).await.unwrap();
                assert_eq!(o1, o2);
            }
            s.submit("b", vec![report(1, 9, b.entries)]).await.unwrap();
            memory
                .submit("b", vec![report(1, 9, b.entries)])
                .await
                .unwrap();
        }
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        assert_eq!(*s.collection("a").await.unwrap(), a);
        assert_eq!(*s.collection("b").await.unwrap(), b);
        for id in ["a", "b"] {
            assert_eq!(
                s.snapshot(id).await.unwrap().acc,
                memory.snapshot(id).await.unwrap().acc
            );
            assert_eq!(
                s.read_committed(id).await.unwrap().acc,
                memory.snapshot(id).await.unwrap().acc
            );
        }
        assert_eq!(s.count("a").await.unwrap(), 40);
        // A duplicate id across the restart is not recounted.
        let o = s.submit("a", vec![report(3, 55, a.entries)]).await.unwrap();
        assert_eq!(
            o,
            BatchOutcome {
                accepted: 0,
                duplicates: 1
            }
        );
        // The same report id in another collection is another report.
        let o = s.submit("b", vec![report(3, 55, b.entries)]).await.unwrap();
        assert_eq!(
            o,
            BatchOutcome {
                accepted: 1,
                duplicates: 0
            }
        );
        assert_eq!(s.count("a").await.unwrap(), 40);
        // Conflicting re-creation is refused, identical is a no-op, across restarts.
        assert_eq!(
            s.create_collection(collection("a", 4)).await,
            Err(StoreError::AlreadyExists("a".into()))
        );
        s.create_collection(a.clone()).await.unwrap();
        assert_eq!(s.count("zz").await, Err(StoreError::NotFound("zz".into())));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failed_commit_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 2);
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.submit("a", vec![report(1, 5, c.entries)]).await.unwrap();
        let before = s.snapshot("a").await.unwrap().acc;
        drop(s);
        // Several submitters in one batch (long delay): all of them fail.
        let s = open_batched(dir.path(), 1000, Duration::from_millis(200));
        s.fail_next_commits(1);
        let tasks: Vec<_> = (10..16u32)
            .map(|k| {
                let s = s.clone();
                tokio::spawn(async move { s.submit("a", vec![report(k, 7, 3)]).await })
            })
            .collect();
        for t in tasks {
            assert!(matches!(t.await.unwrap(), Err(StoreError::Unavailable(_))));
        }
        assert_eq!(s.snapshot("a").await.unwrap().acc, before);
        assert_eq!(s.read_committed("a").await.unwrap().acc, before);
        // The failed ids were not remembered: resending counts them once.
        let o = s
            .submit("a", (10..16u32).map(|k| report(k, 7, 3)).collect())
            .await
            .unwrap();
        assert_eq!(
            o,
            BatchOutcome {
                accepted: 6,
                duplicates: 0
            }
        );
        assert_eq!(s.count("a").await.unwrap(), 7);
        // A failed creation leaves no collection behind.
        s.fail_next_commits(1);
        assert!(matches!(
            s.create_collection(collection("new", 2)).await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            s.collection("new").await,
            Err(StoreError::NotFound(_))
        ));
        assert!(matches!(
            s.read_committed("new").await,
            Err(StoreError::NotFound(_))
        ));
        s.create_collection(collection("new", 2)).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn submitters_are_acknowledged_only_after_the_commit() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 2);
        let delay = Duration::from_millis(400);
        let s = open_batched(dir.path(), 1000, delay);
        s.create_collection(c.clone()).await.unwrap();
        let started = Instant::now();
        let tasks: Vec<_> = (0..8u32)
            .map(|k| {
                let s = s.clone();
                tokio::spawn(async move {
                    // Two submitters share id 0: one of them sees a duplicate.
                    let outcome = s.submit("a", vec![report(k / 2 * 2, 1, 3)]).await;
                    // Acknowledged means committed: the database already has it.
                    let on_disk = s.read_committed("a").await.unwrap().acc.count;
                    (outcome, on_disk)
                })
            })
            .collect();
        tokio::time::sleep(delay / 4).await;
        assert!(
            tasks.iter().all(|t| !t.is_finished()),
            "acknowledged before the commit"
        );
        assert_eq!(s.count("a").await.unwrap(), 0);
        assert_eq!(s.read_committed("a").await.unwrap().acc.count, 0);
        let mut accepted = 0;
        for t in tasks {
            let (outcome, on_disk) = t.await.unwrap();
            accepted += outcome.unwrap().accepted;
            assert_eq!(on_disk, 4);
        }
        assert!(started.elapsed() >= delay);
        assert_eq!(accepted, 4);
        assert_eq!(s.count("a").await.unwrap(), 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_batch_commits_without_waiting_for_the_delay() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 1);
        {
            let s = DurableStore::open(dir.path(), quick()).unwrap();
            s.create_collection(c.clone()).await.unwrap();
        }
        let s = open_batched(dir.path(), 4, Duration::from_secs(600));
        let tasks: Vec<_> = (0..4u32)
            .map(|k| {
                let s = s.clone();
                tokio::spawn(async move { s.submit("a", vec![report(k, 1, c.entries)]).await })
            })
            .collect();
        let all = futures::future::join_all(tasks);
        let done = tokio::time::timeout(Duration::from_secs(30), all)
            .await
            .expect("a full batch waited for the delay");
        assert!(done.into_iter().all(|r| r.unwrap().unwrap().accepted == 1));
        assert_eq!(s.read_committed("a").await.unwrap().acc.count, 4);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_collection_refuses_submits_and_keeps_its_sums() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 2);
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        s.create_collection(c.clone()).await.unwrap();
        s.create_collection(collection("b", 2)).await.unwrap();
        s.submit("a", (0..3u32).map(|k| report(k, 2, c.entries)).collect())
            .await
            .unwrap();
        let before = s.snapshot("a").await.unwrap().acc;
        assert!(!s.is_closed("a").await.unwrap());
        s.close_collection("a").await.unwrap();
        assert!(s.is_closed("a").await.unwrap());
        // Closing twice is a no-op.
        s.close_collection("a").await.unwrap();
        assert!(s.is_closed("a").await.unwrap());
        // New and already-seen ids alike are refused; nothing is counted.
        for k in [1u32, 7] {
            assert_eq!(
                s.submit("a", vec![report(k, 5, c.entries)]).await,
                Err(StoreError::Closed("a".into()))
            );
        }
        assert_eq!(
            s.submit("a", Vec::new()).await,
            Err(StoreError::Closed("a".into()))
        );
        assert_eq!(s.snapshot("a").await.unwrap().acc, before);
        assert_eq!(s.read_committed("a").await.unwrap().acc, before);
        assert_eq!(s.count("a").await.unwrap(), 3);
        // Other collections are unaffected.
        assert!(!s.is_closed("b").await.unwrap());
        s.submit("b", vec![report(1, 1, 3)]).await.unwrap();
        // Unknown collections.
        assert_eq!(
            s.close_collection("zz").await,
            Err(StoreError::NotFound("zz".into()))
        );
        assert_eq!(
            s.is_closed("zz").await,
            Err(StoreError::NotFound("zz".into()))
        );
        // A close whose commit fails does not close.
        s.fail_next_commits(1);
        assert!(matches!(
            s.close_collection("b").await,
            Err(StoreError::Unavailable(_))
        ));
        assert!(!s.is_closed("b").await.unwrap());
        s.submit("b", vec![report(2, 1, 3)]).await.unwrap();
        assert_eq!(s.count("b").await.unwrap(), 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_closed_flag_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 2);
        {
            let s = DurableStore::open(dir.path(), quick()).unwrap();
            s.create_collection(c.clone()).await.unwrap();
            s.create_collection(collection("b", 2)).await.unwrap();
            s.submit("a", vec![report(1, 3, c.entries)]).await.unwrap();
            s.close_collection("a").await.unwrap();
        }
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        assert!(s.is_closed("a").await.unwrap());
        assert!(!s.is_closed("b").await.unwrap());
        assert_eq!(s.count("a").await.unwrap(), 1);
        assert_eq!(
            s.submit("a", vec![report(2, 3, c.entries)]).await,
            Err(StoreError::Closed("a".into()))
        );
        s.close_collection("a").await.unwrap();
        assert_eq!(s.count("a").await.unwrap(), 1);
        s.submit("b", vec![report(2, 3, 3)]).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_close_is_ordered_with_the_submits_of_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let c = collection("a", 2);
        {
            let s = DurableStore::open(dir.path(), quick()).unwrap();
            s.create_collection(c.clone()).await.unwrap();
        }
        let delay = Duration::from_millis(400);
        let s = open_batched(dir.path(), 1000, delay);
        let gap = Duration::from_millis(30);
        let before = {
            let s = s.clone();
            tokio::spawn(async move {
                s.submit("a", (0..3u32).map(|k| report(k, 1, 3)).collect())
                    .await
            })
        };
        tokio::time::sleep(gap).await;
        let close = {
            let s = s.clone();
            tokio::spawn(async move { s.close_collection("a").await })
        };
        tokio::time::sleep(gap).await;
        let close_again = {
            let s = s.clone();
            tokio::spawn(async move { s.close_collection("a").await })
        };
        tokio::time::sleep(gap).await;
        let after = {
            let s = s.clone();
            tokio::spawn(async move { s.submit("a", vec![report(9, 1, 3)]).await })
        };
        tokio::time::sleep(gap).await;
        // All four are in the open batch: nothing is answered or visible yet.
        assert!(!before.is_finished() && !close.is_finished() && !after.is_finished());
        assert!(!s.is_closed("a").await.unwrap());
        assert_eq!(
            before.await.unwrap(),
            Ok(BatchOutcome {
                accepted: 3,
                duplicates: 0
            })
        );
        assert_eq!(close.await.unwrap(), Ok(()));
        assert_eq!(close_again.await.unwrap(), Ok(()));
        assert_eq!(after.await.unwrap(), Err(StoreError::Closed("a".into())));
        assert!(s.is_closed("a").await.unwrap());
        assert_eq!(s.count("a").await.unwrap(), 3);
        assert_eq!(s.read_committed("a").await.unwrap().acc.count, 3);
        // Recovery keeps both the flag and the sums.
        drop(s);
        let s = DurableStore::open(dir.path(), quick()).unwrap();
        assert!(s.is_closed("a").await.unwrap());
        assert_eq!(s.count("a").await.unwrap(), 3);
    }
}
